"""What a batch of rollouts says about the training setup, measured without an environment.

Every function here reads a ``Rollouts`` only (no policy, no environment, no truth) and returns
plain numbers in small frozen dataclasses, so a report, a test or a notebook can print them.

Which position is what. ``mask`` True marks what the policy generated. A position with ``mask``
False is **padding** when it lies after the last generated position of its row (the row has
ended: nothing the policy did can follow it) and **environment output** (tool results,
observations) otherwise, i.e. between or before generated positions. A row with nothing
generated is all padding. Why this rule: ``Rollouts`` stores no separate length, and an episode
ends with the policy's last action; a tool answer after it would be read by nobody.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts, check_rollouts, last_generated
from labkit.core.stats import constant_groups

__all__ = [
    "INTERMEDIATE_MIN_SHARE", "STOCHASTIC_THRESHOLD", "Histogram", "Lengths", "RewardStats",
    "GroupStats", "PositionStats", "Stochasticity", "position_kinds", "histogram", "measure_lengths",
    "measure_rewards", "measure_groups", "measure_positions", "measure_stochasticity", "Tally", "Situations",
]

#: Rewards count as per-step ("intermediate") when at least this share of trajectories receives a
#: non-zero reward before its last generated position (one stray reward in 10,000 rows does not).
INTERMEDIATE_MIN_SHARE = 0.01
#: The environment counts as stochastic when two visits to the same (prompt, history, action)
#: are followed by different observations or rewards more often than this (see
#: :func:`measure_stochasticity`). A deterministic environment gives exactly 0.
STOCHASTIC_THRESHOLD = 0.01
#: Rows handled at once by the position-level passes: bounds the temporaries (each (rows, T)
#: int64 tensor) on large batches.
CHUNK_ROWS = 4096


@dataclass(frozen=True)
class Histogram:
    """Counts of values in bins: ``edges`` has one more entry than ``counts``; bins are
    [edges[i], edges[i+1]) except the last, which is closed. ``discrete`` says the bins are the
    distinct values themselves (``edges[i]`` is then the value, ``edges[-1]`` one past it)."""
    edges: tuple[float, ...]
    counts: tuple[int, ...]
    discrete: bool = False

    def rows(self) -> list[tuple[str, int]]:
        """(bin label, count) pairs, in order."""
        if self.discrete:
            return [(f"{e:g}", c) for e, c in zip(self.edges, self.counts)]
        return [(f"{a:g}-{b:g}", c) for a, b, c in zip(self.edges, self.edges[1:], self.counts)]


@dataclass(frozen=True)
class Lengths:
    """Per-trajectory lengths: ``generated`` tokens (mask True), ``episode`` tokens (generated
    plus environment output, padding excluded) and ``turns`` (None when no trajectory has more
    than one turn: then the data carries no turn structure). Each is a (min, median, max, mean)
    summary plus a histogram of the generated tokens (and of the turns where known)."""
    generated_min: int
    generated_median: float
    generated_max: int
    generated_mean: float
    episode_min: int
    episode_median: float
    episode_max: int
    generated_hist: Histogram
    turns_min: int | None = None
    turns_median: float | None = None
    turns_max: int | None = None
    turns_hist: Histogram | None = None


@dataclass(frozen=True)
class RewardStats:
    """Rewards per trajectory. ``share_nonzero``: trajectories with any non-zero reward;
    ``share_intermediate``: trajectories with a non-zero reward before their last generated
    position; ``intermediate``: that share is at least :data:`INTERMEDIATE_MIN_SHARE`.
    ``total_*`` and ``hist`` describe the total reward (``rollouts.scores``)."""
    share_nonzero: float
    share_intermediate: float
    intermediate: bool
    total_mean: float
    total_std: float
    total_min: float
    total_max: float
    n_distinct: int
    hist: Histogram


@dataclass(frozen=True)
class GroupStats:
    """Task groups (``group_ids``). A group is *zero-variance* when it has two or more members
    and all their total rewards are equal: group-relative estimators (GRPO, RLOO, Dr. GRPO) then
    give every member exactly zero credit. Singletons are counted apart (GRPO's group-of-one rule
    gives them their raw score). ``share_zero_variance``: zero-variance groups among groups of
    two or more (NaN when there is none); ``share_rows_zero_variance``: trajectories in them
    among all trajectories."""
    n_groups: int
    size_min: int
    size_median: float
    size_max: int
    n_singletons: int
    n_zero_variance: int
    share_zero_variance: float
    share_rows_zero_variance: float
    size_hist: Histogram


@dataclass(frozen=True)
class PositionStats:
    """Positions of the padded (B, T) batch by kind (see the module docstring)."""
    generated: int
    environment: int
    padding: int

    @property
    def tool_share(self) -> float:
        """Environment (tool) output among the non-padding positions."""
        used = self.generated + self.environment
        return self.environment / used if used else 0.0

    @property
    def padding_share(self) -> float:
        """Padding among all positions."""
        total = self.generated + self.environment + self.padding
        return self.padding / total if total else 0.0


@dataclass(frozen=True)
class Stochasticity:
    """How often the same situation led to a different result (:func:`measure_stochasticity`).

    ``repeated_keys``: distinct (prompt, history, action) keys visited at least twice;
    ``repeated_visits``: visits to them; ``varying_keys``: those followed by two or more
    different results; ``rate``: the probability that two visits to the same key are followed by
    different results (pairs of visits pooled over keys), None when nothing repeats.
    ``stochastic``: rate > :data:`STOCHASTIC_THRESHOLD`, None when not measurable."""
    n_actions: int
    repeated_keys: int
    repeated_visits: int
    varying_keys: int
    rate: float | None
    threshold: float = STOCHASTIC_THRESHOLD
    unit: str = "turn"

    @property
    def measurable(self) -> bool:
        """Whether some situation repeats, so that a rate exists."""
        return self.rate is not None

    @property
    def stochastic(self) -> bool | None:
        """rate > threshold; None when not measurable."""
        return None if self.rate is None else self.rate > self.threshold

    def summary(self) -> str:
        """One sentence with the number and what it rests on."""
        if self.rate is None:
            return (f"not measurable: none of the {self.n_actions:,} (prompt, history, {self.unit}) "
                    f"situations occurs twice")
        return (f"{self.rate:.3f}: probability that two visits to the same (prompt, history, "
                f"{self.unit}) were followed by different results, over {self.repeated_keys:,} "
                f"situations seen twice or more ({self.repeated_visits:,} visits; "
                f"{self.varying_keys:,} of them varied)")


# --------------------------------------------------------------------------- helpers
def position_kinds(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """``(environment, padding)`` (B, T) bool masks; generated positions are ``rollouts.mask``.

    Padding: after the row's last generated position; environment output: every other position
    with ``mask`` False (see the module docstring)."""
    check_rollouts(rollouts)
    last = last_generated(rollouts.mask)
    t = torch.arange(rollouts.horizon)
    padding = t[None, :] > last[:, None]
    return ~rollouts.mask & ~padding, padding


def histogram(values, *, bins: int = 20, discrete_max: int = 20) -> Histogram:
    """Histogram of a 1-D array of numbers: one bin per distinct value when there are at most
    ``discrete_max`` of them, else ``bins`` equal-width bins over [min, max]."""
    bins = check_int("bins", bins, low=1)
    discrete_max = check_int("discrete_max", discrete_max, low=1)
    x = np.asarray(torch.as_tensor(values).detach().to(torch.float64).reshape(-1))
    if x.size == 0:
        raise ValueError("values: need at least one value")
    if not np.isfinite(x).all():
        raise ValueError("values: contains a non-finite value")
    distinct, counts = np.unique(x, return_counts=True)
    return _histogram_of_counts(distinct, counts, bins, discrete_max)


def _histogram_of_counts(distinct: np.ndarray, counts: np.ndarray, bins: int = 20,
                         discrete_max: int = 20) -> Histogram:
    """:func:`histogram` of the values ``distinct`` (sorted, float64) seen ``counts`` times each:
    the same bins and counts as the histogram of the values themselves (np.histogram's range is
    the values' min and max, and a value's bin depends on the value alone)."""
    if len(distinct) <= discrete_max:
        step = float(np.diff(distinct).min()) if len(distinct) > 1 else 1.0
        edges = tuple(float(v) for v in distinct) + (float(distinct[-1]) + step,)
        return Histogram(edges, tuple(int(c) for c in counts), discrete=True)
    hist, edges = np.histogram(distinct, bins=bins, weights=counts)
    return Histogram(tuple(float(e) for e in edges), tuple(int(c) for c in hist))


def _bincount_histogram(counts: np.ndarray, bins: int) -> Histogram:
    """:func:`histogram` of integers kept as a bincount (``counts[v]``: how often v was seen)."""
    values = np.nonzero(counts)[0]
    return _histogram_of_counts(values.astype(np.float64), counts[values], bins)


def _bincount_summary(counts: np.ndarray) -> tuple[int, float, int, float]:
    """(min, median, max, mean) of integers kept as a bincount; the same numbers as
    :func:`_summary` of the integers themselves (the median of an even count is the midpoint of
    the middle two; the mean is the exact sum divided once)."""
    values = np.nonzero(counts)[0]
    n = int(counts.sum())
    cum = np.cumsum(counts)
    below, above = (n - 1) // 2, n // 2  # 0-based ranks of the middle value(s)
    a, b = (int(np.searchsorted(cum, k, side="right")) for k in (below, above))
    total = int((np.arange(len(counts), dtype=np.int64) * counts).sum())
    return int(values[0]), a + 0.5 * (b - a), int(values[-1]), total / n


def _add_counts(counts: np.ndarray, values: torch.Tensor) -> np.ndarray:
    """``counts`` (a bincount) with the non-negative integers ``values`` added."""
    new = np.bincount(values.numpy(), minlength=len(counts))
    new[:len(counts)] += counts
    return new


def _summary(x: torch.Tensor) -> tuple[float, float, float, float]:
    """(min, median, max, mean); the median of an even count is the midpoint of the middle two."""
    x = x.to(torch.float64)
    return float(x.min()), float(x.quantile(0.5)), float(x.max()), float(x.mean())


# --------------------------------------------------------------------------- measurements
def measure_lengths(rollouts: Rollouts, *, bins: int = 20) -> Lengths:
    """Trajectory lengths in generated tokens, in episode tokens (generated + environment
    output, no padding) and in turns where the data has turns (median: the midpoint of the two
    middle values for an even count)."""
    return Tally().add(rollouts, stochasticity=False).lengths(bins=bins)


def measure_rewards(rollouts: Rollouts, *, bins: int = 20) -> RewardStats:
    """Reward sparsity and distribution (see :class:`RewardStats`)."""
    return Tally().add(rollouts, stochasticity=False).rewards(bins=bins)


def measure_groups(rollouts: Rollouts) -> GroupStats:
    """Group sizes and zero-variance groups (see :class:`GroupStats`)."""
    return Tally().add(rollouts, stochasticity=False).groups()


def measure_positions(rollouts: Rollouts) -> PositionStats:
    """Count generated, environment-output and padding positions (module docstring's rule)."""
    return Tally().add(rollouts, stochasticity=False).positions()


class Tally:
    """Every measurement of this module, accumulated over a batch or over a stream of batches
    (the chunks of a file, ``labkit.io.iter_rollouts``) and mergeable (:meth:`merge`).

    ``add(chunk)`` reduces a chunk to what the measurements need, so a tally's memory does not
    grow with the chunks' (rows, T) tensors: bincounts of the generated and episode lengths and
    of the turn counts (lengths are integers: their min, median, max, mean and histogram are
    exact from the counts); per trajectory its total reward (float64) and group id (int64),
    16 bytes a trajectory, from which the reward distribution, the zero-variance groups and
    the comparison's sample of whole groups are computed exactly as from the whole batch; a few
    counters (trajectories with a non-zero / an intermediate reward; generated and used
    positions; the widest chunk); which optional fields appeared; and the stochasticity
    estimate's (situation, result) visit counts, one row per distinct pair, compacted as they
    grow. The results (:meth:`lengths`, :meth:`rewards`, :meth:`groups`, :meth:`positions`,
    :meth:`stochasticity`) equal the ``measure_*`` functions on the concatenated batch, padded
    to the widest chunk (the ``measure_*`` functions are this class on one batch), provided the
    chunks number their groups alike, as ``iter_rollouts`` does.
    """

    def __init__(self) -> None:
        self.n = 0
        self.horizon = 0
        self.generated = 0
        self.used = 0
        self.nonzero = 0
        self.intermediate = 0
        self._gen = np.zeros(1, dtype=np.int64)
        self._episode = np.zeros(1, dtype=np.int64)
        self._turns = np.zeros(1, dtype=np.int64)
        self._scores: list[np.ndarray] = []
        self._groups: list[np.ndarray] = []
        self.max_agent = -1
        self.fields: set[str] = set()
        self.situations = Situations()

    def add(self, rollouts: Rollouts, *, stochasticity: bool = True, chunk_rows: int = CHUNK_ROWS,
            progress=None) -> "Tally":
        """Measure one batch into the tally; returns the tally. ``stochasticity``: also collect
        its (situation, result) visits (:func:`measure_stochasticity`), ``chunk_rows`` rows at a
        time (``progress``: a tqdm-like wrapper for that loop)."""
        check_rollouts(rollouts)
        chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
        B, T = rollouts.batch_size, rollouts.horizon
        mask, r = rollouts.mask, rollouts.rewards
        gen = rollouts.lengths.long()
        # everything up to the last generated position is generated or environment output
        last = last_generated(mask)
        episode = last + 1
        self._gen = _add_counts(self._gen, gen)
        self._episode = _add_counts(self._episode, episode)
        self._turns = _add_counts(self._turns, rollouts.n_turns.long())
        self.generated += int(gen.sum())
        self.used += int(episode.sum())
        # a non-zero reward anywhere but on the last generated position is an intermediate one
        # (rewards are zero off the mask, so none lies after it)
        per_row = (r != 0).sum(1)
        on_last = (r.gather(1, last.clamp(min=0)[:, None]).squeeze(1) != 0) & (last >= 0)
        self.nonzero += int((per_row > 0).sum())
        self.intermediate += int((per_row - on_last.long() > 0).sum())
        self._scores.append(rollouts.scores.to(torch.float64).numpy().copy())
        self._groups.append(rollouts.group_ids.long().numpy().copy())
        self.max_agent = max(self.max_agent, int(rollouts.agent_ids.max()))
        self.fields |= {name for name in ("anchor_keys", "entropies", "logprobs", "states", "prompts")
                        if getattr(rollouts, name) is not None}
        if stochasticity:
            self.situations.add_rollouts(rollouts, chunk_rows=chunk_rows, progress=progress)
        self.n += B
        self.horizon = max(self.horizon, T)
        return self

    def merge(self, other: "Tally") -> "Tally":
        """Add another tally's batches (measured after this one's); returns this tally."""
        if not isinstance(other, Tally):
            raise TypeError(f"other: expected a Tally, got {type(other).__name__}")
        for name in ("_gen", "_episode", "_turns"):
            mine, theirs = getattr(self, name), getattr(other, name)
            out = np.zeros(max(len(mine), len(theirs)), dtype=np.int64)
            out[:len(mine)] += mine
            out[:len(theirs)] += theirs
            setattr(self, name, out)
        for name in ("n", "generated", "used", "nonzero", "intermediate"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.horizon = max(self.horizon, other.horizon)
        self.max_agent = max(self.max_agent, other.max_agent)
        self._scores += other._scores
        self._groups += other._groups
        self.fields |= other.fields
        self.situations.merge(other.situations)
        return self

    def _need(self) -> None:
        if self.n == 0:
            raise ValueError("tally: no trajectories added yet")

    @property
    def scores(self) -> torch.Tensor:
        """Total reward per trajectory, float64, in the order added."""
        self._need()
        if len(self._scores) > 1:
            self._scores = [np.concatenate(self._scores)]
        return torch.from_numpy(self._scores[0])

    @property
    def group_ids(self) -> torch.Tensor:
        """Group id per trajectory, int64, in the order added."""
        self._need()
        if len(self._groups) > 1:
            self._groups = [np.concatenate(self._groups)]
        return torch.from_numpy(self._groups[0])

    @property
    def max_turns(self) -> int:
        """The largest number of turns of a trajectory."""
        return int(np.nonzero(self._turns)[0][-1])

    def lengths(self, *, bins: int = 20) -> Lengths:
        """:func:`measure_lengths` of everything added."""
        self._need()
        bins = check_int("bins", bins, low=1)
        g, e = _bincount_summary(self._gen), _bincount_summary(self._episode)
        kw = {}
        if self.max_turns > 1:
            tm = _bincount_summary(self._turns)
            kw = dict(turns_min=tm[0], turns_median=tm[1], turns_max=tm[2],
                      turns_hist=_bincount_histogram(self._turns, bins))
        return Lengths(g[0], g[1], g[2], g[3], e[0], e[1], e[2], _bincount_histogram(self._gen, bins), **kw)

    def rewards(self, *, bins: int = 20) -> RewardStats:
        """:func:`measure_rewards` of everything added."""
        self._need()
        s = self.scores
        share_inter = self.intermediate / self.n
        return RewardStats(
            share_nonzero=self.nonzero / self.n, share_intermediate=share_inter,
            intermediate=share_inter >= INTERMEDIATE_MIN_SHARE,
            total_mean=float(s.mean()), total_std=float(s.std()) if s.numel() > 1 else 0.0,
            total_min=float(s.min()), total_max=float(s.max()), n_distinct=int(torch.unique(s).numel()),
            hist=histogram(s, bins=bins))

    def group_sizes(self) -> torch.Tensor:
        """Trajectories per group, in the order of the sorted group ids."""
        return torch.unique(self.group_ids, return_counts=True)[1]

    def groups(self) -> GroupStats:
        """:func:`measure_groups` of everything added."""
        self._need()
        sizes = torch.unique(self.group_ids, return_counts=True)[1]
        n = sizes.numel()
        # the zero-variance rule lives once, in core.stats (GRPO's group-of-one rule beside it)
        zero_rows = constant_groups(self.scores, self.group_ids)
        n_zero = int(torch.unique(self.group_ids[zero_rows]).numel())
        n_multi = int((sizes >= 2).sum())
        size_summary = _summary(sizes)
        return GroupStats(
            n_groups=n, size_min=int(size_summary[0]), size_median=size_summary[1], size_max=int(size_summary[2]),
            n_singletons=int((sizes == 1).sum()), n_zero_variance=n_zero,
            share_zero_variance=n_zero / n_multi if n_multi else float("nan"),
            share_rows_zero_variance=float(zero_rows.sum()) / self.n,
            size_hist=histogram(sizes))

    def positions(self) -> PositionStats:
        """:func:`measure_positions` of everything added, padded to the widest batch."""
        self._need()
        return PositionStats(self.generated, self.used - self.generated, self.n * self.horizon - self.used)

    def stochasticity(self) -> Stochasticity:
        """:func:`measure_stochasticity` of everything added (with ``stochasticity=True``)."""
        self._need()
        return self.situations.result("turn" if self.max_turns > 1 else "action")


# --------------------------------------------------------------------------- stochasticity
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


def _powers(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """base^0..base^(n-1) and the inverse's powers modulo 2**64, as wrapped int64 tensors."""
    inv = pow(_BASE & _MASK64, -1, 1 << 64)
    up, down, a, b = [], [], 1, 1
    for _ in range(n):
        up.append(_to_signed(a))
        down.append(_to_signed(b))
        a = (a * (_BASE & _MASK64)) & _MASK64
        b = (b * inv) & _MASK64
    return torch.tensor(up, dtype=torch.long), torch.tensor(down, dtype=torch.long)


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
    Only the prefix hash is computed per position; everything else per action."""
    mask = rollouts.mask[rows]
    tokens = rollouts.tokens[rows]
    turns = rollouts.turn_ids[rows]
    B, T = mask.shape
    t = torch.arange(T)
    last = torch.where(mask, t, -1).amax(1)
    padding = t[None, :] > last[:, None]
    sym = tokens * 4 + torch.where(mask, 1, torch.where(padding, 0, 2))
    states = rollouts.states[rows] if rollouts.states is not None else None
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
    cum = rollouts.rewards[rows].to(torch.float64).cumsum(1).reshape(-1)
    at_end = cum[er * T + et]
    at_start = torch.where(st > 0, cum[sr * T + (st - 1).clamp(min=0)], 0.0)
    got = torch.round((at_end - at_start) * 1e9).to(torch.long)  # 1e-9: round-off is not luck
    result = _mix(_mix(_mix(following) ^ (obs + 11)) ^ _mix(got) ^ has_next.long())
    return key, result


def measure_stochasticity(rollouts: Rollouts, *, chunk_rows: int = CHUNK_ROWS,
                          progress=None) -> Stochasticity:
    """Estimate how stochastic the environment is from situations that repeat in the data.

    Method (prefix repeats). Cut every trajectory into actions: maximal runs of generated
    positions with one turn id. The *situation* of an action is everything up to and including
    it: the prompt (``prompts[b]`` when given, and ``group_ids[b]``: trajectories of one group
    share a task), every earlier position (tokens, whether generated or environment output, and
    the observation state where ``states`` exist) and the action's own tokens. Its *result* is
    what the environment did next: the environment output up to the next action, the state the
    next action starts from, whether the episode ended, and the reward received for the action.
    In a deterministic environment the result is a function of the situation, so two visits
    to one situation can differ only if the environment (tools, transitions or reward) is
    random. The estimate is the probability that two visits to the same situation had
    different results, pooled over every situation seen at least twice:

        rate = sum_k [n_k (n_k - 1) - sum_r n_kr (n_kr - 1)] / sum_k n_k (n_k - 1)

    (n_k visits to situation k, n_kr of them with result r). 0 means deterministic wherever the
    data can tell; the rate is None ("not measurable") when no situation repeats, which is
    usual for long free-text trajectories: only early turns of a group tend to coincide.
    Situations and results are compared by 64-bit hashes (a collision is astronomically
    unlikely at these sizes); rewards are compared to 1e-9.

    Why prefixes rather than (state, action) pairs: an observation is not the environment's
    state in a partially observed task (the same "tests pass" can hide a fixed or an unfixed
    bug), so equal (observation, action) pairs differ for reasons that are not randomness; the
    whole history with the prompt determines a deterministic environment's next result.
    """
    return Tally().add(rollouts, chunk_rows=chunk_rows, progress=progress).stochasticity()


class Situations:
    """The (situation, result) visits of :func:`measure_stochasticity`, counted and mergeable.

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
        """Count every action of a batch (see :func:`measure_stochasticity`), ``chunk_rows``
        rows at a time."""
        B = rollouts.batch_size
        seed = _mix(rollouts.group_ids.long() * 2 + 1)
        if rollouts.prompts is not None:
            # "" is no prompt (a reader gives "" to the records without one when others have
            # one): a row reads the same whether its batch has prompts or not
            given = torch.tensor([p != "" for p in rollouts.prompts], dtype=torch.bool)
            hashed = torch.tensor([_string_hash(str(p)) if p != "" else 0 for p in rollouts.prompts], dtype=torch.long)
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
