"""Solution to exercise 01a (notebook 01_reinforce_variance): GRPO's group-relative advantage.

Checked by ``check(grpo_advantage, "01a")``; the exercise is ``labkit.course.exercises.ex01_reinforce_variance``.
"""
from __future__ import annotations

import torch

__all__ = ["grpo_advantage"]


def grpo_advantage(scores, group_ids, eps=1e-6):
    """01a · GRPO advantage (Shao et al. 2024, arXiv 2402.03300): each score against its group's.

    Inputs:
        scores: (n,) one outcome score per trajectory.
        group_ids: (n,) integer prompt group of each trajectory.

    Formula:
        A_i = (s_i - mean_group) / (std_group + eps)      (std unbiased, torch.std's default)

    Defaults:
        eps = 1e-6 (verl's).

    Degenerate input:
        a group of one gets mean 0 and std 1 (its raw score / (1 + eps)); an all-equal group gets 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.grpo`` (checked by ``check(grpo_advantage, "01a")``).

    Returns:
        (n,) float64 advantage, one per trajectory.

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    adv = torch.zeros_like(scores)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        if len(s) == 1:
            mean, std = 0.0, 1.0  # the group-of-one rule
        else:
            mean, std = s.mean(), s.std()  # torch.std is the unbiased one (n - 1)
        adv[members] = (s - mean) / (std + eps)
    return adv

