"""Padded numpy columns of a batch of records -> a validated ``Rollouts``, or a RecordError.

Every reader ends here. The cross-field rules of the record format are checked on the padded
(B, T) arrays in a few vectorised passes, and the first offending (row, position) is reported
with the record's number. What the ``Rollouts`` boundary refuses beyond that (label order,
log-probabilities above 0, negative entropies, anchor keys that do not match the steps) is
traced back to its record by building the batch on halves (a few extra builds, on the error
path only), so nothing is loaded half-right and every refusal names a record and a field.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from labkit.core.rollouts import Rollouts
from labkit.io.errors import record_error

__all__ = ["Padded", "GroupNumbering", "assemble", "pad_flat", "pad_rows", "group_codes"]

LABELS = ("step_ids", "turn_ids", "agent_ids")


@dataclass
class Padded:
    """One batch as padded arrays, with what the error messages need.

    ``numbers[b]`` is row b's record number in the source's own counting (``unit``: "line" or
    "row"); ``names`` maps a Rollouts field to the source's name for it (e.g. mask ->
    'generated' or 'response_mask'). ``valid`` (B, T) marks positions inside a record (the rest
    is padding). Fields with a per-record default come as ``(array, given)`` with ``given`` (B,)
    saying which rows gave them. ``reward`` is the outcome reward per record (placed on the last
    generated position), ``rewards`` per-position rewards (intermediate ones for the record
    format, all of them for verl); their sum is stored as ``reward_dtype`` (a source's float
    type is kept: float64 for JSON numbers, the column's or tensor's type otherwise).
    ``numbering``: the file's :class:`GroupNumbering` when the batch is one chunk of a file read
    in chunks (None: the group ids are numbered within this batch, :func:`group_codes`).
    ``wheres``: each row's file, for a batch drawn from several files (errors name the row's
    file; ``where`` then names the whole source, for faults of no one row).
    """

    argument: str
    unit: str
    numbers: np.ndarray
    names: dict[str, str]
    tokens: np.ndarray
    valid: np.ndarray
    group: Sequence
    where: str | None = None
    reward: np.ndarray | None = None
    generated: tuple[np.ndarray, np.ndarray] | None = None
    rewards: tuple[np.ndarray, np.ndarray] | None = None
    labels: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    logprobs: np.ndarray | None = None
    entropies: np.ndarray | None = None
    states: np.ndarray | None = None
    text: list | None = None
    anchor_keys: list | None = None
    prompts: list | None = None
    reward_dtype: Any = np.float64
    info: dict = field(default_factory=dict)
    numbering: "GroupNumbering | None" = None
    wheres: Sequence | None = None

    def error(self, row: int | None, rollouts_field: str | None, detail: str):
        """A RecordError for ``row`` (an index into the batch) and a Rollouts field name."""
        number = None if row is None else int(self.numbers[row])
        name = None if rollouts_field is None else self.names.get(rollouts_field, rollouts_field)
        where = self.where if row is None or self.wheres is None else self.wheres[row]
        return record_error(self.argument, self.unit, number, name, detail, where)


def pad_flat(flat: np.ndarray, valid: np.ndarray, fill: Any, dtype) -> np.ndarray:
    """Spread the concatenated per-record values ``flat`` over a (B, T) array (row-major order
    of ``valid``'s True entries is the records' order), ``fill`` elsewhere. Always a new,
    writable array (``flat`` may be a read-only view of an Arrow buffer)."""
    if flat.size == valid.size:  # every record has T positions: a reshape, no scatter
        return np.array(flat, dtype=dtype).reshape(valid.shape)
    out = np.full(valid.shape, fill, dtype=dtype)
    out[valid] = flat
    return out


def pad_rows(rows: list, lengths: np.ndarray, valid: np.ndarray, fill: Any, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Per-record arrays (``None`` for a record without the field) -> (padded (B, T), given (B,))."""
    given = np.array([r is not None for r in rows], dtype=bool)
    parts = [r if r is not None else np.full(n, fill, dtype=dtype) for r, n in zip(rows, lengths.tolist())]
    flat = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
    return pad_flat(flat, valid, fill, dtype), given


