"""Print the course's times by labkit.course.timing's rule (one row per notebook, with the time each
notebook states now and the "Time:" line it should carry) and the workshop plans.
Usage: python scripts/course_times.py [--out FILE]   (FILE also gets the table)
"""
from __future__ import annotations

import argparse
from pathlib import Path

from labkit.course import timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    table = timing.times_table()
    print(table)
    if args.out:
        args.out.write_text(table)
    for name in timing.PLAN_NAMES:
        print(timing.plan_markdown(name))


if __name__ == "__main__":
    main()
