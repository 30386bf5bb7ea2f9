"""Every control a notebook builds is called, in the notebook's prose, by the label the student sees
on it: a prompt that says "set `group_size` to 1" above a slider labelled "episodes/task" sends the
student looking for a control that is not there. Parses the notebooks' code cells with ast (no
cell is run, no lesson imported)."""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import ipywidgets
import pytest
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROMPT = "Predict, then move"

# labkit.viz's builders (called as viz.slider or, imported, as slider): a slider shows its
# description, else its name (first argument); a dropdown its description, else nothing of its own
LABKIT_BUILDERS = frozenset({"slider", "dropdown"})
WIDGET_MODULES = frozenset({"widgets", "W", "ipywidgets"})


@dataclass(frozen=True)
class Control:
    """One control built in a code cell: the label shown beside it and the Python names the code
    gives it (its key in a controls dict, a slider's name), which a student never sees."""

    cell: int
    label: str
    names: frozenset[str]


def _func_name(call: ast.Call) -> tuple[str | None, str | None]:
    """(module, name) of the function called: ``viz.slider`` -> ("viz", "slider"), ``slider`` ->
    (None, "slider"); (None, None) for anything else (a method of a call's result, a subscript)."""
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return f.value.id, f.attr
    if isinstance(f, ast.Name):
        return None, f.id
    return None, None


def _is_control(call: ast.Call) -> bool:
    """A labkit builder or an ipywidgets class with a value (a slider, dropdown, box, text...)."""
    module, name = _func_name(call)
    if name in LABKIT_BUILDERS and module in (None, "viz"):
        return True
    cls = getattr(ipywidgets, name, None) if module in WIDGET_MODULES else None
    return isinstance(cls, type) and issubclass(cls, ipywidgets.ValueWidget)


def _text(node: ast.AST | None, what: str) -> str | None:
    """A string literal's value (None for a missing argument or a literal None); any other
    expression fails: its label is only known when the cell runs."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise ValueError(f"{what} is not a string literal ({ast.unparse(node)}): write the label out")


def _control(call: ast.Call, key: str | None, cell: int) -> Control:
    """The label a student sees on this control. Dashboard gives a control with an empty
    description its key in the controls dict, so the key is the label of last resort."""
    kw = {k.arg: k.value for k in call.keywords}
    names = {key} if key else set()
    label = _text(kw.get("description"), f"cell {cell}: a description")
    if _func_name(call) in ((None, "slider"), ("viz", "slider")):
        name = _text(call.args[0] if call.args else kw.get("name"), f"cell {cell}: a slider's name")
        names.add(name)
        label = label or name
    label = label or key
    if not label:
        raise ValueError(f"cell {cell}: {ast.unparse(call)[:60]} shows no label (give it a description)")
    return Control(cell, label, frozenset(n for n in names if n))


def cell_controls(source: str, cell: int) -> list[Control]:
    """The controls a code cell builds, in source order. IPython syntax (%pip, !cmd) is turned
    into Python first, as the kernel does."""
    tree = ast.parse(TransformerManager().transform_cell(source))
    keys = {}  # a control built as a value of a dict literal: its key
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Call):
                    keys[id(v)] = k.value
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_control(n)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    return [_control(c, keys.get(id(c)), cell) for c in calls]


def _normal(text: str) -> str:
    """Lower case with every run of white space one space: prose wraps lines anywhere."""
    return " ".join(text.lower().split())


def mentions(prose: str, label: str) -> bool:
    """Whether ``label`` appears in ``prose`` as whole words, case-insensitively (in backticks,
    bold or plain)."""
    return re.search(rf"(?<!\w){re.escape(_normal(label))}(?!\w)", _normal(prose)) is not None


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def notebook_controls(cells: list[dict]) -> list[Control]:
    """Every control the notebook's code cells build, cell by cell."""
    return [c for i, cell in enumerate(cells) if cell["cell_type"] == "code"
            for c in cell_controls(_src(cell), i)]


