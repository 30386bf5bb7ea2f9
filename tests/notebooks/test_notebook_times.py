"""Every notebook states the time the course's timing rule gives it (labkit.course.timing): its
"Time:" line's core path and deep-dive minutes are the rule's, read from the stored outputs.
When a notebook's content changes, rerun `python scripts/course_times.py` and copy its line."""
from pathlib import Path

import pytest

from labkit.course import timing

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TABLE = Path("/tmp/course_times.txt")


def test_the_rules_table_is_printed_for_whoever_updates_the_time_lines():
    table = timing.times_table(ROOT / "notebooks")
    print(table)
    try:
        TABLE.write_text(table)
    except OSError:   # a read-only /tmp does not fail the course
        pass
    assert table.count("\n") == len(NOTEBOOKS) + 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stated_time_is_the_rules(path):
    rule = timing.notebook_time(path)
    stated = timing.stated_time(path)
    assert stated == (rule.core, rule.optional), (
        f"{path.name} states core {stated.core} + deep dives {stated.optional} minutes; the rule gives "
        f"{rule.core} + {rule.optional}: write '{timing.time_line(rule)}'")
