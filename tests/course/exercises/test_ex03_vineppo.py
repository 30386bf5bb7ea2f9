"""Exercise 03 (notebook 03_vineppo): VinePPO's step advantage.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks

EXERCISE = "03a"


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


def vine_step_by_step(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    inner = torch.stack([rewards[i] + V[i + 1] - V[i] for i in range(len(V) - 1)])  # empty for one step
    return torch.cat([inner, (rewards[-1] - V[-1])[None]])


WRONG = [
    (vine_sum, 'MEAN outcome'),
    (vine_flipped, 'after minus before'),
    (vine_no_reward, 'add the reward received inside the step'),
    (vine_bootstrap_past_end, 'bootstrapped past the end'),
]

EDGE_WRONG = [
    (vine_step_by_step, 'raised RuntimeError'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
