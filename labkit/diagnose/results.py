"""The results of labkit.diagnose's measurements: small frozen dataclasses of plain numbers, so
a report, a test or a notebook can print them, and the two thresholds they are judged by.

Each is filled by a measurement of :mod:`labkit.diagnose.measure` (or by a
:class:`~labkit.diagnose.tally.Tally` over a stream of batches); each docstring says what its
numbers count.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INTERMEDIATE_MIN_SHARE", "STOCHASTIC_THRESHOLD", "Histogram", "Lengths", "RewardStats", "GroupStats",
           "PositionStats", "Stochasticity"]

#: Rewards count as per-step ("intermediate") when at least this share of trajectories receives a
#: non-zero reward before its last generated position (one stray reward in 10,000 rows does not).
INTERMEDIATE_MIN_SHARE = 0.01
#: The environment counts as stochastic when two visits to the same (prompt, history, action)
#: are followed by different observations or rewards more often than this (see
#: :func:`~labkit.diagnose.measure.measure_stochasticity`). A deterministic environment gives
#: exactly 0.
STOCHASTIC_THRESHOLD = 0.01


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
    """Positions of the padded (B, T) batch by kind (the rule: :mod:`labkit.diagnose.measure`)."""
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
    """How often the same situation led to a different result
    (:func:`~labkit.diagnose.measure.measure_stochasticity`).

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
