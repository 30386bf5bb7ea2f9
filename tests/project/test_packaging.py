"""How labkit is declared and installed: ranges in pyproject.toml, pins in the lock and the conda
files, the other end of the ranges in requirements-oldest.txt, the notebooks' install cell.
"""

import os
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version


ROOT = Path(__file__).resolve().parents[2]


def _canon(name: str) -> str:
    return name.lower().replace("_", "-")


def _pyproject_requirements() -> dict[str, Requirement]:
    """Every runtime and extra requirement of pyproject.toml (ranges), by canonical name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return {_canon(r.name): r for r in map(Requirement, reqs)}


def _runtime_names() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [_canon(Requirement(r).name) for r in project["dependencies"]]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, _, version = line.strip().partition("==")
            pins[_canon(name)] = version
    return pins


def _conda_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^\s*-\s*(pytorch-cpu)=(\S+)\s*$", line)
        if m:
            pins["torch"] = m.group(2)
            continue
        m = re.match(r"^\s{4,}-\s*([A-Za-z0-9_.\-]+)==(\S+)\s*$", line)
        if m:
            pins[_canon(m.group(1))] = m.group(2)
    return pins


def test_pyproject_states_ranges_not_pins():
    for name, req in _pyproject_requirements().items():
        assert not any(s.operator == "==" for s in req.specifier), f"pyproject: {req} is a pin"
        assert any(s.operator == ">=" for s in req.specifier), f"pyproject: {req} has no lower end"


def _verl_extra() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_canon(Requirement(r).name) for r in project["optional-dependencies"]["verl"]}


def test_lock_pins_lie_inside_the_ranges():
    lock = _pins(ROOT / "requirements.lock")
    for name, req in _pyproject_requirements().items():
        if name in _verl_extra():  # verl caps transformers below the lock's: requirements-verl.txt pins it
            continue
        assert name in lock, f"requirements.lock has no pin for {name}"
        assert req.specifier.contains(lock[name]), f"requirements.lock: {name}=={lock[name]} is outside {req}"


def test_oldest_pins_are_the_lower_ends():
    oldest = _pins(ROOT / "requirements-oldest.txt")
    reqs = _pyproject_requirements()
    for name in _runtime_names() + ["pytest", "pytest-xdist", "hypothesis", "nbformat"]:
        lower = next(Version(s.version) for s in reqs[name].specifier if s.operator == ">=")
        assert name in oldest, f"requirements-oldest.txt has no pin for {name}"
        assert Version(oldest[name]) == lower, f"requirements-oldest.txt: {name}=={oldest[name]}, lower end {lower}"


def test_conda_files_match_the_lock():
    lock = _pins(ROOT / "requirements.lock")
    for path in (ROOT / "environment.yml", ROOT / "binder" / "environment.yml"):
        conda = _conda_pins(path)
        assert set(_runtime_names()) <= set(conda), f"{path.name} misses a runtime dependency"
        for name, version in conda.items():
            assert lock.get(name) == version, f"{path.relative_to(ROOT)}: {name}=={version}, lock {lock.get(name)}"


def test_binder_installs_labkit_itself():
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post


def test_lock_torch_is_the_cpu_pin():
    assert _pins(ROOT / "requirements.lock")["torch"] == "2.13.0"


@pytest.mark.skipif(os.environ.get("LABKIT_EXPECT_INSTALLED") != "1",
                    reason="only in scripts/run_other_end.py's environment (labkit installed as a wheel)")
def test_installed_wheel_reads_its_own_data():
    import labkit
    from labkit.core import paths
    from labkit.policies.lm import load_lm
    from labkit.survey import load_methods

    where = Path(labkit.__file__).resolve()
    assert where.parent != ROOT / "labkit" and "site-packages" in where.parts, f"labkit came from {where}"
    assert paths.data_dir() == paths.PACKAGE_DATA
    model, tokenizer = load_lm()
    assert model.config.vocab_size == len(tokenizer)
    assert len(load_methods()) > 0


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^\s*make test\b", ci, re.M)


def test_notebooks_use_python3_kernel():
    import json
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        meta = json.loads(nb.read_text())["metadata"]
        assert meta["kernelspec"]["name"] == "python3", nb.name


def _setup_cells() -> dict[str, str]:
    import json

    cells = {}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
        cells[nb.name] = "".join(code[0]["source"])
    return cells


def test_every_notebook_opens_with_the_same_install_cell():
    cells = _setup_cells()
    assert len(set(cells.values())) == 1, "the notebooks' first code cells differ"
    assert 'find_spec("labkit")' in next(iter(cells.values()))


class _FakeShell:
    """Records the line magics a cell runs (what IPython would hand to %pip)."""
    def __init__(self):
        self.magics = []

    def run_line_magic(self, name, line, _stack_depth=1):
        self.magics.append((name, line))


def _run_install_cell(tmp_path, monkeypatch, installed: bool, env_source: str | None = None):
    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(next(iter(_setup_cells().values())))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (real(name, *a) if installed or name != "labkit" else None))
    if env_source is None:
        monkeypatch.delenv("LABKIT_SOURCE", raising=False)
    else:
        monkeypatch.setenv("LABKIT_SOURCE", env_source)
    monkeypatch.chdir(tmp_path)
    shell = _FakeShell()
    namespace = {"get_ipython": lambda: shell}
    exec(code, namespace)
    return [(name, line.format(**namespace)) for name, line in shell.magics]


def test_install_cell_does_nothing_where_labkit_is_installed(tmp_path, monkeypatch):
    assert _run_install_cell(tmp_path, monkeypatch, installed=True) == []


def test_install_cell_installs_an_uploaded_wheel_or_labkit_source(tmp_path, monkeypatch):
    (tmp_path / "labkit-0.1.0-py3-none-any.whl").write_bytes(b"")
    assert _run_install_cell(tmp_path, monkeypatch, installed=False) == [
        ("pip", "install --quiet labkit-0.1.0-py3-none-any.whl")]
    assert _run_install_cell(tmp_path, monkeypatch, installed=False, env_source="git+https://example.org/lab") == [
        ("pip", "install --quiet git+https://example.org/lab")]


def test_install_cell_without_a_source_says_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ModuleNotFoundError, match="labkit is not installed: upload .*LABKIT_SOURCE"):
        _run_install_cell(tmp_path, monkeypatch, installed=False)


def test_verl_environment_pins_torch_first_and_verl_inside_the_extra():
    """requirements-verl.txt (make test-verl): torch pinned as in the lock and on the first line
    (installed first: the CPU wheel), verl pinned inside the extra's range, nothing unpinned."""
    path = ROOT / "requirements-verl.txt"
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    pins = _pins(path)
    assert lines[0] == f"torch=={_pins(ROOT / 'requirements.lock')['torch']}", lines[0]
    assert all("==" in ln for ln in lines), f"requirements-verl.txt: unpinned lines {[ln for ln in lines if '==' not in ln]}"
    reqs = _pyproject_requirements()
    assert "verl" in pins and reqs["verl"].specifier.contains(pins["verl"]), pins.get("verl")
    assert "verl" not in _runtime_names(), "verl is an optional extra, never a main dependency"
