"""Solution to exercise 03a (notebook 03_vineppo): VinePPO's step advantage from vine values.

Checked by ``check(vineppo_advantage, "03a")``; the exercise is ``labkit.course.exercises.ex03_vineppo``.
"""
from __future__ import annotations

import torch

__all__ = ["vineppo_advantage"]


def vineppo_advantage(vine_outcomes, rewards):
    """03a · VinePPO step advantage (Kazemnejad et al. 2024, arXiv 2410.01679): values from vines.

    Inputs:
        vine_outcomes: (S, K) the 0/1 outcomes of K vines forked before each of the S steps.
        rewards: (S,) the reward received at the end of each step (the outcome after the last).

    Formula:
        V_i = mean outcome of the K vines from the prefix before step i,   A_i = r_i + V_{i+1} - V_i

    Defaults:
        gamma = 1 (the paper's).

    Degenerate input:
        V = 0 after the final step, so a one-step answer gets r - V_0; K = 1 is allowed (noisy).

    Deviations from the reference:
        none: equal to ``labkit.credit.vineppo`` without whitening.

    Returns:
        (S,) float64 step advantage.

    Cost:
        K continuations per step (already sampled: ``vine_outcomes``).
    """
    V = vine_outcomes.double().mean(dim=1)
    V_next = torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])
    return rewards + V_next - V

