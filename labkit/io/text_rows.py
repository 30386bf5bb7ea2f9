"""Rows of text a framework logged (TRL's completions, verl's rollout dump) -> a validated Rollouts.

Both frameworks log one row per completion with the prompt and completion as **text**, the
training step, the reward (TRL: one column per reward function; verl: ``score`` and the reward
function's extra fields) and, for TRL, the advantage it trained on. This module is the one
place those rows become records of the lab's format, so both follow the same rules:

* **Groups**: an explicit ``group_id`` column is used as given; otherwise rows are grouped by
  **(training step, prompt)** when a step is known (GRPO's group is one prompt's completions *at
  one step*: the same prompt drawn again at a later step is a new group), else by prompt alone.
  ``info['grouping']`` says which.
* **Reward**: ``reward=`` names the column (or columns, summed) to use; by default the source's
  own reward (TRL rows' ``reward``, verl's ``score``), else the **unweighted sum** of the reward
  function columns (TRL's ``reward_weights`` are not in its files). A missing value (None,
  NaN: TRL lets a reward function return None) counts as **0**, as TRL's own ``nansum`` does;
  how many were missing is in ``info['missing_rewards']``. Every reward column is kept in
  ``info['reward_parts']`` ((B, K) float64, NaN where missing; names in
  ``info['reward_part_names']``).
* **Positions**: ``completion_ids`` / ``tokens`` when given, else the text cut by
  ``labkit.io.text_positions`` (the user's tokenizer, or characters, ``info['position_unit']``).
  A position's display string is not stored per position (``Rollouts.text`` stays None unless
  the rows carry a ``text`` field): it is ``chr(id)`` for characters and
  ``info['vocab_text'][id]`` for tokens; ``labkit.io.text_positions.display_text`` gives them.
* **Kept from the framework**: ``info['training_steps']`` (B,) and ``info['advantages']`` (B,)
  when logged. Both follow the rows through ``Rollouts.select``.

The rows become padded arrays column by column (numbers and text converted with numpy, no
per-record dictionaries); fields of the record format riding along (``completion_ids``,
``generated``, ``logprobs``, ...) are checked row by row as a record-format reader checks them.
A run's files are read in chunks by :func:`stream_text_rows`: the same rules, group ids numbered
alike across chunks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import torch

from labkit.core.rollouts import Rollouts
from labkit.io.assemble import GroupNumbering, Padded, assemble, pad_flat
from labkit.io.columns import as_list
from labkit.io.errors import record_error, show
from labkit.io.record import (ALL_OR_NONE, FIELDS, PER_POSITION, _anchor_keys, _group_id, pad_optional,
                              parse_position_field)
from labkit.io.text_positions import TOKENS, Positions, TextCutter

__all__ = ["TextRows", "read_text_rows", "stream_text_rows", "chunk_rows", "text_length", "message_text",
           "numeric_columns", "GROUPINGS", "LARGE_ROWS", "CHUNK_POSITIONS"]

#: Rows from which a progress bar shows by default.
LARGE_ROWS = 50_000
#: Padded positions (rows x longest row, counted in characters) a streamed chunk holds at most:
#: its (rows, T) int64 tensors stay about 16 MB. Larger ones are each a fresh mapping of memory
#: that the system zero-fills page by page, which made 4,096 rows of 1,000 characters a third
#: slower to read and measure than chunks of 2,048 rows (benchmarks/diagnose_trl_run.py).
CHUNK_POSITIONS = 1 << 21
#: What ``info['grouping']`` can say.
GROUPINGS = {"given": "group_id as given", "step": "training step and prompt", "prompt": "prompt"}
#: The record format's name of each Rollouts field (what errors call it).
NAMES = {"tokens": "tokens", "mask": "generated", "rewards": "rewards", "group_ids": "group_id", "prompts": "prompt",
         **{n: n for n in ("step_ids", "turn_ids", "agent_ids", "logprobs", "entropies", "states", "anchor_keys", "text")}}
_NUMBER_TYPES = frozenset({int, float})


@dataclass
class TextRows:
    """A framework's rows as columns, with which column plays which part.

    ``columns``: {name: list, one entry per row}. ``numbers[i]`` / ``wheres[i]``: row i's record
    number and file, for errors (``unit``: "row" or "line"). ``prompt`` / ``completion`` /
    ``step`` / ``advantage``: the source's names for those columns (None: not logged).
    ``reward``: the source's own reward column, if it has one; ``reward_columns``: the columns
    holding reward functions' values."""
    source: str
    format: str
    unit: str
    columns: dict[str, list]
    numbers: list[int]
    wheres: list[str | None]
    prompt: str = "prompt"
    completion: str = "completion"
    step: str | None = None
    advantage: str | None = None
    reward: str | None = None
    reward_columns: list[str] = field(default_factory=list)
    known: set[str] = field(default_factory=set)  # columns read for some purpose (not "ignored")

    def error(self, i: int | None, name: str | None, detail: str):
        if i is None:
            return record_error("source", self.unit, None, name, detail, self.wheres[0] if self.wheres else None)
        return record_error("source", self.unit, self.numbers[i], name, detail, self.wheres[i])


