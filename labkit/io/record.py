"""The record format: one trajectory per record, its fields, and the check of one record.

The package docstring (``labkit.io``) describes the format for users; the JSON Schema
``data/io/rollout_record.schema.json`` states the same field by field. This module is the
reader's side: :func:`parse_record` checks one decoded record (a dict from a JSON line or a TRL
row) field by field and returns numpy arrays; :func:`stack_records` turns many into columns.
Rules that need several fields at once (equal lengths, rewards only where the policy generated,
label order) are checked here (lengths) or on the padded batch (``labkit.io.assemble``).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from labkit.core.paths import data_path, require_data
from labkit.core.segments import default_labels, last_generated
from labkit.io.errors import record_error, show

__all__ = ["SCHEMA_FILE", "REQUIRED", "PER_POSITION", "PER_RECORD", "ALL_OR_NONE", "FIELDS",
           "load_schema", "parse_record", "stack_records", "pad_optional"]

SCHEMA_FILE = ("io", "rollout_record.schema.json")

#: Fields every record must have.
REQUIRED = ("group_id", "tokens", "reward")
#: Per-position fields (one entry per position, the length of ``tokens``) and their kind.
PER_POSITION = {"tokens": "int", "text": "str", "generated": "01", "rewards": "num", "step_ids": "int",
                "turn_ids": "int", "agent_ids": "int", "logprobs": "num", "entropies": "num", "states": "int"}
#: Per-record fields and their kind.
PER_RECORD = {"group_id": "group", "prompt": "str", "reward": "num", "anchor_keys": "keys"}
#: Optional fields without a per-record default: in every record or in none.
ALL_OR_NONE = ("text", "logprobs", "entropies", "states", "anchor_keys")
FIELDS = tuple(PER_RECORD) + tuple(PER_POSITION)
#: Smallest value allowed anywhere in an integer per-position field.
LOWEST = {"tokens": 0, "states": 0, "step_ids": -1, "turn_ids": -1, "agent_ids": -1}

_INT, _NUM = {int}, {int, float}


def load_schema() -> dict:
    """The record's JSON Schema (draft 2020-12), read from ``data/io/rollout_record.schema.json``."""
    path = require_data(data_path(*SCHEMA_FILE), "the rollout record schema")
    return json.loads(path.read_text())


def _integers(values: list, kinds: set, argument: str, unit: str, number: int, name: str, where) -> np.ndarray:
    """A JSON list of integers (integral floats allowed, as JSON Schema's 'integer' allows them)."""
    if kinds <= _INT:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            raise record_error(argument, unit, number, name, "an integer does not fit in 64 bits", where) from None
    arr = np.array(values, dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0 ** 63)
    if bad.any():
        i = int(bad.argmax())
        raise record_error(argument, unit, number, name,
                           f"expected a list of integers, got {show(values[i])} at position {i}", where)
    return arr.astype(np.int64)


def _bad_element(values: list, allowed: set) -> int:
    return next(i for i, v in enumerate(values) if type(v) not in allowed)


def parse_position_field(name: str, values: Any, argument: str, unit: str, number: int, where=None) -> Any:
    """One per-position field of one record, checked: a numpy array (or a list of strings)."""
    kind = PER_POSITION[name]
    if type(values) is not list:
        want = {"int": "integers", "num": "numbers", "str": "strings", "01": "0/1 flags"}[kind]
        raise record_error(argument, unit, number, name, f"expected a list of {want}, got {show(values)}", where)
    kinds = set(map(type, values))  # one C-level pass; bool is its own type here, never an int
    if kind == "str":
        if not kinds <= {str}:
            i = _bad_element(values, {str})
            raise record_error(argument, unit, number, name,
                               f"expected a list of strings, got {show(values[i])} at position {i}", where)
        return values
    if kind == "01":
        if not kinds <= {int, float, bool}:
            i = _bad_element(values, {int, float, bool})
            raise record_error(argument, unit, number, name,
                               f"expected 0/1 (or true/false) per position, got {show(values[i])} at position {i}", where)
        arr = np.array(values, dtype=np.float64)
        bad = (arr != 0) & (arr != 1)
        if bad.any():
            i = int(bad.argmax())
            raise record_error(argument, unit, number, name,
                               f"expected 0/1 (or true/false) per position, got {show(values[i])} at position {i}", where)
        return arr.astype(bool)
    if not kinds <= _NUM:
        i = _bad_element(values, _NUM)
        want = "integers" if kind == "int" else "numbers"
        raise record_error(argument, unit, number, name,
                           f"expected a list of {want}, got {show(values[i])} at position {i}", where)
    if kind == "num":
        arr = np.array(values, dtype=np.float64)
        if not np.isfinite(arr).all():
            i = int((~np.isfinite(arr)).argmax())
            raise record_error(argument, unit, number, name, f"must be finite, got {values[i]} at position {i}", where)
        return arr
    arr = _integers(values, kinds, argument, unit, number, name, where)
    low = LOWEST[name]
    if arr.size and int(arr.min()) < low:
        i = int((arr < low).argmax())
        raise record_error(argument, unit, number, name, f"must be >= {low}, got {int(arr[i])} at position {i}", where)
    return arr


