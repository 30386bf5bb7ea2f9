"""Exercise 01 (notebook 01_reinforce_variance): GRPO's advantage.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

from labkit.course.exercises import check

import exercise_checks as checks

EXERCISE = "01a"


# --------------------------------------------------------------------------- typical wrong answers
def grpo_batch_mean(scores, group_ids):
    return (scores - scores.mean()) / (scores.std() + 1e-6)


def grpo_biased_std(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s / 1.000001 if len(s) == 1 else (s - s.mean()) / (s.std(unbiased=False) + 1e-6)
    return adv


def grpo_no_singleton_rule(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = (s - s.mean()) / (s.std() + 1e-6)  # std of one value: NaN
    return adv


def grpo_singleton_zero(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        if len(s) > 1:
            adv[group_ids == g] = (s - s.mean()) / (s.std() + 1e-6)
    return adv


def grpo_no_eps(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s / 1.000001 if len(s) == 1 else (s - s.mean()) / s.std()
    return adv


def grpo_no_std(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s if len(s) == 1 else s - s.mean()
    return adv


WRONG = [
    (grpo_batch_mean, 'do not sum to zero within a group'),
    (grpo_biased_std, 'biased std'),
    (grpo_no_singleton_rule, 'group-of-one rule'),
    (grpo_singleton_zero, 'group-of-one rule'),
    (grpo_no_eps, 'add eps outside the std'),
    (grpo_no_std, 'Dr. GRPO'),
]

EDGE_WRONG = [
    (grpo_no_singleton_rule, 'group-of-one rule'),
    (grpo_singleton_zero, 'group-of-one rule'),
    (grpo_no_eps, 'add eps outside the std'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


def test_the_nan_remark_is_made_only_for_a_nan_answer():
    assert "NaN" in check(grpo_no_singleton_rule, EXERCISE, seed=0, verbose=False).hint
    assert "NaN" not in check(grpo_singleton_zero, EXERCISE, seed=0, verbose=False).hint


def test_a_float32_wrong_answer_gets_the_same_hint():
    assert "biased std" in check(checks.as_float32(grpo_biased_std), EXERCISE, seed=0, verbose=False).hint
