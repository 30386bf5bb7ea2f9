"""`make test`: every test, in parts, with a closing summary of what ran, what skipped and why.

    python scripts/run_tests.py

1. unit, property and widget tests plus nbval over every notebook, on two workers (nbval
   needs ``--dist loadfile``), each on one thread (configuration ``native:1`` of
   scripts/lib/matrix_configs.py: this CPU's kernels, ``LABKIT_THREADS=1``; two notebooks asking
   for two threads each on a 2-core machine were measured 10x slower), with banded notebook
   checks strict (``LABKIT_STRICT_CHECKS=1``);
2. alone, the real-browser checks (the course in JupyterLab; the static site offline): a
   course notebook in a browser next to another worker's notebook oversubscribes a 2-core CPU
   and can take several times its normal time. They skip where Debian's chromium is absent
   (``bash .ci/install_browser.sh`` installs it).

Exits 1 if any part failed. ``make test-matrix`` runs the notebooks under other CPU kernels
and thread counts (scripts/run_matrix.py).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from lib.matrix_configs import environment

ROOT = Path(__file__).resolve().parent.parent
PARTS = (  # (name, pytest arguments, CPU configuration (scripts/lib/matrix_configs.py) or None: as is)
    ("unit tests + notebooks (nbval)",
     ["-n", "2", "--dist", "loadfile", "--durations=12", "-m", "not browser", "--nbval-lax", "--nbval-current-env",
      "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "tests", "notebooks"], "native:1"),
    ("real-browser checks", ["-m", "browser", "-rs", "tests/browser", "tests/static_site"], None),
)


def run(args: list[str], config: str | None) -> tuple[int, str, float]:
    env = environment(config) if config else dict(os.environ)
    env["LABKIT_STRICT_CHECKS"] = "1"
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:          # stream, so a long run shows progress
        sys.stdout.write(line)
        lines.append(line)
    return proc.wait(), "".join(lines), time.perf_counter() - start


def summary_line(output: str) -> str:
    found = [l.strip("= \n") for l in output.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", l)]
    return found[-1] if found else "no tests ran"


def main() -> int:
    rows, ok = [], True
    for name, args, config in PARTS:
        print(f"\n=== make test: {name}", flush=True)
        code, output, seconds = run(args, config)
        ok &= code in (0, 5) if name.startswith("real-browser") else code == 0
        reasons = sorted({m.strip() for m in re.findall(r"SKIPPED \[\d+\] [^:]+:\d+: (.+)", output)})
        rows.append((name, summary_line(output), seconds, reasons))
    print("\nmake test summary")
    for name, line, seconds, reasons in rows:
        print(f"  {name:32s} {line}  ({seconds / 60:.1f} min)")
        for r in reasons:
            print(f"  {'':32s} skipped: {r}")
    print(f"  {'not run here':32s} the CPU-configuration matrix: `make test-matrix`")
    return 0 if ok else 1


if __name__ == "__main__":
    # no options: --help describes the run; anything else is refused rather than ignored
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    sys.exit(main())
