"""What the tests of every exercise check, written once (each tests/course/exercises/test_exNN_*.py
calls these with its exercise's id and its own typical wrong answers): the exercise states what to
write, its reference solution passes on every seed of SEEDS, its template fails cleanly, each
typical wrong answer fails with the hint that names its mistake on every seed of SEEDS (the
grader draws a fresh seed each attempt, so the fixed cases must catch it whatever the random
ones are), an answer of zeros or of the flipped sign gets the hint for that on every seed, the
printed failure never shows the lab's answer, and a mistake on the main cases is named before
any edge case is graded. Every check here names its seed, so the tests are deterministic."""
from __future__ import annotations

import inspect
import itertools
import math
import re

import pytest
import torch

from torch_lock import torch_is_locked

from labkit.core.protocols import DOCSTRING_SECTIONS
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.grader import _show, _size
from labkit.course.solutions import SOLUTIONS

#: the seeds every typical answer is graded on: small ones, and six-digit ones as a fresh draw gives
SEEDS = (0, 1, 2, 3, 271828, 314159, 577215, 999999)

#: the layout every registered estimator's docstring follows, asked of every solution
HOUSE_SECTIONS = DOCSTRING_SECTIONS
CITATION = re.compile(r"arXiv[: ]?\d{4}\.\d{4,5}|\b(19|20)\d{2}\b")


def as_float32(fn):
    """``fn`` on float32 inputs, answering in float32 (as a reader's float32 code would)."""
    return lambda *args: fn(*[a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                              for a in args]).float()


