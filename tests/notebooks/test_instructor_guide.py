"""The instructor's guide (notebooks/guide/instructors.md) and the course outline
(data/course/outline.csv) follow the notebooks they describe: one guide section per notebook, in
course order, titled as the notebook's first heading, each with the same five parts; every control
the guide tells an instructor to move exists in that notebook's code; the exercises' part has one
paragraph per exercise registered for the notebook, led by its id and kind; no measured number is
quoted (numbers live in the notebooks that compute them); the outline has one row per notebook and its
prerequisites point only backwards. Reads files only: no notebook is run."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from labkit.course.exercises import EXERCISES, KINDS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
GUIDE = ROOT / "notebooks" / "guide" / "instructors.md"
OUTLINE = ROOT / "data" / "course" / "outline.csv"
PARTS = ("Learning goals", "The misconception it targets", "Move this live", "Discussion prompts",
         "The exercises' key points")
EXERCISE_PART = PARTS[-1]
# a paragraph of the exercises' part opens with its lead: **01b, find the bug.**
LEAD = re.compile(r"^\*\*(\d\d[a-z]), ([a-z ]+)\.\*\*", flags=re.M)
# a decimal point between digits, or a leading one (".5"); "2,000" and "1." at a sentence's end are not
DECIMAL = re.compile(r"\d\.\d|(?<![\w.])\.\d")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def _title(path: Path) -> tuple[str, str]:
    """(number, title) from the notebook's first heading, ``# NN · Title``."""
    for cell in _cells(path):
        if cell["cell_type"] != "markdown":
            continue
        for line in _source(cell).splitlines():
            m = re.match(r"#\s+(\d\d)\s+·\s+(.+?)\s*$", line)
            if m:
                return m.group(1), m.group(2)
    raise AssertionError(f"{path.name}: no '# NN · Title' heading")


def _code(path: Path) -> str:
    return "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every ``## `` section, in order; the preface before the first is dropped."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


def _parts(body: str) -> list[tuple[str, str]]:
    """(heading, body) of every ``### `` part of one section, in order."""
    parts = re.split(r"^### (.+)$", body, flags=re.M)
    return [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


@pytest.fixture(scope="module")
def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sections(guide) -> dict[str, dict[str, str]]:
    """Notebook number -> {part heading: part body}."""
    out = {}
    for heading, body in _sections(guide):
        number = heading.split(" ", 1)[0]
        out[number] = dict(_parts(body))
    return out


def test_there_are_twelve_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(12)]


def test_one_section_per_notebook_in_course_order(guide):
    assert guide.lstrip().startswith("# "), "the guide opens with its title, then the preface"
    preface = guide.split("\n## ", 1)[0]
    assert len(preface.split()) > 100, "the preface (how to use the guide) is missing or too short"
    for phrase in ("core path", "deep dive", "Predict, then move", "three-hour", "full-day"):
        assert phrase.lower() in preface.lower(), f"the preface does not mention {phrase!r}"
    headings = [h for h, _ in _sections(guide)]
    expected = ["{} · {}".format(*_title(p)) for p in NOTEBOOKS]
    assert headings == expected


def test_each_section_has_the_five_parts_in_order(sections):
    for number, parts in sections.items():
        assert tuple(parts) == PARTS, f"section {number}: parts {list(parts)}"
        for name, body in parts.items():
            assert body.strip(), f"section {number}: '{name}' is empty"


def test_discussion_prompts_are_two_to_four_questions(sections):
    for number, parts in sections.items():
        prompts = [line for line in parts["Discussion prompts"].splitlines() if line.startswith("* ")]
        assert 2 <= len(prompts) <= 4, f"section {number}: {len(prompts)} discussion prompts"


def test_move_this_live_names_controls_the_notebook_builds(sections):
    """Every name quoted in backticks under "Move this live" is a control's label, found (case
    aside) in that notebook's code; each section names at least one and points to the reveal."""
    for path in NOTEBOOKS:
        number, _ = _title(path)
        live = sections[number]["Move this live"]
        names = re.findall(r"`([^`]+)`", live)
        assert names, f"section {number}: 'Move this live' names no control in backticks"
        code = _code(path).lower()
        for name in names:
            assert "\n" not in name, f"section {number}: a control name breaks across lines: {name!r}"
            assert name.lower() in code, f"section {number}: no control {name!r} in {path.name}'s code"
        assert "reveal after the prediction block gives the numbers" in " ".join(live.split()), \
            f"section {number}: 'Move this live' does not point to the notebook's reveal"


def test_exercise_part_names_every_exercise_and_its_kind(sections):
    """Each notebook's exercises' part has one paragraph per exercise registered for that notebook,
    in letter order, led by the exercise's id and its kind as the course names it (KINDS); no
    paragraph names an exercise that is not registered."""
    for path in NOTEBOOKS:
        number, _ = _title(path)
        want = [(key, KINDS[ex.kind]) for key, ex in sorted(EXERCISES.items()) if key[:2] == number]
        assert want, f"notebook {number}: no registered exercise"
        got = LEAD.findall(sections[number][EXERCISE_PART])
        assert got == want, f"section {number}: exercise paragraphs led by {got}, registered {want}"


def test_no_measured_numbers_in_the_guide(guide):
    hits = [line.strip() for line in guide.splitlines() if DECIMAL.search(line)]
    assert not hits, f"numbers with a decimal point belong in the notebooks: {hits[:5]}"


def test_sections_are_a_readable_length(sections):
    # the exercises' part holds a paragraph for each of a notebook's three exercises, not one, so a
    # section runs to about 600-750 words; the bound still catches a part that sprawls or is missing
    for number, parts in sections.items():
        words = sum(len(body.split()) for body in parts.values())
        assert 200 <= words <= 800, f"section {number}: {words} words"


def _outline() -> list[dict[str, str]]:
    with OUTLINE.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["notebook", "question", "prerequisites"]
        return list(reader)


def test_outline_has_one_row_per_notebook():
    rows = _outline()
    assert [r["notebook"] for r in rows] == [_title(p)[0] for p in NOTEBOOKS]
    for r in rows:
        q = r["question"].strip()
        assert q and q.endswith("?"), f"notebook {r['notebook']}: the question should be one question"
        assert q.count("?") == 1 and "\n" not in q, f"notebook {r['notebook']}: one sentence, please"


def test_outline_prerequisites_point_backwards():
    rows = _outline()
    numbers = [r["notebook"] for r in rows]
    for r in rows:
        prereqs = r["prerequisites"].split()
        assert len(set(prereqs)) == len(prereqs), f"notebook {r['notebook']}: a prerequisite repeats"
        for p in prereqs:
            assert re.fullmatch(r"\d\d", p), f"notebook {r['notebook']}: prerequisite {p!r} is not two digits"
            assert p in numbers and p < r["notebook"], \
                f"notebook {r['notebook']}: prerequisite {p} is not an earlier notebook"
    assert rows[0]["prerequisites"] == ""
    assert rows[1]["prerequisites"] in ("", "00")
