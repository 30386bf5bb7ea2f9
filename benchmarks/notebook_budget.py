"""Measure each notebook's wall time and peak memory, as a student's laptop would run it.

Each notebook runs in a fresh kernel through `jupyter nbconvert --execute` (output discarded),
pinned to 2 threads like a 2-core Binder pod. Peak memory is the largest resident set of any
process in that run (the kernel), read from getrusage(RUSAGE_CHILDREN). Targets: <= 60 s and
well under 1.5 GB per notebook. Usage: python benchmarks/notebook_budget.py [notebook ...]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(path: Path) -> tuple[float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
               "--ExecutePreprocessor.kernel_name=python3", "--ExecutePreprocessor.timeout=600",
               "--output-dir", out, str(path)]
        # Run under a throwaway child so RUSAGE_CHILDREN reflects this notebook alone.
        code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        start = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", code, *cmd], check=True, capture_output=True,
                             text=True, cwd=path.parent, env=env)
        elapsed = time.perf_counter() - start
    peak_mb = int(res.stdout.strip().splitlines()[-1]) / 1024
    return elapsed, peak_mb


def main(argv: list[str]) -> None:
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    print(f"{'notebook':36s} {'wall s':>8s} {'peak MB':>8s}")
    for p in paths:
        t, mb = measure(p)
        flag = "" if t <= 60 and mb < 1500 else "  <-- over budget"
        print(f"{p.name:36s} {t:8.1f} {mb:8.0f}{flag}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