def group_codes(raw: Sequence) -> tuple[np.ndarray, tuple | None]:
    """Group ids as int64 codes: non-negative integers are kept as they are; anything else
    (strings, a mix) is numbered 0, 1, 2, ... in order of first appearance and the original ids
    are returned as ``names`` (names[code] = original id)."""
    if isinstance(raw, np.ndarray):
        if raw.dtype.kind in "iu" and raw.ndim == 1 and (raw.size == 0 or int(raw.min()) >= 0):
            return raw.astype(np.int64), None
        raw = raw.tolist()
    raw = list(raw)
    if all(type(x) is int and x >= 0 for x in raw):
        return np.array(raw, dtype=np.int64), None
    codes: dict = {}
    out = np.empty(len(raw), dtype=np.int64)
    for i, key in enumerate(raw):
        out[i] = codes.setdefault(key, len(codes))
    return out, tuple(codes)


class GroupNumbering:
    """Group ids numbered alike across the chunks of one file (``labkit.io.iter_rollouts``).

    The rule is :func:`group_codes`'s, applied to the whole file as it streams by: when the ids
    are non-negative integers they are kept; otherwise every id is numbered 0, 1, 2, ... in
    order of first appearance *in the file*, and each chunk's ``info['group_names']`` holds the
    names numbered so far (names[code] = original id), so a chunk's codes mean the same as in
    the file read whole. Which rule applies is fixed by the first chunk: an id that is not a
    non-negative integer in a later chunk of an integer-id file is refused (a RecordError naming
    the record), since the chunks already handed out kept their integer ids.
    """

    def __init__(self) -> None:
        self.kind: str | None = None  # "int" (ids kept) or "names" (numbered by first appearance)
        self.names: dict = {}

    def codes(self, p: "Padded") -> tuple[np.ndarray, tuple | None]:
        """(int64 codes, names so far or None) of batch ``p``'s group ids; RecordError on a
        string id in an integer-id file."""
        raw = p.group
        if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu" and raw.ndim == 1 and (
                raw.size == 0 or int(raw.min()) >= 0):
            ints = np.ones(raw.size, dtype=bool)
        else:
            raw = raw.tolist() if isinstance(raw, np.ndarray) else list(raw)
            ints = np.array([type(x) is int and x >= 0 for x in raw], dtype=bool)
        if self.kind is None:
            self.kind = "int" if ints.all() else "names"
        if self.kind == "int":
            if not ints.all():
                row = int((~ints).argmax())
                raise p.error(row, "group_ids", f"is {raw[row]!r}, but the file's earlier records have integer ids; a "
                                                f"file read in chunks (iter_rollouts, diagnose of a file) needs integer "
                                                f"ids throughout or none (read_rollouts reads it whole)")
            return np.array(raw, dtype=np.int64), None  # a copy: Arrow buffers are read-only
        out = np.empty(len(raw), dtype=np.int64)
        names = self.names
        for i, key in enumerate(raw):
            out[i] = names.setdefault(key, len(names))
        return out, tuple(names)


def _first(bad: np.ndarray) -> tuple[int, int]:
    b, t = divmod(int(bad.argmax()), bad.shape[1])
    return b, t