def message_text(value: Any, rows: TextRows, i: int, name: str, with_roles: bool) -> str:
    """A string, or a conversation (list of {'role', 'content'} messages) joined into one."""
    if isinstance(value, str):
        return value
    value = as_list(value)
    if isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in value):
        if with_roles:
            return "\n".join(f"{m.get('role', '')}: {m['content']}" for m in value)
        return "".join(m["content"] for m in value)
    raise rows.error(i, name, f"expected a string or a list of {{'role', 'content'}} messages, got {show(value)}")


def numeric_columns(cols: dict[str, list], exclude) -> list[str]:
    """The columns (in order) whose first non-missing value is a number (not a bool), but
    ``exclude``'s: the candidates for reward functions' values."""
    out = []
    for name, values in cols.items():
        first = next((v for v in values if v is not None), None) if isinstance(values, list) else None
        if name not in exclude and isinstance(first, (int, float)) and not isinstance(first, bool):
            out.append(name)
    return out


def _numbers(rows: TextRows, name: str, *, missing_ok: bool) -> np.ndarray:
    """A numeric column as float64, NaN where missing (refused unless ``missing_ok``)."""
    values = rows.columns[name]
    if set(map(type, values)) <= _NUMBER_TYPES:  # plain ints and floats: converted at once
        try:
            out = np.array(values, dtype=np.float64)
        except OverflowError:  # an integer beyond float64: the row-by-row path says where
            out = None
        if out is not None:
            nan, inf = np.isnan(out), np.isinf(out)
            bad = inf | nan if not missing_ok else inf
            if bad.any():
                i = int(bad.argmax())
                if nan[i]:
                    raise rows.error(i, name, "missing (None or NaN)")
                raise rows.error(i, name, f"must be finite, got {values[i]}")
            return out
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            if not missing_ok:
                raise rows.error(i, name, "missing (None or NaN)")
            out[i] = np.nan
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise rows.error(i, name, f"expected a number, got {show(v)}")
        elif not math.isfinite(float(v)):
            raise rows.error(i, name, f"must be finite, got {v}")
        else:
            out[i] = float(v)
    return out


def _reward_names(rows: TextRows, reward: str | Sequence[str] | None) -> list[str]:
    if reward is None:
        if rows.reward is not None and rows.reward in rows.columns:
            return [rows.reward]
        if rows.reward_columns:
            return list(rows.reward_columns)
        raise rows.error(None, rows.reward or "reward",
                         "missing: no reward column and no reward function's column (pass reward= to name one)")
    names = [reward] if isinstance(reward, str) else list(reward) if isinstance(reward, (list, tuple)) else []
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"reward: expected a column name or a list of them, got {reward!r}")
    choices = [c for c in ([rows.reward] if rows.reward else []) + rows.reward_columns if c in rows.columns]
    for n in names:
        if n not in rows.columns:
            raise ValueError(f"reward: no column {n!r} in {rows.source}; its reward columns are {choices}")
    return names


def _texts(rows: TextRows, has_ids: np.ndarray) -> list[str]:
    """The completion of every row as a string ("" for a row that gives its ids instead)."""
    values = rows.columns[rows.completion]
    if not has_ids.any() and set(map(type, values)) == {str}:
        return values
    out = []
    for i, v in enumerate(values):
        if v is None and has_ids[i]:
            out.append("")
        elif v is None:
            raise rows.error(i, rows.completion, f"missing (give {rows.completion!r} text or 'completion_ids')")
        else:
            out.append(message_text(v, rows, i, rows.completion, with_roles=False))
    return out


def _row_text(positions: Positions, start: int, n: int) -> list[str]:
    ids = positions.flat[start:start + n].tolist()
    return [chr(i) for i in ids] if positions.vocab is None else [positions.vocab[i] for i in ids]


