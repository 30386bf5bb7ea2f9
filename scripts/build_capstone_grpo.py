"""Cached long run of notebook 03's capstone (exercise 03c): the lab's GRPO loop on the tiny LM.

The notebook's live cell trains a few iterations with the reader's own loop; this runs the same
recipe for a few dozen: ``labkit.learn.loop.train(learner, "grpo", kind="grpo", epochs=1,
minibatches=1, max_grad_norm=None)`` with Adam (one update per batch, so PPO's ratio is 1 and the
loss is GRPO's seq-mean-token-mean policy gradient, the loop exercise 03c asks for), on a fresh
copy of the shipped model (``labkit.course.presets.lm_rl_setup``: 4-operand training prompts,
256 held-out problems), and records, besides the learning curve, the log-probability of every
generated token of the 32 reference rollouts (``labkit.envs.arithmetic.truth.load_reference``)
before and after training: the notebook draws what moved.

Writes data/capstone_grpo/curve.csv (one row per iteration, ``train``'s columns),
data/capstone_grpo/logprobs.csv (``row``, ``position``, ``before``, ``after`` for each generated
token of the reference rollouts) and data/capstone_grpo/meta.json (settings, the wall time of the
training and the provenance stamp, ``labkit.core.cache``).

Usage: python scripts/build_capstone_grpo.py [--iterations 60] [--lr 3e-5] [--prompts 8]
       [--samples 8] [--eval-every 10] [--seed 0] [--threads 2]
Rerun whenever data/tiny_lm changes. benchmarks/capstone_grpo.py times the same training on the
current machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.course.presets import lm_rl_setup  # noqa: E402
from labkit.envs.arithmetic.truth import load_reference  # noqa: E402
from labkit.learn.loop import train  # noqa: E402

OUT = ROOT / "data" / "capstone_grpo"


def capstone_run(*, iterations: int, lr: float, prompts: int, samples: int, eval_every: int,
                 seed: int) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """The long run: (train's curve, the reference rollouts' token log-probabilities before and
    after training in long form, the training's wall seconds)."""
    learner = lm_rl_setup(prompts_per_batch=prompts, n_per_prompt=samples)(seed)
    ref, _ = load_reference(learner.env)
    rows = torch.arange(len(ref))
    with torch.no_grad():
        before = learner.logprobs(ref, rows)
    start = time.perf_counter()
    curve = train(learner, "grpo", kind="grpo", iterations=iterations, lr=lr, epochs=1, minibatches=1,
                  max_grad_norm=None, optimizer="adam", eval_every=eval_every, seed=seed, progress=False,
                  label="GRPO (lab's loop)")
    seconds = time.perf_counter() - start
    with torch.no_grad():
        after = learner.logprobs(ref, rows)
    b, t = ref.mask.nonzero(as_tuple=True)
    tokens = pd.DataFrame({"row": b.tolist(), "position": t.tolist(), "before": before[b, t].tolist(),
                           "after": after[b, t].tolist()})
    return curve, tokens, seconds


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cpu = time.process_time()
    curve, tokens, seconds = capstone_run(iterations=args.iterations, lr=args.lr, prompts=args.prompts,
                                          samples=args.samples, eval_every=args.eval_every, seed=args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    curve.to_csv(OUT / "curve.csv", index=False, float_format="%.6g")
    tokens.to_csv(OUT / "logprobs.csv", index=False, float_format="%.6g")
    settings = {"iterations": args.iterations, "lr": args.lr, "prompts_per_batch": args.prompts,
                "n_per_prompt": args.samples, "eval_every": args.eval_every, "seed": args.seed,
                "optimizer": "adam", "epochs": 1, "minibatches": 1, "max_grad_norm": None}
    meta = {"settings": settings, "seconds": round(seconds, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
            "torch_threads": args.threads, "torch": torch.__version__}
    write_meta(OUT / "meta.json", meta, script=__file__, args=cli_args(args),
               inputs=["tiny_lm/model.safetensors", "lm_truth/reference.safetensors"], indent=1)
    evals = curve.dropna(subset=["success"])
    print(evals[["iteration", "train_reward", "success"]].to_string(index=False))
    print(f"wrote {OUT}: training took {seconds:.1f} s on {args.threads} threads")


if __name__ == "__main__":
    main(sys.argv[1:])
