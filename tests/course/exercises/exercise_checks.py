"""What the tests of every exercise check, written once (each tests/course/exercises/test_exNN_*.py
calls these with its notebook and its own typical wrong answers): the exercise states what to
write, its reference solution passes, its template fails cleanly, and each typical wrong answer
fails with the hint that names its mistake, whatever the seed."""
from __future__ import annotations

import inspect
import re

import pytest
import torch

from labkit.core.protocols import DOCSTRING_SECTIONS
from labkit.course.exercises import EXERCISES, check
from labkit.course.solutions import SOLUTIONS

#: the layout every registered estimator's docstring follows, asked of every solution
HOUSE_SECTIONS = DOCSTRING_SECTIONS
CITATION = re.compile(r"arXiv[: ]?\d{4}\.\d{4,5}|\b(19|20)\d{2}\b")


def as_float32(fn):
    """``fn`` on float32 inputs, answering in float32 (as a reader's float32 code would)."""
    return lambda *args: fn(*[a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                              for a in args]).float()


def assert_states_what_to_write(notebook: str) -> None:
    ex = EXERCISES[notebook]
    assert ex.name in ex.signature and "->" in ex.signature
    assert "arXiv" in ex.prompt or "1953" in ex.prompt
    assert ex.signature in str(ex)
    # at least one degenerate case besides the random draws, and the cases are reproducible
    cases = ex.cases(torch.Generator().manual_seed(0))
    assert any(not c.name.startswith("random") for c in cases)
    again = ex.cases(torch.Generator().manual_seed(0))
    assert [c.name for c in cases] == [c.name for c in again]


def assert_solution_passes(notebook: str, seed: int, capsys) -> None:
    result = check(SOLUTIONS[notebook], notebook, seed=seed)
    assert result.passed, str(result)
    assert result.hint is None and bool(result)
    out = capsys.readouterr().out
    assert out.startswith("\u2713") and f"all {result.n_cases} cases pass" in out


def assert_solution_docstring_in_house_order(notebook: str) -> None:
    doc = inspect.getdoc(SOLUTIONS[notebook])
    lines = [line.strip() for line in doc.splitlines()]
    positions = [lines.index(h) for h in HOUSE_SECTIONS]
    assert positions == sorted(positions) and all(doc.count(h) == 1 for h in HOUSE_SECTIONS)
    assert CITATION.search(doc.split("\n\n")[0]) and doc.startswith(notebook)


def assert_template_fails_cleanly(notebook: str) -> None:
    ex = EXERCISES[notebook]
    space: dict = {}
    exec(ex.template, space)
    result = check(space[ex.name], notebook, verbose=False)
    assert not result.passed and "should return a tensor" in result.hint


def assert_fails_with_hint(notebook: str, fn, hint: str, capsys) -> None:
    result = check(fn, notebook)
    assert not result.passed
    assert hint in result.hint, f"{fn.__name__}: got hint {result.hint!r}"
    # the failing case is shown, small, with both answers
    out = capsys.readouterr().out
    assert out.startswith("\u2717") and result.hint in out and f"case '{result.case.name}'" in out
    assert len(out) < 1200


def assert_hint_does_not_depend_on_the_seed(notebook: str, fn, hint: str) -> None:
    for seed in (1, 2):
        result = check(fn, notebook, seed=seed, verbose=False)
        assert not result.passed and hint in result.hint, (seed, result.hint)


class ExerciseTests:
    """The tests every exercise gets. A test file subclasses it as ``TestExercise`` with its
    notebook (``NOTEBOOK``) and its typical wrong answers (``WRONG``: (function, hint) pairs);
    ``wrong`` is parametrized over ``WRONG`` by this folder's conftest.py."""

    NOTEBOOK: str = ""
    WRONG: list = []

    def test_the_exercise_states_what_to_write(self):
        assert_states_what_to_write(self.NOTEBOOK)

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_the_solution_passes(self, seed, capsys):
        assert_solution_passes(self.NOTEBOOK, seed, capsys)

    def test_the_solution_docstring_follows_the_house_order(self):
        assert_solution_docstring_in_house_order(self.NOTEBOOK)

    def test_the_template_runs_and_fails_the_check(self):
        assert_template_fails_cleanly(self.NOTEBOOK)

    def test_there_are_at_least_three_typical_wrong_answers(self):
        assert len(self.WRONG) >= 3

    def test_a_typical_wrong_answer_fails_with_its_hint(self, wrong, capsys):
        assert_fails_with_hint(self.NOTEBOOK, *wrong, capsys)

    def test_the_hint_does_not_depend_on_the_seed(self, wrong):
        assert_hint_does_not_depend_on_the_seed(self.NOTEBOOK, *wrong)
