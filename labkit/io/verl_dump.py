"""verl's rollout dump: the JSON Lines ``RayPPOTrainer`` writes with ``trainer.rollout_data_dir``.

One file per training step, ``<rollout_data_dir>/<step>.jsonl``, one line per trajectory:
``input`` (the prompt, decoded without special tokens), ``output`` (the response, likewise),
``gts`` (the ground truth, if the data has one), ``score`` (the sum of the token-level scores),
``step``, and whatever the reward function returned beside its score (``reward_extra_info``,
e.g. ``acc``). No token ids and no ``uid``: rows are grouped by (step, input) (the same prompt
text twice in one step's batch counts as one group), the text is cut into positions by
``labkit.io.text_positions``, the reward is ``score`` (or ``reward=``: any numeric column, or
several, summed), and the numeric extras are kept in ``info['reward_parts']``
(``labkit.io.text_rows``). Lines are numbered **from 1**, blank lines included, per file.

``read_verl_dump`` reads one file or the folder (files in step order), or only some of its
records (``rows=``, the other lines skipped unparsed); ``iter_verl_dump`` reads it in chunks.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.io.errors import record_error
from labkit.io.jsonl import RecordPicker
from labkit.io.jsonl import LARGE_BYTES
from labkit.io.text_rows import TextRows, chunk_rows, numeric_columns, read_text_rows, stream_text_rows, text_length

__all__ = ["read_verl_dump", "iter_verl_dump", "dump_files", "looks_like_verl_dump", "DUMP_KEYS"]

#: The keys every line of verl's rollout dump has.
DUMP_KEYS = ("input", "output", "score", "step")
_NOT_REWARDS = {"input", "output", "gts", "step", "score", "request_id"}


def looks_like_verl_dump(names) -> bool:
    """Keys of a line of verl's rollout dump (``input``, ``output`` and ``score``)."""
    return {"input", "output", "score"} <= set(names)


def _step_key(path: Path) -> tuple:
    return (0, int(path.stem)) if path.stem.isdigit() else (1, path.name)


def dump_files(path: Path) -> list[Path]:
    """The dump's files: ``path`` itself, or a folder's ``*.jsonl`` in step order ([] if none)."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(path.glob("*.jsonl"), key=_step_key) if path.is_dir() else []


def _lines(files: list[Path], want: np.ndarray | None = None, progress: bool | None = None) -> Iterator[tuple]:
    """(file, line number, parsed line) of every record of the dump, in order, each checked for
    verl's keys; with ``want`` (sorted 0-based record indices over the dump, blank lines not
    counted) only those lines are parsed, and reading stops after the last one."""
    size = sum(f.stat().st_size for f in files)
    show_bar = size >= LARGE_BYTES if progress is None else progress
    picker = RecordPicker(want)
    with progress_bar(total=size, unit="B", unit_scale=True, desc=files[0].parent.name or str(files[0]),
                      enabled=show_bar) as bar:
        for f in files:
            where = str(f)
            with open(f, encoding="utf-8") as fh:
                for number, line in enumerate(fh, 1):
                    bar.update(len(line))
                    if not line.strip():
                        continue
                    if picker.done:
                        return
                    if picker.take() is None:
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise record_error("source", "line", number, None, f"not valid JSON at character "
                                           f"{err.pos + 1}: {err.msg}", where) from None
                    if not isinstance(obj, dict):
                        raise record_error("source", "line", number, None,
                                           f"expected a JSON object (one trajectory), got {type(obj).__name__}", where)
                    for key in ("input", "output", "score"):
                        if key not in obj:
                            raise record_error("source", "line", number, key,
                                               "missing (verl's rollout dump has input, output, score and step)", where)
                    yield where, number, obj
    picker.finish("the last record")


def _text_rows(path: Path, lines: list[tuple], names: list[str] | None = None,
               extras: list[str] | None = None) -> TextRows:
    """The lines as columns: ``names`` (default: every key, in order of first appearance; a line
    without one has None there), ``extras`` the numeric columns kept as reward parts (default:
    those whose first non-missing value is a number)."""
    objs = [obj for _, _, obj in lines]
    if names is None:
        names = list(dict.fromkeys(k for obj in objs for k in obj))
    cols = {k: [obj.get(k) for obj in objs] for k in names}
    if extras is None:
        extras = numeric_columns(cols, _NOT_REWARDS)
    return TextRows(source=str(path), format="verl", unit="line", columns=cols, numbers=[n for _, n, _ in lines],
                    wheres=[w for w, _, _ in lines], prompt="input", completion="output", step="step", reward="score",
                    reward_columns=extras)


def _files(path: Path) -> list[Path]:
    files = dump_files(path)
    if not files:
        raise FileNotFoundError(f"source: no rollout dump (<step>.jsonl files) in {path}")
    return files


def read_verl_dump(path: Path, *, rows: np.ndarray | None = None, tokenizer: Any = None,
                   reward: str | Sequence[str] | None = None, progress: bool | None = None) -> Rollouts:
    """verl's rollout dump (a file or its folder) -> validated Rollouts (RecordError naming the
    file, the line and the field).

    ``rows``: sorted, distinct 0-based record indices over the dump (blank lines are not
    records; checked by the caller) to read only those lines: the others are skipped unparsed.
    Groups are then numbered among the lines read (their names in ``info['group_names']``)."""
    lines = list(_lines(_files(path), rows, progress))
    if not lines:
        raise record_error("source", "line", None, None, "no records (empty files)", str(path))
    return read_text_rows(_text_rows(path, lines), tokenizer=tokenizer, reward=reward)


def iter_verl_dump(path: Path, *, batch_rows: int, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   progress: bool | None = None) -> Iterator[Rollouts]:
    """verl's rollout dump as consecutive Rollouts of ``batch_rows`` records (fewer for the last
    one, and where long outputs would make a chunk of more than
    ``labkit.io.text_rows.CHUNK_POSITIONS`` padded positions), a chunk across files where it
    falls, holding one chunk's lines at a time. Group ids are
    numbered alike in every chunk (``labkit.io.text_rows.stream_text_rows``: ``info['offset']``,
    ``info['first_record']``, the chunk's first line, and ``info['first_file']``, its file).
    The first chunk fixes the columns: its keys (later chunks have them, None where a line
    lacks one; a key first seen later is added for its chunk) and which numeric ones are reward
    parts (a numeric key first seen after the first chunk is listed as ignored)."""
    files = _files(path)

    def chunks() -> Iterator[TextRows]:
        names = extras = None
        lines: list[tuple] = []
        lengths: list[int] = []

        def take(n: int) -> TextRows:
            nonlocal names, extras
            part = lines[:n]
            del lines[:n], lengths[:n]
            if names is None:
                first = _text_rows(path, part)
                names, extras = list(first.columns), first.reward_columns
                return first
            seen = list(dict.fromkeys(k for _, _, obj in part for k in obj if k not in names))
            return _text_rows(path, part, names + seen, extras)

        for line in _lines(files, None, progress):
            lines.append(line)
            lengths.append(text_length(line[2]["output"]))
            if len(lines) >= batch_rows or len(lines) % 256 == 0:  # (a cut is looked for now and then)
                while (n := chunk_rows(lengths, batch_rows, final=False)) is not None:
                    yield take(n)
        while (n := chunk_rows(lengths, batch_rows, final=True)) is not None:
            yield take(n)
        if names is None:
            raise record_error("source", "line", None, None, "no records (empty files)", str(path))

    return stream_text_rows(chunks(), tokenizer=tokenizer, reward=reward)
