"""TRL's shape: rows of ``prompt``, ``completion``, ``reward`` (optional ``completion_ids``).

As a dict of lists (a ``datasets`` column dict, the completions table TRL logs) or a list of
dicts. Rows are numbered **from 0**. ``prompt`` and ``completion`` may be strings or
conversations (lists of ``{"role", "content"}`` messages). Rows with the same prompt form a group
(GRPO's), unless a ``group_id`` is given. Without ``completion_ids`` the completion text is
split into **Unicode code points**: one position per character, token id ``ord(char)``, the
character as the position's text; this keeps every character visible and needs no tokenizer,
but it is not the trained model's tokenization (pass ``completion_ids`` for that). Any field of
the record format (``generated``, ``rewards``, ``logprobs``, ...) may ride along.
"""
from __future__ import annotations

from typing import Any

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.io.assemble import assemble
from labkit.io.errors import record_error, show
from labkit.io.record import FIELDS, parse_record, records_to_padded, rollout_records

__all__ = ["read_trl", "to_trl", "LARGE_ROWS", "FALLBACK_TOKENIZER"]

LARGE_ROWS = 50_000
FALLBACK_TOKENIZER = "unicode code points (completion text without completion_ids)"
_TRL = {"prompt", "completion", "completion_ids", "reward"}


def _rows(source: Any) -> list:
    if isinstance(source, dict) or (hasattr(source, "keys") and hasattr(source, "__getitem__")
                                    and not isinstance(source, (list, tuple))):
        cols = {k: list(source[k]) for k in source.keys()}
        if not cols:
            raise record_error("source", "row", None, None, "no columns (empty input)")
        first = next(iter(cols))
        for name, values in cols.items():
            if len(values) != len(cols[first]):
                raise record_error("source", "row", None, name,
                                   f"has {len(values)} entries but {first!r} has {len(cols[first])} (one per row)")
        return [dict(zip(cols, values)) for values in zip(*cols.values())]
    if isinstance(source, (list, tuple)):
        return list(source)
    raise TypeError(f"source: expected TRL rows (a dict of lists or a list of dicts), got {type(source).__name__}")


def _message_text(value: Any, row: int, name: str, with_roles: bool) -> str:
    """A string, or a conversation (list of {'role', 'content'} messages) joined into one."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in value):
        if with_roles:
            return "\n".join(f"{m.get('role', '')}: {m['content']}" for m in value)
        return "".join(m["content"] for m in value)
    raise record_error("source", "row", row, name,
                       f"expected a string or a list of {{'role', 'content'}} messages, got {show(value)}")


def read_trl(source: Any, *, progress: bool | None = None) -> Rollouts:
    """TRL rows -> validated Rollouts (RecordError naming the row and the field)."""
    rows = _rows(source)
    if not rows:
        raise record_error("source", "row", None, None, "no rows (empty input)")
    show_bar = len(rows) >= LARGE_ROWS if progress is None else progress
    records, ignored, fallback = [], set(), False
    for i, row in enumerate(progress_bar(rows, desc="TRL rows", enabled=show_bar)):
        if not isinstance(row, dict):
            raise record_error("source", "row", i, None, f"expected a dict per row, got {type(row).__name__}")
        rec = {k: v for k, v in row.items() if k in FIELDS}
        ignored.update(k for k in row if k not in FIELDS and k not in _TRL)
        if row.get("prompt") is not None:
            rec["prompt"] = _message_text(row["prompt"], i, "prompt", with_roles=True)
        if rec.get("tokens") is None:
            if row.get("completion_ids") is not None:
                rec["tokens"] = row["completion_ids"]
            elif row.get("completion") is not None:
                text = _message_text(row["completion"], i, "completion", with_roles=False)
                rec["tokens"] = [ord(c) for c in text]
                if rec.get("text") is None:
                    rec["text"] = list(text)
                fallback = True
            else:
                raise record_error("source", "row", i, "completion", "missing (give 'completion' text or 'completion_ids')")
        if rec.get("group_id") is None:
            if rec.get("prompt") is None:
                raise record_error("source", "row", i, "prompt",
                                   "missing: TRL rows are grouped by their prompt (or give 'group_id')")
            rec["group_id"] = rec["prompt"]
        records.append(parse_record(rec, "source", "row", i))
    info = {"source": "TRL rows", "format": "trl"}
    if fallback:
        info["tokenizer"] = FALLBACK_TOKENIZER
    if ignored:
        info["ignored_fields"] = tuple(sorted(ignored))
    return assemble(records_to_padded(records, list(range(len(records))), "source", "row", info=info))


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
