"""Solutions to the exercises of notebook 08_hindsight_counterfactual that ask for a function: HCA's
hindsight ratio (08a) and a leave-one-out baseline with its mistake fixed (08b).

Checked by ``check(hca_credit, "08a")`` and ``check(loo_credit, "08b")``; the exercises are in
``labkit.course.exercises.ex08_hindsight_counterfactual``.
"""
from __future__ import annotations

import torch

__all__ = ["hca_credit", "loo_credit"]


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


def loo_credit(returns, group_ids):
    """08b · Leave-one-out credit (C3, Chen et al. 2026, arXiv 2603.06859; RLOO, arXiv 2402.14740), the bug fixed.

    Inputs:
        returns: (B,) each alternative's return G_i.
        group_ids: (B,) the context of each alternative.

    Formula:
        credit_i = G_i - (1 / (n - 1)) * sum_(j in context(i), j != i) G_j, n = the context's size

    Defaults:
        none.

    Degenerate input:
        a context with one alternative gets 0; a context whose returns are all equal gets 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.rloo`` with one score per alternative.

    Returns:
        (B,) float64 credit of every alternative.

    Cost:
        none beyond the alternatives' returns (C3 pays for them with replays).
    """
    credit = torch.zeros(len(returns), dtype=torch.float64)
    for i in range(len(returns)):
        same_context = group_ids == group_ids[i]
        n = int(same_context.sum())
        if n > 1:
            others = returns[same_context].sum() - returns[i]   # the fix: leave G_i out of its own baseline
            credit[i] = returns[i] - others / (n - 1)
    return credit
