"""TRL's shapes: its completions files, its in-memory logs, and rows of the same columns.

* **Completions files**: with ``log_completions=True`` ``GRPOTrainer`` writes
  ``<output_dir>/completions/completions_NNNNN.parquet`` at every logging step: columns ``step``,
  ``prompt``, ``completion``, one column per reward function (named after it, e.g.
  ``correct_reward``), any extra columns the reward functions logged, and ``advantage``; no token
  ids. ``read_trl_files`` reads one such file, the ``completions`` folder, or the output folder
  holding it (files in step order).
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

from pathlib import Path
from typing import Any, Sequence

from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.io.columns import as_list, is_table, table_columns
from labkit.io.errors import record_error
from labkit.io.record import FIELDS, rollout_records
from labkit.io.text_rows import LARGE_ROWS, TextRows, numeric_columns, read_text_rows

__all__ = ["read_trl", "read_trl_files", "trl_files", "is_trl_logs", "looks_like_trl", "to_trl", "LARGE_ROWS"]

_NOT_REWARDS = {"step", "advantage", "advantages", "completion_ids", "prompt", "completion", "images", *FIELDS}


def is_trl_logs(source: Any) -> bool:
    """``trainer._logs``: a mapping whose ``rewards`` is itself a mapping of columns."""
    return hasattr(source, "keys") and not isinstance(source, (list, tuple)) and "completion" in source.keys() \
        and "rewards" in source.keys() and hasattr(source["rewards"], "keys")


def looks_like_trl(names) -> bool:
    """Column names of TRL rows: a ``completion`` column (text or conversations)."""
    return "completion" in set(names)


def _rows(cols: dict[str, list], source: str, numbers=None, wheres=None) -> TextRows:
    n = len(next(iter(cols.values()))) if cols else 0
    # a 'reward' column is the reward; without one, TRL's files have a column per reward function
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


def read_trl(source: Any, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
             progress: bool | None = None) -> Rollouts:
    """TRL rows or ``trainer._logs`` in memory -> validated Rollouts (RecordError naming the row and
    the field)."""
    name = "TRL trainer._logs" if is_trl_logs(source) else "TRL rows"
    return read_text_rows(_rows(_columns(source), name), tokenizer=tokenizer, reward=reward, progress=progress)


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


def read_trl_files(path: Path, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   progress: bool | None = None) -> Rollouts:
    """TRL's completions Parquet (one file or a folder of them) -> validated Rollouts."""
    import pyarrow.parquet as pq

    files = trl_files(path)
    if not files:
        raise FileNotFoundError(f"source: no TRL completions files (completions_*.parquet) in {path} or its "
                                f"completions/ folder")
    cols: dict[str, list] = {}
    numbers: list[int] = []
    wheres: list[str] = []
    for f in files:
        try:
            table = pq.read_table(f)
        except Exception as err:  # pyarrow's own ArrowInvalid for a file that is not Parquet
            raise record_error("source", "row", None, None, f"not a readable Parquet file ({err})", str(f)) from None
        part = table_columns(table)
        if cols and set(part) != set(cols):
            raise record_error("source", "row", None, None,
                               f"columns {sorted(part)} differ from {files[0].name}'s {sorted(cols)} (one run's "
                               f"files have the same columns)", str(f))
        for k, v in part.items():
            cols.setdefault(k, []).extend(v)
        numbers.extend(range(table.num_rows))
        wheres.extend([str(f)] * table.num_rows)
    if not numbers:
        raise record_error("source", "row", None, None, "no rows (empty files)", str(path))
    rows = _rows(cols, str(path), numbers, wheres)
    return read_text_rows(rows, tokenizer=tokenizer, reward=reward, progress=progress)


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
