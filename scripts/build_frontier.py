"""The credit-assignment efficiency frontier (the survey's open question §9.2): train every arm of
``labkit.bench.frontier`` at equal compute budgets over horizons, budgets and seeds.

Writes data/bench/frontier/frontier.csv (one row per world, horizon, estimator, budget, seed),
crossover.csv (``frontier.crossover``: per horizon, the smallest budget at which a fine-grained
arm's mean final success beats GRPO's, or "none") and meta.json (the grid, the unit, the arms'
batches, wall time, versions). Resumable: cells already in frontier.csv are not recomputed
(``--fresh`` starts over). meta.json carries the provenance stamp of ``labkit.core.cache``.
Run on one thread: OMP_NUM_THREADS=1 python scripts/build_frontier.py
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
from labkit.core.paths import data_path  # noqa: E402

GRID = {"chain": [10, 40, 100, 200], "toolworld": [10, 20, 50]}
ESTIMATORS = {"chain": ["grpo", "vineppo"], "toolworld": ["grpo", "gigpo", "vineppo", "c3"]}
BUDGETS = [256, 1024, 4096, 16384]   # episode equivalents (x (2T + 1) units)
SEEDS = [0, 1, 2]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=data_path("bench", "frontier"))
    ap.add_argument("--seeds", nargs="+", type=int, default=SEEDS)
    ap.add_argument("--budgets", nargs="+", type=float, default=BUDGETS)
    ap.add_argument("--fresh", action="store_true", help="delete frontier.csv first")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / "frontier.csv"
    if args.fresh and csv.exists():
        csv.unlink()
    meta_file = args.out / "meta.json"
    previous = json.loads(meta_file.read_text()) if meta_file.exists() and not args.fresh else {}
    start = time.perf_counter()
    table = frontier.sweep(GRID, ESTIMATORS, args.budgets, args.seeds, out=csv, progress=True)
    wall = time.perf_counter() - start
    cross = frontier.crossover(table)
    cross.to_csv(args.out / "crossover.csv", index=False)
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    meta = {
        "what": "final exact success and credit quality of each arm trained until a compute budget is spent",
        "grid": GRID, "estimators": ESTIMATORS, "budgets_episode_equivalents": args.budgets, "seeds": args.seeds,
        "unit": "1 per env step, policy position, env reset and auxiliary call (labkit.bench.frontier docstring)",
        "unit_weights": frontier.UNIT_WEIGHTS, "episode_units": "2 * horizon + 1",
        "arms": {k: asdict(v) for k, v in frontier.ARMS.items()},
        "loss": "ppo_clip, one epoch, Adam at the learner's default lr 0.1, grad norm clipped to 1",
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
                     "is located; no shrinking was needed (see wall time)",
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "pandas": pd.__version__,
                     "commit": commit},
        "machine": platform.platform(),
    }
    write_meta(meta_file, meta, script=__file__, args=cli_args(args, skip=("out", "fresh")), indent=2)
    print(cross.to_string(index=False))
    print(f"{len(table)} cells, {wall:.0f} s this call")


if __name__ == "__main__":
    main(sys.argv[1:])
