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


def rank_ties_only_in_credit(credit, truth, mask):
    """Averages ties in the credit but ranks the truth plainly, and guards only a constant credit:
    right on every case whose truth has no ties, wrong on the chain's exact advantages."""
    a, b = credit[mask], truth[mask]
    if len(a) < 2 or a.std() == 0:
        return 0.0
    ra = torch.stack([(a < v).sum() + ((a == v).sum() - 1) / 2 for v in a]).double()
    rb = b.argsort(stable=True).argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float(ra @ rb / (ra.norm() * rb.norm()))


WRONG = [
    (rank_ties_only_in_credit, 'in the credit and in the truth'),
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
