"""The credit-assignment efficiency frontier (the survey's open question §9.2): train every arm of
``labkit.bench.frontier`` at equal compute budgets over horizons, budgets and seeds.

Two suites, one data path (``frontier.sweep``, read back with ``frontier.load_frontier(folder)``):

* ``--suite frontier`` (default): the tabular chain and ToolWorld, into data/bench/frontier/;
* ``--suite shared``: the chain with a shared-weight policy (world ``chain_shared``), GRPO against
  VinePPO with steps of m tokens and K vines per fork (``frontier.VINE_STEP_LENS`` x
  ``frontier.VINE_KS``), five seeds, into data/bench/frontier_shared/. The tabular suite's chain
  rows are its contrast.

Writes frontier.csv (one row per world, horizon, estimator, budget, seed), crossover.csv
(``frontier.crossover``: per horizon, the smallest budget at which a fine-grained arm's mean final
success beats GRPO's, or "none"), time_to_success.csv (``frontier.time_to_success`` at
``SUCCESS_THRESHOLD``: the first budget at which an arm's mean success reaches it, with the
spread over seeds) and meta.json (the grid, the unit, the arms' batches, wall time, versions).
Resumable: cells already in frontier.csv are not recomputed (``--fresh`` starts over).
``--horizons`` and ``--budgets`` shrink a suite for a quick look (write it with ``--out``
elsewhere). meta.json carries the provenance stamp of ``labkit.core.cache``.
Run on one thread: OMP_NUM_THREADS=1 python scripts/build_frontier.py [--suite shared]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from labkit.bench import frontier  # noqa: E402
from labkit.core.cache import cli_args, write_meta  # noqa: E402

GRID = {"chain": [10, 40, 100, 200], "toolworld": [10, 20, 50]}
ESTIMATORS = {"chain": ["grpo", "vineppo"], "toolworld": ["grpo", "gigpo", "vineppo", "c3"]}
BUDGETS = [256, 1024, 4096, 16384]   # episode equivalents (x (2T + 1) units)
SEEDS = [0, 1, 2]
SHARED_VINES = [frontier.vine_arm_name(m, k) for m in frontier.VINE_STEP_LENS for k in frontier.VINE_KS]
SUITES = {
    "frontier": {"grid": GRID, "estimators": ESTIMATORS, "seeds": SEEDS, "out": frontier.FRONTIER_DIR},
    # five seeds: the shared policy's runs spread far more than the table's (some collapse)
    "shared": {"grid": {"chain_shared": [10, 40, 100, 200]}, "estimators": {"chain_shared": ["grpo", *SHARED_VINES]},
               "seeds": [0, 1, 2, 3, 4], "out": frontier.SHARED_FRONTIER_DIR},
}
SUCCESS_THRESHOLD = 0.9   # "time to success": the first budget whose mean exact success reaches it


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="frontier")
    ap.add_argument("--out", type=Path, default=None, help="default: the suite's folder in data/bench/")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the suite's seeds")
    ap.add_argument("--budgets", nargs="+", type=float, default=BUDGETS)
    ap.add_argument("--horizons", nargs="+", type=int, default=None,
                    help="only these horizons of the suite's grid (default: all)")
    ap.add_argument("--fresh", action="store_true", help="delete frontier.csv first")
    args = ap.parse_args(argv)
    suite = SUITES[args.suite]
    args.out = suite["out"] if args.out is None else args.out
    args.seeds = suite["seeds"] if args.seeds is None else args.seeds
    grid = {w: [h for h in hs if args.horizons is None or h in args.horizons] for w, hs in suite["grid"].items()}
    grid = {w: hs for w, hs in grid.items() if hs}
    if not grid:
        ap.error(f"--horizons: none of {args.horizons} is in the {args.suite} suite's grid {suite['grid']}")
    estimators = suite["estimators"]
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / "frontier.csv"
    if args.fresh and csv.exists():
        csv.unlink()
    meta_file = args.out / "meta.json"
    previous = json.loads(meta_file.read_text()) if meta_file.exists() and not args.fresh else {}
    start = time.perf_counter()
    table = frontier.sweep(grid, estimators, args.budgets, args.seeds, out=csv, progress=True)
    wall = time.perf_counter() - start
    cross = frontier.crossover(table)
    cross.to_csv(args.out / "crossover.csv", index=False)
    reach = frontier.time_to_success(table, SUCCESS_THRESHOLD)
    reach.to_csv(args.out / "time_to_success.csv", index=False)
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    meta = {
        "what": "final exact success and credit quality of each arm trained until a compute budget is spent",
        "suite": args.suite, "grid": grid, "estimators": estimators,
        "budgets_episode_equivalents": args.budgets, "seeds": args.seeds,
        "unit": "1 per env step, policy position, env reset and auxiliary call (labkit.bench.frontier docstring)",
        "unit_weights": frontier.UNIT_WEIGHTS, "episode_units": "2 * horizon + 1",
        "arms": {k: asdict(frontier.ARMS[k]) for k in sorted({n for names in estimators.values() for n in names})},
        "loss": "ppo_clip, one epoch, Adam, grad norm clipped to 1",
        "learning_rates": {w: frontier.LEARNING_RATES[w] for w in grid},
        "time_to_success_threshold": SUCCESS_THRESHOLD,
        "cells": int(len(table)),
        # the first iteration always runs: where one batch of an arm costs more than the budget the
        # cell overspends (vines on long chains at small budgets); the rest end within one iteration
        "overspent_cells": int((table.over_budget > 0).sum()),
        "max_spent_over_budget": round(float((table.spent / table.budget_units).max()), 2),
        "cells_over_by_more_than_10_percent": sorted({f"{r.world} T={r.horizon} {r.estimator} E={r.budget:g}"
                                                      for r in table.itertuples() if r.spent > 1.1 * r.budget_units}),
        # a resumed build only times the cells it computed; the sum keeps the whole build's time
        "wall_seconds_this_call": round(wall, 1),
        "wall_seconds_total": round(wall + previous.get("wall_seconds_total", 0.0), 1),
        "threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "grid_note": "chain horizons 10, 40, 100, 200 and ToolWorld turns 10, 20, 50, the range the benchmark protocol spans; "
                     "four budgets, so that a crossover between 1k and 16k episode equivalents "
                     "is located; no shrinking was needed (see wall time)"
                     + ("; the shared suite adds VinePPO's step length m and vines per fork K as arms "
                        "(m longer than a chain is the whole chain)" if args.suite == "shared" else ""),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "pandas": pd.__version__,
                     "commit": commit},
        "machine": platform.platform(),
    }
    write_meta(meta_file, meta, script=__file__, args=cli_args(args, skip=("out", "fresh")), indent=2)
    print(cross.to_string(index=False))
    print(f"\ntime to mean success >= {SUCCESS_THRESHOLD}:")
    print(reach.to_string(index=False))
    print(f"{len(table)} cells, {wall:.0f} s this call")


if __name__ == "__main__":
    main(sys.argv[1:])