def assemble(p: Padded) -> Rollouts:
    """Check the padded batch ``p`` and build its Rollouts (or raise RecordError)."""
    B, T = p.tokens.shape
    if B == 0:
        raise p.error(None, None, "no records (empty input)")
    if T == 0:
        raise p.error(None, "tokens", "every record is empty (no positions at all)")
    if p.generated is None:
        mask = p.valid
    else:
        gen, given = p.generated
        mask = np.where(given[:, None], gen, p.valid) & p.valid
    if not mask.any():
        raise p.error(None, "mask", "no record has a generated position (nothing to give credit to)")
    # (token ids >= 0 on generated positions: Rollouts checks it, traced back to a record below)
    # Rewards are summed in the dtype they will be stored in when nothing needs float64: a
    # float64 (B, T) copy of a 100k x 256 batch would add 200 MB to the peak for nothing.
    work = np.float64 if (p.rewards is not None or p.reward_dtype == np.float64) else p.reward_dtype
    if p.rewards is not None:
        rewards = np.asarray(p.rewards[0], dtype=np.float64)
        finite = np.isfinite(rewards)
        if not finite.all():
            b, t = _first(~finite)
            raise p.error(b, "rewards", f"must be finite, got {rewards[b, t]} at position {t}")
        bad = (rewards != 0) & ~mask
        if bad.any():
            b, t = _first(bad)
            raise p.error(b, "rewards", f"position {t} carries reward {rewards[b, t]:g} but is not generated "
                                        f"(tool output or padding); rewards go on positions the policy produced")
    else:
        rewards = np.zeros((B, T), dtype=work)
    if p.reward is not None:
        has = mask.any(1)
        bad = (p.reward != 0) & ~has
        if bad.any():
            b = int(bad.argmax())
            raise p.error(b, "reward", f"is {p.reward[b]:g}, but the trajectory has no generated position to put it on")
        last = T - 1 - mask[:, ::-1].argmax(1)
        rows = np.nonzero(has)[0]
        if p.rewards is not None:
            rewards = rewards.copy()  # the caller's array stays as given
        rewards[rows, last[rows]] += p.reward[rows]

    kw: dict[str, Any] = {"tokens": p.tokens, "mask": mask, "rewards": rewards.astype(p.reward_dtype, copy=False)}
    for name in LABELS:
        if name not in p.labels:
            continue
        ids, given = p.labels[name]
        if not given.any():
            continue  # Rollouts builds the default itself
        if not given.all():
            if name == "step_ids":
                default = np.cumsum(mask, axis=1, dtype=np.int64) - 1
            else:
                default = np.zeros((B, T), dtype=np.int64)
            ids = np.where(given[:, None], ids, default)
        # labels on tool output / padding are ignored (Rollouts wants -1 there)
        kw[name] = np.where(mask, ids, -1).astype(np.int64, copy=False)
    for name in ("logprobs", "entropies"):
        x = getattr(p, name)
        if x is not None:
            kw[name] = np.asarray(x)
    if p.states is not None:
        kw["states"] = p.states
    codes, names = group_codes(p.group) if p.numbering is None else p.numbering.codes(p)
    kw["group_ids"] = codes
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in kw.items()}
    if p.text is not None:
        tensors["text"] = [list(row) + [""] * (T - len(row)) for row in p.text]
    if p.anchor_keys is not None:
        tensors["anchor_keys"] = [list(row) for row in p.anchor_keys]
    if p.prompts is not None and any(x is not None for x in p.prompts):
        tensors["prompts"] = ["" if x is None else x for x in p.prompts]
    info = dict(p.info)
    if names is not None:
        info["group_names"] = names
    try:
        return Rollouts(**tensors, info=info)
    except (ValueError, TypeError) as err:
        raise _traced(p, tensors, err) from None


_BATCH_LEVEL = "mask: no generated position"
_AT = re.compile(r"(?:at )?(?:index )?\(0, (\d+)\)")


def _try(tensors: dict, rows: np.ndarray) -> Exception | None:
    idx = torch.from_numpy(rows)
    kw = {k: (v[idx] if isinstance(v, torch.Tensor) else [v[int(i)] for i in rows]) for k, v in tensors.items()}
    try:
        Rollouts(**kw)
    except (ValueError, TypeError) as err:
        return None if str(err).startswith(_BATCH_LEVEL) else err
    return None


def _traced(p: Padded, tensors: dict, err: Exception) -> Exception:
    """Find the record behind a Rollouts refusal by bisection; a RecordError naming it."""
    rows = np.arange(p.tokens.shape[0])
    while len(rows) > 1:
        half = rows[: len(rows) // 2]
        rows = half if _try(tensors, half) is not None else rows[len(rows) // 2:]
    found = _try(tensors, rows)
    if found is None:  # not a property of one record (should not happen): report it whole
        return p.error(None, None, str(err))
    name, _, detail = str(found).partition(": ")
    detail = _AT.sub(lambda m: f"at position {m.group(1)}", detail).replace("trajectory 0 ", "the trajectory ")
    return p.error(int(rows[0]), name, detail)
