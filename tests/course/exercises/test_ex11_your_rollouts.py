"""Exercises of notebook 11_your_rollouts: 11a, the trajectories GRPO learns nothing from; 11b, RLOO advantages
of a dump's rows with a planted bug (rows grouped by position, not by prompt); 11c, the reading of two
estimators' agreement on a small sample.

For 11a and 11b the reference solution passes on every seed the tests try, the starting code fails cleanly,
and each typical wrong answer (for 11b the planted bug among them) fails with the hint that names its
mistake. For 11c the lab's reading passes, a reading just outside the tolerance and each misreading fail
with their hints, and no failure shows the lab's value."""
from __future__ import annotations


import pytest
import torch

from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex11_your_rollouts import _buggy_rloo
from labkit.course.solutions import rloo_by_prompt

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


# --------------------------------------------------------------------------- 11b: find the bug in the grouping
def _rloo_over(scores, groups, *, with_self=False):
    adv = torch.zeros(len(scores), dtype=torch.float64)
    for rows in groups:
        if len(rows) > 1:
            g = scores[rows].double()
            adv[rows] = g - g.mean() if with_self else g - (g.sum() - g) / (len(rows) - 1)
    return adv


def _by_prompt(prompts):
    rows_of = {}
    for i, p in enumerate(prompts):
        rows_of.setdefault(p, []).append(i)
    return list(rows_of.values())


def rloo_blocks(scores, prompts):
    # a trainer's rewards.view(-1, group_size), with the group size read off the file
    k = len(scores) // len(set(prompts))
    return _rloo_over(scores, [list(range(a, min(a + k, len(scores)))) for a in range(0, len(scores), k)])


def rloo_whole_file(scores, prompts):
    return _rloo_over(scores, [list(range(len(scores)))])


def rloo_row_in_its_baseline(scores, prompts):
    return _rloo_over(scores, _by_prompt(prompts), with_self=True)


def rloo_single_raw(scores, prompts):
    # verl's scalar RLOO: a prompt with one completion keeps its raw score
    adv = _rloo_over(scores, _by_prompt(prompts))
    for rows in _by_prompt(prompts):
        if len(rows) == 1:
            adv[rows] = scores[rows].double()
    return adv


def rloo_single_nan(scores, prompts):
    # the mean over no other row: 0 / 0
    adv = torch.zeros(len(scores), dtype=torch.float64)
    for rows in _by_prompt(prompts):
        g = scores[rows].double()
        adv[rows] = g - (g.sum() - g) / (len(rows) - 1) if len(rows) > 1 else torch.full_like(g, float("nan"))
    return adv


class TestExercise11b(checks.ExerciseTests):
    EXERCISE = "11b"
    BUGGY_HINT = "next to each other"
    WRONG = [
        (_buggy_rloo, "itertools.groupby only joins rows that are next to each other"),
        (rloo_blocks, "not in blocks of consecutive rows"),
        (rloo_whole_file, "not of the whole file"),
        (rloo_row_in_its_baseline, "leave the row itself out of its baseline"),
    ]
    EDGE_WRONG = [
        (rloo_single_raw, "a prompt with one completion"),
        (rloo_single_nan, "a prompt with one completion"),
    ]



def test_the_planted_bug_is_right_on_a_file_sorted_by_prompt():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5], dtype=torch.float64)
    prompts = ["9*3", "9*3", "9*3", "5+8", "5+8"]
    assert torch.equal(_buggy_rloo(scores, prompts), rloo_by_prompt(scores, prompts))
    shuffled = [4, 0, 3, 2, 1]
    assert not torch.equal(_buggy_rloo(scores[shuffled], [prompts[i] for i in shuffled]),
                           rloo_by_prompt(scores, prompts)[shuffled])


def test_the_reference_is_the_library_rloo():
    from labkit.core.rollouts import Rollouts
    from labkit.credit.episode import rloo

    scores = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 0.25], dtype=torch.float64)
    prompts = ["a", "b", "a", "c", "b", "a"]
    ro = Rollouts(tokens=torch.zeros(6, 1, dtype=torch.long), mask=torch.ones(6, 1, dtype=torch.bool),
                  rewards=scores[:, None], group_ids=torch.tensor([0, 1, 0, 2, 1, 0]))
    want = rloo(ro).values[:, 0]
    assert torch.allclose(rloo_by_prompt(scores, prompts), want, atol=1e-12)
    assert torch.allclose(EXERCISES["11b"].reference(scores=scores, prompts=prompts), want, atol=1e-12)
    assert rloo_by_prompt(scores, prompts)[3] == 0  # the prompt answered once


# --------------------------------------------------------------------------- 11c: the reading
READING = "11c"


def test_the_lab_value_is_measured_on_the_shipped_sample():
    # a seeded, deterministic rank correlation on the shipped file, measured at 0.5556
    assert EXERCISES[READING].lab_value() == pytest.approx(0.5556080760119942, abs=1e-6)
    assert check(EXERCISES[READING].lab_value(), READING, verbose=False).passed
    assert check(round(EXERCISES[READING].lab_value(), 2), READING, verbose=False).passed


def test_a_reading_just_outside_the_tolerance_gets_the_general_hint(capsys):
    value = EXERCISES[READING].lab_value()
    for answer in (value + 0.012, value - 0.012):
        result = check(answer, READING)
        out = capsys.readouterr().out
        assert not result.passed and "row grpo, column carl" in result.hint
        assert f"{value:.3f}" not in out


@pytest.mark.parametrize("which, hint", [("whole", "whole file's agreement"), ("reinforce", "REINFORCE's column"),
                                         ("complement", "1 minus the agreement")])
def test_each_misreading_gets_its_hint(which, hint, capsys):
    from labkit.course.exercises.ex11_your_rollouts import _grpo_carl_whole_file, _grpo_reinforce_on_64

    value = EXERCISES[READING].lab_value()
    answer = {"whole": _grpo_carl_whole_file, "reinforce": _grpo_reinforce_on_64,
              "complement": lambda: 1 - value}[which]()
    result = check(answer, READING)
    out = capsys.readouterr().out
    assert not result.passed and hint in result.hint and f"{value:.3f}" not in out


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          ("0.56", "answer with a number"), (float("nan"), "finite number")])
def test_a_non_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, READING, verbose=False)
    assert not result.passed and hint in result.hint
