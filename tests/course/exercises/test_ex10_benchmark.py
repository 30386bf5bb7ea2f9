"""Exercise 10 (notebook 10_benchmark): the benchmark's rank correlation.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

from labkit.course import solutions

import exercise_checks as checks

NOTEBOOK = "10"


# --------------------------------------------------------------------------- typical wrong answers
def rank_pearson(credit, truth, mask):
    a, b = credit[mask], truth[mask]
    if a.std() == 0 or b.std() == 0 or len(a) < 2:
        return 0.0
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def rank_plain_ranks(credit, truth, mask):
    a = credit[mask].argsort(stable=True).argsort().double()
    b = truth[mask].argsort(stable=True).argsort().double()
    a, b = a - a.mean(), b - b.mean()
    d = a.norm() * b.norm()
    return 0.0 if d == 0 else float(a @ b / d)


def rank_ignores_mask(credit, truth, mask):
    return solutions.rank_correlation(credit, truth, torch.ones_like(mask))


def rank_nan_on_constant(credit, truth, mask):
    def ranks(x):
        return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()
    a, b = ranks(credit[mask]), ranks(truth[mask])
    a, b = a - a.mean(), b - b.mean()
    return float(a @ b / (a.norm() * b.norm()))


WRONG = [
    (rank_pearson, 'rank the values first'),
    (rank_plain_ranks, 'average rank'),
    (rank_ignores_mask, 'where mask is True'),
    (rank_nan_on_constant, 'return 0.0, not NaN'),
]

EDGE_WRONG = [
    (rank_nan_on_constant, 'return 0.0, not NaN'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    NOTEBOOK = NOTEBOOK
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
