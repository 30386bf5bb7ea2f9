"""Solution to exercise 08a (notebook 08_hindsight_counterfactual): HCA's hindsight ratio.

Checked by ``check(hca_credit, "08a")``; the exercise is ``labkit.course.exercises.ex08_hindsight_counterfactual``.
"""
from __future__ import annotations

import torch

__all__ = ["hca_credit"]


def hca_credit(pi, h, z):
    """08a · HCA's hindsight ratio (Harutyunyan et al. 2019, arXiv 1912.02503): return-conditioned credit.

    Inputs:
        pi: (N,) the policy's probability of each action taken.
        h: (N,) the hindsight model's probability of it given the outcome Z.
        z: the episode's 0/1 outcome Z.

    Formula:
        credit_t = (1 - pi(a_t | s_t) / h(a_t | s_t, Z)) * Z

    Defaults:
        none.

    Degenerate input:
        a failed episode (Z = 0) gets 0 on every turn, even where h = 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.hca`` (no ratio clipping).

    Returns:
        (N,) float64 credit of every action.

    Cost:
        none beyond the hindsight model's probabilities.
    """
    if z == 0:
        return torch.zeros(len(pi), dtype=torch.float64)
    return (1 - pi / h) * z

