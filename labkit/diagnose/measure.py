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
from labkit.core.rollouts import Rollouts, check_rollouts

__all__ = [
    "INTERMEDIATE_MIN_SHARE", "STOCHASTIC_THRESHOLD", "Histogram", "Lengths", "RewardStats",
    "GroupStats", "PositionStats", "Stochasticity", "position_kinds", "histogram", "measure_lengths",
    "measure_rewards", "measure_groups", "measure_positions", "measure_stochasticity",
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
    last = _last_generated(rollouts.mask)
    t = torch.arange(rollouts.horizon)
    padding = t[None, :] > last[:, None]
    return ~rollouts.mask & ~padding, padding


def _last_generated(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last generated position, (B,) int64; -1 for a row with none."""
    # int32 positions: half the memory traffic of int64 on a (B, T) pass
    t = torch.arange(mask.shape[1], dtype=torch.int32)
    return torch.where(mask, t, torch.tensor(-1, dtype=torch.int32)).amax(1).long()


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
    if len(distinct) <= discrete_max:
        step = float(np.diff(distinct).min()) if len(distinct) > 1 else 1.0
        edges = tuple(float(v) for v in distinct) + (float(distinct[-1]) + step,)
        return Histogram(edges, tuple(int(c) for c in counts), discrete=True)
    counts, edges = np.histogram(x, bins=bins)
    return Histogram(tuple(float(e) for e in edges), tuple(int(c) for c in counts))


def _summary(x: torch.Tensor) -> tuple[float, float, float, float]:
    """(min, median, max, mean); the median of an even count is the midpoint of the middle two."""
    x = x.to(torch.float64)
    return float(x.min()), float(x.quantile(0.5)), float(x.max()), float(x.mean())


# --------------------------------------------------------------------------- measurements
def measure_lengths(rollouts: Rollouts, *, bins: int = 20) -> Lengths:
    """Trajectory lengths in generated tokens, in episode tokens (generated + environment
    output, no padding) and in turns where the data has turns (median: the midpoint of the two
    middle values for an even count)."""
    check_rollouts(rollouts)
    gen = rollouts.lengths
    # everything up to the last generated position is generated or environment output
    episode = _last_generated(rollouts.mask) + 1
    g = _summary(gen)
    e = _summary(episode)
    turns = rollouts.n_turns
    kw = {}
    if int(turns.max()) > 1:
        tm = _summary(turns)
        kw = dict(turns_min=int(tm[0]), turns_median=tm[1], turns_max=int(tm[2]),
                  turns_hist=histogram(turns, bins=bins))
    return Lengths(int(g[0]), g[1], int(g[2]), g[3], int(e[0]), e[1], int(e[2]),
                   histogram(gen, bins=bins), **kw)


def measure_rewards(rollouts: Rollouts, *, bins: int = 20) -> RewardStats:
    """Reward sparsity and distribution (see :class:`RewardStats`)."""
    check_rollouts(rollouts)
    r, mask = rollouts.rewards, rollouts.mask
    per_row = (r != 0).sum(1)
    # a non-zero reward anywhere but on the last generated position is an intermediate one
    # (rewards are zero off the mask, so none lies after it)
    last = _last_generated(mask)
    on_last = (r.gather(1, last.clamp(min=0)[:, None]).squeeze(1) != 0) & (last >= 0)
    share_nonzero = float((per_row > 0).to(torch.float64).mean())
    share_inter = float((per_row - on_last.long() > 0).to(torch.float64).mean())
    s = rollouts.scores.to(torch.float64)
    return RewardStats(
        share_nonzero=share_nonzero, share_intermediate=share_inter,
        intermediate=share_inter >= INTERMEDIATE_MIN_SHARE,
        total_mean=float(s.mean()), total_std=float(s.std()) if s.numel() > 1 else 0.0,
        total_min=float(s.min()), total_max=float(s.max()), n_distinct=int(torch.unique(s).numel()),
        hist=histogram(s, bins=bins))


def measure_groups(rollouts: Rollouts) -> GroupStats:
    """Group sizes and zero-variance groups (see :class:`GroupStats`)."""
    check_rollouts(rollouts)
    gid = rollouts.group_ids
    _, inv, sizes = torch.unique(gid, return_inverse=True, return_counts=True)
    n = sizes.numel()
    s = rollouts.scores.to(torch.float64)
    hi = torch.full((n,), -torch.inf, dtype=torch.float64).scatter_reduce(0, inv, s, "amax")
    lo = torch.full((n,), torch.inf, dtype=torch.float64).scatter_reduce(0, inv, s, "amin")
    multi = sizes >= 2
    zero = multi & (hi == lo)
    n_multi = int(multi.sum())
    size_summary = _summary(sizes)
    return GroupStats(
        n_groups=n, size_min=int(size_summary[0]), size_median=size_summary[1], size_max=int(size_summary[2]),
        n_singletons=int((sizes == 1).sum()), n_zero_variance=int(zero.sum()),
        share_zero_variance=int(zero.sum()) / n_multi if n_multi else float("nan"),
        share_rows_zero_variance=float(sizes[zero].sum()) / rollouts.batch_size,
        size_hist=histogram(sizes))


def measure_positions(rollouts: Rollouts) -> PositionStats:
    """Count generated, environment-output and padding positions (module docstring's rule)."""
    check_rollouts(rollouts)
    used = int((_last_generated(rollouts.mask) + 1).sum())
    generated = int(rollouts.lengths.sum())
    return PositionStats(generated, used - generated, rollouts.batch_size * rollouts.horizon - used)


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
    check_rollouts(rollouts)
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    B = rollouts.batch_size
    seed = _mix(rollouts.group_ids.long() * 2 + 1)
    if rollouts.prompts is not None:
        seed = _mix(seed ^ torch.tensor([_string_hash(str(p)) for p in rollouts.prompts], dtype=torch.long))
    keys, results = [], []
    starts = range(0, B, chunk_rows)
    if progress is not None:
        starts = progress(starts)
    for start in starts:
        rows = slice(start, min(B, start + chunk_rows))
        k, r = _chunk_events(rollouts, rows, seed[rows])
        keys.append(k)
        results.append(r)
    keys, results = torch.cat(keys), torch.cat(results)
    n_actions = keys.numel()
    uk, kinv, kcount = torch.unique(keys, return_inverse=True, return_counts=True)
    repeated = kcount >= 2
    if not bool(repeated.any()):
        return Stochasticity(n_actions, 0, 0, 0, None, unit=_unit(rollouts))
    # (situation, result) pairs, as one hash each; each distinct pair remembers its situation
    pairs = _mix(keys ^ _mix(results))
    _, pinv, pcount = torch.unique(pairs, return_inverse=True, return_counts=True)
    pair_key = torch.zeros(pcount.numel(), dtype=torch.long).scatter_(0, pinv, kinv)
    n = kcount.to(torch.float64)
    total_pairs = float((n * (n - 1)).sum())
    same = float((pcount.to(torch.float64) * (pcount - 1)).sum())
    distinct_results = torch.bincount(pair_key, minlength=uk.numel())
    varying = int((repeated & (distinct_results >= 2)).sum())
    return Stochasticity(n_actions, int(repeated.sum()), int(kcount[repeated].sum()), varying,
                         (total_pairs - same) / total_pairs, unit=_unit(rollouts))


def _unit(rollouts: Rollouts) -> str:
    return "turn" if int(rollouts.n_turns.max()) > 1 else "action"
