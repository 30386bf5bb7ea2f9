"""Exercise 11 (notebook 11_your_rollouts): the trajectories GRPO learns nothing from.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

from labkit.course.exercises import EXERCISES, check

import exercise_checks as checks

EXERCISE = "11a"


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
nograd_tolerance_1e8 = _spread_rule(1e-8)        # ten times too wide


def nograd_exactly_equal(scores, group_ids):
    """Marks a group of two or more only when max == min exactly (round-off counts as a difference)."""
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = len(s) >= 2 and bool(s.max() == s.min())
    return out


def nograd_torch_isclose(scores, group_ids):
    """torch.isclose's defaults (atol 1e-8, rtol 1e-5): a spread of 1e-6 at 0.5 counts as equal."""
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = len(s) >= 2 and bool(torch.isclose(s, s[0].expand_as(s)).all())
    return out


WRONG = [
    (nograd_whole_batch, 'its own GROUP'),
    (nograd_singletons_marked, 'a group of one is not marked'),
    (nograd_std_threshold, 'spread of the scores'),
    (nograd_assumes_sorted, "differs from the lab's"),
]

EDGE_WRONG = [
    (nograd_singletons_marked, 'a group of one is not marked'),
    (nograd_exact_equality, 'round-off'),
    (nograd_exactly_equal, 'round-off'),
    (nograd_isclose_wide, 'not wider'),
    (nograd_tolerance_1e8, 'not wider'),
    (nograd_torch_isclose, 'not wider'),
]

#: twenty seeds, as twenty fresh attempts would draw them
TWENTY_SEEDS = tuple(range(10)) + (10_007, 65_537, 99_991, 123_457, 271_829, 314_159, 524_287, 700_001, 862_979,
                                   999_983)


def test_exact_equality_and_too_wide_tolerances_fail_on_every_seed():
    """The fixed edge cases (round-off, a spread of 1e-6, a spread of 1e-8) catch each of these,
    whatever the random cases are; each is right on every main case, so the edge's hint is told."""
    for fn, hint, case in ((nograd_exactly_equal, 'not exact equality', "equal but for round-off"),
                           (nograd_exact_equality, 'not exact equality', "equal but for round-off"),
                           (nograd_isclose_wide, 'not wider', "a spread of one in a million"),
                           (nograd_torch_isclose, 'not wider', "a spread of one in a million"),
                           (nograd_tolerance_1e8, 'not wider', "a spread of 1e-8")):
        for seed in TWENTY_SEEDS:
            result = check(fn, EXERCISE, seed=seed, verbose=False)
            assert not result.passed and hint in result.hint, (fn.__name__, seed, result.hint)
            assert result.case.name == case, (fn.__name__, seed, result.case.name)


def test_a_std_threshold_fails_on_the_main_cases_on_every_seed():
    for seed in TWENTY_SEEDS:
        result = check(nograd_std_threshold, EXERCISE, seed=seed, verbose=False)
        assert not result.passed and 'spread of the scores' in result.hint and not result.case.tags, (seed, result.hint)


def test_a_tolerance_of_round_off_is_the_right_answer():
    for tol in (1e-12, 1e-9):
        for seed in TWENTY_SEEDS[:5]:
            assert check(_spread_rule(tol), EXERCISE, seed=seed, verbose=False).passed


def test_the_prompt_says_numerically_what_no_gradient_means():
    prompt = EXERCISES[EXERCISE].prompt
    assert "max - min <= 1e-9" in prompt and "1e-6" in prompt


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
