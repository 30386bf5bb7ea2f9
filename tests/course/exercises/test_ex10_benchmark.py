"""Exercise 10 (notebook 10_benchmark): the benchmark's rank correlation.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

from labkit.course import solutions
from labkit.course.exercises import EXERCISES, check

import exercise_checks as checks

EXERCISE = "10a"


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


def _average_ranks(x):
    return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()


def rank_guards_only_credit(credit, truth, mask):
    """Average ranks on both sides, but guards only a constant credit: 0 / 0 = NaN on a constant truth."""
    a, b = credit[mask], truth[mask]
    if len(a) < 2 or a.std() == 0:
        return 0.0
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float(ra @ rb / (ra.norm() * rb.norm()))


def rank_constant_truth_is_one(credit, truth, mask):
    """Right but for a constant truth, which it scores 1.0 (nonsense: nothing is ranked)."""
    if len(truth[mask]) > 1 and truth[mask].std() == 0:
        return 1.0
    return solutions.rank_correlation(credit, truth, mask)


WRONG = [
    (rank_ties_only_in_credit, 'in the credit and in the truth'),
    (rank_pearson, 'rank the values first'),
    (rank_plain_ranks, 'average rank'),
    (rank_ignores_mask, 'where mask is True'),
    (rank_nan_on_constant, 'return 0.0, not NaN'),
]

EDGE_WRONG = [
    (rank_nan_on_constant, 'return 0.0, not NaN'),
    (rank_guards_only_credit, 'return 0.0, not NaN'),
    (rank_constant_truth_is_one, 'guard both sides'),
]

#: twenty seeds, as twenty fresh attempts would draw them
TWENTY_SEEDS = tuple(range(10)) + (10_007, 65_537, 99_991, 123_457, 271_829, 314_159, 524_287, 700_001, 862_979,
                                   999_983)


def test_ranking_the_truth_without_averaging_its_ties_fails_on_every_seed():
    """The fixed case "ties in the truth" (the chain's exact advantage, 0 on every routine token)
    catches an answer that averages ties in the credit only and guards only a constant credit,
    whatever the random cases are; the constant-truth edge case is never reached before it."""
    for seed in TWENTY_SEEDS:
        result = check(rank_ties_only_in_credit, EXERCISE, seed=seed, verbose=False)
        assert not result.passed and "in the credit and in the truth" in result.hint, (seed, result.hint)
        assert not result.case.tags
    ties = next(c for c in EXERCISES[EXERCISE].cases(torch.Generator().manual_seed(0)) if c.name == "ties in the truth")
    assert abs(rank_ties_only_in_credit(**ties.args) - float(EXERCISES[EXERCISE].reference(**ties.args))) > 0.01


def test_guarding_only_a_constant_credit_fails_on_every_seed():
    for fn, hint in ((rank_guards_only_credit, 'return 0.0, not NaN'), (rank_constant_truth_is_one, 'guard both sides')):
        for seed in TWENTY_SEEDS:
            result = check(fn, EXERCISE, seed=seed, verbose=False)
            assert not result.passed and hint in result.hint, (fn.__name__, seed, result.hint)
            assert result.case.name == "constant truth", (fn.__name__, seed, result.case.name)


def test_the_cases_hold_ties_in_the_truth_and_a_constant_truth():
    for seed in (0, 999_983):
        cases = EXERCISES[EXERCISE].cases(torch.Generator().manual_seed(seed))
        truths = [c.args["truth"][c.args["mask"]] for c in cases]
        assert any(len(t.unique()) < len(t) and len(t.unique()) > 1 for t in truths)
        assert any(len(t) > 1 and len(t.unique()) == 1 for t in truths)


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
