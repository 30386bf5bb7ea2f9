"""Solution to exercise 10a (notebook 10_benchmark): Spearman's rank correlation, the benchmark's metric.

Checked by ``check(rank_correlation, "10a")``; the exercise is ``labkit.course.exercises.ex10_benchmark``.
"""
from __future__ import annotations

import torch

__all__ = ["rank_correlation"]


def rank_correlation(credit, truth, mask):
    """10a · The benchmark's rank correlation (Spearman 1904; the survey's benchmark, arXiv 2604.09459).

    Inputs:
        credit, truth: (B, T) estimated and exact credit.
        mask: (B, T) bool, the positions that are scored.

    Formula:
        rho = Pearson correlation of the ranks of credit[mask] and truth[mask]

    Defaults:
        tied values share their average rank.

    Degenerate input:
        a constant side (or a single position) ranks nothing: 0.0, not NaN.

    Deviations from the reference:
        none: equal to ``labkit.scoring.rank_correlation``.

    Returns:
        a float, Spearman's rho over the masked positions (0.0 when either side is constant).

    Cost:
        none.
    """
    def ranks(x):
        # average rank: how many are smaller, plus half of the others equal to it
        return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()

    a, b = ranks(credit[mask].double()), ranks(truth[mask].double())
    a, b = a - a.mean(), b - b.mean()
    denom = a.norm() * b.norm()
    return 0.0 if float(denom) == 0 else float(a @ b / denom)

