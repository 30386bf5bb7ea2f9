"""Exercise 10 (notebook 10_benchmark): the benchmark's rank correlation.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from labkit.course import solutions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

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


# --------------------------------------------------------------------------- the tests
def test_the_exercise_states_what_to_write():
    checks.assert_states_what_to_write(NOTEBOOK)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_solution_passes(seed, capsys):
    checks.assert_solution_passes(NOTEBOOK, seed, capsys)


def test_the_solution_docstring_follows_the_house_order():
    checks.assert_solution_docstring_in_house_order(NOTEBOOK)


def test_the_template_runs_and_fails_the_check():
    checks.assert_template_fails_cleanly(NOTEBOOK)


def test_there_are_at_least_three_typical_wrong_answers():
    assert len(WRONG) >= 3


@pytest.mark.parametrize("fn,hint", WRONG, ids=checks.ids(WRONG))
def test_a_typical_wrong_answer_fails_with_its_hint(fn, hint, capsys):
    checks.assert_fails_with_hint(NOTEBOOK, fn, hint, capsys)


@pytest.mark.parametrize("fn,hint", WRONG, ids=checks.ids(WRONG))
def test_the_hint_does_not_depend_on_the_seed(fn, hint):
    checks.assert_hint_does_not_depend_on_the_seed(NOTEBOOK, fn, hint)
