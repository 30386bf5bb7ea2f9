"""Whether a progress bar shows (labkit.core.progress): the caller's ``enabled`` and the
LABKIT_PROGRESS environment variable decide it in one place; a hidden bar still iterates."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.core.progress import PROGRESS_ENV, progress_bar, progress_shown

LABKIT = Path(__file__).resolve().parents[2] / "labkit"


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)


def test_a_bar_shows_unless_the_caller_turns_it_off(no_env, capsys):
    assert progress_shown() and progress_shown(True) and not progress_shown(False)
    assert list(progress_bar(range(3), desc="shown")) == [0, 1, 2]
    assert "shown" in capsys.readouterr().err  # tqdm writes its bar to stderr
    assert list(progress_bar(range(3), desc="hidden", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["0", "off", "false", "OFF", " False "])
def test_the_environment_variable_hides_every_bar(monkeypatch, capsys, value):
    monkeypatch.setenv(PROGRESS_ENV, value)
    assert not progress_shown(True)
    with progress_bar(total=4, desc="runs") as bar:  # a bar updated by hand works the same
        bar.update(4)
    assert list(progress_bar("ab", desc="letters")) == ["a", "b"]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["1", "on", "true", ""])
def test_any_other_value_leaves_the_bar_to_the_caller(monkeypatch, value):
    monkeypatch.setenv(PROGRESS_ENV, value)
    assert progress_shown(True) and not progress_shown(False)
    assert not progress_bar(range(2), desc="x").disable
    assert progress_bar(range(2), desc="x", enabled=False).disable


@pytest.mark.parametrize("kwargs,arg,error", [
    (dict(desc="x", enabled="yes"), "enabled", TypeError),
    (dict(desc="x", enabled=None), "enabled", TypeError),
    (dict(desc=3), "desc", TypeError),
    (dict(desc="x", disable=True), "disable", TypeError),
])
def test_bad_arguments_name_themselves(kwargs, arg, error):
    with pytest.raises(error, match=f"^{arg}:"):
        progress_bar(range(2), **kwargs)


def test_every_bar_of_labkit_goes_through_the_helper():
    # a tqdm called directly would ignore LABKIT_PROGRESS and leave its bar in a stored notebook
    direct = []
    for path in LABKIT.rglob("*.py"):
        if path.name == "progress.py" and path.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n.split(".")[0] == "tqdm" for n in names):
                    direct.append(f"{path.relative_to(LABKIT.parent)}:{node.lineno}")
    assert not direct, f"import progress_bar from labkit.core.progress instead: {direct}"
