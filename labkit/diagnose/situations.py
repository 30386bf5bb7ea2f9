"""The (situation, result) visits behind the stochasticity measurement, hashed and counted.

:func:`~labkit.diagnose.measure.measure_stochasticity` describes the method: cut trajectories
into actions, key each by everything up to it (its *situation*), and see whether repeated
situations were followed by different *results*. Here: a polynomial prefix hash that keys every
action of a chunk of rows in a few tensor passes (``_chunk_events``), and :class:`Situations`,
the mergeable counter of visits per (situation, result) pair that turns them into a
:class:`~labkit.diagnose.results.Stochasticity`.
"""
from __future__ import annotations

import functools

import torch

from labkit.core.rollouts import Rollouts
from labkit.core.segments import last_generated
from labkit.diagnose.results import Stochasticity

__all__ = ["CHUNK_ROWS", "Situations"]

#: Rows handled at once by the position-level passes: bounds the temporaries (each (rows, T)
#: int64 tensor) on large batches.
CHUNK_ROWS = 4096
#: ... and at most this many positions (rows x T) at once, fewer rows for long ones: a larger
#: temporary is a fresh zero-filled mapping of memory each time, which costs more than the pass.
BLOCK_POSITIONS = 1 << 21

_MASK64 = (1 << 64) - 1


def _to_signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


