"""Build verl's environment, run labkit's parity tests against verl there, read verl's own files, then the speed benchmark.

verl (the RL engine labkit's bridge targets, ``labkit.bridges.verl``) pins transformers < 5.11, so it
cannot live in the lab's environment. This script:

1. builds ``.venv-verl/`` (gitignored) from ``requirements-verl.txt`` with ``scripts/lib/side_env.py``:
   verl itself with ``--no-deps`` (its full dependency set pulls vLLM and a GPU stack; the pins
   are what importing its trainer module and ``core_algos`` needs on a CPU-only machine);
2. runs ``tests/bridges/`` there (``test_bridges_verl_parity.py`` against verl's own functions,
   ``test_bridges_verl.py`` by hand; one torch thread);
3. lets verl write its files again (``scripts/build_verl_dump.py --pickle``: the
   rollout dump by verl's own trainer method, and the DataProto batches it saved) into a
   temporary folder and runs ``tests/io/test_verl_dump.py`` against them;
4. runs ``benchmarks/verl_speed.py`` (labkit / verl time ratios; printed, not asserted), unless
   ``--no-bench``.

``--newest``: steps 1-3 with the newest verl release (``.venv-verl-newest``; ``make
test-frameworks-newest``, not in CI).

Usage: python scripts/run_verl.py [--no-bench] [--newest] [-- pytest args]
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from lib.side_env import ROOT, ensure, parser, regenerate_and_test, versions

VENV = ROOT / ".venv-verl"
REQS = ROOT / "requirements-verl.txt"


def main() -> int:
    cli = parser(__doc__, "verl")
    cli.add_argument("--no-bench", action="store_true", help="skip benchmarks/verl_speed.py")
    args = cli.parse_args()

    t0 = time.perf_counter()
    vpy = ensure(VENV, REQS, library="verl", no_deps=("verl",), newest=args.newest)
    t_env = time.perf_counter() - t0
    found = versions(vpy, ("torch", "transformers", "verl"))
    print(found, flush=True)

    env = dict(os.environ, OMP_NUM_THREADS="1")
    t1 = time.perf_counter()
    code = subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/bridges", *args.pytest_args],
                          cwd=ROOT, env=env).returncode
    if code == 0:
        code = regenerate_and_test(vpy, "scripts/build_verl_dump.py", "verl_dump",
                                   ["tests/io/test_verl_dump.py", "tests/io/test_io_verl.py"], script_args=("--pickle",),
                                   pytest_args=tuple(args.pytest_args))
    t_tests = time.perf_counter() - t1
    t_bench = 0.0
    if code == 0 and not args.no_bench and not args.newest:
        t2 = time.perf_counter()
        code = subprocess.run([str(vpy), "benchmarks/verl_speed.py"], cwd=ROOT,
                              env=dict(os.environ, OMP_NUM_THREADS="2")).returncode
        t_bench = time.perf_counter() - t2
    print(f"test-verl: set-up {t_env:.0f} s, tests {t_tests:.0f} s, benchmark {t_bench:.0f} s; {found}")
    return code


if __name__ == "__main__":
    sys.exit(main())
