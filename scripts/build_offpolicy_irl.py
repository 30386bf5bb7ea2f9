"""Off-policy turns (SORL) and inverse RL (StepAgent) on notebook 08's ToolWorld: every number
notebook 08 reports about them, cached in data/offpolicy_irl/ (seeded; about a minute on one core).

    python scripts/build_offpolicy_irl.py

Writes ``sorl_curves.csv`` (learning curves: on-policy vs batches ``staleness`` iterations old,
without and with SORL's clipping-triggered normalisation, GRPO credit), ``sorl_summary.csv``
(final exact success per arm: mean, min, max over seeds; mean clip fraction), ``sorl_check.csv``
(the stale arms again on eight more seeds, 3..10),
``step_agent_scores.csv`` (StepAgent credit on one fixed batch against the exact advantage and
the skill/luck split, next to GRPO), ``step_agent_curves.csv`` (training with StepAgent credit
vs GRPO) and ``meta.json`` (settings, seeds, timings, the DP expert's action table and the
provenance stamp of ``labkit.core.cache``: no input file, the policies are tabular).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labkit.core.cache import write_meta  # noqa: E402
from labkit.course.presets import NB08_WORLD, scripted_agent_setup  # noqa: E402
from labkit.credit import get_estimator  # noqa: E402
from labkit.envs.toolworld import ToolWorld  # noqa: E402
from labkit.envs.toolworld.learner import ToolLearner  # noqa: E402
from labkit.learn.irl import StepRewardIRL, expert_policy, reward_vs_advantage, step_agent_trainer  # noqa: E402
from labkit.learn.loop import compare, offpolicy_comparison  # noqa: E402
from labkit.scoring import luck_regression, rank_correlation  # noqa: E402

OUT = ROOT / "data" / "offpolicy_irl"
SEEDS = (0, 1, 2)
CHECK_SEEDS = tuple(range(3, 11))                        # a robustness check of the 3-seed result
SORL = dict(kind="grpo", lr=0.3, epochs=2, clip_eps=0.2, iterations=60, eval_every=10)
STALENESS = (4, 8)
BATCH = dict(n_tasks=16, group_size=8, seed=0)           # the fixed scoring batch
DEMOS = dict(n_tasks=256, group_size=1, seed=123)        # expert recordings
SA_TRAIN = dict(kind="grpo", iterations=30, eval_every=10)


def world() -> ToolWorld:
    return ToolWorld(NB08_WORLD.n_files, **NB08_WORLD.kwargs())


def sorl_runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    def make(seed):
        env = world()
        return ToolLearner(env, env.make_policy(), n_tasks=8, group_size=8)

    curves = []
    for k in STALENESS:
        c = offpolicy_comparison(make, "grpo", staleness=k, seeds=SEEDS, **SORL)
        c["staleness_setting"] = k
        curves.append(c)
    curves = pd.concat(curves, ignore_index=True)
    last = curves[curves.iteration == SORL["iterations"]]
    rows = []
    for (k, label), g in last.groupby(["staleness_setting", "label"], sort=False):
        runs = curves[(curves.staleness_setting == k) & (curves.label == label) & (curves.iteration > 0)]
        rows.append({"staleness": k, "arm": label, "final_mean": g.success.mean(), "final_min": g.success.min(),
                     "final_max": g.success.max(), "worst_point": curves[(curves.staleness_setting == k)
                                                                         & (curves.label == label)].success.min(),
                     "clip_frac": runs.clip_frac.mean(),
                     "out_frac": runs.out_frac.mean() if "out_frac" in runs else float("nan"),
                     "weight": runs.scale.mean() if "scale" in runs else float("nan"), "seeds": len(g)})
    return curves, pd.DataFrame(rows)


def sorl_check() -> pd.DataFrame:
    """The same off-policy arms on eight more seeds: does the 3-seed ordering hold?"""
    def make(seed):
        env = world()
        return ToolLearner(env, env.make_policy(), n_tasks=8, group_size=8)

    rows = []
    for k in STALENESS:
        c = offpolicy_comparison(make, "grpo", staleness=k, seeds=CHECK_SEEDS,
                                 arms=["stale", "stale + SORL (batch)", "stale + SORL (per trajectory)"], **SORL)
        last = c[c.iteration == SORL["iterations"]]
        for label, g in last.groupby("label", sort=False):
            rows.append({"staleness": k, "arm": label, "final_mean": g.success.mean(), "final_std": g.success.std(),
                         "final_min": g.success.min(), "final_max": g.success.max(), "seeds": len(g)})
    return pd.DataFrame(rows)


def step_agent_scores() -> tuple[pd.DataFrame, dict]:
    env, policy = scripted_agent_setup()
    truth = env.truth(policy)
    pi = policy.probs().detach()
    ro = env.sample(policy, BATCH["n_tasks"], group_size=BATCH["group_size"], seed=BATCH["seed"])
    A = truth.advantage(ro)
    t0 = time.perf_counter()
    dp_expert, dp_info = expert_policy(env)
    expert_seconds = time.perf_counter() - t0
    experts = {"DP expert": dp_expert, "scripted expert (strength 20)": env.scripted_policy(20.0)}
    credits, extra, timing = {"GRPO": get_estimator("grpo")(ro)}, {}, {}
    for name, ex in experts.items():
        demos = env.sample(ex, DEMOS["n_tasks"], group_size=DEMOS["group_size"], seed=DEMOS["seed"])
        t = time.perf_counter()
        irl = StepRewardIRL.for_env(env).fit(demos, pi, seed=1)
        for centre in (False, True):
            label = f"StepAgent, {name}" + (", centred" if centre else "")
            credits[label] = get_estimator("step_agent")(ro, reward=irl, pi=pi if centre else None)
        timing[name] = time.perf_counter() - t
        tables = reward_vs_advantage(irl, truth)
        seen = tables["seen"]
        extra[name] = {"expert_J": env.truth(ex).J, "expert_turns": irl.expert_turns,
                       "policy_samples": irl.policy_samples, "observations_seen": int(seen.sum()),
                       "table_spearman": rank_correlation(tables["reward"][seen], tables["A_bar"][seen],
                                                          torch.ones_like(tables["reward"][seen], dtype=torch.bool)),
                       "table_top1": float(tables["top1"]), "fit_and_credit_seconds": timing[name]}
    df = luck_regression(ro, truth, credits)
    df.insert(1, "spearman", [rank_correlation(c.token, A, ro.mask) for c in credits.values()])
    for f in ("aux_calls", "env_steps", "policy_forwards"):
        df[f] = [getattr(c.cost, f) for c in credits.values()]
    info = {"policy_J": truth.J, "dp_expert": {k: v for k, v in dp_info.items()}, "expert_seconds": expert_seconds,
            "experts": extra, "turns_in_batch": int(ro.mask.sum())}
    return df, info


def step_agent_training() -> pd.DataFrame:
    env = world()
    experts = {"StepAgent (DP expert)": expert_policy(env)[0], "StepAgent (scripted expert)": env.scripted_policy(20.0)}
    demos = {k: env.sample(ex, DEMOS["n_tasks"], group_size=1, seed=DEMOS["seed"]) for k, ex in experts.items()}

    def make(seed):
        return ToolLearner(env, env.make_policy(), n_tasks=8, group_size=8)

    runs = {"GRPO": lambda learner: {"estimator": "grpo"}}
    for k in experts:
        runs[k] = lambda learner, k=k: {"estimator": step_agent_trainer(demos[k], learner.policy, seed=7)}
    return compare(make, runs, seeds=SEEDS, progress=False, **SA_TRAIN)


def main() -> None:
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    curves, summary = sorl_runs()
    check = sorl_check()
    sorl_seconds = time.perf_counter() - t
    t = time.perf_counter()
    scores, info = step_agent_scores()
    sa_curves = step_agent_training()
    sa_seconds = time.perf_counter() - t
    keep = ["label", "seed", "staleness_setting", "iteration", "success", "train_reward", "clip_frac", "out_frac",
            "scale", "staleness", "env_steps", "seconds"]
    curves[[c for c in keep if c in curves]].round(6).to_csv(OUT / "sorl_curves.csv", index=False)
    summary.round(4).to_csv(OUT / "sorl_summary.csv", index=False)
    check.round(4).to_csv(OUT / "sorl_check.csv", index=False)
    scores.round(4).to_csv(OUT / "step_agent_scores.csv", index=False)
    sa_curves[["label", "seed", "iteration", "success", "train_reward", "aux_calls", "seconds"]].round(6).to_csv(
        OUT / "step_agent_curves.csv", index=False)
    meta = {"world": repr(world()), "seeds": list(SEEDS),
            "check_seeds": list(CHECK_SEEDS),
            "sorl": {**SORL, "staleness": list(STALENESS), "estimator": "grpo", "n_tasks": 8, "group_size": 8,
                     "policy": "uniform (env.make_policy())", "seconds": round(sorl_seconds, 1)},
            "step_agent": {"agent": "env.scripted_policy(2.0) (NB08_AGENT_STRENGTH)", "batch": BATCH, "demos": DEMOS,
                           "training": {**SA_TRAIN, "n_tasks": 8, "group_size": 8}, "seconds": round(sa_seconds, 1),
                           **json.loads(json.dumps(info, default=float))},
            "torch": torch.__version__}
    write_meta(OUT / "meta.json", meta, script=__file__, indent=1)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary.round(3).to_string(index=False))
        print(check.round(3).to_string(index=False))
        print(scores[["method", "spearman", "corr_exact", "b_luck_after", "luck_per_skill", "luck_removed",
                      "aux_calls"]].round(3).to_string(index=False))
        last = sa_curves[sa_curves.iteration == SA_TRAIN["iterations"]]
        print(last.groupby("label").success.agg(["mean", "min", "max"]).round(3))
    print(json.dumps(meta["step_agent"], indent=1, default=float)[:3000])


if __name__ == "__main__":
    main()
