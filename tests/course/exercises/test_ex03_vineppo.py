"""Exercise 03 (notebook 03_vineppo): VinePPO's step advantage.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "03"


# --------------------------------------------------------------------------- typical wrong answers
def vine_sum(vine_outcomes, rewards):
    V = vine_outcomes.sum(1)
    return rewards + torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_flipped(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + V - torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])


def vine_no_reward(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_bootstrap_past_end(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + torch.cat([V[1:], V[-1:]]) - V  # "after the last step the value stays"


WRONG = [
    (vine_sum, 'MEAN outcome'),
    (vine_flipped, 'after minus before'),
    (vine_no_reward, 'add the reward received inside the step'),
    (vine_bootstrap_past_end, 'bootstrapped past the end'),
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
