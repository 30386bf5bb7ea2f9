"""Exercises 04a-04c (notebook 04_process_rewards): PURE's min-form returns, SPO's segment credit with a
planted mistake, and a reading of SPO's hit rate at cut p < 0.99.

For 04a and 04b the reference solution passes on every seed the tests try, the starting point fails, and each
typical wrong answer (written the way a reader would get it wrong; for 04b the planted bug among them) fails
with the hint that names its mistake. For 04c the lab's own value passes, a value just outside the tolerance
gets the general hint, each misreading its own hint, and no failure shows the lab's value."""
from __future__ import annotations

import math

import pytest
import torch

from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex04_process_rewards import spo_credit_buggy

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
class TestExercise04a(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


def test_a_float32_wrong_answer_gets_the_same_hint():
    assert "sum form" in check(checks.as_float32(pure_sum_form), EXERCISE, seed=0, verbose=False).hint


# --------------------------------------------------------------------------- 04b: find the bug in SPO's credit
def spo_uncertain_positions(token_probs, mask, threshold):
    return ((token_probs < threshold) & mask.bool()).nonzero().flatten().tolist()


def spo_no_outcome(token_probs, mask, values, outcome, threshold, interval):
    """The last segment ends at 0 instead of the outcome."""
    low = spo_uncertain_positions(token_probs, mask, threshold)
    cuts = low[::interval]
    credit = torch.zeros(len(token_probs), dtype=torch.float64)
    for j, c in enumerate(cuts):
        v_next = values[cuts[j + 1]] if j + 1 < len(cuts) else 0.0
        end = cuts[j + 1] if j + 1 < len(cuts) else len(token_probs)
        for t in low:
            if c <= t < end:
                credit[t] = v_next - values[c]
    return credit


def spo_every_token_of_the_segment(token_probs, mask, values, outcome, threshold, interval):
    """Confident tokens of a segment take its credit too."""
    cuts = spo_uncertain_positions(token_probs, mask, threshold)[::interval]
    credit = torch.zeros(len(token_probs), dtype=torch.float64)
    for j, c in enumerate(cuts):
        v_next = values[cuts[j + 1]] if j + 1 < len(cuts) else outcome
        end = cuts[j + 1] if j + 1 < len(cuts) else int(mask.sum())
        credit[c:end] = v_next - values[c]
    return credit


def spo_interval_ignored(token_probs, mask, values, outcome, threshold, interval):
    """Every uncertain token starts a segment."""
    cuts = spo_uncertain_positions(token_probs, mask, threshold)
    credit = torch.zeros(len(token_probs), dtype=torch.float64)
    for j, c in enumerate(cuts):
        credit[c] = (values[cuts[j + 1]] if j + 1 < len(cuts) else outcome) - values[c]
    return credit


def spo_whole_response_without_cut(token_probs, mask, values, outcome, threshold, interval):
    """Right with a cut; with none, the whole response is treated as one credited segment."""
    from labkit.course.solutions import spo_credit
    if not spo_uncertain_positions(token_probs, mask, threshold):
        return torch.where(mask.bool(), outcome - values[0], 0.0).double()
    return spo_credit(token_probs, mask, values, outcome, threshold, interval)


class TestExercise04b(checks.ExerciseTests):
    EXERCISE = "04b"
    WRONG = [
        (spo_credit_buggy, "padding got credit"),
        (spo_no_outcome, "the value is the outcome"),
        (spo_every_token_of_the_segment, "only the segment's uncertain tokens"),
        (spo_interval_ignored, "every interval-th uncertain token"),
    ]
    EDGE_WRONG = [(spo_whole_response_without_cut, "no cut and no credited token")]

    def test_the_template_runs_and_fails_the_check(self):
        # a find-the-bug exercise starts from the buggy function: it runs and gets its bug's hint
        ex = EXERCISES[self.EXERCISE]
        space: dict = {"torch": torch}
        exec(ex.template, space)
        result = check(space[ex.name], self.EXERCISE, seed=0, verbose=False)
        assert not result.passed and "padding got credit" in result.hint
        checks.assert_the_lab_answer_is_not_shown(result, str(result))

    def test_the_buggy_function_is_the_template_and_looks_honest(self):
        ex = EXERCISES[self.EXERCISE]
        assert ex.kind == "debug" and ex.path == "deep dive" and "def spo_credit(" in ex.template
        assert "bug" not in ex.template.lower() and "#" not in ex.template.split("cuts = ")[0]


# --------------------------------------------------------------------------- 04c: reading SPO's hit rate
class TestReading04c:
    ex = EXERCISES["04c"]

    def test_the_lab_value_passes_and_lies_in_its_measured_band(self):
        value = self.ex.lab_value()
        # a hit rate on the 8 reference rollouts with a wrong step, from seeded continuations of the
        # tiny LM (float32 sampling can move it by a hit on another CPU); here it is 0.4375
        assert 0.25 <= value <= 0.65
        assert check(value, "04c", verbose=False).passed
        assert check(value + 0.009, "04c", verbose=False).passed

    def test_a_reading_just_outside_the_tolerance_gets_the_general_hint(self, capsys):
        value = self.ex.lab_value()
        for reading in (value + 0.012, value - 0.012):
            result = check(reading, "04c")
            assert not result.passed and result.hint == self.ex.hint
            out = capsys.readouterr().out
            assert f"{value:.3f}" not in out and f"{value:.3f}" not in repr(result)

    @pytest.mark.parametrize("which, words", [(0, "cut p < 0.9"), (1, "K = 4"), (2, "rank correlation"),
                                              (3, "chance hit rate")])
    def test_each_misreading_gets_its_own_hint(self, which, words, capsys):
        m = self.ex.misreadings[which]
        value = m.value() if callable(m.value) else m.value
        assert abs(value - self.ex.lab_value()) > self.ex.tolerance, "a misreading must differ from the lab's value"
        result = check(value, "04c")
        assert not result.passed and words in result.hint, result.hint
        assert f"{self.ex.lab_value():.3f}" not in capsys.readouterr().out

    @pytest.mark.parametrize("answer, words", [(..., "enter your reading"), (None, "enter your reading"),
                                               ("0.4", "answer with a number"), (math.nan, "finite number")])
    def test_no_reading_gets_told_what_to_enter(self, answer, words):
        result = check(answer, "04c", verbose=False)
        assert not result.passed and words in result.hint, result.hint

    def test_the_exercise_states_its_settings_and_tolerance(self):
        assert self.ex.kind == "interpret" and self.ex.path == "deep dive" and self.ex.letter == "c"
        for words in ("K = 9", "p < 0.99", "tolerance 0.01", "arXiv 2505.23564"):
            assert words in " ".join(self.ex.prompt.split()), words
