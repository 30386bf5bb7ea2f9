"""Cached RL runs for notebook 03: GRPO vs PPO-with-critic vs VinePPO on the tiny LM.

Each method (``labkit.learn.lm_runs.lm_rl_runs``) trains a fresh copy of the shipped model on
4-operand training prompts (``labkit.course.presets.lm_rl_setup``) for the same number of
iterations (same batches of prompts, same loss settings; only the credit differs), for several
seeds, and is evaluated on 256 distinct held-out 4-operand problems every few iterations.
Learning curves go to data/rl_runs/curves.csv, parameters, timing and the provenance stamp
(``labkit.core.cache``) to data/rl_runs/meta.json. The notebook loads them (training live would
take minutes) and re-runs a small live piece.

Usage: python scripts/build_rl_runs.py [--methods GRPO PPO VinePPO] [--seeds 0 1 2] [--iterations 24]
Runs of the named methods replace their rows in an existing curves.csv, so methods can be built
in separate processes. Measured: about 19 minutes of one core for everything (GRPO 3, PPO 5,
VinePPO 11); run `--methods VinePPO` and `--methods GRPO PPO` side by side on 2 cores to halve it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.course.presets import lm_rl_setup  # noqa: E402
from labkit.learn.lm_runs import lm_rl_runs  # noqa: E402
from labkit.learn.loop import compare, summarise  # noqa: E402

METHODS = ["GRPO", "PPO", "VinePPO"]

OUT = ROOT / "data" / "rl_runs"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--k", type=int, default=9, help="VinePPO vines per step boundary")
    ap.add_argument("--eval-every", type=int, default=4)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # small batches: one thread is as fast and does not fight other processes
    start = time.perf_counter()
    settings = dict(iterations=args.iterations, lr=args.lr, epochs=args.epochs, minibatches=args.minibatches,
                    eval_every=args.eval_every)
    curves = compare(lm_rl_setup(), lm_rl_runs(k=args.k, methods=args.methods), seeds=args.seeds, **settings)
    OUT.mkdir(parents=True, exist_ok=True)
    csv, meta_file = OUT / "curves.csv", OUT / "meta.json"
    if csv.is_file():  # keep the other methods' runs
        old = pd.read_csv(csv)
        curves = pd.concat([old[~old.label.isin(args.methods)], curves], ignore_index=True)
    curves.to_csv(csv, index=False, float_format="%.6g")
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    meta.update({
        "setup": "lm_rl_setup(): 4-operand prompts, 512 training problems, 256 distinct held-out problems, "
                 "8 prompts x 8 samples per iteration",
        "settings": settings, "k": args.k, "seeds": args.seeds,
        "torch_threads": 1, "torch": torch.__version__,
    })
    meta.setdefault("seconds", {}).update({m: None for m in args.methods})
    for m in args.methods:
        meta["seconds"][m] = round(float(curves[curves.label == m].groupby("seed").seconds.max().sum()), 1)
    # the stamp names every method the file holds now (run with these settings), so its command
    # rebuilds the whole file
    held = argparse.Namespace(**{**vars(args), "methods": [m for m in METHODS if m in set(curves.label)]})
    write_meta(meta_file, meta, script=__file__, args=cli_args(held), inputs=["tiny_lm/model.safetensors"], indent=1)
    print(summarise(curves).round(3).to_string(index=False))
    print(f"wrote {csv} and {meta_file} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
