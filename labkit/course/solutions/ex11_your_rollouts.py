"""Solutions to the exercises of notebook 11_your_rollouts: 11a, the trajectories that give GRPO no
gradient; 11b, REINFORCE++'s whitening with its planted bug fixed.

Checked by ``check(no_gradient_rows, "11a")`` and ``check(whiten_credit, "11b")``; the exercises are in
``labkit.course.exercises.ex11_your_rollouts``.
"""
from __future__ import annotations

import torch

__all__ = ["no_gradient_rows", "whiten_credit"]


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


def whiten_credit(credit, mask):
    """11b · REINFORCE++'s whitening of token credit over a batch (Hu 2025, arXiv 2501.03262).

    Inputs:
        credit: (B, T) token credit.
        mask: (B, T) bool, the generated tokens (False: padding and tool output).

    Formula:
        out = (credit - mean) / sqrt(var + 1e-8) where mask, 0 elsewhere;
        mean, var = mean and population variance of credit[mask] (the whole batch)

    Defaults:
        eps = 1e-8, inside the square root (OpenRLHF's convention).

    Degenerate input:
        an empty mask gives all zeros; credit equal on every generated token gives 0 (0 / sqrt(eps)).

    Deviations from the reference:
        none: equal to ``labkit.core.stats.whiten`` (verl's masked_whiten uses the unbiased variance).

    Returns:
        (B, T) float64 whitened credit, 0 off the mask.

    Cost:
        none beyond two passes over the batch.
    """
    credit = torch.as_tensor(credit, dtype=torch.float64)
    if not bool(mask.any()):
        return torch.zeros_like(credit)
    # the buggy version took these over every position: the mask must come before the statistics
    generated = credit[mask]
    mean = generated.mean()
    var = ((generated - mean) ** 2).mean()
    white = (credit - mean) / torch.sqrt(var + 1e-8)
    return torch.where(mask, white, torch.zeros_like(white))
