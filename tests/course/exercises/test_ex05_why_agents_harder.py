"""Exercise 05 (notebook 05_why_agents_harder): returns discounted per turn.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks

EXERCISE = "05a"


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


def turns_discount_through_log(rewards, turn_ids, gamma):
    # gamma ** (j - k) written as exp((j - k) * log(gamma)): NaN at gamma = 0
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    log_gamma = torch.log(torch.tensor(gamma, dtype=torch.float64))
    return torch.stack([(torch.exp(torch.arange(n - k, dtype=torch.float64) * log_gamma) * r[k:]).sum()
                        for k in range(n)])


WRONG = [
    (turns_discounted_per_token, 'discounted per token, not per turn'),
    (turns_last_reward_only, 'sum of every reward inside it'),
    (turns_forward, 'to the END'),
    (turns_absolute_discount, 'gamma^(j - k)'),
]

EDGE_WRONG = [
    (turns_discount_through_log, 'with gamma = 0 nothing is carried back'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
