"""Exercise 02 (notebook 02_critics_gae): GAE's backward loop.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

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
