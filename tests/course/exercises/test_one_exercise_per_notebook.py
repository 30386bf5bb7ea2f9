"""Every notebook from 00 to 11 has its exercise: one module per notebook in
labkit/course/exercises/ and one in labkit/course/solutions/, each named after the notebook; the
registry holds the twelve in notebook order. An exercise module grades against the library, not a
lesson (labkit.course.nbNN_*), and a solution needs nothing of labkit (a reader prints it whole)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.course.exercises import EXERCISES, list_exercises
from labkit.course.solutions import SOLUTIONS

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
COURSE = ROOT / "labkit" / "course"


def _labkit_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "labkit"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
            found += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return found


def test_there_is_one_exercise_per_notebook_00_to_11():
    assert sorted(EXERCISES) == [f"{i:02d}" for i in range(0, 12)]
    assert list(EXERCISES) == sorted(EXERCISES)
    assert sorted(SOLUTIONS) == sorted(EXERCISES)
    assert len(list_exercises()) == 12


@pytest.mark.parametrize("package", ["exercises", "solutions"])
def test_each_notebook_has_its_module_named_after_it(package):
    modules = sorted(p.stem for p in (COURSE / package).glob("ex[0-9][0-9]_*.py"))
    assert modules == [f"ex{nb}" for nb in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_exercise_module_grades_against_the_library_not_a_lesson(notebook):
    lessons = [m for m in _labkit_imports(COURSE / "exercises" / f"ex{notebook}.py")
               if m.startswith("labkit.course.") and not m.startswith("labkit.course.exercises")]
    assert not lessons, f"ex{notebook} imports {lessons}: what exercises share lives in the grader"
    assert EXERCISES[notebook[:2]].cases.__module__ == f"labkit.course.exercises.ex{notebook}"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_solution_needs_nothing_of_labkit(notebook):
    assert _labkit_imports(COURSE / "solutions" / f"ex{notebook}.py") == []
    assert SOLUTIONS[notebook[:2]].__module__ == f"labkit.course.solutions.ex{notebook}"
