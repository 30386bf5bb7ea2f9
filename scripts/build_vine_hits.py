"""Cached first-wrong-step hits for notebook 03, on more rollouts than the 32 reference ones.

The reference set has only 8 rollouts with a wrong step, so its hit rates move by 0.125 per hit.
This samples one rollout of each of 256 distinct held-out 4-operand problems (a seeded sample
drawn independently of the reference rollouts), keeps the rollouts with a wrong step, and scores GRPO,
VinePPO with K = 1, 3, 9, 16 vines and a 64-vine Monte Carlo reference on them
(``labkit.course.nb03_vineppo.vine_hit_sample``). Per-rollout hits go to data/vine_hits/hits.csv,
sample size and costs to data/vine_hits/meta.json; the notebook loads them and computes the
intervals itself.

Usage: python scripts/build_vine_hits.py [--problems 256] [--truth-k 64] [--seed 3]
Measured: 85 s of CPU (756 s wall on a shared, overloaded 2-core machine). The 64-vine
reference (not the 256 vines of data/lm_truth) keeps it affordable: its values have a standard
error up to 0.06, enough to rank the steps of a rollout. Rerun whenever data/tiny_lm changes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.course import nb03_vineppo as nb03  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402

OUT = ROOT / "data" / "vine_hits"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=256)
    ap.add_argument("--ks", nargs="+", type=int, default=[1, 3, 9, 16])
    ap.add_argument("--truth-k", type=int, default=64)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # small batches: one thread is as fast and does not fight other processes
    start = time.perf_counter()
    env = ArithmeticLM.load()
    hits, meta = nb03.vine_hit_sample(env, n_problems=args.problems, ks=args.ks, truth_k=args.truth_k,
                                      seed=args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    hits.to_csv(OUT / "hits.csv", index=False, float_format="%.6g")
    weights = ROOT / "data" / "tiny_lm" / "model.safetensors"
    meta.update({"model_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "torch_threads": 1,
                 "torch": torch.__version__, "seconds": round(time.perf_counter() - start, 1)})
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(hits.groupby("method", sort=False).hit.agg(["mean", "size"]).round(3).to_string())
    print(f"wrote {OUT} in {meta['seconds']:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
