"""Solution to exercise 07a (notebook 07_critical_actions): CARL's critical-turn selection.

Checked by ``check(carl_select, "07a")``; the exercise is ``labkit.course.exercises.ex07_critical_actions``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["carl_select"]


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