def assert_states_what_to_write(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    assert ex.name in ex.signature and "->" in ex.signature
    assert "arXiv" in ex.prompt or "1953" in ex.prompt
    assert ex.signature in str(ex)
    # at least one degenerate case besides the random draws, and the cases are reproducible
    cases = ex.cases(torch.Generator().manual_seed(0))
    assert any(not c.name.startswith("random") for c in cases)
    again = ex.cases(torch.Generator().manual_seed(0))
    assert [c.name for c in cases] == [c.name for c in again]


def assert_solution_passes(exercise_id: str, seed: int, capsys) -> None:
    result = check(SOLUTIONS[exercise_id], exercise_id, seed=seed)
    assert result.passed, str(result)
    assert result.hint is None and bool(result) and result.seed == seed and result.origin == "given"
    out = capsys.readouterr().out
    assert out.startswith("\u2713") and f"all {result.n_cases} cases pass" in out and f"seed {seed}" in out


def assert_solution_docstring_in_house_order(exercise_id: str) -> None:
    doc = inspect.getdoc(SOLUTIONS[exercise_id])
    lines = [line.strip() for line in doc.splitlines()]
    positions = [lines.index(h) for h in HOUSE_SECTIONS]
    assert positions == sorted(positions) and all(doc.count(h) == 1 for h in HOUSE_SECTIONS)
    assert CITATION.search(doc.split("\n\n")[0]) and doc.startswith(exercise_id)


def assert_buggy_template_fails_with_its_hint(exercise_id: str, hint: str) -> None:
    """A find-the-bug exercise's starting point (the buggy function as the page shows it) runs in a
    notebook's namespace and fails, on a main case of every seed, with the hint naming its bug."""
    ex = EXERCISES[exercise_id]
    space: dict = {"torch": torch, "math": math, "itertools": itertools}
    exec(ex.template, space)
    for seed in SEEDS:
        result = check(space[ex.name], exercise_id, seed=seed, verbose=False)
        assert not result.passed and hint in result.hint, (seed, result.hint)
        assert not result.case.tags, "the planted bug shows on the formula's own cases"
        assert_the_lab_answer_is_not_shown(result, str(result))
    assert "bug" not in ex.template.lower() and "expected" not in ex.prompt.lower()


def assert_template_fails_cleanly(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    space: dict = {}
    exec(ex.template, space)
    result = check(space[ex.name], exercise_id, seed=0, verbose=False)
    assert not result.passed and "should return a tensor" in result.hint
    # every main case fails alike: the smallest is the one shown, and the lab's answer is not
    main = [c for c in ex.cases(torch.Generator().manual_seed(0)) if not c.tags]
    assert _size(result.case) == min(_size(c) for c in main) and not result.case.tags
    assert_the_lab_answer_is_not_shown(result, str(result))


def assert_fails_with_hint(exercise_id: str, fn, hint: str, capsys, seed: int = 0) -> None:
    result = check(fn, exercise_id, seed=seed)
    assert not result.passed
    assert hint in result.hint, f"{fn.__name__}, seed {seed}: got hint {result.hint!r}"
    # the failing case is shown, small, with the reader's answer and the call that repeats it
    out = capsys.readouterr().out
    words = " ".join(out.split())  # the printed lines are wrapped: compare word by word
    assert out.startswith("\u2717") and result.hint in words and f"case '{result.case.name}'" in words
    assert f'check({fn.__name__}, "{exercise_id}", seed={seed}) repeats these cases' in words
    assert len(out) < 1200
    assert_the_lab_answer_is_not_shown(result, out)


def assert_the_lab_answer_is_not_shown(result, out: str) -> None:
    """Neither the printed result nor its repr names the lab's answer on the failing case."""
    assert "expected:" not in out and "expected:" not in repr(result) and "want" not in repr(result)
    if result.want is None:
        return
    def plain(text):  # wrapped lines and spacing aside
        return "".join(text.split())

    # the rounded answer, as the old "expected:" line showed it, unless the case or the reader's
    # answer happens to read the same (a short one such as "0", or [1, 1, 1, 1] beside scores of 1)
    lab = plain(_show(result.want))
    shown_anyway = plain(" ".join(_show(v) for v in [*result.case.args.values(), result.got] if v is not None))
    if len(lab) >= 6 and lab not in shown_anyway:
        for text in (out, str(result), repr(result)):
            assert lab not in plain(text), text


def zeros_answer(exercise_id: str):
    """A placeholder: the reference solution's answer replaced by zeros (False, for a selection)."""
    def placeholder(*args):
        return torch.zeros_like(torch.as_tensor(SOLUTIONS[exercise_id](*args)))
    return placeholder


def sign_flipped_answer(exercise_id: str):
    """The reference solution with its sign flipped."""
    def flipped(*args):
        return -torch.as_tensor(SOLUTIONS[exercise_id](*args))
    return flipped


def raising_on_edge_cases(exercise_id: str, fn, seed: int = 0):
    """``fn``, except that it raises on every edge case (tagged case) of ``seed``."""
    edges = [list(c.args.values()) for c in EXERCISES[exercise_id].cases(torch.Generator().manual_seed(seed)) if c.tags]

    def answer(*args):
        if any(len(args) == len(edge) and all(_equal(a, b) for a, b in zip(args, edge)) for edge in edges):
            raise RuntimeError("this edge case is not handled")
        return fn(*args)
    return answer


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    return a == b


def assert_main_mistake_named_before_edge_failures(exercise_id: str, fn, hint: str, seed: int = 0) -> None:
    alone = check(fn, exercise_id, seed=seed, verbose=False)
    result = check(raising_on_edge_cases(exercise_id, fn, seed), exercise_id, seed=seed, verbose=False)
    if not alone.case.tags:  # a mistake the main cases show: named first, whatever the edges do
        assert hint in result.hint and not result.case.tags, result.hint
    else:                    # a mistake only an edge case shows: the main cases pass, then the edges are graded
        assert "raised RuntimeError" in result.hint and result.case.tags, result.hint


def assert_hint_does_not_depend_on_the_seed(exercise_id: str, fn, hint: str, seeds=SEEDS) -> None:
    for seed in seeds:
        result = check(fn, exercise_id, seed=seed, verbose=False)
        assert not result.passed and hint in result.hint, (fn.__name__, seed, result.hint)


def assert_reading_graded(exercise_id: str, capsys) -> None:
    """What every reading's grader must do: the lab's value passes; a value just outside the tolerance and
    any non-reading get their hints; each misreading its own; the lab's value is never printed."""
    ex = EXERCISES[exercise_id]
    lab = ex.lab_value()
    assert check(lab, exercise_id).passed
    assert check(lab + 0.9 * ex.tolerance, exercise_id, verbose=False).passed
    shown = f"{lab:.3f}"
    # a misreading that this torch's sampler puts within the tolerance of the lab's value is no
    # misreading here (the grader passes it over too); a value several misreadings give gets the first's hint
    misread = [(m, m.value()) for m in ex.misreadings]
    misread = [(m, v) for m, v in misread if abs(v - lab) > ex.tolerance + 1e-12]
    # just outside the tolerance, on each side where that is no known misreading (which has its own hint)
    outside = [x for x in (lab + 1.5 * ex.tolerance, lab - 1.5 * ex.tolerance)
               if all(abs(x - v) > ex.tolerance + 1e-12 for _, v in misread)]
    for answer in outside:
        result = check(answer, exercise_id)
        assert not result.passed and result.hint == ex.hint, result.hint
    for m, value in misread:
        first = next(n for n, v in misread if abs(value - v) <= ex.tolerance + 1e-12)
        result = check(value, exercise_id)
        assert not result.passed and result.hint == first.hint, (m.hint, result.hint)
    if torch_is_locked():  # under the lock's torch every misreading and a point outside are checked
        assert outside and len(misread) == len(ex.misreadings)
    for answer, hint in ((..., "enter your reading"), (None, "enter your reading"), ("0.5", "answer with a number"),
                         (float("nan"), "answer with a finite number")):
        result = check(answer, exercise_id)
        assert not result.passed and hint in result.hint, result.hint
    out = capsys.readouterr().out
    assert out.count("\u2713") == 1 and shown not in out.replace(f"{lab + 0.9 * ex.tolerance:.3f}", "")


class ExerciseTests:
    """The tests every exercise gets. A test file subclasses it as ``TestExercise`` with its
    exercise (``EXERCISE``, its id) and its typical wrong answers (``WRONG``: (function, hint) pairs);
    ``wrong`` is parametrized over ``WRONG`` by this folder's conftest.py."""

    EXERCISE: str = ""
    WRONG: list = []
    #: (function, hint) pairs: answers right on every main case and wrong on an edge case
    EDGE_WRONG: list = []
    #: a find-the-bug exercise: the hint its buggy template gets (default: the first WRONG answer's)
    BUGGY_HINT: str = ""
    #: the hint an answer of zeros gets (the shared placeholder hint, unless a more specific one fits)
    ZEROS_HINT: str = ""

    def test_the_exercise_states_what_to_write(self):
        assert_states_what_to_write(self.EXERCISE)

    @pytest.mark.parametrize("seed", SEEDS)
    def test_the_solution_passes(self, seed, capsys):
        assert_solution_passes(self.EXERCISE, seed, capsys)

    def test_the_solution_passes_on_a_fresh_seed(self, capsys, monkeypatch):
        monkeypatch.delenv("LABKIT_GRADER_SEED", raising=False)
        result = check(SOLUTIONS[self.EXERCISE], self.EXERCISE)
        assert result.passed and result.origin == "fresh", str(result)
        assert "drawn fresh" in capsys.readouterr().out

    def test_the_solution_docstring_follows_the_house_order(self):
        assert_solution_docstring_in_house_order(self.EXERCISE)

    def test_the_template_runs_and_fails_the_check(self):
        if EXERCISES[self.EXERCISE].kind == "debug":  # the buggy function: fails with its bug's hint
            assert_buggy_template_fails_with_its_hint(self.EXERCISE, self.BUGGY_HINT or self.WRONG[0][1])
        else:
            assert_template_fails_cleanly(self.EXERCISE)

    def test_there_are_at_least_three_typical_wrong_answers(self):
        assert len(self.WRONG) >= 3

    def test_a_typical_wrong_answer_fails_with_its_hint(self, wrong, capsys):
        for seed in (0, SEEDS[-1]):
            assert_fails_with_hint(self.EXERCISE, *wrong, capsys, seed=seed)

    def test_the_hint_does_not_depend_on_the_seed(self, wrong):
        assert_hint_does_not_depend_on_the_seed(self.EXERCISE, *wrong)

    @pytest.mark.parametrize("seed", SEEDS)
    def test_an_answer_of_zeros_gets_the_placeholder_hint(self, seed):
        ex = EXERCISES[self.EXERCISE]
        hint = self.ZEROS_HINT or ("your answer is False everywhere" if ex.output == "bool" else
                                   "your answer is 0 everywhere")
        result = check(zeros_answer(self.EXERCISE), self.EXERCISE, seed=seed, verbose=False)
        assert not result.passed and hint in result.hint, result.hint
        assert not result.case.tags, "a placeholder is told on a main case"
        assert_the_lab_answer_is_not_shown(result, str(result))

    @pytest.mark.parametrize("seed", SEEDS)
    def test_a_flipped_sign_gets_the_sign_hint(self, seed):
        if EXERCISES[self.EXERCISE].output == "bool":
            pytest.skip("a selection has no sign")
        result = check(sign_flipped_answer(self.EXERCISE), self.EXERCISE, seed=seed, verbose=False)
        assert not result.passed and "minus the expected one" in result.hint, result.hint
        assert not result.case.tags

    def test_an_edge_case_mistake_passes_the_main_cases_and_gets_its_hint(self, edge_wrong):
        fn, hint = edge_wrong
        result = check(fn, self.EXERCISE, seed=0, verbose=False)
        assert not result.passed and hint in result.hint, result.hint
        assert result.case.tags, f"{fn.__name__} should fail on an edge case only"
        # on other seeds a random case may show the mistake first; the hint is the same
        assert_hint_does_not_depend_on_the_seed(self.EXERCISE, fn, hint)

    def test_a_main_case_mistake_is_named_before_any_edge_case_failure(self, wrong):
        for seed in (0, SEEDS[-1]):
            assert_main_mistake_named_before_edge_failures(self.EXERCISE, *wrong, seed=seed)

    def test_some_typical_mistakes_show_on_the_main_cases_and_some_on_the_edges(self):
        tags = [check(fn, self.EXERCISE, seed=0, verbose=False).case.tags for fn, _ in self.WRONG]
        assert any(not t for t in tags)
        assert self.EDGE_WRONG
