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
* **Kept from the framework**: ``info['training_steps']`` (B,) and ``info['advantages']`` (B,)
  when logged. Both follow the rows through ``Rollouts.select``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.io.assemble import assemble
from labkit.io.columns import as_list
from labkit.io.errors import record_error, show
from labkit.io.record import FIELDS, parse_record, records_to_padded
from labkit.io.text_positions import TOKENS, text_positions

__all__ = ["TextRows", "read_text_rows", "message_text", "numeric_columns", "GROUPINGS", "LARGE_ROWS"]

#: Rows from which a progress bar shows by default.
LARGE_ROWS = 50_000
#: What ``info['grouping']`` can say.
GROUPINGS = {"given": "group_id as given", "step": "training step and prompt", "prompt": "prompt"}


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
    out = np.empty(len(rows.numbers), dtype=np.float64)
    for i, v in enumerate(rows.columns[name]):
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


def read_text_rows(rows: TextRows, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   progress: bool | None = None) -> Rollouts:
    """``rows`` -> a validated Rollouts by the rules of the module docstring."""
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

    given_ids = "tokens" if "tokens" in cols else "completion_ids" if "completion_ids" in cols else None
    positions = None
    if given_ids is None or any(v is None for v in cols[given_ids]):
        if rows.completion not in cols:
            raise rows.error(0, rows.completion, f"missing (give {rows.completion!r} text or 'completion_ids')")
        texts = []
        for i, v in enumerate(cols[rows.completion]):
            if v is None and given_ids is not None and cols[given_ids][i] is not None:
                texts.append("")
                continue
            if v is None:
                raise rows.error(i, rows.completion, f"missing (give {rows.completion!r} text or 'completion_ids')")
            texts.append(message_text(v, rows, i, rows.completion, with_roles=False))
        positions = text_positions(texts, tokenizer)
    elif tokenizer is not None:
        raise ValueError(f"tokenizer: {rows.source} carries token ids ({given_ids!r}); a tokenizer is only for "
                         f"text without ids")

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
        grouping, groups = "given", cols["group_id"]
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
    show_bar = n >= LARGE_ROWS if progress is None else progress
    records = []
    for i in progress_bar(range(n), desc=rows.source, enabled=show_bar):
        rec = {k: cols[k][i] for k in FIELDS if k in cols and k not in ("prompt", "reward", "group_id", "tokens")}
        rec["group_id"] = groups[i]
        rec["reward"] = float(total[i])
        if prompts[i] is not None:
            rec["prompt"] = prompts[i]
        if given_ids is not None and cols[given_ids][i] is not None:
            rec["tokens"] = cols[given_ids][i]
        else:
            rec["tokens"] = positions.ids[i]
            if rec.get("text") is None:
                rec["text"] = positions.text[i]
        records.append(parse_record(rec, "source", rows.unit, rows.numbers[i], rows.wheres[i]))
    info: dict[str, Any] = {"source": rows.source, "format": rows.format, "grouping": GROUPINGS[grouping],
                            "reward_columns": tuple(names),
                            "position_unit": TOKENS if positions is None else positions.unit}
    if positions is not None:
        info["tokenizer"] = positions.how
    if missing.any():
        info["missing_rewards"] = int(missing.sum())
    if parts:
        info["reward_part_names"] = tuple(parts)
        info["reward_parts"] = torch.from_numpy(np.stack([parts[c] for c in parts], 1))
    if steps is not None:
        info["training_steps"] = torch.from_numpy(steps)
    if rows.advantage is not None and rows.advantage in cols:
        info["advantages"] = torch.from_numpy(_numbers(rows, rows.advantage, missing_ok=False))
    if ignored:
        info["ignored_fields"] = tuple(ignored)
    where = rows.wheres[0] if len(set(rows.wheres)) == 1 else None
    return assemble(records_to_padded(records, rows.numbers, "source", rows.unit, where, info=info))
