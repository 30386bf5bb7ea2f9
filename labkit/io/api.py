"""``read_rollouts`` / ``write_rollouts``: pick the format, check the arguments, hand over."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from labkit.core.checks import check_bool, check_choice, check_int
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.io.verl import PICKLE_SUFFIXES

__all__ = ["FORMATS", "FILE_FORMATS", "DEFAULT_BATCH_ROWS", "read_rollouts", "iter_rollouts", "write_rollouts",
           "format_of", "check_rows"]

FORMATS = ("jsonl", "parquet", "verl", "trl")
FILE_FORMATS = ("jsonl", "parquet")
#: Records per chunk of :func:`iter_rollouts` by default: a 256-position chunk of this many rows
#: holds about 70 MB of tensors.
DEFAULT_BATCH_ROWS = 8192
SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def _is_path(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike))


def format_of(source: Any, fmt: str | None = None, argument: str = "source") -> str:
    """The format of ``source``: ``fmt`` when given; else from a path's suffix (``.jsonl``,
    ``.json``, ``.ndjson`` -> jsonl; ``.parquet``, ``.pq`` -> parquet; a trailing ``.gz`` is
    looked through), or from an in-memory object's shape (verl: ``responses``; TRL:
    ``completion``)."""
    if fmt is not None:
        return check_choice("fmt", fmt, FORMATS)
    if _is_path(source):
        path = Path(source)
        if path.is_dir():
            return _folder_format(path, argument)
        if path.suffix.lower() in PICKLE_SUFFIXES:
            return "verl"
        suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
        found = SUFFIXES.get(suffixes[0].lower()) if suffixes else None
        if found is None:
            raise ValueError(f"{argument}: cannot tell the format of {path.name!r} from its suffix; name it "
                             f".jsonl or .parquet, or pass fmt= one of {FORMATS} (a DataProto saved with verl's "
                             f"save_to_disk: fmt='verl' with trust_pickle=True)")
        return found
    keys = None
    if hasattr(source, "batch") and hasattr(source, "non_tensor_batch"):
        return "verl"
    if hasattr(source, "keys"):
        keys = set(source.keys())
    elif isinstance(source, (list, tuple)) and source and isinstance(source[0], dict):
        keys = set(source[0])
    if keys is not None and "responses" in keys:
        return "verl"
    if keys is not None and ("completion" in keys or "completion_ids" in keys):
        return "trl"
    if hasattr(source, "column_names") and "completion" in source.column_names:  # datasets.Dataset, Arrow table
        return "trl"
    raise ValueError(f"{argument}: expected a path (.jsonl / .parquet / a run's folder), a verl batch (a dict with "
                     f"'responses') or TRL rows (with 'completion'), got {type(source).__name__}; pass fmt= to say "
                     f"which")


def _folder_format(path: Path, argument: str) -> str:
    """A run's folder: TRL's completions files or verl's rollout dump."""
    from labkit.io.trl import trl_files
    from labkit.io.verl_dump import dump_files

    if trl_files(path):
        return "trl"
    if dump_files(path):
        return "verl"
    raise ValueError(f"{argument}: {path} is a folder without TRL completions files (completions_*.parquet, in it or "
                     f"in its completions/ folder) or verl's rollout dump (<step>.jsonl); give a file, or the folder "
                     f"that holds them")


def _first_keys(path: Path) -> list[str]:
    """The field names of a file's first record (JSONL: first non-blank line; Parquet: its
    columns); [] when it cannot be read (the reader then says why)."""
    import json

    try:
        if SUFFIXES.get(path.suffixes[-2 if path.suffix == ".gz" and len(path.suffixes) > 1 else -1].lower()) == "parquet":
            import pyarrow.parquet as pq
            return list(pq.read_schema(path).names)
        from labkit.io.jsonl import _open
        with _open(path, "r") as f:
            for line in f:
                if line.strip():
                    obj = json.loads(line)
                    return list(obj) if isinstance(obj, dict) else []
    except Exception:  # any unreadable file: the record-format reader reports it properly
        return []
    return []


