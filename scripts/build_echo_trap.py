"""Cached echo-trap sweep for notebook 05: loss x learning rate x method, several seeds.

Notebook 05's echo trap (``labkit.learn.echo_trap.echo_trap_runs``: GRPO, GRPO on
StarPO-filtered batches and the exact-advantage oracle, each from the uniform agent in
``labkit.course.presets.echo_world()``, 100 iterations of 8 tasks x 8 episodes, Adam) is run with both losses of
``labkit.learn.loop.train`` that differ in how they weigh long episodes (``"grpo"``: mean
within each episode, then over episodes; ``"ppo_clip"`` with one epoch: mean over all turns of
the batch) and three learning rates, on five seeds. Writes to data/echo_trap/:

* ``final.csv``: one row per run (kind, lr, label, seed): final exact J, entropy, timeout share,
  success rate and repeat share of 256 fresh episodes, and the mean ``timeout_push`` (the signed
  share of the loss's weight that timeouts carry) over the first 20 batches;
* ``curves.csv``: per (kind, lr, label, iteration) the mean over seeds of exact J (every 10th
  iteration), entropy, reward spread, the share of flat groups and the timeout share, weight and
  push of the batch trained on;
* ``exact_ascent.csv``: gradient ascent on the exact J (no sampling; ``exact_ascent``) with Adam
  at the same learning rates and plain gradient steps (SGD) at 1 and 3;
* ``loss_direction.csv``: ``loss_direction`` with 32 batches of 64 episodes per probed policy:
  on the way into the loop, the per-episode and token-mean updates built from exact advantages,
  against the exact gradient;
* ``meta.json``: settings, seeds, wall time per part, torch version, and the provenance stamp
  (``labkit.core.cache``; a run of some ``--parts`` records every part the folder holds).

Usage: python scripts/build_echo_trap.py [--parts sweep ascent direction] [--seeds 0 1 2 3 4]
[--lrs 0.03 0.1 0.3]. Measured: about 8 minutes of one busy core for the sweep, 1 for the rest.
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
from labkit.core.paths import data_path  # noqa: E402
from labkit.course.presets import ECHO_WORLD, echo_world  # noqa: E402
from labkit.learn.echo_trap import ECHO_LOSSES, echo_trap_sweep, exact_ascent, loss_direction, trap_table  # noqa: E402

PARTS = ["sweep", "ascent", "direction"]

CURVE_COLUMNS = ["success", "entropy", "reward_spread", "zero_spread_share", "timeout_share", "timeout_weight",
                 "timeout_push", "wrong_submit_push", "success_push"]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--lrs", nargs="+", type=float, default=[0.03, 0.1, 0.3])
    ap.add_argument("--kinds", nargs="+", default=list(ECHO_LOSSES))
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # tabular policy, small batches: one thread is as fast
    out = data_path("echo_trap")
    out.mkdir(parents=True, exist_ok=True)
    meta_file = out / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    meta.update({"world": ECHO_WORLD, "torch_threads": 1, "torch": torch.__version__})
    seconds = meta.get("seconds")
    seconds = meta["seconds"] = seconds if isinstance(seconds, dict) else {}
    if "sweep" in args.parts:
        start = time.perf_counter()
        settings = dict(iterations=args.iterations, keep=0.25, n_tasks=8, group_size=8, eval_every=10)
        curves, final = echo_trap_sweep(echo_world(), kinds=args.kinds, lrs=args.lrs, seeds=args.seeds,
                                        progress=True, **settings)
        final.to_csv(out / "final.csv", index=False, float_format="%.6g")
        mean = curves.groupby(["kind", "lr", "label", "iteration"], sort=False)[CURVE_COLUMNS].mean().reset_index()
        mean.to_csv(out / "curves.csv", index=False, float_format="%.5g")
        meta.update({"settings": settings, "kinds": args.kinds, "lrs": args.lrs, "seeds": args.seeds,
                     "optimizer": "adam", "epochs": 1})
        seconds["sweep"] = round(time.perf_counter() - start, 1)
        print(trap_table(final).round(3).to_string(index=False))
    if "ascent" in args.parts:
        start = time.perf_counter()
        runs = [exact_ascent(echo_world(), lr=lr, optimizer="adam", iterations=args.iterations) for lr in args.lrs]
        runs += [exact_ascent(echo_world(), lr=lr, optimizer="sgd", iterations=args.iterations) for lr in (1.0, 3.0)]
        ascent = pd.concat(runs, ignore_index=True)
        ascent.to_csv(out / "exact_ascent.csv", index=False, float_format="%.6g")
        meta["ascent"] = {"adam_lrs": args.lrs, "sgd_lrs": [1.0, 3.0], "iterations": args.iterations}
        seconds["ascent"] = round(time.perf_counter() - start, 1)
        print(ascent[ascent.iteration == args.iterations].round(3).to_string(index=False))
    if "direction" in args.parts:
        start = time.perf_counter()
        direction = loss_direction(echo_world(), n_batches=32)
        direction.to_csv(out / "loss_direction.csv", index=False, float_format="%.6g")
        meta["direction"] = {"probe_at": sorted(direction.iteration.unique().tolist()), "n_batches": 32,
                             "lr": 0.3, "seed": 0}
        seconds["direction"] = round(time.perf_counter() - start, 1)
        print(direction.round(3).to_string(index=False))
    # the stamp names every part the folder holds now, so its command rebuilds all of them
    built = argparse.Namespace(**{**vars(args), "parts": [p for p in PARTS if p in args.parts or p in seconds]})
    write_meta(meta_file, meta, script=__file__, args=cli_args(built), indent=1)
    print(f"wrote {out}: {seconds}")


if __name__ == "__main__":
    main(sys.argv[1:])
