"""Install labkit as a wheel into a second environment at the other end of its ranges; run its tests.

`make test` runs against requirements.lock, the newest end of pyproject.toml's ranges (the exact
versions the stored outputs were made with). This script checks the other end, as a user who
runs `pip install labkit` beside older packages would get it:

1. a fresh virtual environment, ``.venv-other-end/``, on another Python (3.12 by default: Colab's;
   ``--python`` or ``$OTHER_PYTHON`` picks one), with every pin of ``requirements-oldest.txt``
   (the lower end of each range in pyproject.toml; tests/project/test_packaging.py checks they agree);
2. a wheel built from this repository (so it carries data/ as labkit/_data), installed there
   together with those pins: pip refuses if a pin falls outside a range;
3. the unit, property and widget tests (not nbval: the stored outputs belong to the lock's
   versions; not the browser) from tests/, run from outside the repository's import path so
   that they exercise the installed copy; ``LABKIT_EXPECT_INSTALLED=1`` makes
   tests/project/test_packaging.py check that labkit and its data come from site-packages.

Usage: python scripts/run_other_end.py [--python PATH] [--workers N] [-- pytest args]
About 2 minutes to set up on a fresh machine (torch 2.6's CUDA wheels, ~3 GB from PyPI) and
1 minute of tests on 2 cores.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-other-end"
OLDEST = ROOT / "requirements-oldest.txt"
WANTED = "3.12"


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import venv"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_python(requested: str | None) -> str:
    """The interpreter for the second environment: --python, $OTHER_PYTHON, python3.12 on PATH,
    a pyenv 3.12, else this one (said aloud)."""
    for python in (requested, os.environ.get("OTHER_PYTHON")):
        if python:
            if not _runs(python):
                raise SystemExit(f"--python: {python} does not run (or has no venv module)")
            return python
    candidates = [shutil.which(f"python{WANTED}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{WANTED}*/bin/python")))
    for python in candidates:
        if python and _runs(python):
            return python
    print(f"(no Python {WANTED} found: the second environment uses {sys.executable})")
    return sys.executable


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="interpreter for the second environment (default: 3.12)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    if args.workers < 1:
        parser.error("--workers: must be at least 1")

    t0 = time.perf_counter()
    python = find_python(args.python)
    stamp = VENV / ".oldest-installed"
    want = hashlib.sha256(OLDEST.read_bytes() + python.encode()).hexdigest()
    if not (stamp.is_file() and stamp.read_text() == want):
        shutil.rmtree(VENV, ignore_errors=True)
        run([python, "-m", "venv", str(VENV)])
        vpy = str(VENV / "bin" / "python")
        run([vpy, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
        run([vpy, "-m", "pip", "install", "--quiet", "-r", str(OLDEST)])
        stamp.write_text(want)
    vpy = str(VENV / "bin" / "python")
    t_env = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="labkit-wheel-") as out:
        # build isolation: setuptools comes from the package index, as for any user's pip install
        run([vpy, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, str(ROOT)])
        wheel = next(Path(out).glob("labkit-*.whl"))
        print(f"wheel: {wheel.name}, {wheel.stat().st_size / 2**20:.1f} MiB")
        run([vpy, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel)])
        # the wheel's declared ranges against the pins: pip refuses a pin outside a range
        run([vpy, "-m", "pip", "install", "--quiet", str(wheel), "-r", str(OLDEST)])
    run([vpy, "-m", "pip", "check"])
    versions = subprocess.run(
        [vpy, "-c", "import sys, torch, transformers, numpy, pandas, altair, labkit; "
                    "print('python', sys.version.split()[0], '| torch', torch.__version__, "
                    "'| transformers', transformers.__version__, '| numpy', numpy.__version__, "
                    "'| pandas', pandas.__version__, '| altair', altair.__version__, "
                    "'| labkit from', labkit.__file__)"],
        capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()).stdout.strip()
    print(versions)

    # The venv's own pytest script (not `python -m pytest`, which would put the repository on
    # sys.path and import the clone's labkit instead of the installed one).
    env = dict(os.environ, LABKIT_EXPECT_INSTALLED="1", OMP_NUM_THREADS="1")
    cmd = [str(VENV / "bin" / "pytest"), "tests", "-q", "-p", "no:cacheprovider", "-m", "not browser",
           "-n", str(args.workers), *args.pytest_args]
    t1 = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    print(f"other end: set-up {t_env:.0f} s, tests {time.perf_counter() - t1:.0f} s; {versions}")
    return code


if __name__ == "__main__":
    sys.exit(main())
