"""How far a measured rate could move on another sample: a Wilson interval for one rate, a
paired bootstrap interval for the difference of two methods scored on the same rollouts, and an
unpaired one for the difference of two means over independent runs (seeds)."""
from __future__ import annotations

from statistics import NormalDist
from typing import Mapping

import numpy as np
import pandas as pd

from labkit.core.checks import check_int, check_number


def wilson_interval(successes: float, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a rate of ``successes`` out of ``n`` (fractional successes,
    such as shared ties, are allowed): unlike rate ± z·SE it stays inside [0, 1] and is not
    empty at a rate of 0 or 1, which matters for small samples."""
    n = check_int("n", n, low=1)
    successes = check_number("successes", successes, low=0.0, high=float(n))
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    # at a rate of exactly 0 or 1 the bound is exactly 0 or 1 (the formula leaves rounding dust)
    return (0.0 if p == 0 else max(0.0, centre - half)), (1.0 if p == 1 else min(1.0, centre + half))


def hit_rate_intervals(hits: Mapping[str, pd.DataFrame], *, level: float = 0.95) -> pd.DataFrame:
    """One row per method of ``hits`` (method -> a ``first_error_hits`` table): the hit rate, its
    Wilson interval at ``level`` over the rollouts scored, the chance rate and the number of
    rollouts. The interval says how far the rate could move on another sample of rollouts."""
    if not hits:
        raise ValueError("hits: need at least one method")
    rows = []
    for name, table in hits.items():
        n = len(table)
        if n == 0:
            raise ValueError(f"hits: {name!r} scored no rollout")
        lo, hi = wilson_interval(float(table.hit.sum()), n, level=level)
        rows.append({"method": name, "hit_rate": float(table.hit.mean()), "low": lo, "high": hi,
                     "chance": float(table.chance.mean()), "rollouts": n})
    return pd.DataFrame(rows)


def paired_difference(a: pd.DataFrame, b: pd.DataFrame, *, level: float = 0.95, n_boot: int = 4000,
                      seed: int = 0) -> dict[str, float]:
    """Hit rate of ``a`` minus that of ``b`` (two ``first_error_hits`` tables on the same
    rollouts) with a paired bootstrap interval: rollouts are resampled with replacement
    ``n_boot`` times (numpy, seeded ``seed``) and the ``level`` percentile interval of the
    difference is returned. Pairing removes the rollout-to-rollout spread both methods share,
    so it is narrower than comparing two separate intervals. Keys: diff, low, high, rollouts."""
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    if list(a.row) != list(b.row):
        raise ValueError("b: must score the same rollouts as a, in the same order")
    d = a.hit.to_numpy(float) - b.hit.to_numpy(float)
    if len(d) == 0:
        raise ValueError("a: scored no rollout")
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    boot = d[idx].mean(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {"diff": float(d.mean()), "low": float(lo), "high": float(hi), "rollouts": len(d)}


def mean_interval(values, *, level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """The mean of ``values`` (one per independent run, e.g. per training seed or per batch) with
    a percentile bootstrap interval: the values resampled with replacement ``n_boot`` times
    (numpy, seeded ``seed``) and the ``level`` interval of the resampled means. Keys: mean, low,
    high, n. With a handful of runs the interval is on the narrow side."""
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    x = np.asarray(values, dtype=float).ravel()
    if len(x) == 0:
        raise ValueError("values: need at least one value")
    if not np.isfinite(x).all():
        raise ValueError(f"values: must be finite, got {x[~np.isfinite(x)][0]}")
    boot = x[np.random.default_rng(check_int("seed", seed)).integers(0, len(x), size=(n_boot, len(x)))].mean(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {"mean": float(x.mean()), "low": float(lo), "high": float(hi), "n": len(x)}


def difference_interval(a, b, *, level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """mean(``a``) - mean(``b``) for two samples of independent runs (e.g. one value per training
    seed of two methods) with a percentile bootstrap interval: each sample is resampled with
    replacement on its own ``n_boot`` times (numpy, seeded ``seed``) and the ``level`` interval of
    the difference of the resampled means is returned. Nothing is paired: seed 3 of one method
    and seed 3 of another share no randomness worth cancelling. With a handful of runs per side
    the percentile interval is on the narrow side; read it as the least the difference could
    move. Keys: diff, low, high, n_a, n_b."""
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    samples = []
    for name, values in (("a", a), ("b", b)):
        x = np.asarray(values, dtype=float).ravel()
        if len(x) == 0:
            raise ValueError(f"{name}: need at least one value")
        if not np.isfinite(x).all():
            raise ValueError(f"{name}: values must be finite, got {x[~np.isfinite(x)][0]}")
        samples.append(x)
    x, y = samples
    rng = np.random.default_rng(check_int("seed", seed))
    boot = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(1) - y[rng.integers(0, len(y), size=(n_boot, len(y)))].mean(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {"diff": float(x.mean() - y.mean()), "low": float(lo), "high": float(hi), "n_a": len(x), "n_b": len(y)}
