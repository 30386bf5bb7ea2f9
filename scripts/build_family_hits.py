"""Cached first-wrong-step hits of every reasoning-side estimator of notebook 04, on more rollouts
than the 32 reference ones and over several sampling seeds.

Notebook 04's cross-family table runs on the 32 reference rollouts, of which only 8 have a wrong
step: a hit rate there moves by 0.125 per hit. This draws, for each sampling seed, one rollout of
each of 256 distinct held-out 4-operand problems, runs every estimator of the table on them with
that seed (``labkit.course.reasoning_roster.reasoning_methods`` with ``Knobs(seed=seed)``; the
critic fitted with that seed; group baselines see the 256 rollouts as one group, as the notebook's
see its 32) and scores each on the rollouts that have a wrong step: the first-wrong-step hit
(``labkit.scoring.first_error_hits``) and the within-rollout rank correlation against a 64-vine
Monte Carlo step advantage (``family_hit_sample`` below). CAPO is scored at several verifier error
rates as well. Per-rollout scores go to data/family_hits/hits.csv; sample sizes, costs and the
provenance stamp (``labkit.core.cache``) to data/family_hits/meta.json. Notebook 04 loads them
(``labkit.course.nb04_process_rewards.load_family_hits``) and computes the intervals itself
(``family_intervals``).

Usage: python scripts/build_family_hits.py [--problems 256] [--seeds 100 200 300 400] [--truth-k 64]
                                           [--capo-errors 0 0.1 0.3 0.5]
Measured: 1108 s of wall time for the default four seeds, one thread, on a shared and busy 2-core
machine (about 200 s of CPU per seed when the machine is idle). Rerun whenever data/tiny_lm,
data/reward_models or data/implicit_lm change (the stamp catches those), or when the roster in
labkit/course/reasoning_roster.py does (nothing catches that).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.core.checks import check_int, check_number  # noqa: E402
from labkit.course import reasoning_roster as roster  # noqa: E402
from labkit.course.presets import LM_OPERANDS  # noqa: E402
from labkit.credit.mc import vineppo  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.scoring import first_error_hits, step_rank_correlation  # noqa: E402

OUT = ROOT / "data" / "family_hits"
INPUTS = ["tiny_lm/model.safetensors", "reward_models/prm.safetensors", "reward_models/orm.safetensors",
          "implicit_lm/dpo_model.safetensors", "implicit_lm/treg_model.safetensors"]
# the truth's vines are seeded past every seed the roster uses (seed + 1 .. seed + 5)
TRUTH_SEED_OFFSET = 65


def rank_within(credit: torch.Tensor, truth: torch.Tensor, rollouts) -> list[float]:
    """Spearman's rho between each rollout's step credits and its true step advantages
    (``step_rank_correlation`` with ``within=True`` on that rollout alone); NaN where there is
    nothing to rank (one step, or a constant truth), the rollouts that score skips."""
    steps, present = rollouts.view(truth.double(), "step", "mean")
    out = []
    for b in range(rollouts.batch_size):
        if int(present[b].sum()) >= 2 and float(steps[b][present[b]].std()) > 0:
            out.append(step_rank_correlation(credit[b:b + 1], truth[b:b + 1], rollouts.select([b]), within=True))
        else:
            out.append(float("nan"))
    return out


def family_hit_sample(env, models, *, seed: int, n_problems: int = 256, n_operands: int = LM_OPERANDS,
                      truth_k: int = 64, capo_errors: Sequence[float] = (0.0, 0.1, 0.3, 0.5),
                      progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Every method of notebook 04's table on one sample: one rollout of each of ``n_problems``
    distinct held-out ``n_operands``-operand problems (sampling seed ``seed``), the methods run
    with ``Knobs(seed=seed)`` on all of them, scored on the rollouts with a wrong step; CAPO also
    at each verifier error rate of ``capo_errors`` (as "CAPO, verifier error e"). ``models``:
    ``load_models(env, seed=seed)``. Returns (scores, meta): one row per (method, rollout with a
    wrong step) with ``seed``, ``method``, ``row`` (index in the sample), ``hit``, ``chance``,
    ``rank_corr_within`` (against the ``truth_k``-vine step advantage, vines seeded
    ``seed + 65``), ``first_error_step``, ``steps`` and ``reward``; meta the sample's size and
    success rate and each method's cost and seconds."""
    seed = check_int("seed", seed, low=0)
    n_problems = check_int("n_problems", n_problems, low=1)
    truth_k = check_int("truth_k", truth_k, low=1)
    capo_errors = [check_number("capo_errors", e, low=0.0, high=1.0) for e in capo_errors]
    problems = env.task.sample_prompts(n_problems, n_operands, split="held_out", seed=seed, unique=True)
    ro = env.rollouts(problems, seed=seed)
    wrong = (ro.truth["first_error_step"] >= 0).nonzero().flatten().tolist()
    if not wrong:
        raise ValueError("n_problems: no rollout of the sample has a wrong step")
    sub = ro.select(wrong)
    truth = vineppo(sub, value_fn=env.value_fn(seed=seed + TRUTH_SEED_OFFSET), k=truth_k).token
    present = sub.view(sub.rewards, "step", "sum")[1]
    runs = [(m.name, m) for m in roster.reasoning_methods(env, models, roster.Knobs(seed=seed))]
    for e in capo_errors:
        capo = roster.method_by_name(roster.reasoning_methods(env, models, roster.Knobs(error_rate=e, seed=seed)),
                                     "CAPO")
        runs.append((f"CAPO, verifier error {e:g}", capo))
    tables, costs = [], {}
    for name, method in runs:
        if progress:
            print(f"seed {seed}: {name}", flush=True)
        start = time.perf_counter()
        credit = method.run(ro)
        seconds = time.perf_counter() - start
        token = credit.token[wrong]
        table = first_error_hits(token, sub)
        rhos = rank_within(token, truth, sub)
        table["rank_corr_within"] = [rhos[r] for r in table.row]
        table["first_error_step"] = sub.truth["first_error_step"][table.row].tolist()
        table["steps"] = present[table.row].sum(1).tolist()
        table["reward"] = sub.rewards.sum(1)[table.row].tolist()
        table["row"] = [wrong[r] for r in table.row]  # index in the whole sample
        table.insert(0, "method", name)
        table.insert(0, "seed", seed)
        tables.append(table)
        costs[name] = {**credit.cost.as_dict(), "seconds": round(seconds, 2)}
    meta = {"seed": seed, "n_problems": n_problems, "success": float(ro.scores.mean()),
            "with_wrong_step": len(wrong), "scored": int(len(tables[0])), "cost": costs}
    return pd.concat(tables, ignore_index=True), meta


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=256)
    ap.add_argument("--seeds", nargs="+", type=int, default=[100, 200, 300, 400])
    ap.add_argument("--truth-k", type=int, default=64)
    ap.add_argument("--capo-errors", nargs="+", type=float, default=[0.0, 0.1, 0.3, 0.5])
    args = ap.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        raise SystemExit("--seeds: each seed once")
    if any(abs(a - b) <= TRUTH_SEED_OFFSET for a in args.seeds for b in args.seeds if a != b):
        # seed + 1 .. seed + 65 feed one sample's vines; another sample must not reuse them
        raise SystemExit(f"--seeds: keep seeds more than {TRUTH_SEED_OFFSET} apart")
    torch.set_num_threads(1)  # small batches: one thread is as fast and does not fight other processes
    start = time.perf_counter()
    env = ArithmeticLM.load()
    tables, samples = [], []
    for seed in args.seeds:
        models = roster.load_models(env, seed=seed, progress=False)
        table, meta = family_hit_sample(env, models, seed=seed, n_problems=args.problems, truth_k=args.truth_k,
                                        capo_errors=args.capo_errors)
        tables.append(table)
        samples.append(meta)
    hits = pd.concat(tables, ignore_index=True)
    OUT.mkdir(parents=True, exist_ok=True)
    hits.to_csv(OUT / "hits.csv", index=False, float_format="%.6g")
    meta = {"n_problems": args.problems, "n_operands": LM_OPERANDS, "seeds": args.seeds, "truth_k": args.truth_k,
            "capo_errors": args.capo_errors, "truth_seed_offset": TRUTH_SEED_OFFSET, "samples": samples,
            "with_wrong_step": sum(s["with_wrong_step"] for s in samples), "torch_threads": 1,
            "torch": torch.__version__, "seconds": round(time.perf_counter() - start, 1)}
    write_meta(OUT / "meta.json", meta, script=__file__, args=cli_args(args), inputs=INPUTS, indent=1)
    print(hits.groupby("method", sort=False).hit.agg(["mean", "size"]).round(3).to_string())
    print(f"wrote {OUT} in {meta['seconds']:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
