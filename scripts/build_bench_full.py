"""Build the cached full benchmark run: every registered estimator on every task of the `full` suite.

The `full` suite (``labkit.bench.suite``): the tiny LM's reference rollouts with cached Monte Carlo
step truth, BifurcationChain at horizons 10, 40, 100, 200, ToolWorld over 10 / 20 / 50 turns x
tool noise 0 / 0.2 / 0.4, every designed TeamTask case; seeds 0, 1, 2. Writes
data/bench/full/records.jsonl (every record validated against data/bench/record.schema.json),
records.csv and meta.json (wall time, thread count, versions, record counts, and the provenance
stamp of ``labkit.core.cache``: the LM task reads the tiny model, its reference rollouts, reward
models and tuned copies).

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
from labkit.core.cache import rebuild_command, write_meta  # noqa: E402
from labkit.core.paths import data_path  # noqa: E402

# every file the full suite's LM task reads
INPUTS = ["tiny_lm/model.safetensors", "lm_truth/reference.safetensors", "reward_models/prm.safetensors",
          "reward_models/orm.safetensors", "implicit_lm/dpo_model.safetensors", "implicit_lm/treg_model.safetensors"]


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
            "command": rebuild_command(__file__)}
    # a resumed build holds what a fresh one would (meta's "resumed" says it was resumed): its
    # command is the plain script
    write_meta(out / "meta.json", meta, script=__file__, inputs=INPUTS, indent=2)
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