def parse_record(obj: Any, argument: str, unit: str, number: int, where: str | None = None) -> dict:
    """Check one decoded record and return its fields as numpy arrays / Python values.

    ``null`` counts as absent. Unknown fields are left out of the result (the caller notes their
    names). Raises RecordError naming ``unit number`` and the field.
    """
    if not isinstance(obj, dict):
        raise record_error(argument, unit, number, None,
                           f"expected a JSON object (one trajectory), got {type(obj).__name__}", where)
    out: dict[str, Any] = {}
    for name in REQUIRED:
        if obj.get(name) is None:
            raise record_error(argument, unit, number, name, "missing (a required field)", where)
    for name, value in obj.items():
        if value is None:
            continue
        if name in PER_POSITION:
            out[name] = parse_position_field(name, value, argument, unit, number, where)
        elif name == "reward":
            if type(value) not in _NUM or not np.isfinite(value):
                raise record_error(argument, unit, number, name, f"expected a finite number, got {show(value)}", where)
            out[name] = float(value)
        elif name == "prompt":
            if type(value) is not str:
                raise record_error(argument, unit, number, name, f"expected a string, got {show(value)}", where)
            out[name] = value
        elif name == "group_id":
            out[name] = _group_id(value, argument, unit, number, where)
        elif name == "anchor_keys":
            out[name] = _anchor_keys(value, argument, unit, number, where)
    n = len(out["tokens"])
    for name in PER_POSITION:
        if name in out and len(out[name]) != n:
            raise record_error(argument, unit, number, name,
                               f"has {len(out[name])} entries but 'tokens' has {n} (one per position)", where)
    return out


def _group_id(value: Any, argument: str, unit: str, number: int, where) -> int | str:
    if type(value) is str:
        return value
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or value < 0:
        raise record_error(argument, unit, number, "group_id",
                           f"expected a non-negative integer or a string, got {show(value)}", where)
    return value


def _anchor_keys(value: Any, argument: str, unit: str, number: int, where) -> list:
    if type(value) is not list:
        raise record_error(argument, unit, number, "anchor_keys",
                           f"expected a list of strings or integers (one per step), got {show(value)}", where)
    keys = []
    for i, k in enumerate(value):
        if type(k) is float and k.is_integer():
            k = int(k)
        if type(k) not in (str, int):
            raise record_error(argument, unit, number, "anchor_keys",
                               f"expected a string or an integer per step, got {show(k)} at step {i}", where)
        keys.append(k)
    return keys


def stack_records(records: list[dict], numbers: list[int], argument: str, unit: str, where=None) -> dict:
    """Columns of parsed records: ``lengths`` (n,), each per-position field as a list of arrays
    (``None`` for a record without it), per-record fields as lists; all-or-none fields checked."""
    if not records:
        raise record_error(argument, unit, None, None, "no records (empty input)", where)
    cols: dict[str, Any] = {"lengths": np.array([len(r["tokens"]) for r in records], dtype=np.int64)}
    for name in FIELDS:
        present = [name in r for r in records]
        if not any(present):
            continue
        if name in ALL_OR_NONE and not all(present):
            i = present.index(False)
            first = present.index(True)
            raise record_error(argument, unit, numbers[i], name,
                               f"missing, but {unit} {numbers[first]} has it (give {name!r} in every record or in none)",
                               where)
        cols[name] = [r.get(name) for r in records]
    return cols


def records_to_padded(records: list[dict], numbers: list[int], argument: str, unit: str,
                      where: str | None = None, info: dict | None = None):
    """Parsed records (``parse_record``'s output) -> a ``Padded`` batch for ``assemble``."""
    from labkit.io.assemble import Padded, pad_flat  # one direction: assemble knows no records

    cols = stack_records(records, numbers, argument, unit, where)
    lengths = cols["lengths"]
    T = int(lengths.max())
    valid = np.arange(T)[None, :] < lengths[:, None]
    names = {"tokens": "tokens", "mask": "generated", "rewards": "rewards", "group_ids": "group_id",
             "prompts": "prompt", **{n: n for n in ("step_ids", "turn_ids", "agent_ids", "logprobs", "entropies",
                                                    "states", "anchor_keys", "text")}}
    p = Padded(argument=argument, unit=unit, numbers=np.asarray(numbers), names=names, where=where,
               tokens=pad_flat(np.concatenate(cols["tokens"]), valid, 0, np.int64), valid=valid,
               group=cols["group_id"], reward=np.array(cols["reward"], dtype=np.float64),
               text=cols.get("text"), anchor_keys=cols.get("anchor_keys"), prompts=cols.get("prompt"),
               info=dict(info or {}))
    pad_optional(p, cols, lengths, valid)
    return p