# Odd multipliers (from splitmix64 / the golden ratio); int64 arithmetic wraps modulo 2**64.
_M1, _M2, _GOLD = _to_signed(0xBF58476D1CE4E5B9), _to_signed(0x94D049BB133111EB), _to_signed(0x9E3779B97F4A7C15)
_BASE = _to_signed(0x100000001B3)  # the polynomial hash's base (FNV's prime: odd)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64 (wrapping): spreads nearby integers over all 64 bits.
    Logical right shifts are emulated by masking off the sign-extended bits."""
    def shr(v, k):
        return (v >> k) & ((1 << (64 - k)) - 1)
    x = x + _GOLD
    x = (x ^ shr(x, 30)) * _M1
    x = (x ^ shr(x, 27)) * _M2
    return x ^ shr(x, 31)


@functools.lru_cache(maxsize=8)  # one per horizon seen; a stream's chunks share a few
def _powers(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """base^0..base^(n-1) and the inverse's powers modulo 2**64, as wrapped int64 tensors
    (shared between calls: never written in place)."""
    inv = pow(_BASE & _MASK64, -1, 1 << 64)
    up, down, a, b = [], [], 1, 1
    for _ in range(n):
        up.append(_to_signed(a))
        down.append(_to_signed(b))
        a = (a * (_BASE & _MASK64)) & _MASK64
        b = (b * inv) & _MASK64
    return torch.tensor(up, dtype=torch.long), torch.tensor(down, dtype=torch.long)


@functools.lru_cache(maxsize=1 << 14)  # a run repeats its prompts chunk after chunk
def _string_hash(s: str) -> int:
    """A deterministic 63-bit hash of a string (Python's ``hash`` is salted per process)."""
    h = 1469598103934665603
    for byte in s.encode("utf-8"):
        h = ((h ^ byte) * 1099511628211) & _MASK64
    return _to_signed(h)


# A position's symbol in the prefix hash: token * 4 + kind (0 padding, 1 generated, 2 environment)
# plus state * _STATE_SHIFT where states exist. Injective for token ids below 2**31 and states
# below 2**30, so distinct positions hash differently before any collision of the polynomial.
_STATE_SHIFT = 1 << 33


def _chunk_events(rollouts: Rollouts, rows: slice, row_seed: torch.Tensor):
    """(keys, results) int64 of every action in ``rows``: an action is a maximal run of
    generated positions with one turn id; its key hashes (row seed, every position before and
    including it); its result hashes what followed it (environment output up to the next
    action, the observation state there, the end of the episode) and the reward it received.
    When every row is one action from its first position (one turn, no environment output:
    completions) they are keyed by :func:`_single_action_events` in a few passes, else by
    :func:`_events`."""
    mask = rollouts.mask[rows]
    turns = rollouts.turn_ids[rows]
    T = mask.shape[1]
    last = last_generated(mask)
    # one action from position 0: generated up to its last generated position, one turn (bool
    # and read-only passes: on long rows allocating (rows, T) int64 temporaries is the cost)
    single = (mask | (torch.arange(T)[None, :] > last[:, None])).all(1) & (turns.amax(1) <= 0)
    tensors = {"mask": mask, "tokens": rollouts.tokens[rows], "turns": turns, "rewards": rollouts.rewards[rows],
               "states": rollouts.states[rows] if rollouts.states is not None else None,
               "row_seed": row_seed, "last": last}
    return (_single_action_events if bool(single.all()) else _events)(**tensors)


def _single_action_events(mask, tokens, turns, rewards, states, row_seed, last):
    """:func:`_events` of rows whose generated positions are 0 .. last, one turn: one action per
    row (none for an empty row), nothing after it. Its key is the prefix hash at ``last``,

        H[last] = base^last * (4 * sum_s tokens[s] base^-s + sum_s base^-s
                               + _STATE_SHIFT * sum_s states[s] base^-s) + seed * base^(last+1)

    over s <= last (the symbol token * 4 + 1 + state * _STATE_SHIFT of a generated position,
    summed in the same wrapping int64 arithmetic, so the very same integers), row sums instead of
    a cumulative sum over every position; its result: no environment output, no next state
    (-1 with states, 0 without), the episode ends, and the row's reward."""
    keep = last >= 0
    if not bool(keep.all()):
        mask, tokens, rewards, row_seed, last = mask[keep], tokens[keep], rewards[keep], row_seed[keep], last[keep]
        states = states[keep] if states is not None else None
    T = mask.shape[1]
    powers, inverse = _powers(T + 1)
    inv = inverse[:T]
    x = tokens.masked_fill(~mask, 0)
    acc = x.mul_(inv).sum(1) * 4 + inv.cumsum(0)[last]
    if states is not None:
        x = states.masked_fill(~mask, 0)
        acc += x.mul_(inv).sum(1) * _STATE_SHIFT
    del x
    key = acc * powers[last] + powers[last + 1] * row_seed
    r = rewards.to(torch.float64)
    if bool(((r != 0).view(torch.uint8).sum(1, dtype=torch.int32) <= 1).all()):
        got = r.sum(1)  # at most one non-zero reward per row: any order of summing gives it exactly
    else:
        got = r.cumsum(1).gather(1, last[:, None]).squeeze(1)  # the order _events sums in
    got = torch.round(got * 1e9).to(torch.long)
    obs = torch.full_like(key, -1) if states is not None else torch.zeros_like(key)
    following = torch.zeros_like(key)
    result = _mix(_mix(_mix(following) ^ (obs + 11)) ^ _mix(got))  # (^ has_next: 0, nothing follows)
    return key, result


def _events(mask, tokens, turns, rewards, states, row_seed, last):
    """(keys, results) of every action of these rows (see :func:`_chunk_events`). Only the prefix
    hash is computed per position; everything else per action."""
    B, T = mask.shape
    t = torch.arange(T)
    padding = t[None, :] > last[:, None]
    sym = tokens * 4 + torch.where(mask, 1, torch.where(padding, 0, 2))
    if states is not None:
        # the state the policy saw at a generated position is part of what happened there
        sym += torch.where(mask, states, 0) * _STATE_SHIFT
    sym.masked_fill_(padding, 0)
    # prefix hash H[t] = seed * base^(t+1) + sum_{s<=t} sym[s] * base^(t-s) (wrapping int64), as
    # base^t * cumsum_s(sym[s] * base^-s): base is odd, so it has an inverse modulo 2**64
    powers, inverse = _powers(T + 1)
    sym *= inverse[None, :T]
    H = sym.cumsum_(1)
    H *= powers[None, :T]
    H += powers[None, 1:] * row_seed[:, None]
    del sym
    # action boundaries: a generated position whose neighbour is not generated or in another turn
    same_next = mask[:, 1:] & mask[:, :-1] & (turns[:, 1:] == turns[:, :-1])
    pad_col = torch.zeros(B, 1, dtype=torch.bool)
    end = mask & ~torch.cat([same_next, pad_col], 1)
    start = mask & ~torch.cat([pad_col, same_next], 1)
    er, et = end.nonzero(as_tuple=True)        # row-major: actions in order within each row
    sr, st = start.nonzero(as_tuple=True)      # the same actions, by their first position
    n = er.numel()
    Hf = H.reshape(-1)
    key = Hf[er * T + et]
    # the next action of the same row, if any
    has_next = torch.zeros(n, dtype=torch.bool)
    has_next[:-1] = er[1:] == er[:-1]
    nxt = torch.where(has_next, torch.cat([st[1:], st[:1]]), (last[er] + 1))
    # environment output between the action and the next one (or the row's end):
    # H[stop - 1] - H[end] * base^(stop - 1 - end), empty -> 0
    stop = nxt
    gap = stop - 1 - et
    following = torch.where(gap > 0, Hf[er * T + (stop - 1).clamp(min=0)] - key * powers[gap.clamp(min=0)], 0)
    if states is not None:
        obs = torch.where(has_next, states.reshape(-1)[er * T + nxt.clamp(max=T - 1)], -1)
    else:
        obs = torch.zeros(n, dtype=torch.long)
    # reward received by the action: its positions' rewards (rewards sit on generated positions)
    cum = rewards.to(torch.float64).cumsum(1).reshape(-1)
    at_end = cum[er * T + et]
    at_start = torch.where(st > 0, cum[sr * T + (st - 1).clamp(min=0)], 0.0)
    got = torch.round((at_end - at_start) * 1e9).to(torch.long)  # 1e-9: round-off is not luck
    result = _mix(_mix(_mix(following) ^ (obs + 11)) ^ _mix(got) ^ has_next.long())
    return key, result


class Situations:
    """The (situation, result) visits of :func:`~labkit.diagnose.measure.measure_stochasticity`,
    counted and mergeable.

    Held as one row per distinct (situation, result) pair: its hash, its situation's hash and
    its number of visits. New visits are appended as they come and folded in (equal pairs
    summed) once they outnumber the folded rows, so the memory is about two rows per distinct
    pair and the folding costs O(N log N) over a whole stream."""

    def __init__(self) -> None:
        self._parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._folded = 0
        self._pending = 0

    def add(self, keys: torch.Tensor, results: torch.Tensor) -> None:
        """Count one visit per (keys[i], results[i]) (int64 hashes)."""
        pairs = _mix(keys ^ _mix(results))
        self._parts.append((pairs, keys, torch.ones_like(keys)))
        self._pending += keys.numel()
        if self._pending > max(1 << 20, self._folded):
            self._fold()

    def add_rollouts(self, rollouts: Rollouts, *, chunk_rows: int = CHUNK_ROWS, progress=None) -> None:
        """Count every action of a batch (see the module docstring), ``chunk_rows`` rows at a
        time (fewer when rows are so long that more would exceed :data:`BLOCK_POSITIONS`)."""
        B = rollouts.batch_size
        chunk_rows = max(1, min(chunk_rows, BLOCK_POSITIONS // rollouts.horizon))
        seed = _mix(rollouts.group_ids.long() * 2 + 1)
        if rollouts.prompts is not None:
            # "" is no prompt (a reader gives "" to the records without one when others have
            # one): a row reads the same whether its batch has prompts or not
            given = torch.tensor([p != "" for p in rollouts.prompts], dtype=torch.bool)
            memo: dict[str, int] = {"": 0}  # each distinct prompt hashed once (a group shares one)
            hashed = torch.tensor([memo[p] if p in memo else memo.setdefault(p, _string_hash(p))
                                   for p in map(str, rollouts.prompts)], dtype=torch.long)
            seed = torch.where(given, _mix(seed ^ hashed), seed)
        starts = range(0, B, chunk_rows)
        if progress is not None:
            starts = progress(starts)
        for start in starts:
            rows = slice(start, min(B, start + chunk_rows))
            self.add(*_chunk_events(rollouts, rows, seed[rows]))

    def merge(self, other: "Situations") -> None:
        """Add another counter's visits."""
        self._parts += other._parts
        self._pending += other._folded + other._pending
        self._fold()

    def _fold(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self._parts:
            empty = torch.zeros(0, dtype=torch.long)
            return empty, empty, empty
        if len(self._parts) > 1 or self._pending:
            pairs = torch.cat([p[0] for p in self._parts])
            keys = torch.cat([p[1] for p in self._parts])
            counts = torch.cat([p[2] for p in self._parts])
            u, inv = torch.unique(pairs, return_inverse=True)
            summed = torch.zeros(u.numel(), dtype=torch.long).scatter_add_(0, inv, counts)
            # each distinct pair remembers its situation (equal pairs have equal situations)
            pair_key = torch.zeros(u.numel(), dtype=torch.long).scatter_(0, inv, keys)
            self._parts = [(u, pair_key, summed)]
            self._folded, self._pending = u.numel(), 0
        return self._parts[0]

    def result(self, unit: str = "turn") -> Stochasticity:
        """The estimate from every visit counted (``unit`` names an action in the summary)."""
        _, pair_key, pcount = self._fold()
        n_actions = int(pcount.sum())
        uk, kinv = torch.unique(pair_key, return_inverse=True)
        kcount = torch.zeros(uk.numel(), dtype=torch.long).scatter_add_(0, kinv, pcount)
        repeated = kcount >= 2
        if not bool(repeated.any()):
            return Stochasticity(n_actions, 0, 0, 0, None, unit=unit)
        n = kcount.to(torch.float64)
        total_pairs = float((n * (n - 1)).sum())
        same = float((pcount.to(torch.float64) * (pcount - 1)).sum())
        distinct_results = torch.bincount(kinv, minlength=uk.numel())
        varying = int((repeated & (distinct_results >= 2)).sum())
        return Stochasticity(n_actions, int(repeated.sum()), int(kcount[repeated].sum()), varying,
                             (total_pairs - same) / total_pairs, unit=unit)
