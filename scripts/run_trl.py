"""Build TRL's environment, let a real GRPOTrainer run write its files, and read them with labkit.

TRL (the trainer whose completions files ``labkit.io`` reads) brings its own stack, so it lives
in ``.venv-trl`` (``scripts/lib/side_env.py`` builds it from ``requirements-trl.txt``). This script
then runs ``scripts/build_trl_run.py --all`` there into a temporary folder (the tiny LM: four
GRPO steps, then two steps of each variant setting, about 25 s) and ``tests/io/test_trl.py`` and
``tests/diagnose/test_framework_credit.py`` against what those runs wrote, so a change in TRL's
files, or in how TRL computes its advantages under each setting, fails here rather than in a
user's hands; and ``tests/bridges/test_bridges_trl.py`` (labkit's per-token credit inside a real
``GRPOTrainer``, ``labkit.bridges.trl``: three two-step runs, about 10 s). ``--newest``: the same with the newest TRL release (``.venv-trl-newest``;
``make test-frameworks-newest``, not in CI).

Usage: python scripts/run_trl.py [--newest] [-- pytest args]
"""
from __future__ import annotations

import sys
import time

from lib.side_env import ROOT, ensure, parser, regenerate_and_test, versions

VENV = ROOT / ".venv-trl"
REQS = ROOT / "requirements-trl.txt"


def main() -> int:
    args = parser(__doc__, "TRL").parse_args()
    t0 = time.perf_counter()
    vpy = ensure(VENV, REQS, library="trl", newest=args.newest)
    found = versions(vpy, ("torch", "transformers", "trl"))
    print(found, flush=True)
    t1 = time.perf_counter()
    code = regenerate_and_test(vpy, "scripts/build_trl_run.py", "trl_grpo",
                               ["tests/io/test_trl.py", "tests/diagnose/test_framework_credit.py",
                                "tests/bridges/test_bridges_trl.py"],
                               script_args=("--all",), pytest_args=tuple(args.pytest_args))
    print(f"test-trl: set-up {t1 - t0:.0f} s, run and tests {time.perf_counter() - t1:.0f} s; {found}")
    return code


if __name__ == "__main__":
    sys.exit(main())
