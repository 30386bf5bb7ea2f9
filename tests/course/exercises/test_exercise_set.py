"""The course's exercises as a whole: at least three per notebook from 00 to 11, every kind
somewhere, a capstone in each half of the course; one module per notebook in
labkit/course/exercises/ and one in labkit/course/solutions/, each named after the notebook. An
exercise module grades against the library, not a lesson (labkit.course.nbNN_*), and a solution
needs nothing of labkit (a reader prints it whole)."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from labkit.course.exercises import EXERCISES, KINDS, Exercise, Reading, get_exercise, list_exercises
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


def test_every_notebook_has_at_least_three_exercises_lettered_in_order():
    per_notebook = Counter(ex.notebook for ex in EXERCISES.values())
    assert sorted(per_notebook) == [nb[:2] for nb in NOTEBOOKS]
    assert min(per_notebook.values()) >= 3, per_notebook
    assert list(EXERCISES) == sorted(EXERCISES)
    for nb, n in per_notebook.items():
        assert [ex.letter for ex in EXERCISES.values() if ex.notebook == nb] == list("abcdefgh"[:n])
    assert len(list_exercises()) == len(EXERCISES)


def test_every_kind_appears_and_each_half_of_the_course_has_a_capstone():
    kinds = Counter(ex.kind for ex in EXERCISES.values())
    assert set(kinds) == set(KINDS), kinds
    halves = {int(ex.notebook) < 6 for ex in EXERCISES.values() if ex.kind == "capstone"}
    assert halves == {True, False}


def test_each_notebook_opens_its_exercises_with_one_on_the_core_path():
    for nb in {ex.notebook for ex in EXERCISES.values()}:
        assert get_exercise(nb).path == "core" and get_exercise(int(nb)).id == nb + "a"


def test_a_reading_is_an_interpret_exercise_and_everything_else_has_a_solution():
    readings = {k for k, ex in EXERCISES.items() if isinstance(ex, Reading)}
    assert readings == {k for k, ex in EXERCISES.items() if ex.kind == "interpret"}
    functions = {k for k, ex in EXERCISES.items() if isinstance(ex, Exercise)}
    assert sorted(SOLUTIONS) == sorted(functions)
    for k in functions:
        assert SOLUTIONS[k].__name__ == EXERCISES[k].name


@pytest.mark.parametrize("package", ["exercises", "solutions"])
def test_each_notebook_has_its_module_named_after_it(package):
    modules = sorted(p.stem for p in (COURSE / package).glob("ex[0-9][0-9]_*.py"))
    assert modules == [f"ex{nb}" for nb in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_exercise_module_grades_against_the_library_not_a_lesson(notebook):
    lessons = [m for m in _labkit_imports(COURSE / "exercises" / f"ex{notebook}.py")
               if m.startswith("labkit.course.") and not m.startswith("labkit.course.exercises")
               and m.split(".")[2].startswith("nb")]
    assert not lessons, f"ex{notebook} imports {lessons}: what exercises share lives in the library"
    for ex in EXERCISES.values():
        if ex.notebook == notebook[:2]:
            made_by = ex.measure if isinstance(ex, Reading) else ex.cases
            assert made_by.__module__ == f"labkit.course.exercises.ex{notebook}"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_solutions_need_nothing_of_labkit(notebook):
    assert _labkit_imports(COURSE / "solutions" / f"ex{notebook}.py") == []
    for k, fn in SOLUTIONS.items():
        if k.startswith(notebook[:2]):
            assert fn.__module__ == f"labkit.course.solutions.ex{notebook}"


def test_an_exercise_is_found_by_id_notebook_or_name_and_an_unknown_one_is_named():
    first = next(iter(EXERCISES.values()))
    assert get_exercise(first.id) is get_exercise(first.name) is get_exercise(int(first.notebook)) is first
    with pytest.raises(ValueError, match="unknown 'nope'"):
        get_exercise("nope")
    with pytest.raises(TypeError, match="exercise:"):
        get_exercise(1.5)


@pytest.mark.parametrize("exercise_id", sorted(k for k, ex in EXERCISES.items() if isinstance(ex, Reading)))
def test_a_readings_revealed_run_is_whole_and_measures_the_lab_value(exercise_id, capsys):
    """What reveal_solution prints for a reading runs on its own (its imports and the function,
    nothing from the module around it) and gives the value the reading is graded against."""
    from labkit.course.exercises import reveal_solution
    ex = EXERCISES[exercise_id]
    reveal_solution(exercise_id)
    space: dict = {}
    exec(capsys.readouterr().out, space)
    value = space[ex.measure.__name__]()
    lab = ex.lab_value()
    assert value == lab if ex.choices else abs(value - lab) < 1e-9, (value, lab)
