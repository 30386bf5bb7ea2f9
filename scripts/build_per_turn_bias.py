"""The per-turn question on ToolWorld: is the policy gradient of per-turn credit biased when the
policy decides when to stop, and by how much?

For every (step_cost, find_reward) of ``labkit.course.per_turn.PER_TURN_SETTINGS`` and both
agents of ``STOPPING_AGENTS`` (one that stops early, one that plays on), ``gradient_bias``
averages the policy gradient of five per-turn estimators (MT-GRPO's turn-index normalisation,
the same with a return-to-go leave-one-out baseline, GiGPO, turn-level GAE with the exact
values, the exact advantage) over ``--batches`` independent batches of 4 tasks x 8 episodes and
reads it against the exact dJ/dlogits: its scale along the exact gradient and its push towards
submitting that no rescaling explains, each with a 95 % interval over the batches.

Usage: python scripts/build_per_turn_bias.py [--batches 1000] [--seed 0]
(about two minutes on one core) -> data/per_turn/bias.csv and data/per_turn/meta.json (stamped,
``labkit.core.cache``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.course import per_turn as lesson  # noqa: E402

OUT = ROOT / "data" / "per_turn"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=1000, help="independent batches per cell")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    grid = lesson.per_turn_grid(n_batches=args.batches, seed=args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    grid.to_csv(OUT / "bias.csv", index=False, float_format="%.6g")
    meta = {"what": __doc__.splitlines()[0], "world": lesson.PER_TURN_WORLD,
            "settings": [list(s) for s in lesson.PER_TURN_SETTINGS], "agents": lesson.STOPPING_AGENTS,
            "batches": args.batches, "tasks_per_batch": 4, "group_size": 8, "seed": args.seed,
            "estimators": list(lesson.PER_TURN_ESTIMATORS), "seconds": round(time.perf_counter() - start, 1)}
    write_meta(OUT / "meta.json", meta, script=__file__, args=cli_args(args), indent=1)
    print(grid.round(4).to_string())
    print(f"wrote {OUT / 'bias.csv'} in {meta['seconds']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
