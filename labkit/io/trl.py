"""TRL's shapes: its completions files, its in-memory logs, and rows of the same columns.

* **Completions files**: with ``log_completions=True`` ``GRPOTrainer`` writes
  ``<output_dir>/completions/completions_NNNNN.parquet`` at every logging step: columns ``step``,
  ``prompt``, ``completion``, one column per reward function (named after it, e.g.
  ``correct_reward``), any extra columns the reward functions logged, and ``advantage``; no token
  ids. ``read_trl_files`` reads one such file, the ``completions`` folder, or the output folder
  holding it (files in step order), or only the files holding some rows (``rows=``);
  ``iter_trl_files`` streams it in chunks of rows. The files' footers are read first: every
  file must have the first file's columns, and a reward function's column is one whose Parquet
  type is numeric.
* **In-memory logs**: ``trainer._logs`` (``prompt``, ``completion``, ``rewards`` = {function:
  values}, ``advantages``, ``extra``), which holds the last generation batch only: one step, so
  its rows are grouped by prompt.
* **Rows**: a dict of columns, a pandas DataFrame, a ``datasets.Dataset``, an Arrow table or a
  list of dicts, with ``prompt``, ``completion`` and a ``reward`` column (what ``to_trl`` writes,
  what many scripts keep), or the reward functions' columns as in the files; ``completion_ids``
  (token ids) and any field of the record format (``group_id``, ``generated``, ``logprobs``,
  ...) may ride along. Arrays and tensors are accepted wherever a list is.

Rows are numbered **from 0** (within each file, whose name the error gives). ``prompt`` and
``completion`` may be strings or conversations (lists of ``{"role", "content"}`` messages).
Grouping, the reward (the sum of the reward functions, or ``reward=``), missing rewards and
text without ids follow ``labkit.io.text_rows``. A numeric column other than ``step`` and
``advantage`` is taken to be a reward function's: if a reward function logs numeric extras,
pass ``reward=`` to say which columns are rewards. ``step`` is TRL's ``global_step`` at logging
time; with ``logging_steps`` > 1 a file holds the last generation batch before it only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.io.columns import as_list, is_table, table_columns
from labkit.io.errors import record_error
from labkit.io.record import FIELDS, rollout_records
from labkit.io.text_rows import (LARGE_ROWS, TextRows, chunk_rows, numeric_columns, read_text_rows, stream_text_rows,
                                 text_length)

__all__ = ["read_trl", "read_trl_files", "iter_trl_files", "trl_files", "is_trl_logs", "looks_like_trl", "to_trl",
           "LARGE_ROWS"]

_NOT_REWARDS = {"step", "advantage", "advantages", "completion_ids", "prompt", "completion", "images", *FIELDS}


def is_trl_logs(source: Any) -> bool:
    """``trainer._logs``: a mapping whose ``rewards`` is itself a mapping of columns."""
    return hasattr(source, "keys") and not isinstance(source, (list, tuple)) and "completion" in source.keys() \
        and "rewards" in source.keys() and hasattr(source["rewards"], "keys")


def looks_like_trl(names) -> bool:
    """Column names of TRL rows: a ``completion`` column (text or conversations)."""
    return "completion" in set(names)


def _rows(cols: dict[str, list], source: str, numbers=None, wheres=None, rewards=None) -> TextRows:
    n = len(next(iter(cols.values()))) if cols else 0
    # a 'reward' column is the reward; without one, TRL's files have a column per reward function
    if rewards is None:
        rewards = [] if "reward" in cols else numeric_columns(cols, _NOT_REWARDS)
    advantage = "advantage" if "advantage" in cols else "advantages" if "advantages" in cols else None
    return TextRows(source=source, format="trl", unit="row", columns=cols,
                    numbers=list(range(n)) if numbers is None else numbers,
                    wheres=[None] * n if wheres is None else wheres, step="step", advantage=advantage,
                    reward="reward" if "reward" in cols else None, reward_columns=rewards, known={"images"})


def _columns(source: Any) -> dict[str, list]:
    if is_trl_logs(source):
        cols = {"prompt": as_list(source["prompt"]), "completion": as_list(source["completion"])}
        for group in ("rewards", "extra"):
            if group in source.keys():
                cols.update({str(k): as_list(v) for k, v in source[group].items()})
        if "advantages" in source.keys():
            cols["advantage"] = as_list(source["advantages"])
        return cols
    if is_table(source):
        cols = table_columns(source)
        if not cols:
            raise record_error("source", "row", None, None, "no columns (empty input)")
        return cols
    if isinstance(source, (list, tuple)):
        rows = list(source)
        if not rows:
            raise record_error("source", "row", None, None, "no rows (empty input)")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise record_error("source", "row", i, None, f"expected a dict per row, got {type(row).__name__}")
        names = list(dict.fromkeys(k for row in rows for k in row))
        return {k: [as_list(row.get(k)) for row in rows] for k in names}
    raise TypeError(f"source: expected TRL rows (a dict of columns, a DataFrame, a datasets.Dataset, a list of "
                    f"dicts) or trainer._logs, got {type(source).__name__}")


def read_trl(source: Any, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None) -> Rollouts:
    """TRL rows or ``trainer._logs`` in memory -> validated Rollouts (RecordError naming the row and
    the field)."""
    name = "TRL trainer._logs" if is_trl_logs(source) else "TRL rows"
    return read_text_rows(_rows(_columns(source), name), tokenizer=tokenizer, reward=reward)


def trl_files(path: Path) -> list[Path]:
    """The completions files at ``path``: the file itself, or the ``completions_*.parquet`` files of
    a folder (or of its ``completions`` subfolder), in step order; [] when there are none."""
    path = Path(path)
    if path.is_file():
        return [path]
    for folder in (path, path / "completions"):
        files = sorted(folder.glob("completions_*.parquet")) if folder.is_dir() else []
        if files:
            return files
    return []


def _numeric_type(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t)


@dataclass
class _Run:
    """A run's completions files, from their footers only: ``counts[k]`` rows in ``files[k]``,
    ``columns`` (the first file's, in its order; every file has the same) and ``rewards`` (the
    reward functions' columns: numeric by their Parquet type, in the first file that types them)."""
    path: Path
    files: list[Path]
    counts: np.ndarray
    columns: list[str]
    rewards: list[str]

    @property
    def starts(self) -> np.ndarray:
        """Index of each file's first row in the run."""
        return np.cumsum(self.counts) - self.counts


def _run(path: Path) -> _Run:
    """Check the files' footers (readable, same columns) before any row is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = trl_files(path)
    if not files:
        raise FileNotFoundError(f"source: no TRL completions files (completions_*.parquet) in {path} or its "
                                f"completions/ folder")
    counts, columns, types = [], None, {}
    for f in files:
        try:
            meta = pq.read_metadata(f)
            schema = meta.schema.to_arrow_schema()
        except Exception as err:  # pyarrow's own ArrowInvalid for a file that is not Parquet
            raise record_error("source", "row", None, None, f"not a readable Parquet file ({err})", str(f)) from None
        if columns is None:
            columns = list(schema.names)
        elif set(schema.names) != set(columns):
            raise record_error("source", "row", None, None,
                               f"columns {sorted(schema.names)} differ from {files[0].name}'s {sorted(columns)} (one "
                               f"run's files have the same columns)", str(f))
        for name, t in zip(schema.names, schema.types):
            if name not in types and meta.num_rows and not pa.types.is_null(t):
                types[name] = t
        counts.append(meta.num_rows)
    if not sum(counts):
        raise record_error("source", "row", None, None, "no rows (empty files)", str(path))
    # what numeric_columns says of the rows' values, said from the column types
    rewards = [] if "reward" in columns else [c for c in columns if c not in _NOT_REWARDS and c in types
                                              and _numeric_type(types[c])]
    return _Run(Path(path), files, np.array(counts, dtype=np.int64), columns, rewards)


def _read_table(f: Path, rows: np.ndarray | None = None):
    """File ``f`` (only its rows ``rows``, 0-based in the file, when given) as an Arrow table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(f)
    except Exception as err:
        raise record_error("source", "row", None, None, f"not a readable Parquet file ({err})", str(f)) from None
    return table if rows is None else table.take(pa.array(rows))


def read_trl_files(path: Path, *, rows: np.ndarray | None = None, tokenizer: Any = None,
                   reward: str | Sequence[str] | None = None, progress: bool | None = None) -> Rollouts:
    """TRL's completions Parquet (one file or a folder of them) -> validated Rollouts.

    ``rows``: sorted, distinct 0-based row indices of the run (its files in step order; checked by
    the caller) to read only those rows: only the files holding one are read. Groups are then
    numbered among the rows read (their names in ``info['group_names']``)."""
    run = _run(path)
    total = int(run.counts.sum())
    if rows is not None and rows.size and int(rows[-1]) >= total:
        raise ValueError(f"rows: record {int(rows[-1])} is past the last record ({total:,} records)")
    cols: dict[str, list] = {c: [] for c in run.columns}
    numbers: list[int] = []
    wheres: list[str] = []
    starts = run.starts
    want = None if rows is None else np.searchsorted(starts, rows, side="right") - 1  # each wanted row's file
    picked = range(len(run.files)) if rows is None else np.unique(want).tolist()
    show_bar = (total if rows is None else len(rows)) >= LARGE_ROWS if progress is None else progress
    for k in progress_bar(picked, desc=run.path.name, unit="file", enabled=show_bar):
        local = None if rows is None else rows[want == k] - starts[k]
        table = _read_table(run.files[k], local)
        for name, values in table_columns(table).items():
            cols[name].extend(values)
        numbers.extend(range(table.num_rows) if local is None else local.tolist())
        wheres.extend([str(run.files[k])] * table.num_rows)
    text = _rows(cols, str(path), numbers, wheres, run.rewards)
    return read_text_rows(text, tokenizer=tokenizer, reward=reward)


def iter_trl_files(path: Path, *, batch_rows: int, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   progress: bool | None = None) -> Iterator[Rollouts]:
    """TRL's completions Parquet as consecutive Rollouts of ``batch_rows`` rows (fewer for the
    last one, and where long completions would make a chunk of more than
    ``labkit.io.text_rows.CHUNK_POSITIONS`` padded positions), a chunk across file boundaries
    where it falls, holding one chunk's rows at a time.
    Group ids are numbered alike in every chunk; ``info['offset']`` is the chunk's first row in
    the run, ``info['first_record']`` / ``info['first_file']`` that row's row number and file
    (``labkit.io.text_rows.stream_text_rows``). The files' footers are checked first (readable,
    same columns), so a run that cannot be read fails before its first chunk."""
    run = _run(path)
    total = int(run.counts.sum())
    show_bar = total >= LARGE_ROWS if progress is None else progress

    def chunks() -> Iterator[TextRows]:
        cols: dict[str, list] = {c: [] for c in run.columns}
        numbers: list[int] = []
        wheres: list[str] = []
        lengths: list[int] = []

        def take(n: int) -> TextRows:
            out = _rows({c: v[:n] for c, v in cols.items()}, str(path), numbers[:n], wheres[:n], run.rewards)
            for v in (*cols.values(), numbers, wheres, lengths):
                del v[:n]
            return out

        with progress_bar(total=total, desc=run.path.name, unit="row", enabled=show_bar) as bar:
            for f, count in zip(run.files, run.counts.tolist()):
                if not count:
                    continue
                table = _read_table(f)
                for name, values in table_columns(table).items():
                    cols[name].extend(values)
                numbers.extend(range(table.num_rows))
                wheres.extend([str(f)] * table.num_rows)
                lengths.extend(map(text_length, cols["completion"][-table.num_rows:]) if "completion" in cols
                               else [0] * table.num_rows)
                del table
                while (n := chunk_rows(lengths, batch_rows, final=False)) is not None:
                    yield take(n)
                bar.update(count)
            while (n := chunk_rows(lengths, batch_rows, final=True)) is not None:
                yield take(n)

    return stream_text_rows(chunks(), tokenizer=tokenizer, reward=reward)


def to_trl(rollouts: Rollouts) -> dict:
    """The batch as TRL-style columns (a dict of lists, one entry per trajectory): ``prompt``
    (``None`` without prompts), ``completion`` (the positions' text joined, tool output included;
    ``""`` without text), ``completion_ids``, ``reward`` (the outcome: the reward on the last
    generated position), ``group_id``, and every other field the record format stores for this
    batch (``None`` in a row where the record omits it: the reader's default). ``read_rollouts(
    columns, "trl")`` gives the Rollouts back (``truth`` and ``info`` aside)."""
    check_rollouts(rollouts)
    records = rollout_records(rollouts)
    out: dict[str, list] = {"prompt": [r.get("prompt") for r in records],
                            "completion": ["".join(r.get("text", [])) for r in records],
                            "completion_ids": [r["tokens"] for r in records],
                            "reward": [r["reward"] for r in records],
                            "group_id": [r["group_id"] for r in records]}
    extra = [n for n in FIELDS if n not in ("prompt", "tokens", "reward", "group_id") and any(n in r for r in records)]
    for name in extra:
        out[name] = [r.get(name) for r in records]
    return out
