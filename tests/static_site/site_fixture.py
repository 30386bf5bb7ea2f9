"""Inputs for building the static site in tests: an outline CSV, a times table and plan pages made
up for the notebooks at hand, and a small course of two notebooks and a guide whose outputs carry
what the course's outputs carry (method cards with display math, a prediction's reveal)."""
from __future__ import annotations

import csv
from pathlib import Path

import nbformat
import pandas as pd

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
REVEAL_HTML = ("<div class=\"prediction\"><details><summary>Reveal the answer</summary>"
               "<p>The measured share was 0.25, so $p = 1/4$.</p></details></div>")
PLAN_PAGES = [
    ("plan-three-hour.html", "Three-hour plan",
     "# Three-hour plan\n\n| start | what |\n|---|---|\n| 0:00 | [the first notebook](01_first.ipynb), "
     "core path |\n| 0:50 | break |\n\nSkip the deep dives; the return is $G_t = r_t + \\gamma G_{t+1}$.\n"),
    ("plan-full-day.html", "Full-day plan", "# Full-day plan\n\nEvery notebook, deep dives included.\n"),
]
GUIDE = ("# Instructor's guide\n\n## 01 · First\n\nAsk for the guess before [the reveal](../01_first.ipynb). "
         "The estimate is $\\hat{V}$; tickets cost $5 or $10.\n\n"
         "```python\nprint('$$ not math $$')\n```\n")


def question(number: str) -> str:
    """The made-up question of notebook ``number``."""
    return f"What does notebook {number} measure?"


def write_outline(path: Path, numbers: list[str]) -> Path:
    """An outline CSV at ``path``: each notebook's question, the one before it as prerequisite."""
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["notebook", "question", "prerequisites"])
        for i, n in enumerate(numbers):
            w.writerow([n, question(n), " ".join(numbers[max(0, i - 2):i])])
    return Path(path)


def times(numbers: list[str]) -> pd.DataFrame:
    """A times table as labkit.course.timing.course_times gives it, numbers made up: notebook
    number i takes 20 + i core minutes and 5 * (i % 3) optional ones."""
    rows = []
    for i, n in enumerate(numbers):
        core, optional = 20 + i, 5 * (i % 3)
        rows.append({"notebook": n, "title": f"Notebook {n}", "core": core, "optional": optional,
                     "total": core + optional})
    return pd.DataFrame(rows)


def card_markdown() -> str:
    """A method card as the course displays it: Markdown with display math and code in <details>."""
    return ("**`gae`** — Generalised advantage estimation.\n\n$$\nA_t = \\delta_t + \\gamma \\lambda A_{t+1},"
            "\\quad \\delta_t = r_t + \\gamma V_{t+1} - V_t\n$$\n\n<details><summary>The code</summary>\n\n"
            "```python\nx = '$a$'\n```\n\n</details>\n")


def first_notebook():
    """A notebook with inline math, dollar amounts, code spans, a prediction's reveal beside a
    widget view (no widget state stored) and a method card."""
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# 01 · First\n\nThe score $s_i$ of trajectory *i*; a ticket costs $5 and a "
                             "book $10; literally \\$x\\$ here; code `$y$` stays.\n\n"
                             "$$\n\\operatorname{mean}_{j \\in g(i)} s_j\n$$"),
        v4.new_markdown_cell("**Predict, then move.** Which share?"),
        v4.new_code_cell("predict('share', answer=0.25)", outputs=[v4.new_output(
            "display_data", data={"text/plain": "Prediction(...)", "text/html": REVEAL_HTML,
                                  WIDGET_VIEW: {"model_id": "0123abcd", "version_major": 2, "version_minor": 0}})]),
        v4.new_code_cell("show_methods('gae')", outputs=[v4.new_output(
            "execute_result", data={"text/plain": "<card>", "text/markdown": card_markdown()}, execution_count=1)]),
        v4.new_code_cell("print('$$ stays $$')", outputs=[v4.new_output("stream", name="stdout", text="$$ stays $$\n")]),
    ]
    return nb


def second_notebook():
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [v4.new_markdown_cell("# 02 · Second\n\nBack to [the first](01_first.ipynb).")]
    return nb


def small_course(folder: Path) -> Path:
    """Two notebooks and notebooks/guide/instructors.md written into ``folder``; returns it."""
    folder = Path(folder)
    (folder / "guide").mkdir(parents=True, exist_ok=True)
    nbformat.write(first_notebook(), folder / "01_first.ipynb")
    nbformat.write(second_notebook(), folder / "02_second.ipynb")
    (folder / "guide" / "instructors.md").write_text(GUIDE, encoding="utf-8")
    return folder
