"""Learning-rate sweep for notebook 03: GRPO vs PPO-with-critic vs VinePPO on the tiny LM at
several learning rates, several seeds each.

The runs are notebook 03's (``labkit.course.presets.lm_rl_setup`` and
``labkit.learn.lm_runs.lm_rl_runs``: the same prompts, batches, loss settings and evaluation as
``scripts/build_rl_runs.py``); only the
learning rate, the iteration count (an ``iterations`` column) and the seeds vary. The question it answers: is there a
learning rate at which the comparison moves beyond the noise of the seeds? Curves go to
data/rl_runs/lr_sweep.csv (with an ``lr`` column), settings and timing to
data/rl_runs/lr_sweep_meta.json; the notebook loads them (``load_lr_sweep``) and does not train.

Usage: python scripts/build_rl_lr_sweep.py --lrs 3e-5 1e-4 [--methods GRPO VinePPO] [--seeds 0 1 2]
       [--iterations 24]
Each (lr, method, seed) run is saved as it finishes and replaces an earlier run of the same
kind in lr_sweep.csv, so pieces can be built in separate processes (one thread each); the meta's
provenance stamp (``labkit.core.cache``) lists the command of every piece. One seed of 24 iterations takes about one
minute for GRPO, two for PPO and four for VinePPO (K = 9) on one core.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import PROVENANCE, cli_args, write_meta  # noqa: E402
from labkit.course.presets import lm_rl_setup  # noqa: E402
from labkit.learn.lm_runs import lm_rl_runs  # noqa: E402
from labkit.learn.loop import compare  # noqa: E402

OUT = ROOT / "data" / "rl_runs"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", nargs="+", type=float, required=True)
    ap.add_argument("--methods", nargs="+", default=["GRPO", "PPO", "VinePPO"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--k", type=int, default=9, help="VinePPO vines per step boundary")
    ap.add_argument("--eval-every", type=int, default=4)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # small batches: one thread is as fast and does not fight other processes
    csv, meta_file = OUT / "lr_sweep.csv", OUT / "lr_sweep_meta.json"
    settings = dict(epochs=args.epochs, minibatches=args.minibatches, eval_every=args.eval_every)
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    if meta and meta.get("settings") != settings:
        raise SystemExit(f"--epochs/--minibatches/--eval-every: {csv} was built with "
                         f"{meta['settings']}; delete it to change them")
    meta.update({"setup": "lm_rl_setup(): as data/rl_runs/meta.json", "settings": settings, "k": args.k,
                 "torch_threads": 1, "torch": torch.__version__})
    for lr in args.lrs:
        for method in args.methods:
            for seed in args.seeds:  # one run at a time, saved as it finishes: a long sweep can stop part way
                start = time.perf_counter()
                run = compare(lm_rl_setup(), lm_rl_runs(k=args.k, methods=[method]), seeds=[seed],
                              lr=lr, iterations=args.iterations, progress=False, **settings)
                run.insert(1, "lr", lr)
                run.insert(2, "iterations", args.iterations)
                save(run, meta, cli_args(args), csv, meta_file)
                end = run.dropna(subset=["success"]).success
                print(f"lr {lr:g} {method} seed {seed}: success {end.iloc[0]:.3f} -> {end.iloc[-1]:.3f} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)


def save(run: pd.DataFrame, meta: dict, piece: list[str], csv: Path, meta_file: Path) -> None:
    """Merge one run into the cache, replacing an earlier run of the same (lr, iterations,
    method, seed), and add ``piece`` (this command's arguments) to the stamp's list of pieces; a
    lock keeps two processes building pieces side by side from losing rows."""
    import fcntl

    lr, iterations, method, seed = (run[c].iloc[0] for c in ("lr", "iterations", "label", "seed"))
    with open(Path(tempfile.gettempdir()) / "labkit_lr_sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        curves = run
        if csv.is_file():
            old = pd.read_csv(csv)
            same = (old.lr == lr) & (old.iterations == iterations) & (old.label == method) & (old.seed == seed)
            curves = pd.concat([old[~same], run], ignore_index=True)
        curves = curves.sort_values(["lr", "iterations", "label", "seed", "iteration"], kind="stable")
        curves.to_csv(csv, index=False, float_format="%.6g")
        fresh = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        fresh.update({k: v for k, v in meta.items() if k not in ("seconds", "seeds", PROVENANCE)})
        key = f"{method} lr={lr:g} iterations={iterations}"
        done = curves[(curves.lr == lr) & (curves.iterations == iterations) & (curves.label == method)]
        fresh.setdefault("seconds", {})[key] = round(float(done.groupby("seed").seconds.max().sum()), 1)
        fresh.setdefault("seeds", {})[key] = sorted(int(s) for s in done.seed.unique())
        pieces = fresh.get(PROVENANCE, {}).get("args", [])
        pieces = pieces if pieces and isinstance(pieces[0], list) else [pieces] if pieces else []
        pieces = [p for p in pieces if p != piece] + [piece]  # in the order they were run
        write_meta(meta_file, fresh, script=__file__, args=pieces, inputs=["tiny_lm/model.safetensors"],
                   indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
