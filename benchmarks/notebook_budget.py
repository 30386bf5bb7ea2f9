"""Measure each notebook's wall time and peak memory, as a student's laptop would run it.

Each notebook runs in a fresh kernel through `jupyter nbconvert --execute` (output discarded),
pinned to 2 threads like a 2-core Binder pod. Peak memory is the largest resident set of any
process in that run (the kernel), read from getrusage(RUSAGE_CHILDREN). Targets: <= 30 s and
at most 1 GB per notebook. With --solutions each notebook runs as a student who did every
exercise would run it: each exercise's cell holds the lab's reference solution (or, for a
reading, the lab's own run), so a capstone's training runs too; the table then also says how
many exercise checks passed. Usage: python benchmarks/notebook_budget.py [--solutions] [notebook ...]
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


TARGET_S, TARGET_MB = 30, 1024
_CHECK = re.compile(r'check\(\w+, "(\d\d[a-z])"\)\s*$')


def solved(path: Path) -> tuple[Path, int]:
    """A copy of the notebook at ``path``, beside it (same working directory), with every
    exercise's cell solved (labkit.course.exercises.reveal.solved_cell); and how many."""
    from labkit.course.exercises.reveal import solved_cell
    nb = json.loads(path.read_text())
    n = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        found = _CHECK.search(source) if cell["cell_type"] == "code" else None
        if found:
            cell["source"] = solved_cell(found.group(1), source)
            n += 1
    copy = path.with_name(f".solved_{path.name}")
    copy.write_text(json.dumps(nb))
    return copy, n


def passed_checks(executed: Path) -> int:
    """How many exercise checks an executed notebook's outputs report as passed."""
    nb = json.loads(executed.read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    return len(re.findall(r"^\u2713 \d\d[a-z] ", text, re.M))


def measure(path: Path, keep: Path | None = None) -> tuple[float, float]:
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
        if keep is not None:
            (Path(out) / path.name).replace(keep)
    peak_mb = int(res.stdout.strip().splitlines()[-1]) / 1024
    return elapsed, peak_mb


def main(argv: list[str]) -> None:
    solutions = "--solutions" in argv
    argv = [a for a in argv if a != "--solutions"]
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    print(f"{'notebook':36s} {'wall s':>8s} {'peak MB':>8s}" + ("  checks passed" if solutions else ""))
    for p in paths:
        if not solutions:
            t, mb = measure(p)
            extra = ""
        else:
            copy, n = solved(p)
            executed = Path(tempfile.mkdtemp()) / p.name
            try:
                t, mb = measure(copy, keep=executed)
                extra = f"  {passed_checks(executed)}/{n}"
            finally:
                copy.unlink()
        flag = "" if t <= TARGET_S and mb <= TARGET_MB else "  <-- over budget"
        print(f"{p.name:36s} {t:8.1f} {mb:8.0f}{extra}{flag}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
