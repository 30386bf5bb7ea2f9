"""How long a notebook takes a learner: one rule applied to the notebook's content, and the
workshop plans built from its minutes.

The rule reads a notebook's JSON with its stored outputs and adds up

    prose words / PROSE_WPM + printed words / OUTPUT_WPM + code words / CODE_WPM
    + CHART_MIN per chart + PREDICTION_MIN per prediction block + EXERCISE_MINUTES[kind] per exercise

over the core path and over the deep dives separately, charges the compute time COMPUTE_MIN to
the core path, and rounds each of the two UP to a multiple of ROUND_TO minutes; the total is
their sum. The constants, and why:

* PROSE_WPM = 120 words a minute for Markdown prose. Adults read English non-fiction silently
  at 238 words a minute on average (Brysbaert 2019, "How many words do we read per minute?",
  J. Memory and Language 109, 104047; range 175-300, slower in a second language). Reading to
  learn is slower: Carver (1992, "Reading rate: theory, research, and practical implications",
  J. Reading 36(2)) puts studying at about 200 and memorising at about 138. This prose carries
  formulas and numbers to find again in the outputs, for readers many of whom read English as a
  second language: a little below the memorising pace.
* OUTPUT_WPM = 240 for printed output (streams, tables, the text of results): it is read to find
  the numbers the prose quotes, not word by word, at about the ordinary non-fiction pace
  (Brysbaert's 238), slower than Carver's skimming (about 450) because a table's numbers are
  compared across rows.
* CODE_WPM = 120 for the source of code cells: each is read once before it runs. No published
  pace for code fits better, and code is not read faster than prose (eye tracking reads it less
  linearly: Busjahn et al. 2015, ICPC), so it gets the prose pace.
* CHART_MIN = 1 minute per chart (an output with a picture) or widget (a dashboard counts as one
  interactive chart): a title, two axis titles and a legend to read, then the pattern the prose
  points at to find; the moves of a dashboard's controls are the prediction block's.
* PREDICTION_MIN = 3 minutes per "Predict, then move" block, besides its words: enter a guess
  (about 30 s), move the control 2-4 times and look at each redraw (about 1.5 minutes; a redraw
  itself is under 1 s, benchmarks/slider_latency.py), compare the reveal with the guess (about
  1 minute).
* EXERCISE_MINUTES per exercise (a Markdown cell starting with ``<!-- exercise ID -->``, ID the
  exercise's id such as ``01b``), by its kind, besides its words:
  implement 15 (write a short function from its formula and run the checker until it passes,
  one or two hints); find the bug 10 (read a given function of 10-20 lines against its statement,
  find the one planted mistake, fix a line or two, check); run and interpret 10 (run one cell at
  the named settings, find the number or pattern asked for in its output, enter it; the run
  itself is seconds); capstone 30 (write a loss or a training loop of 20-40 lines, pass its
  checker, then train with it and read the result, a minute or two of it the run's).
* COMPUTE_MIN = 0.5: the project holds every notebook to at most 30 s on two cores (timed with
  scripts/execute_notebooks.py; benchmarks/notebook_budget.py reports wall time and memory); the
  whole budget is charged, to the core path.

The plans (data/course/plans.csv, one row per block: plan, order, notebook, what = core | all |
exercise-only | a deep dive's title, break_after minutes, note) carry no times: ``plan`` adds the
rule's minutes from each plan's start (PLAN_SETTINGS) and refuses a plan longer than its length.

What counts: Markdown words without HTML comments (a word is any run of non-space characters with
a letter or digit in it, so a number is a word and a rule line ``----`` is not); the words of
stream outputs and of results' text (their Markdown where they have one, which is what Jupyter
shows, else their plain text); one chart per output holding a picture or a widget (its placeholder
text is not read); the words of code cells' source. Prediction blocks are Markdown cells
containing "Predict, then move".

Core path and deep dives (the workshop's marker convention): a Markdown cell whose source starts
with the line ``<!-- deep-dive -->`` opens a deep dive (its heading names it); it runs until the
next Markdown cell starting with ``<!-- core -->`` or with the marker of an exercise on the core
path, or the notebook's end. Everything else is the core path. An exercise on the core path
(its registered ``path``) must sit there and a deep-dive exercise inside a deep dive; its own
minutes run from its marker to the next marker of any kind.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from labkit.core.checks import check_choice
from labkit.core.paths import data_path, require_data

PROSE_WPM = 120
OUTPUT_WPM = 240
CODE_WPM = 120
CHART_MIN = 1.0
PREDICTION_MIN = 3.0
EXERCISE_MINUTES = {"implement": 15.0, "debug": 10.0, "interpret": 10.0, "capstone": 30.0}
COMPUTE_MIN = 0.5
ROUND_TO = 5

DEEP_DIVE, CORE = "<!-- deep-dive -->", "<!-- core -->"
_EXERCISE = re.compile(r"<!-- exercise (\d\d[a-z]) -->")
PREDICT = "Predict, then move"
PICTURES = ("image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json")
# what scripts/execute_notebooks.py stores in place of a live chart or widget
PLACEHOLDERS = ("[interactive chart or widget: run the cell to display it]",
                "[interactive widget: run the cell to display it]")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"   # a clone's notebooks/
PLANS_CSV = ("course", "plans.csv")
PLAN_NAMES = ("three-hour", "full-day")
# each plan's title, length in minutes (breaks included) and clock time of its start
PLAN_SETTINGS = {"three-hour": ("Three-hour workshop", 180, "09:00"),
                 "full-day": ("Full-day workshop", 510, "09:00")}
PARTS = ("core", "all", "exercise-only")   # or a deep dive's title

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TIME = re.compile(r"Time: about (\d+) minutes(?: \(core path (\d+) minutes; deep dives (\d+) minutes\))?")


def count_words(text: str) -> int:
    """The number of words in ``text``: runs of non-space characters holding a letter or digit."""
    return sum(any(ch.isalnum() for ch in token) for token in text.split())


@dataclass(frozen=True)
class Parts:
    """What the rule counts in a stretch of a notebook; ``minutes`` is the rule's sum (unrounded,
    compute not included)."""

    prose_words: int = 0
    output_words: int = 0
    code_words: int = 0
    charts: int = 0
    predictions: int = 0
    exercises: int = 0
    exercise_minutes: float = 0.0

    def __add__(self, other: Parts) -> Parts:
        return Parts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def minutes(self) -> float:
        return (self.prose_words / PROSE_WPM + self.output_words / OUTPUT_WPM + self.code_words / CODE_WPM
                + self.charts * CHART_MIN + self.predictions * PREDICTION_MIN + self.exercise_minutes)


def round_up(minutes: float) -> int:
    """``minutes`` rounded up to a multiple of ROUND_TO (0 stays 0)."""
    return ROUND_TO * math.ceil(round(minutes, 6) / ROUND_TO)


@dataclass(frozen=True)
class NotebookTime:
    """A notebook's time by the rule: ``core``, ``optional`` (the deep dives) and ``total``
    minutes (each of the first two rounded up to ROUND_TO), the counts behind them, each deep
    dive's minutes by title (``sections``, rounded up alike), the core path's exercises'
    (``exercise``: from each core exercise's marker to the next marker, summed, rounded up) and
    each exercise's own by id (``exercises``: from its marker to the next marker, rounded up)."""

    notebook: str
    title: str
    core: int
    optional: int
    total: int
    core_parts: Parts
    optional_parts: Parts
    compute_minutes: float = COMPUTE_MIN
    sections: dict[str, int] = field(default_factory=dict)
    exercise: int = 0
    exercises: dict[str, int] = field(default_factory=dict)


def _text(source) -> str:
    return source if isinstance(source, str) else "".join(source)


def _marker(cell: dict) -> str | None:
    """The marker a Markdown cell starts with (deep-dive, core, or an exercise's: its id), else None."""
    if cell.get("cell_type") != "markdown":
        return None
    first = _text(cell.get("source", "")).lstrip("\n").split("\n", 1)[0].strip()
    exercise = _EXERCISE.fullmatch(first)
    return exercise.group(1) if exercise else first if first in (DEEP_DIVE, CORE) else None


def exercise_marker(cell: dict) -> str | None:
    """The id of the exercise whose marker a Markdown cell starts with, else None."""
    marker = _marker(cell)
    return None if marker in (None, DEEP_DIVE, CORE) else marker


def _exercise(exercise_id: str):
    """The registered exercise of a marker (imported here: the registry imports this rule)."""
    from labkit.course.exercises import EXERCISES
    if exercise_id not in EXERCISES:
        raise ValueError(f"cells: the marker names exercise {exercise_id!r}, which is not registered "
                         f"(known: {list(EXERCISES)})")
    return EXERCISES[exercise_id]


def _output_parts(output: dict) -> Parts:
    kind = output.get("output_type")
    if kind == "stream":
        return Parts(output_words=count_words(_text(output.get("text", ""))))
    if kind not in ("execute_result", "display_data"):
        return Parts()   # errors: a stored notebook has none worth reading
    data = output.get("data", {})
    plain = _text(data.get("text/plain", "")).strip()
    if any(k in data for k in PICTURES) or plain in PLACEHOLDERS:
        return Parts(charts=1)
    text = _COMMENT.sub("", _text(data["text/markdown"])) if "text/markdown" in data else plain
    return Parts(output_words=count_words(text))


def cell_parts(cell: dict) -> Parts:
    """What the rule counts in one notebook cell (its outputs included)."""
    source = _text(cell.get("source", ""))
    if cell.get("cell_type") == "markdown":
        exercise = exercise_marker(cell)
        return Parts(prose_words=count_words(_COMMENT.sub("", source)), predictions=int(PREDICT in source),
                     exercises=int(exercise is not None),
                     exercise_minutes=_exercise(exercise).minutes if exercise else 0.0)
    if cell.get("cell_type") != "code":
        return Parts()
    parts = Parts(code_words=count_words(source))
    for output in cell.get("outputs", []):
        parts = parts + _output_parts(output)
    return parts


def _deep_dive_title(cell: dict, n: int) -> str:
    for line in _text(cell["source"]).splitlines():
        if line.startswith("#"):
            return re.sub(r"\s*\(optional\)\s*", " ", line.lstrip("#")).strip()
    return f"deep dive {n}"


def _read(path) -> dict:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path: expected a path to a .ipynb file, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no notebook at {path}")
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"path: {path} is not a notebook's JSON ({err})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"path: {path} has no list of cells")
    return nb


def _title(cells: list[dict], stem: str) -> str:
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for line in _text(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return re.sub(r"^\d\d\s*·\s*", "", line[2:].strip())
    return stem


def deep_dives(cells: list[dict]) -> list[str | None]:
    """For each cell, the title of the deep dive it belongs to, or None on the core path, by the
    marker convention above. Raises if two deep dives share a title, or if a deep-dive exercise
    sits on the core path."""
    where, seen = [], set()
    title = None
    for cell in cells:
        marker = _marker(cell)
        if marker == DEEP_DIVE:
            title = _deep_dive_title(cell, len(seen) + 1)
            if title in seen:
                raise ValueError(f"cells: two deep dives are titled {title!r}")
            seen.add(title)
        elif marker == CORE:
            title = None
        elif marker is not None:  # an exercise: a core one returns to the core path
            if _exercise(marker).path == "core":
                title = None
            elif title is None:
                raise ValueError(f"cells: exercise {marker} is a deep dive but sits on the core path "
                                 f"(open a deep dive before it)")
        where.append(title)
    return where


def notebook_time(path) -> NotebookTime:
    """The rule's time for the notebook at ``path`` (a .ipynb file, read with its stored outputs)."""
    nb = _read(path)
    path = Path(path)
    core, optional, exercise, sections = Parts(), Parts(), Parts(), {}
    try:
        where = deep_dives(nb["cells"])
    except ValueError as err:
        raise ValueError(f"path: {path.name}: {err}") from None
    current, own = None, {}  # the exercise a cell belongs to; each exercise's parts
    for cell, title in zip(nb["cells"], where):
        marker = _marker(cell)
        if marker is not None:
            current = exercise_marker(cell)
        parts = cell_parts(cell)
        if current is not None:
            own[current] = own.get(current, Parts()) + parts
        if title is not None:
            optional, sections[title] = optional + parts, sections.get(title, Parts()) + parts
        else:
            core = core + parts
            if current is not None:
                exercise = exercise + parts
    c, o = round_up(core.minutes + COMPUTE_MIN), round_up(optional.minutes)
    return NotebookTime(notebook=path.stem[:2], title=_title(nb["cells"], path.stem), core=c, optional=o,
                        total=c + o, core_parts=core, optional_parts=optional,
                        sections={k: round_up(v.minutes) for k, v in sections.items()},
                        exercise=round_up(exercise.minutes),
                        exercises={k: round_up(v.minutes) for k, v in own.items()})


def _notebooks(folder) -> list[Path]:
    folder = NOTEBOOKS if folder is None else Path(folder)
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"folder: no notebooks named NN_*.ipynb in {folder} (the course's "
                                "notebooks/ folder of a clone)")
    return paths


def course_times(folder=None) -> pd.DataFrame:
    """One row per notebook of ``folder`` (default: the clone's notebooks/): notebook, title,
    core, optional, total minutes and the counts of the whole notebook behind them."""
    rows = []
    for path in _notebooks(folder):
        t = notebook_time(path)
        counts = t.core_parts + t.optional_parts
        rows.append({"notebook": t.notebook, "title": t.title, "core": t.core, "optional": t.optional,
                     "total": t.total, **{f.name: getattr(counts, f.name) for f in fields(counts)}})
    return pd.DataFrame(rows)


class StatedTime(NamedTuple):
    """A notebook's stated minutes: core path and deep dives."""

    core: int
    optional: int


def stated_time(path) -> StatedTime:
    """The time a notebook states in its first three Markdown cells: "Time: about N minutes (core
    path M minutes; deep dives K minutes)." gives (M, K); the older "Time: about N minutes." gives
    (N, 0). Raises ValueError if there is no such line or N is not M + K."""
    nb = _read(path)
    markdown = [_text(c.get("source", "")) for c in nb["cells"] if c.get("cell_type") == "markdown"]
    m = _TIME.search("\n".join(markdown[:3]))
    if m is None:
        raise ValueError(f"path: {Path(path).name} states no 'Time: about N minutes' in its first three "
                         "Markdown cells")
    total, core, optional = m.groups()
    if core is None:
        return StatedTime(int(total), 0)
    if int(total) != int(core) + int(optional):
        raise ValueError(f"path: {Path(path).name} states about {total} minutes, but core {core} + deep dives "
                         f"{optional} = {int(core) + int(optional)}")
    return StatedTime(int(core), int(optional))


def time_line(t: NotebookTime) -> str:
    """The "Time: ..." line a notebook should carry for the rule's time ``t``."""
    if not t.optional:
        return f"Time: about {t.total} minutes."
    return f"Time: about {t.total} minutes (core path {t.core} minutes; deep dives {t.optional} minutes)."


def exercise_line(exercise_id: str, minutes: int) -> str:
    """The line under an exercise's heading stating its kind, the rule's ``minutes`` for it and
    its path, e.g. "*Find the bug · about 15 minutes · deep dive*"."""
    from labkit.course.exercises import KINDS
    ex = _exercise(exercise_id)
    path = "core path" if ex.path == "core" else "deep dive"
    return f"*{KINDS[ex.kind].capitalize()} \u00b7 about {minutes} minutes \u00b7 {path}*"


_EXERCISE_LINE = re.compile(r"^\*[A-Z][a-z ]+ \u00b7 about \d+ minutes \u00b7 (core path|deep dive)\*$", re.M)


def with_exercise_line(source: str, line: str) -> str:
    """An exercise's marker cell ``source`` with its stated line replaced by ``line`` (or added
    under the heading, the first line starting with #, when it has none)."""
    if _EXERCISE_LINE.search(source):
        return _EXERCISE_LINE.sub(line, source, count=1)
    lines = source.split("\n")
    at = next((i for i, x in enumerate(lines) if x.startswith("#")), 0)
    return "\n".join(lines[: at + 1] + ["", line] + lines[at + 1:])


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _part_minutes(t: NotebookTime, part: str, where: str) -> int:
    if part == "core":
        return t.core
    if part == "all":
        return t.total
    if part == "exercise-only":
        if not t.exercise:
            raise ValueError(f"{where}: notebook {t.notebook} has no exercise")
        return t.exercise
    if part not in t.sections:
        raise ValueError(f"{where}: part {part!r} is none of {PARTS} nor a deep dive of notebook {t.notebook} "
                         f"(its deep dives: {sorted(t.sections) or 'none'})")
    return t.sections[part]


def read_plans(path=None) -> pd.DataFrame:
    """The plans' rows (data/course/plans.csv unless ``path``): plan, order, notebook, what,
    break_after (minutes), note; checked for columns, plan names and whole minutes."""
    path = require_data(data_path(*PLANS_CSV), "the workshop plans") if path is None else Path(path)
    rows = pd.read_csv(path, dtype={"notebook": str, "what": str, "note": str}, keep_default_na=False)
    missing = {"plan", "order", "notebook", "what", "break_after", "note"} - set(rows.columns)
    if missing:
        raise ValueError(f"path: {path} lacks the columns {sorted(missing)}")
    for i, row in rows.iterrows():
        where = f"{path.name} row {i + 2}"   # the line in the file, after its header
        check_choice(f"{where} plan", row.plan, PLAN_NAMES)
        if not re.fullmatch(r"\d\d", row.notebook):
            raise ValueError(f"{where} notebook: expected two digits such as '01', got {row.notebook!r}")
        for column in ("order", "break_after"):
            if not re.fullmatch(r"\d+", str(row[column])):
                raise ValueError(f"{where} {column}: expected whole minutes or a whole number, got {row[column]!r}")
    rows = rows.astype({"order": int, "break_after": int})
    twice = rows[rows.duplicated(["plan", "order"])]
    if len(twice):
        raise ValueError(f"path: {path.name} repeats order {twice.order.iloc[0]} in plan {twice.plan.iloc[0]!r}")
    return rows.sort_values(["plan", "order"], ignore_index=True)


def plan(name: str, *, folder=None, plans=None) -> pd.DataFrame:
    """The plan ``name`` (one of PLAN_NAMES) as a timetable: one row per block and per break, with
    start and end clock times from the rule's minutes (columns start, end, notebook, title, part,
    minutes, note). ``folder``: the notebooks (default the clone's); ``plans``: the CSV (default
    data/course/plans.csv). Raises ValueError if the plan does not fit its length."""
    check_choice("name", name, PLAN_NAMES)
    title, length, start = PLAN_SETTINGS[name]
    rows = read_plans(plans)
    rows = rows[rows.plan == name]
    if rows.empty:
        raise ValueError(f"name: no rows for plan {name!r} in the plans' CSV")
    paths = {p.stem[:2]: p for p in _notebooks(folder)}
    h, m = map(int, start.split(":"))
    clock, out = 60 * h + m, []
    for row in rows.itertuples():
        where = f"plan {name!r} order {row.order}"
        if row.notebook not in paths:
            raise ValueError(f"{where}: no notebook {row.notebook} among {sorted(paths)}")
        t = notebook_time(paths[row.notebook])
        minutes = _part_minutes(t, row.what, where)
        out.append({"start": _clock(clock), "end": _clock(clock + minutes), "notebook": t.notebook,
                    "title": t.title, "part": row.what, "minutes": minutes, "note": row.note})
        clock += minutes
        if row.break_after:
            kind = "Lunch" if row.break_after >= 45 else "Break"
            out.append({"start": _clock(clock), "end": _clock(clock + row.break_after), "notebook": "",
                        "title": kind, "part": "break", "minutes": row.break_after, "note": ""})
            clock += row.break_after
    used = clock - (60 * h + m)
    if used > length:
        raise ValueError(f"name: the {name} plan takes {used} minutes by the rule's times, more than its "
                         f"{length}; drop or shorten a block in {PLANS_CSV[-1]}")
    return pd.DataFrame(out)


def plan_markdown(name: str, *, folder=None, plans=None) -> str:
    """A Markdown page for the plan ``name``: title, length, the timetable (breaks as rows, what to
    skip in each block's note) and the notebooks it leaves out with their core minutes."""
    table = plan(name, folder=folder, plans=plans)
    title, length, start = PLAN_SETTINGS[name]
    content = int(table.loc[table.part != "break", "minutes"].sum())
    lines = [f"# {title}", "",
             f"{length // 60} h {length % 60:02d} min from {start} ({table.end.iloc[-1]} by the plan): "
             f"{content} minutes of notebooks, {int(table.minutes.sum()) - content} minutes of breaks. "
             "Minutes come from the course's timing rule (`labkit.course.timing`): a learner's reading, "
             "charts, predictions and the exercise, rounded up to 5 minutes.", "",
             "| Start | End | Notebook | Part | Minutes | Note |", "|---|---|---|---|---|---|"]
    for r in table.itertuples():
        what = f"**{r.title}**" if r.part == "break" else f"{r.notebook} · {r.title}"
        lines.append(f"| {r.start} | {r.end} | {what} | {'' if r.part == 'break' else r.part} | {r.minutes} "
                     f"| {r.note} |")
    times = course_times(folder)
    left = times[~times.notebook.isin(set(table.notebook))]
    if len(left):
        lines += ["", "Not in this plan (core minutes by the rule; for another day or self-study): "
                  + "; ".join(f"{r.notebook} · {r.title} ({r.core})" for r in left.itertuples()) + "."]
    return "\n".join(lines) + "\n"


def times_table(folder=None) -> str:
    """The rule's table for every notebook of ``folder`` as text: its counts, core, optional and
    total minutes, the time the notebook states now, and the "Time:" line it should carry."""
    times = course_times(folder)
    stated = []
    for path in _notebooks(folder):
        try:
            stated.append("{} + {}".format(*stated_time(path)))
        except ValueError:
            stated.append("none")
    times["stated"] = stated
    times["time_line"] = [time_line(notebook_time(p)) for p in _notebooks(folder)]
    sums = times[["core", "optional", "total"]].sum()
    return (times.drop(columns="title").to_string(index=False)
            + f"\nsum: core {sums.core}, optional {sums.optional}, total {sums.total} minutes\n")
