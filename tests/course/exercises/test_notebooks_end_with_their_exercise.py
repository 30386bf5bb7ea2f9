"""Every notebook from 00 to 11 ends with its exercise: the task, the reader's empty function and
check(); the reference solution is named in the text, never written on the page."""
from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.course.exercises import EXERCISES

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"


def test_every_notebook_from_00_to_11_ends_with_its_exercise():
    for key, ex in EXERCISES.items():
        path = next(NOTEBOOKS.glob(f"{key}_*.ipynb"))
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert f"get_exercise({int(key)})" in code[-2], path.name
        assert f"def {ex.name}(" in code[-1] and code[-1].rstrip().endswith(f"check({ex.name}, {int(key)})"), path.name
        assert f"labkit.course.solutions.{ex.name}" in text, path.name
        body = code[-1].split(f"def {ex.name}(")[1].split("check(")[0]
        assert not re.search(r"^\s+return\b", body, re.M), f"{path.name}: the solution is on the page"
