"""Histograms and (min, median, max, mean) summaries, of values or of integers kept as bincounts.

A :class:`~labkit.diagnose.tally.Tally` keeps lengths and turn counts as bincounts, so its
memory does not grow with the trajectories; the bincount versions here give the same bins and
numbers as the plain ones would on the integers themselves.
"""
from __future__ import annotations

import numpy as np
import torch

from labkit.core.checks import check_int
from labkit.diagnose.results import Histogram

__all__ = ["histogram", "bincount_histogram", "bincount_summary", "add_counts", "summary"]


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


def bincount_histogram(counts: np.ndarray, bins: int) -> Histogram:
    """:func:`histogram` of integers kept as a bincount (``counts[v]``: how often v was seen)."""
    values = np.nonzero(counts)[0]
    return _histogram_of_counts(values.astype(np.float64), counts[values], bins)


def bincount_summary(counts: np.ndarray) -> tuple[int, float, int, float]:
    """(min, median, max, mean) of integers kept as a bincount; the same numbers as
    :func:`summary` of the integers themselves (the median of an even count is the midpoint of
    the middle two; the mean is the exact sum divided once)."""
    values = np.nonzero(counts)[0]
    n = int(counts.sum())
    cum = np.cumsum(counts)
    below, above = (n - 1) // 2, n // 2  # 0-based ranks of the middle value(s)
    a, b = (int(np.searchsorted(cum, k, side="right")) for k in (below, above))
    total = int((np.arange(len(counts), dtype=np.int64) * counts).sum())
    return int(values[0]), a + 0.5 * (b - a), int(values[-1]), total / n


def add_counts(counts: np.ndarray, values: torch.Tensor) -> np.ndarray:
    """``counts`` (a bincount) with the non-negative integers ``values`` added."""
    new = np.bincount(values.numpy(), minlength=len(counts))
    new[:len(counts)] += counts
    return new


def summary(x: torch.Tensor) -> tuple[float, float, float, float]:
    """(min, median, max, mean); the median of an even count is the midpoint of the middle two."""
    x = x.to(torch.float64)
    return float(x.min()), float(x.quantile(0.5)), float(x.max()), float(x.mean())
