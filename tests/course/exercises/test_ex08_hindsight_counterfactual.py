"""Exercise 08 (notebook 08_hindsight_counterfactual): HCA's hindsight ratio.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "08"


# --------------------------------------------------------------------------- typical wrong answers
def hca_inverted(pi, h, z):
    return (1 - h / pi) * z


def hca_forgot_z(pi, h, z):
    return torch.where(h > 0, 1 - pi / h.clamp(min=1e-12), torch.zeros_like(h))


def hca_sign_flipped(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else (pi / h - 1) * z


def hca_nan_on_failure(pi, h, z):
    return (1 - pi / h) * z


def hca_log_ratio(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else torch.log(h / pi) * z


WRONG = [
    (hca_inverted, 'not (1 - h / pi)'),
    (hca_forgot_z, 'multiply by the outcome Z'),
    (hca_sign_flipped, 'POSITIVE credit'),
    (hca_nan_on_failure, "don't divide by h when Z = 0"),
    (hca_log_ratio, 'not a log-ratio'),
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
