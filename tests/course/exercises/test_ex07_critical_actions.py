"""Exercise 07 (notebook 07_critical_actions): CARL's critical-turn selection.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "07"


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
