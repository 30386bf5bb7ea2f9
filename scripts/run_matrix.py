"""Run nbval over every notebook under several CPU configurations (``make test-matrix``).

    python scripts/run_matrix.py                      # default:1 avx2:2 native:4
    python scripts/run_matrix.py default:1 avx512:2   # any KERNELS:THREADS list

Every configuration must pass with the same stored outputs: exact numbers are compared as
text, learned ones within the bands in data/notebook_checks/ (see labkit/course/bands.py).
Prints one row per configuration (tests passed / failed, wall time) and exits 1 if any failed.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from lib.matrix_configs import DEFAULT_MATRIX, environment, parse

ROOT = Path(__file__).resolve().parent.parent
NBVAL = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


def run(config: str, notebooks: list[str]) -> dict:
    env = environment(config)
    env["LABKIT_STRICT_CHECKS"] = "1"
    # Two workers only when each runs one thread: a 2-core machine running two notebooks that
    # each want several threads slows tiny tensor operations down about tenfold.
    workers = ["-n", "2", "--dist", "loadfile"] if parse(config)[1] == 1 else []
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *NBVAL, *workers, *notebooks], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors)", tail)}
    if proc.returncode != 0:
        failed = [l for l in proc.stdout.splitlines() if l.startswith(("FAILED", "ERROR"))]
        print(f"--- {config}: {tail}", *failed, sep="\n", flush=True)
    return {"config": config, "passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0),
            "seconds": seconds, "ok": proc.returncode == 0}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("items", nargs="*", metavar="CONFIG_OR_NOTEBOOK",
                        help=f"KERNELS:THREADS configurations (default: {' '.join(DEFAULT_MATRIX)}) and "
                             "notebooks (default: every one)")
    argv = parser.parse_args(argv).items
    for a in argv:  # anything else would be dropped silently, and the default matrix run instead
        if ":" not in a and not a.endswith(".ipynb"):
            parser.error(f"{a!r}: expected a KERNELS:THREADS configuration or a notebook (.ipynb)")
    configs = [a for a in argv if ":" in a] or list(DEFAULT_MATRIX)
    for c in configs:
        parse(c)
    notebooks = [a for a in argv if a.endswith(".ipynb")] or sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    rows = []
    for config in configs:
        print(f"test matrix: nbval over {len(notebooks)} notebooks with {config} ...", flush=True)
        rows.append(run(config, notebooks))
    print("\nconfiguration   passed  failed  wall time")
    for r in rows:
        print(f"{r['config']:14s} {r['passed']:7d} {r['failed']:7d}  {r['seconds']:7.0f} s"
              + ("" if r["ok"] else "   FAILED"))
    print(f"matrix: {sum(r['passed'] for r in rows)} passed, {sum(r['failed'] for r in rows)} failed")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
