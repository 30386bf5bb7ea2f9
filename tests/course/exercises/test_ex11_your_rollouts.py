"""Exercise 11 (notebook 11_your_rollouts): the trajectories GRPO learns nothing from.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks

NOTEBOOK = "11"


# --------------------------------------------------------------------------- typical wrong answers
def nograd_whole_batch(scores, group_ids):
    return torch.full(scores.shape, bool(scores.max() == scores.min()))


def nograd_singletons_marked(scores, group_ids):
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = bool(s.max() == s.min())     # a group of one is "all equal" too
    return out


def nograd_std_threshold(scores, group_ids):
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = len(s) > 1 and bool(s.std() < 0.5)
    return out


def nograd_assumes_sorted(scores, group_ids):
    # takes groups as consecutive runs of equal ids: a shuffled dump breaks it
    out = torch.zeros(len(scores), dtype=torch.bool)
    start = 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or group_ids[i] != group_ids[start]:
            s = scores[start:i]
            out[start:i] = len(s) >= 2 and bool(s.max() == s.min())
            start = i
    return out


def _spread_rule(tol):
    def marked(scores, group_ids):
        out = torch.zeros(len(scores), dtype=torch.bool)
        for g in group_ids.unique():
            s = scores[group_ids == g]
            out[group_ids == g] = len(s) > 1 and bool(s.max() - s.min() <= tol)
        return out
    return marked


nograd_exact_equality = _spread_rule(0.0)        # the old rule: round-off counted as a difference
nograd_isclose_wide = _spread_rule(1e-4)         # swallows a spread GRPO's std division blows up


WRONG = [
    (nograd_whole_batch, 'its own GROUP'),
    (nograd_singletons_marked, 'a group of one is not marked'),
    (nograd_std_threshold, 'spread of the scores'),
    (nograd_assumes_sorted, "differs from the lab's"),
]

EDGE_WRONG = [
    (nograd_singletons_marked, 'a group of one is not marked'),
    (nograd_exact_equality, 'round-off'),
    (nograd_isclose_wide, 'not wider'),
]


def test_a_tolerance_of_round_off_is_the_right_answer():
    from labkit.course.exercises import check

    for tol in (1e-12, 1e-9):
        assert check(_spread_rule(tol), NOTEBOOK, seed=3, verbose=False).passed


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    NOTEBOOK = NOTEBOOK
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
