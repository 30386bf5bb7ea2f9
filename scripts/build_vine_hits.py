"""Cached first-wrong-step hits for notebook 03, on more rollouts than the 32 reference ones.

The reference set has only 8 rollouts with a wrong step, so its hit rates move by 0.125 per hit.
This samples one rollout of each of 256 distinct held-out 4-operand problems (a seeded sample
drawn independently of the reference rollouts), keeps the rollouts with a wrong step, and scores GRPO,
VinePPO with K = 1, 3, 9, 16 vines and a 64-vine Monte Carlo reference on them
(``vine_hit_sample`` below; the hits are ``labkit.scoring.first_error_hits``). Per-rollout hits go
to data/vine_hits/hits.csv, sample size, costs and the provenance stamp (``labkit.core.cache``) to
data/vine_hits/meta.json; the notebook loads them (``load_vine_hits``) and computes the intervals
itself.

Usage: python scripts/build_vine_hits.py [--problems 256] [--truth-k 64] [--seed 3]
Measured: 85 s of CPU (756 s wall on a shared, overloaded 2-core machine). The 64-vine
reference (not the 256 vines of data/lm_truth) keeps it affordable: its values have a standard
error up to 0.06, enough to rank the steps of a rollout. Rerun whenever data/tiny_lm changes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Iterable

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.core.checks import check_int  # noqa: E402
from labkit.course.presets import LM_OPERANDS, held_out_sample  # noqa: E402
from labkit.credit import get_estimator  # noqa: E402
from labkit.credit.mc import vineppo  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.scoring import first_error_hits  # noqa: E402

OUT = ROOT / "data" / "vine_hits"


def vine_hit_sample(env, *, n_problems: int = 256, n_operands: int = LM_OPERANDS, ks: Iterable[int] = (1, 3, 9, 16),
                    truth_k: int = 64, seed: int = 3, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """First-wrong-step hits on a larger sample than the 32 reference rollouts: one rollout of
    each of ``n_problems`` distinct held-out ``n_operands``-operand problems (sampling seed
    ``seed``); the rollouts with a wrong step are scored with GRPO (one group of all rollouts),
    VinePPO with each k of ``ks`` (vines seeded ``seed + k``, as notebook 03's ``vine_credits``
    seeds them) and a ``truth_k``-vine Monte Carlo "truth" (seed ``seed + truth_k + 1``). Returns
    (hits, meta): hits in long form (``method``, ``k`` (0 for GRPO), then ``first_error_hits``'
    columns plus ``first_error_step`` and ``reward``), meta the sample size and each method's
    vines and token positions."""
    n_problems = check_int("n_problems", n_problems, low=1)
    truth_k = check_int("truth_k", truth_k, low=1)
    ks = [check_int("ks", k, low=1) for k in ks]
    if truth_k in ks:
        raise ValueError(f"truth_k: {truth_k} is also in ks; the truth needs its own vines")
    ro = held_out_sample(env, n_problems, n_operands, seed=seed)
    wrong = (ro.truth["first_error_step"] >= 0).nonzero().flatten().tolist()
    if not wrong:
        raise ValueError("n_problems: no rollout of the sample has a wrong step")
    grpo = get_estimator("grpo")(ro.with_(group_ids=torch.zeros(len(ro), dtype=torch.long)))
    sub = ro.select(wrong)  # vines only where a hit can be scored
    credits = {("GRPO", 0): grpo.token[wrong]}
    costs = {"GRPO": {"vines": 0, "policy_tokens": 0}}
    # each k's vines seeded on their own (seed + k), the truth's one seed further on
    vine_seeds = {**{k: seed + k for k in ks}, truth_k: seed + 1 + truth_k}
    for k, vine_seed in vine_seeds.items():
        if progress:
            print(f"vines: k = {k}", flush=True)
        credit = vineppo(sub, value_fn=env.value_fn(seed=vine_seed), k=k)
        name = f"truth K={k}" if k == truth_k else f"VinePPO K={k}"
        credits[(name, k)] = credit.token
        costs[name] = {"vines": credit.cost.policy_forwards, "policy_tokens": credit.cost.policy_tokens}
    tables = []
    for (name, k), token in credits.items():
        table = first_error_hits(token, sub)
        table.insert(0, "k", k)
        table.insert(0, "method", name)
        table["first_error_step"] = sub.truth["first_error_step"][table.row].tolist()
        table["reward"] = sub.rewards.sum(1)[table.row].tolist()
        table["row"] = [wrong[r] for r in table.row]  # index in the whole sample
        tables.append(table)
    meta = {"n_problems": n_problems, "n_operands": n_operands, "seed": seed, "success": float(ro.scores.mean()),
            "with_wrong_step": len(wrong), "truth_k": truth_k, "ks": ks, "cost": costs}
    return pd.concat(tables, ignore_index=True), meta


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
    hits, meta = vine_hit_sample(env, n_problems=args.problems, ks=args.ks, truth_k=args.truth_k, seed=args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    hits.to_csv(OUT / "hits.csv", index=False, float_format="%.6g")
    meta.update({"torch_threads": 1, "torch": torch.__version__, "seconds": round(time.perf_counter() - start, 1)})
    write_meta(OUT / "meta.json", meta, script=__file__, args=cli_args(args), inputs=["tiny_lm/model.safetensors"],
               indent=1)
    print(hits.groupby("method", sort=False).hit.agg(["mean", "size"]).round(3).to_string())
    print(f"wrote {OUT} in {meta['seconds']:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
