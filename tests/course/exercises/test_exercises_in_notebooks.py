"""Every registered exercise sits in its notebook as the course lays one out: a Markdown cell
opening with its marker (``<!-- exercise 01b -->``), its heading and the line stating its kind,
the rule's minutes and its path; a code cell showing the task (``get_exercise("01b")``); a code
cell with the reader's starting point (an empty function, the buggy one, or the reading left open)
ending in ``check(name, "01b")``; and further on a Markdown cell pointing to
``reveal_solution("01b")``. The solution is never on the page nor its module named, the text
never promises to show what was expected, and the exercises close the notebook (only the last
one's cells, a capstone's training run among them, follow its check)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from labkit.course import timing
from labkit.course.exercises import EXERCISES, Reading
from labkit.course.exercises.reveal import solved_cell

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"


def _notebook(exercise_id: str) -> tuple[Path, list[dict]]:
    path = next(NOTEBOOKS.glob(f"{exercise_id[:2]}_*.ipynb"))
    return path, json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _where(exercise_id: str) -> tuple[Path, list[dict], int]:
    path, cells = _notebook(exercise_id)
    at = [i for i, c in enumerate(cells) if timing.exercise_marker(c) == exercise_id]
    assert len(at) == 1, f"{path.name}: {len(at)} markers of exercise {exercise_id}"
    return path, cells, at[0]


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_the_marker_cell_states_title_kind_minutes_and_path(exercise_id):
    ex = EXERCISES[exercise_id]
    path, cells, at = _where(exercise_id)
    text = _source(cells[at])
    assert re.search(rf"^##+ Exercise {exercise_id}: ", text, re.M), f"{path.name}: no heading 'Exercise {exercise_id}: ...'"
    minutes = timing.notebook_time(path).exercises[exercise_id]
    assert timing.exercise_line(exercise_id, minutes) in text, f"{path.name}: stated line out of date " \
        "(python scripts/course_times.py --write)"
    on_core = timing.deep_dives(cells)[at] is None
    assert on_core == (ex.path == "core"), path.name


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_the_task_and_the_starting_point_follow_the_marker(exercise_id):
    ex = EXERCISES[exercise_id]
    path, cells, at = _where(exercise_id)
    code = [(i, _source(c)) for i, c in enumerate(cells) if c["cell_type"] == "code" and i > at][:2]
    assert f'get_exercise("{exercise_id}")' in code[0][1], path.name
    start = code[1][1]
    assert start.rstrip().endswith(f'check({ex.name}, "{exercise_id}")'), path.name
    if isinstance(ex, Reading):
        # the run the student makes may come first; the reading itself is left open on its own line
        assert re.search(rf"^{ex.name} = \.\.\.", start, re.M), path.name
        return
    assert f"def {ex.name}(" in start, path.name
    if ex.kind == "debug":  # the buggy function exactly as registered: the page and the grader agree
        assert ex.template.strip() in start, f"{path.name}: the buggy function differs from the registered one"
        return
    body = start.split(f"def {ex.name}(")[1].split("check(")[0]
    assert not re.search(r"^\s+return\b", body, re.M), f"{path.name}: the solution is on the page"


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_a_markdown_cell_after_the_exercise_points_to_reveal_solution(exercise_id):
    path, cells, at = _where(exercise_id)
    later = [_source(c) for c in cells[at + 1:] if c["cell_type"] == "markdown"]
    assert any(f'reveal_solution("{exercise_id}")' in text for text in later), path.name


@pytest.mark.parametrize("notebook", sorted({ex.notebook for ex in EXERCISES.values()}))
def test_the_page_never_shows_a_solution_nor_promises_the_expected_answer(notebook):
    path, cells = _notebook(notebook)
    everything = "".join(_source(c) for c in cells)
    assert "labkit.course.solutions" not in everything, f"{path.name}: names the solutions' module"
    first = min(i for i, c in enumerate(cells) if timing.exercise_marker(c))
    text = " ".join(_source(c) for c in cells[first:] if c["cell_type"] == "markdown")
    assert "expected" not in text.lower(), f"{path.name}: a failure never shows what was expected"
    last = max(i for i, c in enumerate(cells) if timing.exercise_marker(c))
    assert any(c["cell_type"] == "code" for c in cells[last:]), f"{path.name}: ends with no exercise"
    assert all(c["cell_type"] == "markdown" or 'check(' in _source(c) or "get_exercise(" in _source(c)
               or i > last for i, c in enumerate(cells) if i >= first), \
        f"{path.name}: lesson code among the exercises (only a capstone's run may follow its check)"


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_the_solved_cell_is_python_that_still_ends_in_the_check(exercise_id):
    """What benchmarks/notebook_budget.py --solutions runs in place of the starting point."""
    ex = EXERCISES[exercise_id]
    path, cells, at = _where(exercise_id)
    start = [_source(c) for i, c in enumerate(cells) if c["cell_type"] == "code" and i > at][1]
    solved = solved_cell(exercise_id, start)
    ast.parse(solved)
    assert solved.rstrip().endswith(f'check({ex.name}, "{exercise_id}")')
    assert "# your code here" not in solved and f"{ex.name} = ...  #" not in solved
    if isinstance(ex, Reading):
        assert f"{ex.name} = {ex.measure.__name__}()" in solved


def test_a_cell_that_is_not_the_exercise_is_refused():
    with pytest.raises(ValueError, match="source: not exercise 01a's cell"):
        solved_cell("01a", "x = 1")