def unnamed_labels(cells: list[dict]) -> list[Control]:
    """Controls whose label appears in no markdown cell of the notebook."""
    prose = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    return [c for c in notebook_controls(cells) if not mentions(prose, c.label)]


def code_names_in_prompts(cells: list[dict]) -> list[tuple[Control, str]]:
    """(control, word) for each `word` in backticks in the "Predict, then move" cell after a
    control's cell that is one of the control's Python names but not its label: the prompt calls
    the control something the student cannot see."""
    found = {}  # (control, word) once, however often the prompt repeats the word
    for c in notebook_controls(cells):
        after = cells[c.cell + 1] if c.cell + 1 < len(cells) else None
        if after is None or after["cell_type"] != "markdown" or PROMPT not in _src(after):
            continue
        for word in re.findall(r"`([^`]+)`", _src(after)):
            if word.strip() in c.names and _normal(word) != _normal(c.label):
                found[c, word.strip()] = None
    return list(found)


# ---------------------------------------------------------------------------------------------
# the checker itself


def test_labels_follow_what_each_builder_shows():
    src = ('%pip install nothing\n'
           'viz.interact(f, controls={"group_size": viz.slider("group_size", 1, 16, 1, 8, description="episodes/task"),\n'
           '    "noise": slider("noise", 0.0, 1.0, 0.1, 0.5),\n'
           '    "method": viz.dropdown(["a", "b"]),\n'
           '    "k": widgets.SelectionSlider(options=[1, 2], description="vines K"),\n'
           '    "on": W.Checkbox(value=True, description="")})\n'
           'out = widgets.Output()\n')
    got = [(c.label, sorted(c.names)) for c in cell_controls(src, 3)]
    assert got == [("episodes/task", ["group_size"]), ("noise", ["noise"]), ("method", ["method"]),
                   ("vines K", ["k"]), ("on", ["on"])]
    with pytest.raises(ValueError, match="cell 3: a description is not a string literal"):
        cell_controls('viz.slider("x", 0, 1, 1, 0, description=f"{n} x")', 3)
    with pytest.raises(ValueError, match="shows no label"):
        cell_controls('widgets.Dropdown(options=[1, 2])', 3)


def test_mentions_whole_words_across_line_breaks():
    assert mentions("Set **episodes per\ntask** to 1", "episodes per task")
    assert mentions("move `Noise` up", "noise")
    assert not mentions("the noise_std knob", "noise")
    assert not mentions("a kit", "K")


def test_the_checks_catch_a_prompt_that_uses_the_code_names():
    cells = [{"cell_type": "code", "source": [
                 'viz.interact(f, controls={"group_size": viz.slider("group_size", 1, 16, 1, 8, '
                 'description="episodes/task")})']},
             {"cell_type": "markdown", "source": [f"**{PROMPT}.**\n\n* Set `group_size` to 1."]}]
    (control,) = unnamed_labels(cells)
    assert (control.cell, control.label) == (0, "episodes/task")
    assert [(c.label, w) for c, w in code_names_in_prompts(cells)] == [("episodes/task", "group_size")]
    cells[1]["source"] = [f"**{PROMPT}.**\n\n* Set **episodes/task** to 1."]
    assert unnamed_labels(cells) == [] and code_names_in_prompts(cells) == []


# ---------------------------------------------------------------------------------------------
# the notebooks


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_control_label_is_in_the_prose(path):
    missing = [f"cell {c.cell}: {c.label!r}" for c in unnamed_labels(_cells(path))]
    assert not missing, (f"{path.name}: controls whose visible label no markdown cell uses "
                         f"(relabel the control or use its label in the prose): {'; '.join(missing)}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prompts_call_controls_by_their_labels(path):
    wrong = [f"cell {c.cell + 1}: `{w}` for the control labelled {c.label!r} (cell {c.cell})"
             for c, w in code_names_in_prompts(_cells(path))]
    assert not wrong, f"{path.name}: prompts that name a control by its code name: {'; '.join(wrong)}"
