"""Solution to exercise 11a (notebook 11_your_rollouts): the trajectories that give GRPO no gradient.

Checked by ``check(no_gradient_rows, "11a")``; the exercise is ``labkit.course.exercises.ex11_your_rollouts``.
"""
from __future__ import annotations

import torch

__all__ = ["no_gradient_rows"]


def no_gradient_rows(scores, group_ids):
    """11a · Trajectories GRPO learns nothing from (Shao et al. 2024, arXiv 2402.03300).

    Inputs:
        scores: (n,) one outcome score per trajectory.
        group_ids: (n,) integer prompt group of each trajectory.

    Formula:
        marked_i = |group(i)| >= 2  and  max_{j in group(i)} s_j - min_{j in group(i)} s_j <= 1e-9

    Defaults:
        none.

    Degenerate input:
        a group of one is never marked (GRPO's group-of-one rule gives it its raw score).

    Deviations from the reference:
        none: equal to ``labkit.core.stats.constant_groups`` (checked by ``check(no_gradient_rows, "11a")``).

    Returns:
        (n,) bool, True on a trajectory of a group of two or more whose scores are all equal to within 1e-9.

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    marked = torch.zeros(len(scores), dtype=torch.bool)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        # equal to within round-off: GRPO's advantages there are below ~5e-4, no gradient
        marked[members] = len(s) >= 2 and bool(s.max() - s.min() <= 1e-9)
    return marked

