"""The grader every exercise shares: each attempt draws its cases from a fresh seed, says which, and
check(..., seed=S) repeats them (LABKIT_GRADER_SEED fixes it); a failure shows the hint, the
smallest failing case and the reader's answer, never the lab's; a reader's exception, a wrong type
or shape, an input changed in place and a loop that never ends are reported with their case, not
raised; the main cases are graded before the edge cases; the result prints once and reads well,
its lines wrapped between words to fit JupyterLab's output column; check's own bad arguments
raise errors that name the argument; reveal_solution prints a reference solution, and the
exercises' namespace imports none. The exercises here are only the vehicle: any one would do."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from labkit.course import solutions
from labkit.course.exercises import (EXERCISES, Case, CheckResult, Exercise, check, get_exercise, once_passed,
                                     reveal_solution)
from labkit.course.exercises.grader import SEED_ENV, WIDTH

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402


def grpo_off_by_one(scores, group_ids):
    """A wrong answer, shown with its case and both answers."""
    return solutions.grpo_advantage(scores, group_ids) + 1


def test_a_function_that_raises_is_reported_with_its_case():
    def broken(scores, group_ids):
        if len(scores) == 1:
            raise IndexError("no neighbour")
        return solutions.grpo_advantage(scores, group_ids)

    result = check(broken, "01", seed=0, verbose=False)
    assert not result.passed and isinstance(result.error, IndexError)
    assert "raised IndexError: no neighbour" in result.hint
    assert len(result.case.args["scores"]) == 1


def test_a_wrong_return_type_or_shape_is_named():
    assert "shape (" in check(lambda scores, group_ids: scores[:1], "01", seed=0, verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: "no idea", "01", seed=0, verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: None, "01", seed=0, verbose=False).hint


def test_changing_an_input_in_place_is_reported():
    def in_place(scores, group_ids):
        out = solutions.grpo_advantage(scores, group_ids)
        scores.zero_()
        return out

    assert "in place" in check(in_place, "01", seed=0, verbose=False).hint


def test_a_list_answer_is_accepted():
    assert check(lambda q, effects: solutions.mixer_credit(q, effects).tolist(), "09", seed=0, verbose=False).passed
    assert check(lambda scores, group_ids: solutions.grpo_advantage(scores, group_ids).tolist(), 1, seed=0, verbose=False)


def test_the_exercise_can_be_named_several_ways():
    ex = EXERCISES["02a"]
    assert get_exercise(2) is get_exercise("02") is get_exercise("2") is get_exercise("02a") is get_exercise("gae") \
        is get_exercise(ex) is ex
    assert ex.check(solutions.gae, seed=0, verbose=False).passed


@pytest.mark.parametrize("kwargs,name,error", [
    (dict(fn=42, exercise="01"), "fn", TypeError),
    (dict(fn=solutions.gae, exercise="12"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise="nope"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise=2.0), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise=True), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise="02", seed=-1), "seed", ValueError),
    (dict(fn=solutions.gae, exercise="02", seed="a"), "seed", TypeError),
    (dict(fn=solutions.gae, exercise="02", seed=2 ** 64), "seed", ValueError),
    (dict(fn=solutions.gae, exercise="02", verbose="yes"), "verbose", TypeError),
])
def test_bad_arguments_to_check_name_the_argument(kwargs, name, error):
    with pytest.raises(error, match=f"^{name}:"):
        check(**kwargs)


def test_the_result_is_a_small_object():
    result = check(grpo_off_by_one, "01", seed=0, verbose=False)
    assert isinstance(result, CheckResult) and isinstance(get_exercise(1), Exercise)
    assert result.got.shape == result.want.shape  # the lab's answer is kept, for tests
    lines = str(result).splitlines()
    assert str(result) == repr(result) and lines[0].startswith("\u2717 01")
    # the hint, then the smallest failing case, the reader's answer and the seed, each on lines of
    # their own; never the lab's answer
    assert [line.split(":")[0].strip() for line in lines if line.startswith("  ") and not line.startswith("    ")][-3:] \
        == [f"smallest failing case '{result.case.name}'", "yours", "seed 0 (as asked)"]
    assert "expected" not in str(result)


def _result(hint: str, case: Case, got=None, want=None) -> CheckResult:
    return CheckResult("01 \u00b7 GRPO advantage", False, hint, case, got, want, n_cases=12)


def test_long_lines_wrap_between_words_with_a_hanging_indent():
    hint = ("a group of one should get its raw score / (1 + eps) (the group-of-one rule: mean 0, std 1, as verl "
            "does); torch.std of one value is NaN")
    scores = torch.linspace(-1.5, 1.5, 25, dtype=torch.float64)
    case = Case("random #0", dict(scores=scores, group_ids=torch.arange(25)))
    text = str(_result(hint, case, got=-scores, want=scores))
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    # each part starts on a line of its own; its continuation lines hang under it
    starts = [i for i, line in enumerate(lines) if line.startswith(("\u2717", "  smallest failing case", "  yours:"))]
    assert len(starts) == 3 and starts[0] == 0 and len(lines) > 3
    for first, nxt in zip(starts, starts[1:] + [len(lines)]):
        indent = {0: "  ", 1: "    "}.get(starts.index(first), " " * 9)
        assert all(line.startswith(indent) and not line.startswith(indent + " ") for line in lines[first + 1:nxt])
    # nothing is cut inside a word or a number: the words read back unchanged
    shown = " ".join(text.split())
    assert " ".join(f"\u2717 01 \u00b7 GRPO advantage: {hint}".split()) in shown
    assert "-1.5, -1.375," in shown and "group_ids=[0, 1, 2," in shown


def test_a_short_result_stays_on_one_line_per_part():
    case = Case("group of one", dict(scores=torch.tensor([0.7], dtype=torch.float64), group_ids=torch.tensor([3])))
    text = str(_result("a short hint", case, got=torch.tensor([0.0]), want=torch.tensor([0.7])))
    assert text.splitlines() == ["\u2717 01 \u00b7 GRPO advantage: a short hint", "  smallest failing case 'group of one': "
                                 "scores=[0.7], group_ids=[3]", "  yours: [0]"]


def test_a_wide_selection_wraps_between_rows():
    keep = torch.zeros(6, 12, dtype=torch.bool)
    text = str(_result("a turn that is not present (padding) must never be kept",
                       Case("random #0", dict(present=keep)), got=keep, want=keep))
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "[0,0,0,0,0,0,0,0,0,0,0,0], [0,0,0,0,0,0,0,0,0,0,0,0]" in " ".join(text.split())


@pytest.mark.parametrize("notebook", sorted(EXERCISES))
def test_the_task_fits_the_output_column(notebook):
    text = str(EXERCISES[notebook])
    assert all(len(line) <= WIDTH for line in text.splitlines())
    # the prompt's words, in order, with its argument and formula lines each starting a line
    prompt = EXERCISES[notebook].prompt
    assert " ".join(prompt.split()) in " ".join(text.split())
    starts = text.splitlines()
    for line in prompt.splitlines():
        if line.startswith("  "):
            assert any(shown.startswith(line[:40]) for shown in starts), line


def test_the_main_cases_are_graded_before_the_edge_cases():
    def wrong_and_crashing_on_a_group_of_one(scores, group_ids):
        if len(scores) == 1:
            raise IndexError("no neighbour")
        return scores - scores.mean()            # the batch's mean: wrong on the main cases

    result = check(wrong_and_crashing_on_a_group_of_one, "01", seed=0, verbose=False)
    assert "sum to zero within a group" in result.hint and not result.case.tags
    # an answer right on the main cases is then graded on the edges
    singleton_zero = check(lambda s, g: solutions.grpo_advantage(s, g) if len(s) > 1 else 0 * s, "01", seed=0, verbose=False)
    assert "group-of-one rule" in singleton_zero.hint and singleton_zero.case.tags == {"singleton"}


def test_parameter_names_are_free_and_a_wrong_arity_shows_the_signature():
    assert check(lambda s, g: solutions.grpo_advantage(s, g), "01", seed=0, verbose=False).passed
    result = check(lambda scores: scores, "01", seed=0, verbose=False)
    assert "raised TypeError" in result.hint and "grpo_advantage(scores, group_ids)" in result.hint


def test_a_notebook_cell_shows_the_result_once(capsys):
    result = check(grpo_off_by_one, "01", seed=0)
    printed = capsys.readouterr().out
    result._ipython_display_()  # what IPython calls for a cell's last value
    assert printed and capsys.readouterr().out == ""
    quiet = check(grpo_off_by_one, "01", seed=0, verbose=False)
    quiet._ipython_display_()
    assert capsys.readouterr().out == printed


def test_float32_answers_are_graded_like_float64_ones():
    # a named mistake in float32 keeps its hint: tests/course/exercises/test_ex01_*.py and test_ex04_*.py
    assert check(checks.as_float32(solutions.grpo_advantage), "01", seed=0, verbose=False).passed
    assert check(checks.as_float32(solutions.gae), "02", seed=0, verbose=False).passed


def test_a_function_that_never_returns_is_stopped_with_a_hint():
    def spins(rewards, mask, gamma):
        t = 0
        while t < rewards.shape[1]:   # the index never moves
            pass
    result = check(spins, "00", seed=0, verbose=False, timeout=0.2)
    assert not result.passed and "did not return within 0.2 s" in result.hint
    # a bare `except Exception` in the reader's code cannot swallow the stop
    def swallows(rewards, mask, gamma):
        while True:
            try:
                pass
            except Exception:
                pass
    assert "did not return" in check(swallows, "00", seed=0, verbose=False, timeout=0.2).hint
    # and the limit is off again afterwards: the solution passes with no alarm pending
    assert check(solutions.reward_to_go, "00", seed=0, verbose=False, timeout=0.2).passed


@pytest.mark.parametrize("timeout", [0, -1, "10"])
def test_a_bad_timeout_names_the_argument(timeout):
    with pytest.raises((TypeError, ValueError), match="^timeout"):
        check(solutions.reward_to_go, "00", seed=0, verbose=False, timeout=timeout)


def test_register_refuses_what_is_not_an_exercise():
    from labkit.course.exercises.grader import register

    with pytest.raises(TypeError, match="^exercise:"):
        register(solutions.gae)


# --------------------------------------------------------------------------- fresh cases, no answers shown
def test_each_attempt_draws_fresh_cases_and_says_which(monkeypatch, capsys):
    monkeypatch.delenv(SEED_ENV, raising=False)
    results = [check(grpo_off_by_one, "01") for _ in range(3)]
    out = capsys.readouterr().out
    assert all(r.origin == "fresh" and 0 <= r.seed < 1_000_000 for r in results)
    assert len({r.seed for r in results}) > 1   # three equal draws out of a million: never in practice
    for r in results:
        assert f'seed {r.seed} (fresh): check(grpo_off_by_one, "01a", seed={r.seed}) repeats these cases' in \
            " ".join(out.split())
    passed = check(solutions.grpo_advantage, "01", verbose=False)
    assert passed.origin == "fresh" and str(passed) == f"\u2713 01a \u00b7 GRPO advantage: all {passed.n_cases} " \
        f"cases pass, drawn fresh (seed {passed.seed})"


def test_the_seed_a_result_names_repeats_its_cases(monkeypatch):
    monkeypatch.delenv(SEED_ENV, raising=False)
    first = check(grpo_off_by_one, "01", verbose=False)
    again = check(grpo_off_by_one, "01", seed=first.seed, verbose=False)
    assert again.origin == "given" and again.seed == first.seed
    assert again.case.name == first.case.name and str(again).splitlines()[:-1] == str(first).splitlines()[:-1]
    assert "(as asked)" in str(again) and "(fresh)" in str(first)


def test_different_seeds_give_different_random_cases():
    ex = EXERCISES["01a"]
    draws = [ex.cases(torch.Generator().manual_seed(seed)) for seed in (0, 1, 999_999)]
    randoms = [[c.args["scores"].tolist() for c in cases if c.name.startswith("random")] for cases in draws]
    assert randoms[0] != randoms[1] != randoms[2]
    # the fixed cases are the same on every seed
    fixed = [[c.name for c in cases if not c.name.startswith("random")] for cases in draws]
    assert fixed[0] == fixed[1] == fixed[2]


def test_the_environment_can_fix_the_seed(monkeypatch):
    monkeypatch.setenv(SEED_ENV, "42")
    result = check(grpo_off_by_one, "01", verbose=False)
    assert result.seed == 42 and result.origin == "env" and f"fixed by {SEED_ENV}" in str(result)
    assert check(solutions.grpo_advantage, "01", verbose=False).seed == 42
    assert check(grpo_off_by_one, "01", seed=7, verbose=False).seed == 7   # a seed named in the call wins
    passed = check(solutions.gae, "02", verbose=False)
    assert f"on seed 42 fixed by {SEED_ENV}" in str(passed)


@pytest.mark.parametrize("value", ["abc", "-3", "1.5"])
def test_a_bad_seed_in_the_environment_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(SEED_ENV, value)
    with pytest.raises(ValueError, match=f"^{SEED_ENV}:"):
        check(solutions.gae, "02", verbose=False)


def test_the_lab_answer_is_kept_but_never_shown(capsys):
    want = torch.tensor([0.123, -4.567], dtype=torch.float64)
    case = Case("random #0", dict(scores=torch.tensor([9.0, 8.0], dtype=torch.float64), group_ids=torch.tensor([0, 0])))
    result = _result("a hint", case, got=torch.tensor([1.0, 2.0]), want=want)
    result._ipython_display_()
    shown = [str(result), repr(result), capsys.readouterr().out]
    assert all("0.123" not in text and "-4.567" not in text and "expected" not in text for text in shown)
    assert result.want is want
    # a function that returns nothing: the hint says so, the lab's answer is not printed either
    empty = check(lambda scores, group_ids: None, "01", seed=0, verbose=False)
    assert empty.want is not None and "expected" not in str(empty)
    checks.assert_the_lab_answer_is_not_shown(empty, str(empty))


def test_a_failing_function_is_shown_on_its_smallest_failing_case():
    def raises_on_long_input(scores, group_ids):
        if len(scores) >= 5:
            raise IndexError("too long")
        return solutions.grpo_advantage(scores, group_ids)

    result = check(raises_on_long_input, "01", seed=0, verbose=False)
    main = [c for c in EXERCISES["01a"].cases(torch.Generator().manual_seed(0)) if not c.tags]
    failing = [c for c in main if len(c.args["scores"]) >= 5]
    assert "raised IndexError" in result.hint
    assert len(result.case.args["scores"]) == min(len(c.args["scores"]) for c in failing)


# --------------------------------------------------------------------------- reference solutions
@pytest.mark.parametrize("notebook", sorted(k for k, ex in EXERCISES.items() if ex.kind != "interpret"))
def test_reveal_solution_prints_the_reference_and_returns_nothing(notebook, capsys):
    ex = EXERCISES[notebook]
    assert reveal_solution(notebook) is None
    out = capsys.readouterr().out
    first, *rest = out.splitlines()
    assert first == f"# The lab's reference solution to exercise {ex.key}"
    assert "import torch" in rest and f"def {ex.name}(" in out and "return" in out
    # the printed text defines a function that passes the check: it is the whole solution
    space: dict = {}
    exec(out, space)
    assert check(space[ex.name], notebook, seed=0, verbose=False).passed
    reveal_solution(ex.name)
    assert capsys.readouterr().out == out


@pytest.mark.parametrize("exercise,error", [(12, ValueError), ("nope", ValueError), (1.5, TypeError), (None, TypeError)])
def test_reveal_solution_refuses_an_unknown_exercise(exercise, error):
    with pytest.raises(error, match="^exercise:"):
        reveal_solution(exercise)


def test_the_exercises_namespace_does_not_expose_the_solutions():
    code = ("import sys, labkit.course.exercises as ex\n"
            "assert 'labkit.course.solutions' not in sys.modules, 'imported'\n"
            "assert not hasattr(ex, 'solutions') and not hasattr(ex, 'SOLUTIONS')\n"
            "names = [n for n in dir(ex) if not n.startswith('_')]\n"
            "assert not any(n in names for n in ('reward_to_go', 'grpo_advantage', 'gae', 'rank_correlation')), names\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_no_exercise_module_imports_the_solutions_at_load_time():
    import ast

    for path in sorted((Path(__file__).resolve().parents[3] / "labkit" / "course" / "exercises").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: reveal_solution imports one when asked
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any("solutions" in n for n in names), path.name


# --------------------------------------------------------------------------- kinds: find the bug, a custom call
def _double_buggy(x):
    """Twice each entry."""
    return x + x + 1


def _cases_for_double(gen):
    return [Case("three", dict(x=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)))]


def test_a_find_the_bug_exercise_starts_from_its_buggy_function_under_its_name():
    ex = Exercise(notebook="97", name="double", title="Double", signature="double(x) -> tensor (n,)",
                  prompt="Fix it: return 2 x.", cases=_cases_for_double, reference=lambda x: 2 * x,
                  letter="b", kind="debug", path="deep dive", buggy=_double_buggy)
    assert ex.template.startswith("def double(x):\n    \"\"\"Twice each entry.\"\"\"\n    return x + x + 1")
    space: dict = {}
    exec(ex.template, space)
    assert not ex.check(space["double"], seed=0, verbose=False).passed
    assert ex.check(lambda x: x + x, seed=0, verbose=False).passed
    assert str(ex).startswith("Exercise 97b \u00b7 Double (find the bug, deep dive)")


def test_an_exercise_can_grade_what_a_custom_call_returns():
    # the reader's function fills a buffer; the grader calls it and grades the buffer
    def fill(fn, args):
        out = torch.zeros(3, dtype=torch.float64)
        fn(args["x"], out)
        return out

    ex = Exercise(notebook="97", name="double_into", title="Double into", signature="double_into(x, out) -> None",
                  prompt="Write 2 x into out.", cases=_cases_for_double, reference=lambda x: 2 * x, letter="c",
                  call=fill)
    assert ex.check(lambda x, out: out.copy_(2 * x), seed=0, verbose=False).passed
    assert not ex.check(lambda x, out: out.copy_(x), seed=0, verbose=False).passed


@pytest.mark.parametrize("kw,match", [
    (dict(kind="debug"), "buggy: a 'debug' exercise needs the buggy function"),
    (dict(buggy=_double_buggy), "buggy: a 'debug' exercise needs the buggy function"),
    (dict(kind="interpret"), "kind: a run-and-interpret exercise is a Reading"),
    (dict(kind="essay"), "kind: expected one of"),
    (dict(letter="ab"), "letter:"),
])
def test_a_malformed_exercise_is_refused_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        Exercise(notebook="97", name="double", title="Double", signature="double(x) -> tensor (n,)",
                 prompt="p", cases=_cases_for_double, reference=lambda x: 2 * x, **kw)


def test_once_passed_runs_only_after_a_passing_check(capsys):
    assert once_passed(solutions.grpo_advantage, "01a", lambda: 42) == 42
    assert once_passed(grpo_off_by_one, "01a", lambda: 1 / 0) is None
    assert once_passed("x", "01a", lambda: 1 / 0, what="the live run") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and "make the check" not in out
    assert out.startswith('Not training yet: grpo_off_by_one does not pass check(grpo_off_by_one, "01a")')
    assert 'Not the live run yet: fn does not pass check(fn, "01a")' in out
