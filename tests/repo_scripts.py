"""The repository's scripts/ as modules, for the tests that call a builder's functions directly."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str):
    """``scripts/<name>.py`` imported as a module; skips the test where scripts/ is not next to
    the tests (an installed copy of labkit without its repository)."""
    path = SCRIPTS / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"scripts/{name}.py is not next to the tests (an installed copy)")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
