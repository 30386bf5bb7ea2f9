"""Exercise 00 (notebook 00_map): reward-to-go.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "00"


# --------------------------------------------------------------------------- typical wrong answers
def rtg_forward(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in range(rewards.shape[1]):          # walks forwards: the past, not the future
            if mask[b, t]:
                running = rewards[b, t] + gamma * running
                G[b, t] = running
    return G


def rtg_tool_output_discounts(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            running = rewards[b, t] + gamma * running   # tool output counted as a step
            if mask[b, t]:
                G[b, t] = running
    return G


def rtg_credit_everywhere(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            if mask[b, t]:
                running = rewards[b, t] + gamma * running
            G[b, t] = running                       # tool output and padding get credit too
    return G


def rtg_leaves_out_own_reward(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            if mask[b, t]:
                G[b, t] = gamma * running
                running = rewards[b, t] + gamma * running
    return G


WRONG = [
    (rtg_forward, 'BEFORE each token'),
    (rtg_tool_output_discounts, 'tool output is not a step'),
    (rtg_credit_everywhere, 'credit off the mask must be 0'),
    (rtg_leaves_out_own_reward, 'own reward'),
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
