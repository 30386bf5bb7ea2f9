"""Exercises of notebook 00_map: 00a reward-to-go, 00b (find the bug) the returns of a rollout buffer,
00c (run and interpret) a count read off the inventory.

The reference solutions pass on every seed the tests try, the templates fail cleanly, each typical wrong
answer (written the way a reader would get it wrong; for 00b the planted bug among them) fails with the
hint that names its mistake, and the reading is graded against the lab's own count."""
from __future__ import annotations

import inspect

import pytest
import torch

from labkit import survey
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.reveal import solution_source

import exercise_checks as checks

EXERCISE = "00a"


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


def rtg_discount_through_log(rewards, mask, gamma):
    # gamma ** k written as exp(k * log(gamma)): NaN at gamma = 0
    G = torch.zeros_like(rewards)
    log_gamma = torch.log(torch.tensor(gamma, dtype=rewards.dtype))
    for b in range(rewards.shape[0]):
        steps = mask[b].nonzero().flatten()
        for i, t in enumerate(steps):
            k = torch.arange(len(steps) - i, dtype=rewards.dtype)
            G[b, t] = (torch.exp(k * log_gamma) * rewards[b, steps[i:]]).sum()
    return G


WRONG = [
    (rtg_forward, 'BEFORE each token'),
    (rtg_tool_output_discounts, 'tool output is not a step'),
    (rtg_credit_everywhere, 'credit off the mask must be 0'),
    (rtg_leaves_out_own_reward, 'own reward'),
]

EDGE_WRONG = [
    (rtg_discount_through_log, 'with gamma = 0 nothing is carried back'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# --------------------------------------------------------------------------- 00b: find the bug
def buffer_no_reset(rewards, dones, gamma):
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):   # forgets the episode boundaries
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def buffer_reset_late(rewards, dones, gamma):
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
        if dones[t]:                           # one step late: the done step already took the next episode's
            running = 0.0
    return returns


def buffer_discount_late(rewards, dones, gamma):
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if dones[t]:
            running = 0.0
        running = gamma * (rewards[t] + running)   # r_t discounted once already
        returns[t] = running
    return returns


def buffer_discount_through_log(rewards, dones, gamma):
    # vectorised: gamma ** k as exp(k log gamma), which breaks at gamma = 0 (0 * -inf)
    n = len(rewards)
    episode = torch.cumsum(dones.long(), 0) - dones.long()
    k = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    same = (episode[None, :] == episode[:, None]) & (k >= 0)
    weight = torch.where(same, torch.exp(k * torch.log(torch.tensor(gamma, dtype=torch.float64))), 0.0)
    return weight @ rewards


BUFFER_WRONG = [
    (EXERCISES["00b"].buggy, "the return of the step AFTER t"),
    (buffer_no_reset, "flow across episodes"),
    (buffer_reset_late, "handled one step late"),
    (buffer_discount_late, "discounted once too often"),
]

BUFFER_EDGE_WRONG = [(buffer_discount_through_log, "with gamma = 0 nothing is carried back")]


class TestExercise00b(checks.ExerciseTests):
    EXERCISE = "00b"
    WRONG = BUFFER_WRONG
    EDGE_WRONG = BUFFER_EDGE_WRONG



def test_00b_the_planted_bug_is_the_notebook_template():
    ex = EXERCISES["00b"]
    assert ex.kind == "debug" and ex.path == "deep dive"
    assert ex.template.startswith("def buffer_returns(rewards, dones, gamma):")
    assert "expected" not in ex.prompt.lower() and "bug" not in ex.template.lower()
    assert inspect.getdoc(ex.buggy)  # honest-looking code: a docstring, no comment naming the mistake


# --------------------------------------------------------------------------- 00c: run and interpret
def test_00c_the_lab_count_is_the_explore_dashboards():
    ex = EXERCISES["00c"]
    assert ex.kind == "interpret" and ex.path == "deep dive" and ex.tolerance == 0.5
    methods = survey.load_methods()
    hits = survey.filter_methods(methods, granularity="step", status="concept-only")
    assert ex.lab_value() == len(hits) and len(hits) > 0
    assert check(ex.lab_value(), "00c", verbose=False).passed
    assert check(float(ex.lab_value()) + 0.4, "00c", verbose=False).passed


def test_00c_a_wrong_count_gets_the_general_hint_and_never_the_lab_count(capsys):
    ex = EXERCISES["00c"]
    known = {m.value() for m in ex.misreadings}
    wrong = next(v for v in range(ex.lab_value() + 1, 100) if v not in known and abs(v - ex.lab_value()) > 0.5)
    result = check(wrong, "00c")
    out = capsys.readouterr().out
    assert not result.passed and result.hint == ex.hint
    assert f"{ex.lab_value()}" not in out.replace(f"yours: {wrong}", "")
    assert not check(ex.lab_value() + 1, "00c", verbose=False).passed


@pytest.mark.parametrize("index", range(4))
def test_00c_each_misreading_gets_its_own_hint(index):
    ex = EXERCISES["00c"]
    m = ex.misreadings[index]
    value = m.value()
    assert value != ex.lab_value()
    result = check(value, "00c", verbose=False)
    assert not result.passed and result.hint == m.hint


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          ("eleven", "answer with a number"), (float("nan"), "finite number")])
def test_00c_no_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, "00c", verbose=False)
    assert not result.passed and hint in result.hint


def test_00c_reveal_prints_the_measurement():
    text = solution_source("00c")
    assert "def step_methods_only_mapped" in text and "filter_methods" in text
