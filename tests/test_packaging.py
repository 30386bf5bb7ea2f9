"""The three dependency declarations (pyproject, environment.yml, binder/) and the lock agree."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["test"]
    pins = {}
    for r in reqs:
        name, _, version = r.partition("==")
        assert version, f"pyproject: {r!r} is not pinned with =="
        pins[name.lower()] = version
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
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_environment_yml_matches_pyproject():
    assert _conda_pins(ROOT / "environment.yml") == _pyproject_pins()


def test_binder_matches_pyproject():
    assert _conda_pins(ROOT / "binder" / "environment.yml") == _pyproject_pins()
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post


def test_lock_holds_every_pin():
    lock = _lock_pins()
    for name, version in _pyproject_pins().items():
        assert lock.get(name.replace("_", "-")) == version, f"requirements.lock disagrees on {name}"


def test_torch_is_the_cpu_pin():
    assert _pyproject_pins()["torch"] == "2.13.0"


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
