"""Exercise 00 (notebook 00_map): reward-to-go.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

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