def _reader(path: Path, fmt: str) -> str:
    """Which reader a file or folder needs: the record format ("jsonl", "parquet"), TRL's
    completions files ("trl_files"), verl's rollout dump ("verl_dump") or a saved DataProto
    ("verl_pickle"), from ``fmt`` and a look at the file's first record."""
    from labkit.io.trl import looks_like_trl
    from labkit.io.verl_dump import looks_like_verl_dump

    if path.is_dir():
        return {"trl": "trl_files", "verl": "verl_dump"}.get(fmt) or _refuse_folder(path, fmt)
    if not path.is_file():
        raise FileNotFoundError(f"source: no such file or folder {path}")
    if fmt == "verl":
        suffix = SUFFIXES.get(path.suffixes[-2 if path.suffix == ".gz" and len(path.suffixes) > 1 else -1].lower()
                              if path.suffixes else "")
        return "verl_dump" if suffix == "jsonl" else "verl_pickle"
    keys = _first_keys(path)
    if fmt == "trl":
        return "trl_files"
    if "tokens" in keys or "group_id" in keys:
        return fmt
    if looks_like_verl_dump(keys):
        return "verl_dump"
    if looks_like_trl(keys):
        return "trl_files"
    return fmt


def _refuse_folder(path: Path, fmt: str) -> str:
    raise ValueError(f"source: {path} is a folder; fmt={fmt!r} reads one file (folders hold TRL's or verl's files: "
                     f"fmt='trl' or 'verl')")


def check_rows(rows: Any) -> np.ndarray:
    """``rows`` as a 1-D int64 array of sorted, distinct, non-negative record indices (or an
    error that starts with ``rows:``)."""
    if isinstance(rows, (str, bytes, dict)) or not hasattr(rows, "__len__"):
        raise TypeError(f"rows: expected a sorted sequence of record indices, got {type(rows).__name__}")
    if isinstance(rows, torch.Tensor):
        rows = rows.detach().cpu().numpy()
    arr = np.asarray(rows)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"rows: expected a non-empty 1-D sequence of record indices, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"rows: expected integer record indices, got {arr.dtype}")
    arr = arr.astype(np.int64)
    if int(arr.min()) < 0:
        raise ValueError(f"rows: record indices start at 0, got {int(arr.min())}")
    if arr.size > 1 and not bool((np.diff(arr) > 0).all()):
        i = int((np.diff(arr) <= 0).argmax())
        raise ValueError(f"rows: must be sorted and distinct, got {int(arr[i])} before {int(arr[i + 1])}")
    return arr


def _check_file(source: Any, fmt: str) -> Path:
    if not _is_path(source):
        raise TypeError(f"source: fmt={fmt!r} reads a file; expected a path, got {type(source).__name__}")
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"source: no such file {path}")
    return path


