"""Every notebook opens with its learning objectives and time, and every dashboard or widget cell is
followed by a "Predict, then move" prompt; every prompt asks its question in prose and is followed by
ONE code cell that records the learner's guess (``predict(...)``) before it shows the answer computed
there. Reads the notebooks' JSON only."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# A cell that shows an interactive control: a dashboard (viz.interact, Dashboard, a lesson's
# *dashboard* helper) or an ipywidgets control built directly (widgets.X(...), viz.slider/dropdown).
WIDGET = re.compile(
    r"viz\.interact\(|\bDashboard\(|\blesson\.\w*dashboard\w*\("
    r"|\b(?:widgets|W)\.(?:IntSlider|FloatSlider|SelectionSlider|Dropdown|ToggleButtons|Checkbox|Text|Select\w*|RadioButtons)\("
    r"|\bviz\.(?:slider|dropdown)\("
)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def widget_cells(cells: list[dict]) -> list[int]:
    """Indices of the code cells that show an interactive control."""
    return [i for i, c in enumerate(cells) if c["cell_type"] == "code" and WIDGET.search(_src(c))]


def test_notebooks_found():
    assert len(NOTEBOOKS) == 12, [p.name for p in NOTEBOOKS]


def test_detector_sees_dashboards_and_not_imports():
    fake = [{"cell_type": "code", "source": ["import ipywidgets as widgets\n", "from labkit import viz"]},
            {"cell_type": "code", "source": ["viz.interact(f, controls={})"]},
            {"cell_type": "markdown", "source": ["viz.interact(f)"]},
            {"cell_type": "code", "source": ["k = widgets.SelectionSlider(options=[1, 2])"]}]
    assert widget_cells(fake) == [1, 3]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_widget_has_a_prompt(path):
    cells = _cells(path)
    found = widget_cells(cells)
    missing = [i for i in found
               if i + 1 >= len(cells) or cells[i + 1]["cell_type"] != "markdown"
               or "Predict, then move" not in _src(cells[i + 1])]
    assert not missing, f"{path.name}: widget cells {missing} are not followed by a 'Predict, then move' cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prompts_have_bullets(path):
    cells = _cells(path)
    for i in widget_cells(cells):
        text = _src(cells[i + 1]) if i + 1 < len(cells) else ""
        part = text[text.find("Predict, then move"):]
        bullets = [ln for ln in part.splitlines() if ln.startswith(("* ", "- "))]
        assert len(bullets) >= 2, f"{path.name} cell {i + 1}: a prompt needs at least two bullets"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_objectives_and_time_up_front(path):
    md = [_src(c) for c in _cells(path) if c["cell_type"] == "markdown"][:3]
    head = "\n".join(md)
    assert "You will learn" in head, f"{path.name}: no 'You will learn' in its first three markdown cells"
    # what the time must be is labkit.course.timing's rule (tests/notebooks/test_notebook_times.py)
    assert re.search(r"Time: about (\d+) minutes", head), \
        f"{path.name}: no 'Time: about N minutes' in its first three markdown cells"


PROMPT = "Predict, then move"
# a measured result in prose (two or more decimals, e.g. 0.653): the answer belongs to the predict cell
RESULT_IN_PROSE = re.compile(r"(?<![\w.])[-\u2212+]?\d+\.\d{2,}(?![\d.])")


def prompt_cells(cells: list[dict]) -> list[int]:
    """Indices of the Markdown cells holding a "Predict, then move" prompt."""
    return [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and PROMPT in _src(c)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_prompt_records_a_guess_before_its_answer(path):
    cells = _cells(path)
    for i in prompt_cells(cells):
        nxt = cells[i + 1] if i + 1 < len(cells) else {"cell_type": "none", "source": []}
        assert nxt["cell_type"] == "code", f"{path.name} cell {i}: a prompt must be followed by its predict() cell"
        calls = re.findall(r"\bpredict\(", _src(nxt))
        assert len(calls) == 1, f"{path.name} cell {i + 1}: one predict(...) call per prompt, found {len(calls)}"
        shown = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in nxt.get("outputs", []))
        assert shown.startswith("Predict: ") and "\nAnswer: " in shown, \
            f"{path.name} cell {i + 1}: the stored output shows no computed answer (run the notebook)"
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in nxt.get("outputs", []))
        assert "<details" in html and "<details open" not in html, f"{path.name} cell {i + 1}: no collapsed reveal"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prompts_ask_without_answering(path):
    cells = _cells(path)
    for i in prompt_cells(cells):
        found = RESULT_IN_PROSE.findall(_src(cells[i]))
        assert not found, f"{path.name} cell {i}: the prompt states results {found}; let predict() reveal them"


def test_the_result_detector():
    assert RESULT_IN_PROSE.findall("cosine 0.653, noise 0.5, T = 200, K = 16, 1.000 and \u22120.155") == \
        ["0.653", "1.000", "\u22120.155"]
