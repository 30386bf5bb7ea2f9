"""Side environments for the outside libraries labkit reads or feeds (verl, TRL).

Each library pins packages the lab's own environment cannot share (verl caps transformers below
the lab's; TRL brings its own stack), so each gets a virtual environment of its own, built from
a requirements file of pins (``requirements-verl.txt``, ``requirements-trl.txt``):

1. the torch pin alone first (the local CPU wheel, so nothing pulls a CUDA build);
2. every other pin, with their dependencies (torch pinned again, so pip keeps it);
3. the packages named ``no_deps`` with ``--no-deps`` (verl: its full dependency set is vLLM and a
   GPU stack; the pins are what labkit's use of it imports);
4. labkit itself, editable (its own ranges, resolved against those pins).

A stamp (the hash of the requirements file and pyproject.toml) skips the build when nothing
changed. ``newest=True`` builds ``<venv>-newest`` with the library itself unpinned (the newest
release), everything else as pinned: for ``make test-frameworks-newest``, never in CI.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def parser(doc: str, library: str) -> argparse.ArgumentParser:
    """A runner's command line: ``--newest`` (the library's newest release instead of its pin)
    and extra pytest arguments after ``--``."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--newest", action="store_true", help=f"the newest {library} release instead of the pin")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def run(cmd: list, **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def read_pins(reqs: Path) -> list[str]:
    """The requirement lines of ``reqs`` (comments and blank lines dropped)."""
    lines = [ln.split("#")[0].strip() for ln in reqs.read_text().splitlines()]
    return [ln for ln in lines if ln]


def _name(pin: str) -> str:
    return pin.split("==")[0].split(">")[0].split("<")[0].strip().lower()


def build(venv: Path, reqs: Path, *, library: str, no_deps: tuple[str, ...] = (), newest: bool = False) -> None:
    """A fresh ``venv`` with the pins of ``reqs`` (see the module docstring for the order)."""
    lines = read_pins(reqs)
    torch = next(ln for ln in lines if _name(ln) == "torch")
    if newest:
        lines = [library if _name(ln) == library else ln for ln in lines]
    later = [ln for ln in lines if _name(ln) in no_deps]
    rest = [ln for ln in lines if ln != torch and ln not in later]
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv])
    vpy = venv / "bin" / "python"
    run([vpy, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([vpy, "-m", "pip", "install", "--quiet", torch])
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join([torch, *rest]) + "\n")
    try:
        run([vpy, "-m", "pip", "install", "--quiet", "-r", f.name])
    finally:
        os.unlink(f.name)
    if later:
        run([vpy, "-m", "pip", "install", "--quiet", "--no-deps", *later])
    run([vpy, "-m", "pip", "install", "--quiet", "-e", ROOT, torch, *rest])


def ensure(venv: Path, reqs: Path, *, library: str, no_deps: tuple[str, ...] = (), newest: bool = False) -> Path:
    """The side environment's python, building it first when the pins changed (always for
    ``newest``: the newest release may have moved)."""
    if newest:
        venv = venv.with_name(venv.name + "-newest")
    stamp = venv / ".side-env-installed"
    want = hashlib.sha256(reqs.read_bytes() + (ROOT / "pyproject.toml").read_bytes()).hexdigest()
    vpy = venv / "bin" / "python"
    if newest or not (stamp.is_file() and stamp.read_text() == want and vpy.exists()):
        build(venv, reqs, library=library, no_deps=no_deps, newest=newest)
        stamp.write_text(want)
    return vpy


def versions(vpy: Path, modules: tuple[str, ...]) -> str:
    """'name version | ...' of ``modules`` as the side environment imports them."""
    code = ("import importlib, warnings; warnings.simplefilter('ignore'); print(' | '.join(f'{m} ' + "
            "importlib.import_module(m).__version__ for m in " + repr(list(modules)) + "))")
    return subprocess.run([str(vpy), "-c", code], capture_output=True, text=True, check=True,
                          cwd=tempfile.gettempdir()).stdout.strip()


def regenerate_and_test(vpy: Path, script: str, name: str, tests: list[str], script_args: tuple[str, ...] = (),
                        pytest_args: tuple[str, ...] = ()) -> int:
    """Write the library's files again with ``script`` (into a temporary ``<runs>/<name>``), then
    run ``tests`` against them (``LABKIT_FRAMEWORK_RUNS``): a change in what the library writes
    fails here. Returns pytest's exit status."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="framework-runs-") as runs:
        run([vpy, script, "--out", Path(runs) / name, *script_args], cwd=ROOT, env=env)
        env["LABKIT_FRAMEWORK_RUNS"] = runs
        return subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests, *pytest_args],
                              cwd=ROOT, env=env).returncode