def read_rollouts(source: Any, fmt: str | None = None, *, rows: Sequence[int] | None = None,
                  progress: bool | None = None, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                  trust_pickle: bool = False) -> Rollouts:
    """Read trajectories into a validated ``Rollouts``: a file in the record format, the files a
    training framework writes, or a batch in a framework's in-memory shape.

    ``source``, and the format (``fmt``, default: told from the source):

    * the record format: a ``.jsonl`` (JSON Lines) or ``.parquet`` file (``labkit.io``);
    * ``"trl"``: TRL's completions files (one ``completions_NNNNN.parquet``, the ``completions``
      folder or the output folder holding it), ``trainer._logs``, or rows in memory (a dict of
      columns, DataFrame, ``datasets.Dataset``, list of dicts): ``labkit.io.trl``;
    * ``"verl"``: verl's rollout dump (a ``<step>.jsonl`` of ``trainer.rollout_data_dir`` or the
      folder), a ``DataProto`` / dict of tensors in memory (``labkit.io.verl``), or a DataProto
      saved with ``save_to_disk`` (``.pkl``; a pickle, read only with ``trust_pickle=True``).

    Files are told apart by their first record's fields, folders by the files in them. Text
    without token ids (TRL's and verl's logs) becomes positions by ``tokenizer`` (a folder
    saved with ``save_pretrained`` or a tokenizer object) or, without one, one per character
    (``info['position_unit']`` says which). ``reward``: which logged column(s) are the reward
    (default: the source's own, else the sum of TRL's reward-function columns). Grouping: by
    ``group_id`` / ``uid`` when given, else by (training step, prompt) when the step is logged,
    else by prompt (``info['grouping']``); see ``labkit.io.text_rows``.

    ``progress``: a tqdm bar; ``None`` shows one for large inputs only. A bad record raises
    ``RecordError`` with its number and field; nothing is returned half-read. ``info`` of the
    result says where it came from (``source``, ``format``), which fields were ignored
    (``ignored_fields``) and the original group ids when they were not non-negative integers
    (``group_names``).

    ``rows``: read only these records, a sorted sequence of distinct 0-based record indices (the
    rows of the batch this function returns without ``rows``; for JSONL, blank lines are not
    records). A record-format file is then read without holding the rest: JSONL skips the other
    lines unparsed, Parquet decodes only the row groups holding a wanted row, a batch at a time.
    Errors still name the record's line / row in the file. String group ids are numbered
    among the records read (their names in ``info['group_names']``); integer ids are kept.
    TRL's completions files and verl's rollout dump count records over the run (its files in
    step order): only the files holding a wanted row are read (TRL), or only the wanted lines
    parsed (verl), and errors name the file, its row / line and the field; their groups are
    numbered among the records read, by name ("step 3 | <prompt>"). Batches in memory and
    saved DataProto files are read whole, then the rows selected.
    """
    fmt = format_of(source, fmt)
    if progress is not None:
        progress = check_bool("progress", progress)
    trust_pickle = check_bool("trust_pickle", trust_pickle)
    if rows is not None:
        rows = check_rows(rows)
    reader = _reader(Path(source), fmt) if _is_path(source) else fmt
    text = {"tokenizer": tokenizer, "reward": reward}
    if reader not in ("trl_files", "verl_dump", "trl"):
        for name, value in text.items():
            if value is not None:
                raise ValueError(f"{name}: only for text a framework logged (TRL's or verl's files, TRL rows); "
                                 f"{_is_path(source) and Path(source).name or 'this batch'} carries token ids "
                                 f"and rewards as the lab's fields")
    if reader in FILE_FORMATS:
        path = _check_file(source, fmt)
        if reader == "jsonl":
            from labkit.io.jsonl import read_jsonl
            return read_jsonl(path, rows=rows, progress=progress)
        from labkit.io.parquet import read_parquet
        return read_parquet(path, rows=rows, progress=progress)
    if reader == "trl_files":
        from labkit.io.trl import read_trl_files
        return read_trl_files(Path(source), rows=rows, progress=progress, **text)
    if reader == "verl_dump":
        from labkit.io.verl_dump import read_verl_dump
        return read_verl_dump(Path(source), rows=rows, progress=progress, **text)
    if reader == "verl_pickle":
        from labkit.io.verl import read_saved_verl
        out = read_saved_verl(Path(source), trust_pickle=trust_pickle)
    elif reader == "verl":
        from labkit.io.verl import read_verl
        out = read_verl(source)
    else:
        from labkit.io.trl import read_trl
        out = read_trl(source, **text)
    if rows is None:
        return out
    if int(rows[-1]) >= out.batch_size:
        raise ValueError(f"rows: record {int(rows[-1])} is past the last record ({out.batch_size:,} records)")
    return out.select(torch.from_numpy(rows))


