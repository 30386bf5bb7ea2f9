"""The grader every exercise shares: a reader's exception, a wrong type or shape, an input changed in
place and a loop that never ends are reported with their case, not raised; the result prints
once and reads well; check's own bad arguments raise errors that name the argument. The
exercises here are only the vehicle: any one would do."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from labkit.course import solutions
from labkit.course.exercises import EXERCISES, CheckResult, Exercise, check, get_exercise

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402


def grpo_off_by_one(scores, group_ids):
    """A wrong answer no rule names: it fails on the tolerance, with both answers shown."""
    return solutions.grpo_advantage(scores, group_ids) + 1


def test_a_function_that_raises_is_reported_with_its_case():
    def broken(scores, group_ids):
        if len(scores) == 1:
            raise IndexError("no neighbour")
        return solutions.grpo_advantage(scores, group_ids)

    result = check(broken, "01", verbose=False)
    assert not result.passed and isinstance(result.error, IndexError)
    assert "raised IndexError: no neighbour" in result.hint
    assert len(result.case.args["scores"]) == 1


def test_a_wrong_return_type_or_shape_is_named():
    assert "shape (" in check(lambda scores, group_ids: scores[:1], "01", verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: "no idea", "01", verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: None, "01", verbose=False).hint


def test_changing_an_input_in_place_is_reported():
    def in_place(scores, group_ids):
        out = solutions.grpo_advantage(scores, group_ids)
        scores.zero_()
        return out

    assert "in place" in check(in_place, "01", verbose=False).hint


def test_a_list_answer_is_accepted():
    assert check(lambda v: solutions.shapley3(v).tolist(), "09", verbose=False).passed
    assert check(lambda scores, group_ids: solutions.grpo_advantage(scores, group_ids).tolist(), 1, verbose=False)


def test_the_exercise_can_be_named_several_ways():
    ex = EXERCISES["02"]
    assert get_exercise(2) is get_exercise("02") is get_exercise("2") is get_exercise("gae") is get_exercise(ex) is ex
    assert ex.check(solutions.gae, verbose=False).passed


@pytest.mark.parametrize("kwargs,name,error", [
    (dict(fn=42, exercise="01"), "fn", TypeError),
    (dict(fn=solutions.gae, exercise="12"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise="nope"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise=2.0), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise=True), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise="02", seed=-1), "seed", ValueError),
    (dict(fn=solutions.gae, exercise="02", seed="a"), "seed", TypeError),
    (dict(fn=solutions.gae, exercise="02", verbose="yes"), "verbose", TypeError),
])
def test_bad_arguments_to_check_name_the_argument(kwargs, name, error):
    with pytest.raises(error, match=f"^{name}:"):
        check(**kwargs)


def test_the_result_is_a_small_object():
    result = check(grpo_off_by_one, "01", verbose=False)
    assert isinstance(result, CheckResult) and isinstance(get_exercise(1), Exercise)
    assert result.got.shape == result.want.shape
    assert str(result) == repr(result) and str(result).count("\n") == 3


def test_parameter_names_are_free_and_a_wrong_arity_shows_the_signature():
    assert check(lambda s, g: solutions.grpo_advantage(s, g), "01", verbose=False).passed
    result = check(lambda scores: scores, "01", verbose=False)
    assert "raised TypeError" in result.hint and "grpo_advantage(scores, group_ids)" in result.hint


def test_a_notebook_cell_shows_the_result_once(capsys):
    result = check(grpo_off_by_one, "01")
    printed = capsys.readouterr().out
    result._ipython_display_()  # what IPython calls for a cell's last value
    assert printed and capsys.readouterr().out == ""
    quiet = check(grpo_off_by_one, "01", verbose=False)
    quiet._ipython_display_()
    assert capsys.readouterr().out == printed


def test_float32_answers_are_graded_like_float64_ones():
    # a named mistake in float32 keeps its hint: tests/course/exercises/test_ex01_*.py and test_ex04_*.py
    assert check(checks.as_float32(solutions.grpo_advantage), "01", verbose=False).passed
    assert check(checks.as_float32(solutions.gae), "02", verbose=False).passed


def test_a_function_that_never_returns_is_stopped_with_a_hint():
    def spins(rewards, mask, gamma):
        t = 0
        while t < rewards.shape[1]:   # the index never moves
            pass
    result = check(spins, "00", verbose=False, timeout=0.2)
    assert not result.passed and "did not return within 0.2 s" in result.hint
    # a bare `except Exception` in the reader's code cannot swallow the stop
    def swallows(rewards, mask, gamma):
        while True:
            try:
                pass
            except Exception:
                pass
    assert "did not return" in check(swallows, "00", verbose=False, timeout=0.2).hint
    # and the limit is off again afterwards: the solution passes with no alarm pending
    assert check(solutions.reward_to_go, "00", verbose=False, timeout=0.2).passed


@pytest.mark.parametrize("timeout", [0, -1, "10"])
def test_a_bad_timeout_names_the_argument(timeout):
    with pytest.raises((TypeError, ValueError), match="^timeout"):
        check(solutions.reward_to_go, "00", verbose=False, timeout=timeout)


def test_register_refuses_what_is_not_an_exercise():
    from labkit.course.exercises.grader import register

    with pytest.raises(TypeError, match="^exercise:"):
        register(solutions.gae)