def _position_fields(rows: TextRows, lengths: np.ndarray, positions: Positions | None,
                     has_ids: np.ndarray) -> dict[str, list]:
    """The record format's per-position fields the rows carry (``generated``, ``logprobs``, ...;
    ``text``): {name: per-row array, or None where the row leaves it out}, each checked as a
    record-format reader checks it (values, one per position, all-or-none fields)."""
    out: dict[str, list] = {}
    starts = np.cumsum(lengths) - lengths
    for name in PER_POSITION:
        if name == "tokens" or name not in rows.columns:
            continue
        parsed: list = [None] * len(lengths)
        for i, v in enumerate(rows.columns[name]):
            if v is None:
                if name == "text" and positions is not None and not has_ids[i]:
                    # a row whose positions were cut from its text shows that text
                    parsed[i] = _row_text(positions, int(starts[i]), int(lengths[i]))
                continue
            arr = parse_position_field(name, v, "source", rows.unit, rows.numbers[i], rows.wheres[i])
            if len(arr) != lengths[i]:
                raise rows.error(i, name, f"has {len(arr)} entries but 'tokens' has {int(lengths[i])} (one per position)")
            parsed[i] = arr
        out[name] = parsed
    if "anchor_keys" in rows.columns:
        out["anchor_keys"] = [None if v is None else _anchor_keys(v, "source", rows.unit, rows.numbers[i], rows.wheres[i])
                              for i, v in enumerate(rows.columns["anchor_keys"])]
    for name, parsed in out.items():
        present = [x is not None for x in parsed]
        if name in ALL_OR_NONE and any(present) and not all(present):
            i, first = present.index(False), present.index(True)
            raise rows.error(i, name, f"missing, but {rows.unit} {rows.numbers[first]} has it (give {name!r} in "
                                      f"every record or in none)")
    return {name: parsed for name, parsed in out.items() if any(x is not None for x in parsed)}


def read_text_rows(rows: TextRows, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   cutter: TextCutter | None = None, numbering: GroupNumbering | None = None,
                   info: dict | None = None) -> Rollouts:
    """``rows`` -> a validated Rollouts by the rules of the module docstring.

    For one chunk of a stream (:func:`stream_text_rows`): ``cutter``, the stream's
    :class:`~labkit.io.text_positions.TextCutter` (else one is made from ``tokenizer``);
    ``numbering``, its :class:`~labkit.io.assemble.GroupNumbering` (else groups are numbered
    within these rows); ``info``, entries added to the result's ``info``."""
    n = len(rows.numbers)
    if n == 0:
        raise rows.error(None, None, "no rows (empty input)")
    cols = rows.columns
    for name, values in cols.items():
        if not isinstance(values, list) or len(values) != n:
            got = len(values) if isinstance(values, list) else type(values).__name__
            raise rows.error(None, name, f"has {got} entries but there are {n} rows (one per row)")

    names = _reward_names(rows, reward)
    parts_names = [c for c in dict.fromkeys(([rows.reward] if rows.reward else []) + rows.reward_columns + names)
                   if c in cols]
    parts = {c: _numbers(rows, c, missing_ok=True) for c in parts_names}
    chosen = np.stack([parts[c] for c in names], 1)
    missing = np.isnan(chosen)
    total = np.where(missing, 0.0, chosen).sum(1)
    if not np.isfinite(total).all():  # finite parts can still overflow when summed
        i = int((~np.isfinite(total)).argmax())
        raise rows.error(i, "reward", f"expected a finite number, got {show(float(total[i]))}")

    # positions: the given ids, or the text cut by the tokenizer / into characters
    given_ids = "tokens" if "tokens" in cols else "completion_ids" if "completion_ids" in cols else None
    has_ids = np.array([v is not None for v in cols[given_ids]], dtype=bool) if given_ids else np.zeros(n, bool)
    positions = None
    if not has_ids.all():
        if rows.completion not in cols:
            raise rows.error(0, rows.completion, f"missing (give {rows.completion!r} text or 'completion_ids')")
        positions = (cutter or TextCutter(tokenizer)).cut(_texts(rows, has_ids))
    elif tokenizer is not None:
        raise ValueError(f"tokenizer: {rows.source} carries token ids ({given_ids!r}); a tokenizer is only for "
                         f"text without ids")
    if has_ids.any():
        ends = np.cumsum(positions.lengths) if positions is not None else None
        pieces = [parse_position_field("tokens", v, "source", rows.unit, rows.numbers[i], rows.wheres[i])
                  if has_ids[i] else positions.flat[ends[i] - positions.lengths[i]:ends[i]]
                  for i, v in enumerate(cols[given_ids])]
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=n)
        flat = np.concatenate(pieces).astype(np.int64, copy=False)
    else:
        lengths, flat = positions.lengths, positions.flat
    T = int(lengths.max())
    valid = np.arange(T)[None, :] < lengths[:, None]
    tokens = pad_flat(flat, valid, 0, np.int64)
    del flat
    extra = _position_fields(rows, lengths, positions, has_ids)

    prompts: list[str | None] = [None] * n
    if rows.prompt in cols:
        prompts = [None if v is None else message_text(v, rows, i, rows.prompt, with_roles=True)
                   for i, v in enumerate(cols[rows.prompt])]
    steps = None
    if rows.step is not None and rows.step in cols:
        raw = _numbers(rows, rows.step, missing_ok=False)
        if not (raw == np.round(raw)).all() or (raw < 0).any():
            i = int(((raw != np.round(raw)) | (raw < 0)).argmax())
            raise rows.error(i, rows.step, f"expected a non-negative integer training step, got {show(cols[rows.step][i])}")
        steps = raw.astype(np.int64)
    if "group_id" in cols:
        grouping, groups = "given", []
        for i, v in enumerate(cols["group_id"]):
            if v is None:
                raise rows.error(i, "group_id", "missing (a required field)")
            groups.append(_group_id(v, "source", rows.unit, rows.numbers[i], rows.wheres[i]))
    else:
        if any(p is None for p in prompts):
            i = prompts.index(None)
            raise rows.error(i, rows.prompt, "missing: rows are grouped by their prompt (or give 'group_id')")
        if steps is not None:
            grouping, groups = "step", [f"step {s} | {p}" for s, p in zip(steps.tolist(), prompts)]
        else:
            grouping, groups = "prompt", prompts

    used = {rows.prompt, rows.completion, rows.step, rows.advantage, rows.reward, "completion_ids", "group_id",
            *rows.reward_columns, *names, *rows.known}
    ignored = sorted(c for c in cols if c not in used and c not in FIELDS)
    meta: dict[str, Any] = {"source": rows.source, "format": rows.format, "grouping": GROUPINGS[grouping],
                            "reward_columns": tuple(names),
                            "position_unit": TOKENS if positions is None else positions.unit}
    if positions is not None:
        meta["tokenizer"] = positions.how
        if positions.vocab is not None:
            meta["vocab_text"] = positions.vocab
    if missing.any():
        meta["missing_rewards"] = int(missing.sum())
    if parts:
        meta["reward_part_names"] = tuple(parts)
        meta["reward_parts"] = torch.from_numpy(np.stack([parts[c] for c in parts], 1))
    if steps is not None:
        meta["training_steps"] = torch.from_numpy(steps)
    if rows.advantage is not None and rows.advantage in cols:
        meta["advantages"] = torch.from_numpy(_numbers(rows, rows.advantage, missing_ok=False))
    if ignored:
        meta["ignored_fields"] = tuple(ignored)
    meta.update(info or {})

    one_file = len(set(rows.wheres)) == 1
    p = Padded(argument="source", unit=rows.unit, numbers=np.asarray(rows.numbers), names=NAMES,
               where=rows.wheres[0] if one_file else rows.source, wheres=None if one_file else rows.wheres,
               tokens=tokens, valid=valid, group=groups, reward=total, prompts=prompts, info=meta,
               numbering=numbering)
    pad_optional(p, extra, lengths, valid)
    p.text, p.anchor_keys = extra.get("text"), extra.get("anchor_keys")
    return assemble(p)


