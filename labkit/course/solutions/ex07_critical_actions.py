"""Solutions to the exercises of notebook 07_critical_actions that ask for a function: CARL's
critical-turn selection (07a) and IGPO's information-gain credit with its mistake fixed (07b).

Checked by ``check(carl_select, "07a")`` and ``check(igpo_credit, "07b")``; the exercises are in
``labkit.course.exercises.ex07_critical_actions``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["carl_select", "igpo_credit"]


def carl_select(entropies, present, fraction):
    """07a · CARL's critical-turn selection (Shen et al. 2025, arXiv 2512.04949): the most uncertain turns.

    Inputs:
        entropies: (B, N) the policy's entropy at every turn.
        present: (B, N) bool, which turns exist.
        fraction: the share of the batch's present turns to keep, in (0, 1].

    Formula:
        keep the ceil(fraction * n) present turns with the largest entropy, n = present turns in the batch

    Defaults:
        none: fraction is an argument (CARL's setting in the lab: 0.3).

    Degenerate input:
        at least one turn is kept; ties go to the earlier turn (row-major); padding is never kept.

    Deviations from the reference:
        none: equal to ``labkit.credit.carl``'s ``info["kept"]``.

    Returns:
        (B, N) bool, True on the kept turns.

    Cost:
        none: the entropies come with the sampled batch.
    """
    present = present.bool()
    turns = [(float(entropies[b, k]), b, k) for b, k in present.nonzero().tolist()]  # row-major order
    n_keep = max(1, math.ceil(fraction * len(turns) - 1e-9))  # - 1e-9: 0.3 * 10 is 3.0000000000000004
    turns.sort(key=lambda e: -e[0])  # Python's sort is stable: equal entropies keep row-major order
    keep = torch.zeros_like(present)
    for _, b, k in turns[:n_keep]:
        keep[b, k] = True
    return keep


def igpo_credit(p, outcome, gamma):
    """07b · IGPO's information-gain credit (Wang et al. 2025, arXiv 2510.14967), one trajectory, the bug fixed.

    Inputs:
        p: (N + 1,) the chance of success, p[0] before the first turn, p[k + 1] after turn k.
        outcome: the trajectory's 0/1 outcome.
        gamma: the discount over turns, in [0, 1].

    Formula:
        r_k = p[k + 1] - p[k] for every turn but the last, which gets r = outcome;
        A_k = sum_(j >= k) gamma^(j - k) r_j

    Defaults:
        none: gamma is an argument (IGPO's reference code uses 1).

    Degenerate input:
        one turn: its credit is the outcome; gamma = 0: each turn keeps its own reward.

    Deviations from the reference:
        none: equal to ``labkit.credit.igpo`` with normalize=False (no group normalisation).

    Returns:
        (N,) float64 credit of every turn.

    Cost:
        none beyond the success probabilities (the paper's teacher-forced passes).
    """
    n = len(p) - 1
    rewards = torch.zeros(n, dtype=torch.float64)
    for k in range(n - 1):
        rewards[k] = p[k + 1] - p[k]   # the chance after turn k minus the chance before it (the fix)
    rewards[n - 1] = outcome
    credit = torch.zeros(n, dtype=torch.float64)
    running = 0.0
    for k in reversed(range(n)):
        running = rewards[k] + gamma * running
        credit[k] = running
    return credit
