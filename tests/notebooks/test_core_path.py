"""A workshop that skips every deep dive still runs: no core-path cell uses a name that only a
deep dive's cells define. Static (the cells' Python is parsed, not run): a name a core cell reads
must be bound by an earlier core cell, by the cell itself, or be a builtin."""
from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path

import pytest

from labkit.course.timing import deep_dives

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _python(source: str) -> ast.Module:
    # IPython's magics and shell escapes are not Python: blank them out, keeping line numbers
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    return ast.parse("\n".join(lines))


def bound_and_read(source: str) -> tuple[set, set]:
    """The names a cell binds at top level (assignments, imports, defs, loop targets, ...) and the
    names it reads that it has not bound before reading them (approximately: any Load of a name
    the cell never binds)."""
    tree = _python(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # a function's own name and its parameters (the parameters only inside it; counting
            # them for the whole cell can only hide a finding, never invent one)
            bound.update([node.name] if not isinstance(node, ast.Lambda) else [])
            bound.update(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read - bound


def core_uses_of_deep_dive_names(cells: list[dict]) -> list[tuple[int, str]]:
    """(cell index, name) for every core code cell reading a name that only deep-dive cells bound."""
    core, deep, found = set(dir(builtins)) | {"display", "get_ipython"}, set(), []
    for i, (cell, title) in enumerate(zip(cells, deep_dives(cells))):
        if cell["cell_type"] != "code":
            continue
        bound, read = bound_and_read("".join(cell["source"]))
        if title is None:
            found += [(i, name) for name in sorted(read & (deep - core))]
            core |= bound
        else:
            deep |= bound
    return found


def test_the_check_sees_a_deep_dive_name_used_on_the_core_path():
    md = lambda s: {"cell_type": "markdown", "source": s}  # noqa: E731
    code = lambda s: {"cell_type": "code", "source": s}  # noqa: E731
    cells = [code("import torch\nx = 1"), md("<!-- deep-dive -->\n## Extra (optional)"), code("y = x + 1\ndef f(a): return a"),
             md("<!-- core -->\n## Back"), code("print(x, len([x]))"), code("print(y)"), code("z = 2\nprint(z, f)")]
    assert core_uses_of_deep_dive_names(cells) == [(5, "y"), (6, "f")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_core_path_runs_without_its_deep_dives(path):
    cells = json.loads(path.read_text())["cells"]
    found = core_uses_of_deep_dive_names(cells)
    assert not found, f"{path.name}: core cells use names only a deep dive defines: {found}"
