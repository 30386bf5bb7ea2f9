"""Execute notebooks top to bottom once, seeded, and store their outputs in place.

This is the one scripted execution whose outputs nbval compares against (`make notebooks`):
text for exact numbers, and data/notebook_checks/*.json for the learned numbers a cell checks
within a band (the bands themselves are kept; scripts/measure_check_spread.py measures them).
Usage: python scripts/execute_notebooks.py [notebooks/01_*.ipynb ...]   (default: all)
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PLACEHOLDER = "[interactive chart or widget: run the cell to display it]"


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    os.environ.setdefault("PYTHONHASHSEED", "0")
    # Banded checks (labkit.course.bands) store this run's numbers in data/notebook_checks/.
    os.environ["LABKIT_RECORD_CHECKS"] = "1"
    # Widget state is not stored: altair's offline chart widget carries its ~1 MB JavaScript
    # bundle in that state, once per chart, which would bloat every commit of a notebook.
    client = NotebookClient(nb, kernel_name="python3", timeout=600, store_widget_state=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:  # keep stored notebooks free of run-specific metadata
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):  # no stored state to show it from: say so
                out["data"] = {"text/plain": PLACEHOLDER}
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> None:
    paths = [Path(a).resolve() for a in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for p in paths:
        print(f"{p.name}: executed in {execute(p):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
