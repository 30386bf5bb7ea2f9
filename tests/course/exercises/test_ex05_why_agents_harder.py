"""Exercise 05 (notebook 05_why_agents_harder): returns discounted per turn.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "05"


# --------------------------------------------------------------------------- typical wrong answers
def turns_discounted_per_token(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    G = torch.zeros(len(rewards), dtype=torch.float64)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if turn_ids[t] >= 0:
            running = rewards[t] + gamma * running
            G[t] = running
    return torch.stack([G[turn_ids == k][0] for k in range(n)])  # the turn's first token


def turns_last_reward_only(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k][-1] for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in reversed(range(n)):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_forward(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in range(n):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_absolute_discount(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    disc = r * gamma ** torch.arange(n, dtype=torch.float64)
    return disc.flip(0).cumsum(0).flip(0)


WRONG = [
    (turns_discounted_per_token, 'discounted per token, not per turn'),
    (turns_last_reward_only, 'sum of every reward inside it'),
    (turns_forward, 'to the END'),
    (turns_absolute_discount, 'gamma^(j - k)'),
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
