"""Solution to exercise 06a (notebook 06_gigpo): GiGPO's anchor-group step term.

Checked by ``check(gigpo_step_term, "06a")``; the exercise is ``labkit.course.exercises.ex06_gigpo``.
"""
from __future__ import annotations

import torch

__all__ = ["gigpo_step_term"]


def gigpo_step_term(turn_rewards, present, anchors, gamma):
    """06a · GiGPO's step term (Feng et al. 2025, arXiv 2505.10978): a turn against its anchor group.

    Inputs:
        turn_rewards: (B, N) each turn's summed reward, 0 where absent.
        present: (B, N) bool, which turns exist.
        anchors: (B, N) integer key of the observation each turn starts from.
        gamma: the discount per turn.

    Formula:
        R_k = r_k + gamma R_{k+1},   A^S_k = R_k - mean of R over the turns with the same anchor

    Defaults:
        norm = "mean_norm" (no std division), as GiGPO's default.

    Degenerate input:
        an anchor group of one gets 0; absent turns get 0; repeat visits in one episode count.

    Deviations from the reference:
        none: equal to ``labkit.credit.gigpo``'s ``info["step_term"]`` for one task group.

    Returns:
        (B, N) float64 step term, 0 where no turn is present.

    Cost:
        none beyond the batch.
    """
    B, N = turn_rewards.shape
    R = torch.zeros(B, N, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for k in reversed(range(N)):
            if present[b, k]:
                running = turn_rewards[b, k] + gamma * running
                R[b, k] = running
    groups = {}
    for b in range(B):
        for k in range(N):
            if present[b, k]:
                groups.setdefault(int(anchors[b, k]), []).append((b, k))
    out = torch.zeros(B, N, dtype=torch.float64)
    for members in groups.values():
        if len(members) == 1:
            continue  # nothing to compare with
        mean = sum(R[b, k] for b, k in members) / len(members)
        for b, k in members:
            out[b, k] = R[b, k] - mean
    return out

