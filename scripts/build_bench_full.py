"""Build the cached full benchmark run: every registered estimator on every task of the `full` suite.

The `full` suite (``labkit.bench.suite``): the tiny LM's reference rollouts with cached Monte Carlo
step truth, BifurcationChain at horizons 10, 40, 100, 200, ToolWorld over 10 / 20 / 50 turns x
tool noise 0 / 0.2 / 0.4, every designed TeamTask case; seeds 0, 1, 2. Writes
data/bench/full/records.jsonl (every record validated against data/bench/record.schema.json),
records.csv and meta.json (wall time, thread count, versions, record counts).

Usage: python scripts/build_bench_full.py [--out DIR] [--resume]
Runs on one torch thread (the measured wall time in meta.json is for one thread).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import labkit  # noqa: E402
from labkit.bench import run_suite  # noqa: E402
from labkit.bench.records import CSV, JSONL  # noqa: E402
from labkit.core.paths import data_path  # noqa: E402


def main(argv: list[str]) -> None:
    """Run the full suite into ``--out`` (default data/bench/full) and write meta.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(data_path("bench", "full")), help="results folder")
    ap.add_argument("--resume", action="store_true", help="keep finished cells (default: start over)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    if not args.resume:
        for name in (JSONL, CSV, "meta.json"):
            (out / name).unlink(missing_ok=True)
    start = time.perf_counter()
    res = run_suite("full", "all", out, progress=True)
    wall = time.perf_counter() - start
    recs = res["records"]
    counts = {s: sum(r["status"] == s for r in recs) for s in ("ok", "skipped", "error")}
    meta = {"suite": "full", "estimators": "all", "records": len(recs), "counts": counts,
            "wall_seconds": round(wall, 1), "torch_threads": torch.get_num_threads(), "resumed": bool(args.resume),
            "labkit_version": labkit.__version__, "torch_version": torch.__version__,
            "python_version": platform.python_version(), "machine": platform.machine(),
            "command": "python scripts/build_bench_full.py"}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