def text_length(value: Any) -> int:
    """Characters of a completion as logged (a string, or a conversation's contents; 0 for
    anything else): what a chunk's size is counted in before the text is cut."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(len(m["content"]) for m in value if isinstance(m, dict) and isinstance(m.get("content"), str))
    return 0


def chunk_rows(lengths: Sequence[int], batch_rows: int, final: bool) -> int | None:
    """How many of the buffered rows (``lengths``: their text lengths, in order) the next chunk
    takes: ``batch_rows``, or fewer where that many rows padded to their longest would exceed
    :data:`CHUNK_POSITIONS` (at least one row); None while the buffer cannot tell yet (fewer
    rows than ``batch_rows``, all fitting, and more may come: ``final`` False)."""
    m = min(len(lengths), batch_rows)
    if m == 0:
        return None
    padded = np.maximum.accumulate(np.asarray(lengths[:m], dtype=np.int64)) * np.arange(1, m + 1)
    k = max(1, int((padded <= CHUNK_POSITIONS).sum()))
    if k < m or m == batch_rows or final:
        return k
    return None


def stream_text_rows(chunks: Iterable[TextRows], *, tokenizer: Any = None,
                     reward: str | Sequence[str] | None = None) -> Iterator[Rollouts]:
    """Each chunk of a run's rows (consecutive, in the run's order) as a validated Rollouts, by
    :func:`read_text_rows` with one tokenizer and one group numbering for them all: a group's
    code is the same in every chunk, and each chunk's ``info['group_names']`` holds the names
    numbered so far. Each chunk's ``info`` adds ``offset`` (its first row's index in the run,
    0-based), ``first_record`` (that row's number in its file, as errors count it) and
    ``first_file``."""
    cutter = TextCutter(tokenizer)
    numbering = GroupNumbering()
    offset = 0
    for rows in chunks:
        info = {"offset": offset, "first_record": rows.numbers[0], "first_file": rows.wheres[0]}
        yield read_text_rows(rows, tokenizer=tokenizer, reward=reward, cutter=cutter, numbering=numbering, info=info)
        offset += len(rows.numbers)
