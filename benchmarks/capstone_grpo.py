"""Wall time of notebook 03's long capstone run (exercise 03c) on this machine.

Reruns the training that scripts/build_capstone_grpo.py cached in data/capstone_grpo, with the
settings its meta.json records (``labkit.learn.loop.train``, GRPO, one Adam step per batch, on a
fresh copy of the shipped model), on ``--threads`` torch threads (2 by default, the course's
budget), and prints its wall and CPU seconds beside the time recorded when the cache was built.
Prints figures, no assertions; other processes sharing the CPU slow it down.

    python benchmarks/capstone_grpo.py [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from labkit.core.cache import read_cache
from labkit.core.paths import data_path
from labkit.course.presets import lm_rl_setup
from labkit.learn.loop import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    meta, _ = read_cache(data_path("capstone_grpo"), script="build_capstone_grpo.py", files=["curve.csv"])
    s = meta["settings"]
    learner = lm_rl_setup(prompts_per_batch=s["prompts_per_batch"], n_per_prompt=s["n_per_prompt"])(s["seed"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    wall, cpu = time.perf_counter(), time.process_time()
    train(learner, "grpo", kind="grpo", iterations=s["iterations"], lr=s["lr"], epochs=s["epochs"],
          minibatches=s["minibatches"], max_grad_norm=s["max_grad_norm"], optimizer=s["optimizer"],
          eval_every=s["eval_every"], seed=s["seed"], progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"capstone long run: {s['iterations']} iterations of {s['prompts_per_batch']} x {s['n_per_prompt']}, "
          f"{args.threads} threads: {wall:.1f} s wall, {cpu:.1f} s CPU (load average before: {load:.1f}); "
          f"recorded at build: {meta['seconds']} s wall on {meta['torch_threads']} threads")


if __name__ == "__main__":
    main()