def iter_rollouts(source: Any, fmt: str | None = None, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                  progress: bool | None = None, **read: Any) -> Iterator[Rollouts]:
    """Read a rollout file in consecutive chunks of at most ``batch_rows`` records, each a
    validated ``Rollouts``, holding one chunk at a time.

    Memory is bounded by ``batch_rows`` (a chunk is padded to its own longest record), not by
    the file: the way to measure a dump too large to load (``labkit.diagnose`` does). Parquet is
    decoded a record batch at a time (only the row group's pages in use are held); JSONL is read
    line by line. Every chunk is checked as ``read_rollouts`` checks a file, and a bad record
    raises ``RecordError`` with its **line / row in the file** when its chunk is reached (the
    chunks before it have been handed out). Across chunks: **group ids** keep the file's
    identity (integer ids are kept; string ids are numbered by first appearance in the file,
    every chunk's ``info['group_names']`` holding the names numbered so far, so equal codes in
    two chunks are one group; a file mixing integer and string ids is refused when its first
    chunk had only integers); JSONL's all-or-none fields are checked across chunks too. Each
    chunk's ``info``: ``offset`` (index of its first record in the file, 0-based: what
    ``read_rollouts(rows=...)`` takes) and ``first_record`` (that record's number as errors
    count it: line for JSONL, row for Parquet), with ``source``, ``format``, ``ignored_fields``.

    ``source`` may also be what ``read_rollouts`` reads from a framework (``read``: its
    ``tokenizer``, ``reward``, ``trust_pickle``). TRL's completions files and verl's rollout
    dump are streamed the same way: ``batch_rows`` rows at a time across the run's files (their
    text converted a chunk at a time, see ``labkit.io.text_rows``), groups named "step s |
    prompt" numbered alike in every chunk, each chunk's ``info`` holding its rows'
    ``training_steps``, ``advantages``, ``reward_parts`` ... and the run's ``grouping``,
    ``position_unit``, ``reward_columns``, ``tokenizer``; ``offset`` counts rows over the run,
    ``first_record`` is the row / line in its file ``first_file``. A batch in memory or a saved
    DataProto is read whole, then handed out in chunks. ``progress``: a tqdm bar over the file;
    None shows one for large files.
    """
    fmt = format_of(source, fmt)
    batch_rows = check_int("batch_rows", batch_rows, low=1)
    if progress is not None:
        progress = check_bool("progress", progress)
    unknown = sorted(set(read) - {"tokenizer", "reward", "trust_pickle"})
    if unknown:
        raise TypeError(f"iter_rollouts: unexpected argument {unknown[0]!r}")
    reader = _reader(Path(source), fmt) if _is_path(source) else fmt
    if reader in FILE_FORMATS and not any(v not in (None, False) for v in read.values()):
        path = _check_file(source, fmt)
        if reader == "jsonl":
            from labkit.io.jsonl import iter_jsonl
            return iter_jsonl(path, batch_rows=batch_rows, progress=progress)
        from labkit.io.parquet import iter_parquet
        return iter_parquet(path, batch_rows=batch_rows, progress=progress)
    if reader in ("trl_files", "verl_dump"):
        check_bool("trust_pickle", read.get("trust_pickle", False))  # no pickle here: checked, not used
        text = {k: v for k, v in read.items() if k != "trust_pickle"}
        if reader == "trl_files":
            from labkit.io.trl import iter_trl_files
            return iter_trl_files(Path(source), batch_rows=batch_rows, progress=progress, **text)
        from labkit.io.verl_dump import iter_verl_dump
        return iter_verl_dump(Path(source), batch_rows=batch_rows, progress=progress, **text)
    whole = read_rollouts(source, fmt, progress=progress, **read)
    return _slices(whole, batch_rows)


def _slices(rollouts: Rollouts, batch_rows: int) -> Iterator[Rollouts]:
    for start in range(0, rollouts.batch_size, batch_rows):
        chunk = rollouts.select(torch.arange(start, min(rollouts.batch_size, start + batch_rows)))
        chunk.info.update(offset=start, first_record=start)
        yield chunk


def write_rollouts(rollouts: Rollouts, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write ``rollouts`` to ``path`` in the record format, as JSON Lines or Parquet (``fmt``,
    default from the suffix); returns the path. ``read_rollouts`` gives the same trajectories
    back (``labkit.io`` says what is stored: every Rollouts field but ``truth`` and ``info``;
    padding after a trajectory's last generated position is not)."""
    check_rollouts(rollouts)
    if not _is_path(path):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    fmt = format_of(path, fmt, argument="path")
    if fmt not in FILE_FORMATS:
        raise ValueError(f"fmt: write_rollouts writes files ({FILE_FORMATS}); for {fmt!r} use "
                         f"to_verl_batch / to_trl")
    path = Path(path)
    if fmt == "jsonl":
        from labkit.io.jsonl import write_jsonl
        return write_jsonl(rollouts, path)
    from labkit.io.parquet import write_parquet
    return write_parquet(rollouts, path)
