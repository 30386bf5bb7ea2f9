"""Exercises of notebook 02_critics_gae: 02a GAE's backward loop, 02b (find the bug) GAE on a padded
batch, 02c (run and interpret) the relative variance of GAE at lambda = 0.6.

The reference solutions pass on every seed the tests try, the templates fail cleanly, each typical wrong
answer (written the way a reader would get it wrong; for 02b the planted bug among them) fails with the
hint that names its mistake, and the reading is graded against the lab's own run."""
from __future__ import annotations

import pytest
import torch

from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.reveal import solution_source

import exercise_checks as checks

EXERCISE = "02a"


# --------------------------------------------------------------------------- typical wrong answers
def gae_bootstrap_past_end(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue
            nxt = t + 1
            while nxt < T and not mask[b, nxt]:
                nxt += 1
            v_next = values[b, nxt] if nxt < T else values[b, t]  # "the value stays after the end"
            delta = rewards[b, t] + gamma * v_next - values[b, t]
            running = delta + gamma * lam * running
            adv[b, t] = running
    return adv


def gae_forgot_lambda(rewards, values, mask, gamma, lam):
    return _gae_with(rewards, values, mask, gamma, gamma)  # A_t = delta_t + gamma A_{t'}


def _gae_with(rewards, values, mask, gamma, discount):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        nv, na = 0.0, 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                adv[b, t] = rewards[b, t] + gamma * nv - values[b, t] + discount * na
                nv, na = values[b, t], adv[b, t]
    return adv


def gae_tool_tokens_as_steps(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        if not mask[b].any():
            continue
        last = int(mask[b].nonzero().max())
        running, v_next = 0.0, 0.0
        for t in reversed(range(last + 1)):  # stops at the end, but walks through tool output as steps
            delta = rewards[b, t] + gamma * v_next - values[b, t]
            running = delta + gamma * lam * running
            adv[b, t] = running
            v_next = values[b, t]
    return adv * mask


def gae_credit_off_mask(rewards, values, mask, gamma, lam):
    # verl-style: the running advantage is carried through tool output AND written there
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        nv, na = 0.0, 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                adv[b, t] = rewards[b, t] + gamma * nv - values[b, t] + gamma * lam * na
                nv, na = values[b, t], adv[b, t]
            else:
                adv[b, t] = na
    return adv


def gae_lam0_without_bootstrap(rewards, values, mask, gamma, lam):
    if lam == 0:  # "no lambda, no looking ahead": but delta_t still bootstraps from V_{t'}
        return torch.where(mask, rewards - values, 0.0)
    return _gae_with(rewards, values, mask, gamma, gamma * lam)


WRONG = [
    (gae_bootstrap_past_end, 'bootstrapped past the end'),
    (gae_forgot_lambda, 'gamma * lam'),
    (gae_tool_tokens_as_steps, 'tool output is not a step'),
    (gae_credit_off_mask, 'credit off the mask must be 0'),
]

EDGE_WRONG = [
    (gae_lam0_without_bootstrap, 'at lam = 0 GAE is the one-step TD error'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# --------------------------------------------------------------------------- 02b: find the bug
def padded_gae_same_state(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                delta = rewards[b, t] + gamma * values[b, t] - values[b, t]   # V(s_t) where V(s_{t+1}) belongs
                running = delta + gamma * lam * running
                adv[b, t] = running
    return adv


def padded_gae_gamma_only(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                nxt = values[b, t + 1] if t + 1 < T and mask[b, t + 1] else 0.0
                running = rewards[b, t] + gamma * nxt - values[b, t] + gamma * running   # lam forgotten
                adv[b, t] = running
    return adv


def padded_gae_credits_padding(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):   # padding is treated as a step with no reward
            nxt = values[b, t + 1] if t + 1 < T and mask[b, t + 1] else 0.0
            running = rewards[b, t] + gamma * nxt - values[b, t] + gamma * lam * running
            adv[b, t] = running
    return adv


def padded_gae_through_log(rewards, values, mask, gamma, lam):
    # vectorised: (gamma lam) ** k as exp(k log(gamma lam)), which breaks at lam = 0 or gamma = 0
    B, T = rewards.shape
    nxt = torch.where(torch.cat([mask[:, 1:], torch.zeros(B, 1, dtype=torch.bool)], 1),
                      torch.cat([values[:, 1:], torch.zeros(B, 1, dtype=values.dtype)], 1), 0.0)
    delta = torch.where(mask, rewards + gamma * nxt - values, 0.0)
    k = torch.arange(T)[None, :] - torch.arange(T)[:, None]
    weight = torch.where(k >= 0, torch.exp(k * torch.log(torch.tensor(gamma * lam, dtype=torch.float64))), 0.0)
    return torch.where(mask, delta @ weight.T, 0.0)


PADDED_WRONG = [
    (EXERCISES["02b"].buggy, "bootstrapped from the critic's value on padding"),
    (padded_gae_same_state, "delta_t uses V(s_t) twice"),
    (padded_gae_gamma_only, "discounts by gamma, not gamma * lam"),
    (padded_gae_credits_padding, "credit off the mask must be 0"),
]

PADDED_EDGE_WRONG = [(padded_gae_through_log, "at lam = 0 GAE is the one-step TD error")]


class TestExercise02b(checks.ExerciseTests):
    EXERCISE = "02b"
    WRONG = PADDED_WRONG
    EDGE_WRONG = PADDED_EDGE_WRONG



def test_02b_is_a_deep_dive_bug_hunt_with_an_honest_looking_template():
    ex = EXERCISES["02b"]
    assert ex.kind == "debug" and ex.path == "deep dive"
    assert ex.template.startswith("def padded_gae(rewards, values, mask, gamma, lam):")
    assert "expected" not in ex.prompt.lower() and "bug" not in ex.template.lower()


# --------------------------------------------------------------------------- 02c: run and interpret
def test_02c_the_lab_value_is_the_sweeps_reading(torch_is_locked):
    from labkit.course import nb02_critics_gae as lesson

    ex = EXERCISES["02c"]
    assert ex.kind == "interpret" and ex.path == "deep dive" and ex.tolerance == 0.05
    # seeded float64 on the CPU, and what the notebook's sweep function gives at lambda = 0.6
    if torch_is_locked:  # another torch samples other episodes
        assert ex.lab_value() == pytest.approx(3.92332, abs=1e-4)
    sweep = lesson.gae_lambda_sweep([0.6], critic_episodes=64, n_batches=100, batch_size=32, seed=0, progress=False)
    assert sweep.set_index("critic").relative_variance["learned"] == pytest.approx(ex.lab_value(), abs=1e-9)
    assert check(ex.lab_value(), "02c", verbose=False).passed
    assert check(round(ex.lab_value(), 2), "02c", verbose=False).passed


def test_02c_a_wrong_value_gets_the_general_hint_and_never_the_lab_value(capsys):
    ex = EXERCISES["02c"]
    outside = round(ex.lab_value() + 0.06, 2)
    result = check(outside, "02c")
    out = capsys.readouterr().out
    assert not result.passed and result.hint == ex.hint
    assert f"{ex.lab_value():.3f}" not in out and f"{ex.lab_value():.2f}" not in out


@pytest.mark.parametrize("index", range(5))
def test_02c_each_misreading_gets_its_own_hint(index):
    ex = EXERCISES["02c"]
    m = ex.misreadings[index]
    value = m.value()
    assert abs(value - ex.lab_value()) > ex.tolerance
    result = check(value, "02c", verbose=False)
    assert not result.passed and result.hint == m.hint


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          ("3.9", "answer with a number"), (float("inf"), "finite number")])
def test_02c_no_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, "02c", verbose=False)
    assert not result.passed and hint in result.hint


def test_02c_reveal_prints_the_measurement():
    text = solution_source("02c")
    assert "def gae_noise_at_lambda_06" in text and "gradient_study" in text and "TabularCritic" in text
