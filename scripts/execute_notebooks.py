"""Execute notebooks top to bottom once, seeded, and store their outputs in place.

This is the one scripted execution whose outputs nbval compares against (`make notebooks`):
text for exact numbers, and data/notebook_checks/*.json for the learned numbers a cell checks
within a band (the bands themselves are kept; scripts/measure_check_spread.py measures them).
The kernel runs with LABKIT_STATIC_IMAGES=1 (unless set otherwise), so every chart and dashboard
displayed also carries a PNG of itself (labkit.viz._static); the stored output keeps that
picture and a placeholder text in place of the live widget view, which cannot be shown without
stored widget state. Static viewers and `make site` show the picture; a kernel, the widget.
It also runs with LABKIT_PROGRESS=0: no progress bar is drawn into the stored outputs.
The exercises' graders draw fresh cases on every run; here LABKIT_GRADER_SEED=0 (unless set
otherwise) fixes them, so a stored exercise cell shows the same failing case from run to run.
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
# Any other widget (a dropdown over a Markdown card, ...): it has no picture to store.
WIDGET_PLACEHOLDER = "[interactive widget: run the cell to display it]"
# How a chart's or a dashboard's widget view names itself in its text/plain.
CHART_REPRS = ("<altair.jupyter", "JupyterChart(", "Dashboard(")
# Kept from a widget's display bundle: the static pictures labkit adds next to the live view.
IMAGE_TYPES = ("image/png", "image/svg+xml")


def strip_widget_views(nb) -> int:
    """Replace every live widget view in ``nb``'s outputs by a placeholder text (PLACEHOLDER for
    a chart or dashboard, WIDGET_PLACEHOLDER for any other widget), keeping the static images
    stored beside it; a widget whose bundle also carries text/html (its own static form, as a
    prediction block's reveal) keeps that and its text/plain instead. Returns how many widget
    views were replaced."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and "text/html" in data:
                # an object that ships its own static form beside the live view (a prediction
                # block's collapsed reveal): keep that form, drop only the view
                out["data"] = {k: v for k, v in data.items() if k != WIDGET_VIEW}
                n += 1
            elif WIDGET_VIEW in data:  # no stored state to show it from: say so, keep the picture
                text = data.get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                is_chart = text.startswith(CHART_REPRS)
                out["data"] = {"text/plain": PLACEHOLDER if is_chart else WIDGET_PLACEHOLDER,
                               **{k: data[k] for k in IMAGE_TYPES if k in data}}
                n += 1
    return n


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    os.environ.setdefault("PYTHONHASHSEED", "0")
    # Banded checks (labkit.course.bands) store this run's numbers in data/notebook_checks/.
    os.environ["LABKIT_RECORD_CHECKS"] = "1"
    # Charts and dashboards carry a static picture (LABKIT_STATIC_IMAGES=0 turns it off).
    os.environ.setdefault("LABKIT_STATIC_IMAGES", "1")
    # No progress bars (labkit.core.progress): stored outputs are read without a kernel, where a
    # finished bar is noise.
    os.environ["LABKIT_PROGRESS"] = "0"
    # The exercises' check() draws a fresh seed per attempt; a fixed one keeps stored outputs stable.
    os.environ.setdefault("LABKIT_GRADER_SEED", "0")
    # Widget state is not stored: altair's offline chart widget carries its ~1 MB JavaScript
    # bundle in that state, once per chart, which would bloat every commit of a notebook.
    client = NotebookClient(nb, kernel_name="python3", timeout=600, store_widget_state=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:  # keep stored notebooks free of run-specific metadata
        cell.metadata.pop("execution", None)
    strip_widget_views(nb)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> None:
    paths = [Path(a).resolve() for a in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for p in paths:
        print(f"{p.name}: executed in {execute(p):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
