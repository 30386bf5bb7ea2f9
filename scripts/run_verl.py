"""Build verl's environment, run labkit's parity tests against verl there, then the speed benchmark.

verl (the RL engine labkit's bridge targets, ``labkit.bridges.verl``) pins transformers < 5.11, so it
cannot live in the lab's environment. This script:

1. builds ``.venv-verl/`` (gitignored) from ``requirements-verl.txt``: the torch pin alone first
   (the CPU wheel), then every other pin but verl's, then ``verl`` with ``--no-deps`` (its full
   dependency set pulls vLLM and a GPU stack; importing ``verl.trainer.ppo.core_algos`` needs only
   the pins), then labkit itself (``pip install -e .``: labkit's own ranges, resolved against
   those pins); a stamp (the file's hash) skips all this when nothing changed;
2. runs ``tests/bridges/`` there (``test_bridges_verl_parity.py`` against verl's own functions,
   ``test_bridges_verl.py`` by hand; one torch thread);
3. runs ``benchmarks/verl_speed.py`` (labkit / verl time ratios; printed, not asserted), unless
   ``--no-bench``.

Usage: python scripts/run_verl.py [--no-bench] [-- pytest args]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-verl"
REQS = ROOT / "requirements-verl.txt"


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def pins() -> tuple[str, str, list[str]]:
    """(torch pin, verl pin, every other pin) from requirements-verl.txt."""
    lines = [ln.split("#")[0].strip() for ln in REQS.read_text().splitlines()]
    lines = [ln for ln in lines if ln]
    torch = next(ln for ln in lines if ln.startswith("torch=="))
    verl = next(ln for ln in lines if ln.startswith("verl=="))
    return torch, verl, [ln for ln in lines if ln not in (torch, verl)]


def build(python: str) -> None:
    """A fresh .venv-verl with the pins (see the module docstring for the order and why)."""
    torch, verl, rest = pins()
    shutil.rmtree(VENV, ignore_errors=True)
    run([python, "-m", "venv", str(VENV)])
    vpy = str(VENV / "bin" / "python")
    run([vpy, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([vpy, "-m", "pip", "install", "--quiet", torch])
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join([torch, *rest]) + "\n")  # torch again: pip keeps the pin while resolving
    try:
        run([vpy, "-m", "pip", "install", "--quiet", "-r", f.name])
    finally:
        os.unlink(f.name)
    run([vpy, "-m", "pip", "install", "--quiet", "--no-deps", verl])
    # labkit with its own dependencies; the pins above stay (they lie inside labkit's ranges)
    run([vpy, "-m", "pip", "install", "--quiet", "-e", str(ROOT), torch, *rest])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-bench", action="store_true", help="skip benchmarks/verl_speed.py")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    stamp = VENV / ".verl-installed"
    want = hashlib.sha256(REQS.read_bytes() + (ROOT / "pyproject.toml").read_bytes()).hexdigest()
    vpy = VENV / "bin" / "python"
    # rebuilt when the pins change, and when the interpreter link is gone (a moved or damaged venv)
    if not (stamp.is_file() and stamp.read_text() == want and vpy.exists()):
        build(sys.executable)
        stamp.write_text(want)
    t_env = time.perf_counter() - t0
    versions = subprocess.run(
        [str(vpy), "-c", "import torch, transformers, verl, labkit; print('torch', torch.__version__, "
                         "'| transformers', transformers.__version__, '| verl', verl.__version__)"],
        capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()).stdout.strip()
    print(versions, flush=True)

    env = dict(os.environ, OMP_NUM_THREADS="1")
    t1 = time.perf_counter()
    code = subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/bridges", *args.pytest_args],
                          cwd=ROOT, env=env).returncode
    t_tests = time.perf_counter() - t1
    t_bench = 0.0
    if code == 0 and not args.no_bench:
        t2 = time.perf_counter()
        code = subprocess.run([str(vpy), "benchmarks/verl_speed.py"], cwd=ROOT,
                              env=dict(os.environ, OMP_NUM_THREADS="2")).returncode
        t_bench = time.perf_counter() - t2
    print(f"test-verl: set-up {t_env:.0f} s, tests {t_tests:.0f} s, benchmark {t_bench:.0f} s; {versions}")
    return code


if __name__ == "__main__":
    sys.exit(main())
