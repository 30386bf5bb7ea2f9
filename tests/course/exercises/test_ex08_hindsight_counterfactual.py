"""Exercises of notebook 08_hindsight_counterfactual: HCA's hindsight ratio (08a), a leave-one-out baseline with
a planted mistake (08b), GRPO's sign agreement at tool noise 0.2 (08c, a reading).

For 08a and 08b the reference solution passes on every seed the tests try, the template fails cleanly, and
each typical wrong answer (written the way a reader would get it wrong) fails with the hint that names its
mistake; for 08b the planted bug is one of them. For 08c the lab's value passes, a reading just outside the
tolerance and each misreading get their hints, and no failure shows the lab's value."""
from __future__ import annotations

import torch

import exercise_checks as checks
from labkit.course import nb08_hindsight_counterfactual as lesson
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex08_hindsight_counterfactual import buggy_loo_credit

EXERCISE = "08a"


# --------------------------------------------------------------------------- typical wrong answers
def hca_inverted(pi, h, z):
    return (1 - h / pi) * z


def hca_forgot_z(pi, h, z):
    return torch.where(h > 0, 1 - pi / h.clamp(min=1e-12), torch.zeros_like(h))


def hca_sign_flipped(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else (pi / h - 1) * z


def hca_nan_on_failure(pi, h, z):
    return (1 - pi / h) * z


def hca_log_ratio(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else torch.log(h / pi) * z


WRONG = [
    (hca_inverted, 'not (1 - h / pi)'),
    (hca_forgot_z, 'multiply by the outcome Z'),
    (hca_sign_flipped, 'POSITIVE credit'),
    (hca_nan_on_failure, "don't divide by h when Z = 0"),
    (hca_log_ratio, 'not a log-ratio'),
]

EDGE_WRONG = [
    (hca_nan_on_failure, "don't divide by h when Z = 0"),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# --------------------------------------------------------------------------- 08b: find the bug in a leave-one-out baseline
def loo_divides_by_n(returns, group_ids):
    credit = torch.zeros(len(returns), dtype=torch.float64)
    for i in range(len(returns)):
        same = group_ids == group_ids[i]
        n = int(same.sum())
        if n > 1:
            credit[i] = returns[i] - (returns[same].sum() - returns[i]) / n
    return credit


def loo_whole_batch(returns, group_ids):
    n = len(returns)
    return returns - (returns.sum() - returns) / (n - 1)


def loo_nan_for_one(returns, group_ids):
    credit = torch.zeros(len(returns), dtype=torch.float64)
    for i in range(len(returns)):
        same = group_ids == group_ids[i]
        n = int(same.sum())
        credit[i] = returns[i] - (returns[same].sum() - returns[i]) / (n - 1)   # 0 / 0 for a context of one
    return credit


LOO_WRONG = [
    (buggy_loo_credit, "leave the alternative out of its own baseline"),
    (loo_divides_by_n, "not by n"),
    (loo_whole_batch, "not with the whole batch"),
    (loo_nan_for_one, "a context with one alternative gets credit 0"),
]

LOO_EDGE_WRONG = [
    (loo_nan_for_one, "a context with one alternative gets credit 0"),
]


class TestExercise08b(checks.ExerciseTests):
    EXERCISE = "08b"
    BUGGY_HINT = "leave the alternative out of its own baseline"
    WRONG = LOO_WRONG
    EDGE_WRONG = LOO_EDGE_WRONG


    def test_the_planted_bug_is_one_line_away_from_the_solution(self):
        ex = EXERCISES[self.EXERCISE]
        fixed = ex.template.replace("returns[same_context].mean()",
                                    "(returns[same_context].sum() - returns[i]) / (n - 1)")
        assert fixed != ex.template
        space: dict = {"torch": torch}
        exec(fixed, space)
        assert check(space[ex.name], self.EXERCISE, seed=0, verbose=False).passed


# --------------------------------------------------------------------------- 08c: a reading
def test_08c_the_reading_is_graded(capsys):
    checks.assert_reading_graded("08c", capsys)


def test_08c_the_measured_value_is_the_lessons(torch_is_locked):
    # exact counts on a seeded batch (no training): pinned under the lock's torch (another samples
    # another batch), and equal to what the notebook's cell runs on any
    value = EXERCISES["08c"].lab_value()
    if torch_is_locked:
        assert abs(value - 363 / 520) < 1e-9
    sweep = lesson.noise_sweep((0.2,), methods=["GRPO"], n_tasks=16, group_size=8, history_tasks=256, seed=2)
    assert abs(float(sweep.set_index("method").sign_agree["GRPO"]) - value) < 1e-12


def test_08c_states_settings_and_tolerance():
    ex = EXERCISES["08c"]
    assert ex.kind == "interpret" and ex.path == "deep dive" and ex.letter == "c"
    assert "tool noise 0.2" in ex.prompt and "within 0.005" in ex.prompt and ex.tolerance == 0.005
    assert "expected" not in ex.prompt.lower()
