"""Exercises of notebook 10_benchmark: 10a, the benchmark's rank correlation; 10b, recall@k with a planted
bug; 10c, the reading of whose credit is best at equal compute.

For 10a and 10b the reference solution passes on every seed the tests try, the starting code fails cleanly,
and each typical wrong answer (for 10b the planted bug among them) fails with the hint that names its
mistake. For 10c the lab's reading passes, each misreading gets its hint, and no failure shows the answer."""
from __future__ import annotations

import pytest
import torch

from labkit.course import solutions
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex10_benchmark import _buggy_recall
from labkit.course.solutions import recall_at_k

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


# --------------------------------------------------------------------------- 10b: find the bug in recall@k
def _recall(credit, mask, targets, *, signed=False, first_k=False, pooled=False, empty=None):
    recalls, hits, total = [], 0.0, 0
    for b in range(credit.shape[0]):
        wanted = (targets[b] & mask[b])[mask[b]]
        k = int(wanted.sum())
        if k == 0:
            if empty is not None:
                recalls.append(empty)
            continue
        size = credit[b][mask[b]] if signed else credit[b][mask[b]].abs()
        if first_k:
            pick = torch.zeros(len(size), dtype=torch.float64)
            pick[torch.sort(-size, stable=True).indices[:k]] = 1.0
        else:
            kth = torch.sort(size, descending=True).values[k - 1]
            above, tied = size > kth, size == kth
            pick = above.double()
            pick[tied] = (k - int(above.sum())) / int(tied.sum())
        recalls.append(float(pick[wanted].sum()) / k)
        hits, total = hits + float(pick[wanted].sum()), total + k
    return hits / total if pooled else sum(recalls) / len(recalls)


def recall_signed(credit, mask, targets):
    return _recall(credit, mask, targets, signed=True)


def recall_topk_by_position(credit, mask, targets):
    return _recall(credit, mask, targets, first_k=True)


def recall_pooled(credit, mask, targets):
    return _recall(credit, mask, targets, pooled=True)


def recall_no_target_is_zero(credit, mask, targets):
    return _recall(credit, mask, targets, empty=0.0)


def recall_no_target_is_nan(credit, mask, targets):
    return _recall(credit, mask, targets, empty=float("nan"))


class TestExercise10b(checks.ExerciseTests):
    EXERCISE = "10b"
    BUGGY_HINT = "a mask applied after ranking"
    WRONG = [
        (_buggy_recall, "a mask applied after ranking comes too late"),
        (recall_signed, "rank by |credit|"),
        (recall_topk_by_position, "torch.topk breaks ties by position"),
        (recall_pooled, "average the recall per trajectory"),
    ]
    EDGE_WRONG = [
        (recall_no_target_is_zero, "left out of the average"),
        (recall_no_target_is_nan, "left out of the average"),
    ]



def test_recall_is_the_library_metric_and_equal_credit_scores_chance():
    from labkit.scoring import recall_at_k as library

    gen = torch.Generator().manual_seed(2)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    targets = torch.zeros(3, 6, dtype=torch.bool)
    targets[0, 2] = targets[1, [0, 3]] = targets[2, 5] = True
    for _ in range(5):
        credit = torch.randn(3, 6, generator=gen, dtype=torch.float64)
        assert recall_at_k(credit, mask, targets) == pytest.approx(library(credit, mask, targets))
    flat = torch.ones(3, 6, dtype=torch.float64)
    assert recall_at_k(flat, mask, targets) == pytest.approx((1 / 6 + 2 / 4 + 1 / 6) / 3)


# --------------------------------------------------------------------------- 10c: the reading
READING = "10c"


def test_the_lab_reading_is_c3_and_differs_from_the_best_learner():
    from labkit.course.exercises.ex10_benchmark import _best_success_toolworld

    assert EXERCISES[READING].lab_value() == "c3"
    assert _best_success_toolworld() == "gigpo"
    assert check("C3", READING, verbose=False).passed


@pytest.mark.parametrize("answer, hint", [
    ("gigpo", "best final SUCCESS"),
    ("grpo", "read the credit-quality metric"),
    ("vineppo", "read the credit-quality metric"),
])
def test_a_misreading_gets_its_hint_and_never_the_lab_answer(answer, hint, capsys):
    result = check(answer, READING)
    out = capsys.readouterr().out
    assert not result.passed and hint in result.hint and "'c3'" not in out.lower()


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          (0.47, "answer with one of"), ("C3 PPO", "is not one of the choices")])
def test_a_non_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, READING, verbose=False)
    assert not result.passed and hint in result.hint
