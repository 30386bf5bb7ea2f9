"""Monte Carlo ground truth for the tiny LM: values of reference rollouts' prefixes from many vines.

For a fixed, seeded set of reference rollouts of the shipped model on held-out problems, estimate
V(prefix) = P(correct final answer | prefix) from K continuations (default 256) at every step
boundary of every rollout, and at every token of the first few rollouts. The result is cached in
data/lm_truth/ (safetensors tensors + a JSON of parameters with the provenance stamp of
``labkit.core.cache``) so notebooks load it in well under a second:
`labkit.envs.arithmetic.truth.load_reference()`, which refuses it once data/tiny_lm changes.

Usage: python scripts/build_lm_truth.py [--k 256] [--rollouts 32] [--token-rows 4]
Takes about 3-4 minutes on 2 cores. Rerun whenever data/tiny_lm changes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.envs.arithmetic.truth import REFERENCE_DIR  # noqa: E402


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=256, help="continuations per prefix")
    ap.add_argument("--rollouts", type=int, default=32, help="reference rollouts")
    ap.add_argument("--token-rows", type=int, default=4, help="rollouts valued at every token")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    start = time.perf_counter()
    env = ArithmeticLM.load()
    # Mostly four operands, where the model makes its mistakes; a quarter with three.
    n4 = (3 * args.rollouts) // 4
    problems = (env.task.sample_prompts(n4, n_operands=4, split="held_out", seed=args.seed, unique=True)
                + env.task.sample_prompts(args.rollouts - n4, n_operands=3, split="held_out",
                                          seed=args.seed, unique=True))
    ro = env.rollouts(problems, n_per_prompt=1, seed=args.seed)
    print(f"{len(ro)} reference rollouts, success rate {float(ro.scores.mean()):.3f}")

    step_values, cost = env.value_fn(seed=args.seed + 1)(ro, args.k)
    print(f"step values: {int(cost.policy_forwards)} vines ({time.perf_counter() - start:.0f} s so far)")

    rows = list(range(min(args.token_rows, len(ro))))
    prefixes, owners, where = [], [], []
    for b in rows:
        for t in range(int(ro.lengths[b])):
            prefixes.append(ro.info["prompt_ids"][b] + ro.tokens[b, :t].tolist())
            owners.append(ro.info["problems"][b])
            where.append((b, t))
    vals, _ = env.prefix_values(prefixes, owners, args.k, seed=args.seed + 2)
    token_values = torch.zeros(len(rows), ro.horizon, dtype=torch.float64)
    for (b, t), v in zip(where, vals.tolist()):
        token_values[b, t] = v
    print(f"token values: {len(prefixes) * args.k} vines ({time.perf_counter() - start:.0f} s so far)")

    width = max(len(p) for p in ro.info["prompt_ids"])
    prompt_ids = torch.full((len(ro), width), env.pad_id, dtype=torch.long)
    for b, p in enumerate(ro.info["prompt_ids"]):
        prompt_ids[b, width - len(p):] = torch.tensor(p)  # left-padded, as the model saw them
    tensors = {
        "tokens": ro.tokens, "mask": ro.mask, "rewards": ro.rewards.float(), "step_ids": ro.step_ids,
        "logprobs": ro.logprobs.float(), "entropies": ro.entropies.float(), "prompt_ids": prompt_ids,
        "step_values": step_values.float(), "step_correct": ro.truth["step_correct"],
        "first_error_step": ro.truth["first_error_step"], "token_values": token_values.float(),
    }
    REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(REFERENCE_DIR / "reference.safetensors"))
    meta = {
        "k": args.k, "seed": args.seed, "n_rollouts": len(ro), "token_rows": rows,
        "operands": [list(p.operands) for p in problems],
        "temperature": env.temperature, "success_rate": float(ro.scores.mean()),
        "vines": int(cost.policy_forwards) + len(prefixes) * args.k,
        "seconds": round(time.perf_counter() - start, 1),
        "how": "V(prefix) = mean outcome reward of k continuations sampled at the policy temperature; "
               "standard error <= 0.5 / sqrt(k)",
    }
    write_meta(REFERENCE_DIR / "reference.json", meta, script=__file__, args=cli_args(args),
               inputs=["tiny_lm/model.safetensors"], indent=1)
    print(f"wrote {REFERENCE_DIR} in {meta['seconds']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
