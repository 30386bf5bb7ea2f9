"""Print the course's times by labkit.course.timing's rule (one row per notebook, with the time each
notebook states now and the "Time:" line it should carry) and the workshop plans; with --write,
first bring every notebook's stated times up to date: its "Time:" line and the line under each
exercise's heading (kind, minutes, path).
Usage: python scripts/course_times.py [--out FILE] [--write]   (FILE also gets the table)
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat

from labkit.course import timing

_STATED = re.compile(r"Time: about \d+ minutes(?: \(core path \d+ minutes; deep dives \d+ minutes\))?\.")


def write_stated_times(folder: Path = timing.NOTEBOOKS) -> list[str]:
    """Rewrite the stated times of every notebook of ``folder`` until they agree with the rule (a
    line first added changes the words it counts, so it takes a second pass). Returns the names
    of the notebooks changed."""
    changed = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        for _ in range(3):
            nb = nbformat.read(path, as_version=4)
            t = timing.notebook_time(path)
            before = [c.source for c in nb.cells]
            for cell in nb.cells[:4]:
                if cell.cell_type == "markdown" and _STATED.search(cell.source):
                    cell.source = _STATED.sub(timing.time_line(t), cell.source, count=1)
                    break
            for cell in nb.cells:
                exercise = timing.exercise_marker(cell)
                if exercise:
                    cell.source = timing.with_exercise_line(cell.source,
                                                           timing.exercise_line(exercise, t.exercises[exercise]))
            if [c.source for c in nb.cells] == before:
                break
            nbformat.write(nb, path)
            changed.append(path.name)
    return sorted(set(changed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--write", action="store_true", help="first update the times the notebooks state")
    args = parser.parse_args()
    if args.write:
        print("updated:", ", ".join(write_stated_times()) or "none")
    table = timing.times_table()
    print(table)
    if args.out:
        args.out.write_text(table)
    for name in timing.PLAN_NAMES:
        print(timing.plan_markdown(name))


if __name__ == "__main__":
    main()
