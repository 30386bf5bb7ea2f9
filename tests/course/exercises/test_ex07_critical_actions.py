"""Exercise 07 (notebook 07_critical_actions): CARL's critical-turn selection.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import math
import torch

import exercise_checks as checks

EXERCISE = "07a"


# --------------------------------------------------------------------------- typical wrong answers
def carl_floor(entropies, present, fraction):
    n = int(present.sum())
    k = int(fraction * n)
    order = torch.argsort(torch.where(present, entropies, -1.0).flatten(), descending=True, stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_lowest(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    order = torch.argsort(torch.where(present, entropies, math.inf).flatten(), stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_keeps_padding(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    order = torch.argsort(entropies.flatten(), descending=True, stable=True)  # padding not masked out
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_per_row(entropies, present, fraction):
    keep = torch.zeros_like(present)
    for b in range(len(present)):
        n = int(present[b].sum())
        if n == 0:
            continue
        k = max(1, math.ceil(fraction * n - 1e-9))
        order = torch.argsort(torch.where(present[b], entropies[b], -1.0), descending=True, stable=True)
        keep[b, order[:k]] = True
    return keep


def carl_late_ties(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    flat = torch.where(present, entropies, -1.0).flatten().flip(0)  # ties go to the LATER turn
    order = torch.argsort(flat, descending=True, stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.flip(0).view(present.shape)


WRONG = [
    (carl_floor, 'ceil(fraction * n)'),
    (carl_lowest, 'LARGEST entropy'),
    (carl_keeps_padding, 'never be kept'),
    (carl_per_row, 'not row by row'),
    (carl_late_ties, 'break ties by position'),
]

EDGE_WRONG = [
    (carl_late_ties, 'break ties by position'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