def pad_optional(p, cols: dict, lengths: np.ndarray, valid: np.ndarray) -> None:
    """Set the optional per-position fields of ``cols`` (per-record arrays, None where a record
    lacks the field) on the ``Padded`` batch ``p``, each with its padding value and default."""
    from labkit.io.assemble import pad_rows

    if "generated" in cols:
        p.generated = pad_rows(cols["generated"], lengths, valid, False, bool)
    if "rewards" in cols:
        p.rewards = pad_rows(cols["rewards"], lengths, valid, 0.0, np.float64)
    for name in ("step_ids", "turn_ids", "agent_ids"):
        if name in cols:
            p.labels[name] = pad_rows(cols[name], lengths, valid, -1, np.int64)
    for name, fill, dtype in (("logprobs", 0.0, np.float64), ("entropies", 0.0, np.float64), ("states", 0, np.int64)):
        if name in cols:
            setattr(p, name, pad_rows(cols[name], lengths, valid, fill, dtype)[0])


def record_lengths(rollouts) -> tuple[np.ndarray, np.ndarray]:
    """(length, last generated position) per trajectory of a Rollouts: a record keeps positions
    up to its last generated one (what follows is padding); length 0 when nothing was generated."""
    last = last_generated(rollouts.mask).numpy()
    return last + 1, last


def rollout_records(rollouts, argument: str = "rollouts") -> list[dict]:
    """The records of a Rollouts, one dict per trajectory, in the record format.

    Positions after a trajectory's last generated one are padding and are not written. The
    outcome ``reward`` is the reward on the last generated position; ``rewards`` (the other
    positions' rewards) is written only when some is non-zero; ``generated`` only when a
    position inside the record is not generated; labels only where they differ from the
    default; ``truth`` and ``info`` are not part of the format (``info['group_names']``, left by
    a reader, turns group ids back into the source's ids). ``text``: ``Rollouts.text``, or the
    display strings of text a reader cut into positions
    (``labkit.io.text_positions.position_texts``).
    """
    from labkit.core.rollouts import check_rollouts
    from labkit.io.text_positions import position_texts

    ro = check_rollouts(rollouts)
    B = ro.batch_size
    lengths, last = record_lengths(ro)
    rows = np.arange(B)
    rewards = ro.rewards.detach().to("cpu").numpy()
    has = lengths > 0
    outcome = np.where(has, rewards[rows, last], 0.0)
    inter = rewards.copy()
    inter[rows[has], last[has]] = 0
    inter_rows = (inter != 0).any(1)
    mask = ro.mask.numpy()
    partial = (~mask & (np.arange(ro.horizon)[None, :] < lengths[:, None])).any(1)  # tool output inside
    defaults = default_labels(ro.mask)
    differs = {n: (getattr(ro, n) != defaults[n]).any(1).numpy() for n in defaults}
    group_names = ro.info.get("group_names")
    groups = ro.group_ids.tolist()
    if isinstance(group_names, tuple) and len(group_names) > max(groups):
        groups = [group_names[g] for g in groups]
    lists = {"tokens": ro.tokens.tolist(), "generated": ro.mask.to(torch.uint8).tolist(), "rewards": inter.tolist()}
    for name in ("step_ids", "turn_ids", "agent_ids"):
        if differs[name].any():
            lists[name] = getattr(ro, name).tolist()
    for name in ("logprobs", "entropies", "states"):
        if getattr(ro, name) is not None:
            lists[name] = getattr(ro, name).tolist()
    if ro.anchor_keys is not None:
        for b, keys in enumerate(ro.anchor_keys):
            for k, key in enumerate(keys):
                if type(key) not in (str, int):
                    raise TypeError(f"{argument}: anchor_keys[{b}][{k}] is {show(key)}; the record format stores "
                                    f"strings or integers (write str(key) keys if they are other hashables)")
    text = position_texts(ro)
    out = []
    for b in range(B):
        n = int(lengths[b])
        rec: dict[str, Any] = {"group_id": groups[b]}
        if ro.prompts is not None:
            rec["prompt"] = ro.prompts[b]
        rec["tokens"] = lists["tokens"][b][:n]
        rec["reward"] = float(outcome[b]) + 0.0  # + 0.0: no "-0.0" in files
        if partial[b]:
            rec["generated"] = lists["generated"][b][:n]
        if inter_rows[b]:
            rec["rewards"] = lists["rewards"][b][:n]
        for name in ("step_ids", "turn_ids", "agent_ids"):
            if name in lists and differs[name][b]:
                rec[name] = lists[name][b][:n]
        for name in ("logprobs", "entropies", "states"):
            if name in lists:
                rec[name] = lists[name][b][:n]
        if ro.anchor_keys is not None:
            rec["anchor_keys"] = list(ro.anchor_keys[b])
        if text is not None:
            rec["text"] = text[b][:n]
        out.append(rec)
    return out
