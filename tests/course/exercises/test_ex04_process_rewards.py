"""Exercise 04 (notebook 04_process_rewards): PURE's min-form returns.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

from labkit.course.exercises import check

import exercise_checks as checks

EXERCISE = "04a"


# --------------------------------------------------------------------------- typical wrong answers
def pure_sum_form(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    r[-1] += outcome
    return r.flip(0).cumsum(0).flip(0)


def pure_soft_max(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    shaped = torch.softmax(r / temperature, 0) * r
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


def pure_p_not_r(step_scores, outcome, temperature):
    p = step_scores.clone()
    shaped = torch.softmax(-p / temperature, 0) * p
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


def pure_forward_cumsum(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    shaped = torch.softmax(-r / temperature, 0) * r
    shaped[-1] += outcome
    return shaped.cumsum(0)


def pure_naive_exp(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    e = torch.exp(-r / temperature)
    shaped = e / e.sum() * r
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


WRONG = [
    (pure_sum_form, 'sum form'),
    (pure_soft_max, 'WORST step'),
    (pure_p_not_r, '2p - 1'),
    (pure_forward_cumsum, 'reverse cumulative sum'),
    (pure_naive_exp, 'torch.softmax'),
]

EDGE_WRONG = [
    (pure_naive_exp, 'torch.softmax'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


def test_a_float32_wrong_answer_gets_the_same_hint():
    assert "sum form" in check(checks.as_float32(pure_sum_form), EXERCISE, seed=0, verbose=False).hint
