"""Every notebook from 00 to 11 ends with its exercise: the task, the reader's empty function and
check(); its last Markdown cell points to ``reveal_solution(<n>)`` for the reference solution,
which is never written on the page nor imported by name, and the exercise's text never promises
to show what was expected (a failure shows the hint, the smallest failing case and the reader's
own answer)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit.course.exercises import EXERCISES

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"


def _cells(key: str):
    path = next(NOTEBOOKS.glob(f"{key}_*.ipynb"))
    return path, json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_the_notebook_ends_with_its_exercise(key):
    ex = EXERCISES[key]
    path, cells = _cells(key)
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert f"get_exercise({int(key)})" in code[-2], path.name
    assert f"def {ex.name}(" in code[-1] and code[-1].rstrip().endswith(f"check({ex.name}, {int(key)})"), path.name
    body = code[-1].split(f"def {ex.name}(")[1].split("check(")[0]
    assert not re.search(r"^\s+return\b", body, re.M), f"{path.name}: the solution is on the page"


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_the_last_markdown_cell_points_to_reveal_solution(key):
    path, cells = _cells(key)
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert f"reveal_solution({int(key)})" in markdown[-1], path.name
    everything = "".join("".join(c["source"]) for c in cells)
    assert "labkit.course.solutions" not in everything, f"{path.name}: names the solutions' module"


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_the_exercise_text_does_not_promise_the_expected_answer(key):
    path, cells = _cells(key)
    start = max(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("<!-- exercise -->"))
    text = " ".join("".join(c["source"]) for c in cells[start:] if c["cell_type"] == "markdown")
    assert "expected" not in text.lower(), f"{path.name}: a failure no longer shows what was expected"
