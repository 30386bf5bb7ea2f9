"""PilotRL and PRS as training schedules (stand-ins) on a ToolWorld: do they change learning beyond
the seeds' spread? Every number is cached in data/schedules/ (seeded; about a minute on one core).

    python scripts/build_schedules.py

The world: notebook 08's tool noise (error rate 0.3 on all three tools, 20 turns) with eight files
instead of five. Measured before choosing it (uniform start policy, 8 tasks x 8 episodes a batch,
5 seeds, 60 batches): outcome-only GRPO climbs from 0.296 to 0.54 exact success with five files
but only from 0.202 to 0.39 with eight, so eight files is the slow-learning, sparse-reward case
in which dense shaping (PRS) and staged credit (PilotRL) have the most room to help.

Arms (``ARMS``), each trained from the uniform policy on ``len(SEEDS)`` seeds:

* outcome only (GRPO) - the control;
* shaping kept on, PRS - outcome + w x checkable turn signals for the whole run, or phased out
  in three stages (all checks, then "tests pass" only, then the outcome alone), at w = 0.1 and 0.5;
* GiGPO throughout, PilotRL (GRPO, then GiGPO from ``SWITCH`` on).

Writes ``curves.csv`` (exact success every 10 batches, per arm and seed; the stage in force),
``summary.csv`` (final success mean / std / min / max, area under the curve, effect against the
control with its standard error and a verdict), ``hacking.csv`` (what the trained policies do:
the chance to re-run the tests after "tests pass" instead of submitting, checks fired and
time-outs per episode on a fixed evaluation batch), ``credit_scores.csv`` (each stage's credit on
notebook 08's fixed batch against the exact advantage and the skill/luck split, with its cost) and
``meta.json`` (settings, verdicts, timings and the provenance stamp of ``labkit.core.cache``: no
input file, the policies are tabular). ``check_summary.csv``: the w = 0.1 shaping arms, GiGPO and PilotRL again on
notebook 08's own five-file world (same seeds), as a robustness check of the verdicts.
"""
from __future__ import annotations

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
from labkit.envs.toolworld.env import RUN_TESTS, SUBMIT, TESTS_PASS  # noqa: E402
from labkit.envs.toolworld.features import VERIFIABLE_CHECKS, verifiable_turn_rewards  # noqa: E402
from labkit.envs.toolworld.learner import ToolLearner  # noqa: E402
from labkit.learn.loop import train  # noqa: E402
from labkit.learn.schedules import ShapedReward, pilotrl_schedule, prs_schedule, shaped_constant  # noqa: E402
from labkit.scoring import luck_regression, rank_correlation  # noqa: E402

OUT = ROOT / "data" / "schedules"
N_FILES = 8
SEEDS = tuple(range(8))
TRAIN = dict(kind="grpo", iterations=90, eval_every=10)   # lr: ToolLearner.default_lr (0.1)
BATCH = dict(n_tasks=8, group_size=8)                     # per training iteration
SWITCH = 31                                               # PilotRL: 30 batches of episode credit first
WEIGHTS = (0.1, 0.5)                                      # dense weight w of the shaping arms
EVAL = dict(n_tasks=128, group_size=1, seed=999)          # the batch the hacking numbers are read on
SCORE_BATCH = dict(n_tasks=16, group_size=8, seed=0)      # notebook 08's scoring batch
CONTROL = "outcome only (GRPO)"
CHECK_ARMS = (CONTROL, "shaping kept on (w=0.1)", "PRS (w=0.1)", "GiGPO throughout", "PilotRL (GRPO -> GiGPO)")


def world() -> ToolWorld:
    return ToolWorld(N_FILES, **NB08_WORLD.kwargs())


def prs_stages(w: float) -> list:
    third = TRAIN["iterations"] // 3
    return [(1, {c: w for c in VERIFIABLE_CHECKS}), (third + 1, {"tests_pass": w}), (2 * third + 1, {})]


def arms(env) -> dict:
    """label -> a function returning a fresh estimator / schedule (one per run)."""
    out = {CONTROL: lambda: "grpo"}
    for w in WEIGHTS:
        out[f"shaping kept on (w={w:g})"] = lambda w=w: shaped_constant(env, {c: w for c in VERIFIABLE_CHECKS})
        out[f"PRS (w={w:g})"] = lambda w=w: prs_schedule(env, stages=prs_stages(w))
    out["GiGPO throughout"] = lambda: "gigpo"
    out["PilotRL (GRPO -> GiGPO)"] = lambda: pilotrl_schedule(SWITCH)
    return out


def hacking(env, policy, label: str, seed) -> dict:
    """What a policy does with the shaped-but-useless options."""
    probs = policy.probs().detach()
    ro = env.sample(policy, EVAL["n_tasks"], group_size=EVAL["group_size"], seed=EVAL["seed"])
    checks = verifiable_turn_rewards(env, ro).sum(1)                  # every check at weight 1
    submitted = ((ro.tokens == SUBMIT) & ro.mask).any(1)
    return {"label": label, "seed": seed, "p_rerun_after_pass": float(probs[TESTS_PASS, RUN_TESTS]),
            "p_submit_after_pass": float(probs[TESTS_PASS, SUBMIT]), "checks_per_episode": float(checks.mean()),
            "timeout_share": float((~submitted).double().mean()), "turns_per_episode": float(ro.mask.sum(1).double().mean()),
            "exact_success": env.truth(policy).J}


def training(env=None, only=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    env = world() if env is None else env
    curves, hack = [], [hacking(env, env.make_policy(), "start (uniform)", -1)]
    for label, make in arms(env).items():
        if only is not None and label not in only:
            continue
        for s in SEEDS:
            learner = ToolLearner(env, env.make_policy(), **BATCH)
            c = train(learner, make(), seed=s, label=label, progress=False, **TRAIN)
            curves.append(c)
            hack.append(hacking(env, learner.policy, label, s))
    return pd.concat(curves, ignore_index=True), pd.DataFrame(hack)


def auc(g: pd.DataFrame) -> float:
    """Mean exact success over the run: trapezoid area under the evaluated points / iterations."""
    g = g.dropna(subset=["success"]).sort_values("iteration")
    x, y = g.iteration.to_numpy(float), g.success.to_numpy(float)
    return float(((y[1:] + y[:-1]) / 2 * (x[1:] - x[:-1])).sum() / (x[-1] - x[0]))


def summary(curves: pd.DataFrame) -> pd.DataFrame:
    last = curves[curves.iteration == TRAIN["iterations"]]
    per_run = [{"label": k[0], "seed": k[1], "final": float(last[(last.label == k[0]) & (last.seed == k[1])].success.iloc[0]),
                "auc": auc(g)} for k, g in curves.groupby(["label", "seed"], sort=False)]
    per_run = pd.DataFrame(per_run)
    rows = []
    ctrl = per_run[per_run.label == CONTROL]
    for label, g in per_run.groupby("label", sort=False):
        # PilotRL is compared with both of its ingredients
        refs = [CONTROL] + (["GiGPO throughout"] if label.startswith("PilotRL") else [])
        row = {"arm": label, "seeds": len(g), "final_mean": g.final.mean(), "final_std": g.final.std(),
               "final_min": g.final.min(), "final_max": g.final.max(), "auc_mean": g.auc.mean(), "auc_std": g.auc.std()}
        for i, ref in enumerate(refs):
            r = per_run[per_run.label == ref]
            tag = "" if i == 0 else "_vs_gigpo"
            for what in ("final", "auc"):
                diff = g[what].mean() - r[what].mean()
                se = (g[what].var() / len(g) + r[what].var() / len(r)) ** 0.5
                row[f"{what}_effect{tag}"] = diff
                row[f"{what}_se{tag}"] = se
                row[f"{what}_measurable{tag}"] = bool(label != ref and abs(diff) > 2 * se)
        row["verdict"] = verdict(row, label == CONTROL)
        rows.append(row)
    del ctrl
    return pd.DataFrame(rows)


def verdict(row: dict, is_control: bool) -> str:
    """One line from the numbers: the effect on final success against the control, and whether it
    exceeds two standard errors of the difference of means."""
    if is_control:
        return "control"
    d, se = row["final_effect"], row["final_se"]
    word = ("better" if d > 0 else "worse") if row["final_measurable"] else "no measurable difference"
    out = f"{word}: final success {d:+.3f} vs outcome-only GRPO (2 SE = {2 * se:.3f})"
    if "final_effect_vs_gigpo" in row:
        d2, se2 = row["final_effect_vs_gigpo"], row["final_se_vs_gigpo"]
        w2 = ("better" if d2 > 0 else "worse") if row["final_measurable_vs_gigpo"] else "no measurable difference"
        out += f"; {w2} vs GiGPO throughout ({d2:+.3f}, 2 SE = {2 * se2:.3f})"
    return out


def credit_scores() -> pd.DataFrame:
    """Each stage's credit on notebook 08's fixed batch (5 files, scripted agent of strength 2)."""
    env, policy = scripted_agent_setup()
    truth = env.truth(policy)
    ro = env.sample(policy, **SCORE_BATCH)
    all_checks = {c: 1.0 for c in VERIFIABLE_CHECKS}
    credits = {"GRPO": get_estimator("grpo")(ro), "GiGPO": get_estimator("gigpo")(ro)}
    for w in WEIGHTS:
        credits[f"PRS stage 1 / shaping (w={w:g})"] = ShapedReward(
            "grpo", lambda r, w=w: verifiable_turn_rewards(env, r, weights={c: w for c in all_checks}))(ro)
        credits[f"PRS stage 2 (w={w:g})"] = ShapedReward(
            "grpo", lambda r, w=w: verifiable_turn_rewards(env, r, weights={"tests_pass": w}))(ro)
    df = luck_regression(ro, truth, credits)
    adv = truth.advantage(ro)
    df["rank_corr"] = [rank_correlation(c, adv, ro.mask) for c in credits.values()]
    for cost in ("aux_calls", "env_steps", "policy_forwards"):
        df[cost] = [getattr(c.cost, cost) for c in credits.values()]
    return df[["method", "rank_corr", "corr_exact", "b_skill", "b_luck_after", "luck_per_skill", "luck_removed",
               "aux_calls", "env_steps", "policy_forwards"]]


def main() -> None:
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    curves, hack = training()
    train_seconds = time.perf_counter() - t
    table = summary(curves)
    # robustness: the same arms (w = 0.1 only) on notebook 08's own five-file world, where GiGPO
    # has more of an edge over GRPO: does a schedule show something there?
    check_env = ToolWorld(NB08_WORLD.n_files, **NB08_WORLD.kwargs())
    t = time.perf_counter()
    check_curves, _ = training(check_env, CHECK_ARMS)
    check_seconds = time.perf_counter() - t
    check = summary(check_curves)
    t = time.perf_counter()
    scores = credit_scores()
    score_seconds = time.perf_counter() - t
    keep = ["label", "seed", "iteration", "stage", "success", "train_reward", "entropy", "aux_calls"]   # no wall time: it would churn the file
    curves[[c for c in keep if c in curves]].round(6).to_csv(OUT / "curves.csv", index=False)
    table.round(4).to_csv(OUT / "summary.csv", index=False)
    check.round(4).to_csv(OUT / "check_summary.csv", index=False)
    hack.round(4).to_csv(OUT / "hacking.csv", index=False)
    scores.round(4).to_csv(OUT / "credit_scores.csv", index=False)
    meta = {"world": repr(world()),
            "why_this_world": "NB08 tool noise with 8 files: outcome-only GRPO from the uniform policy reaches only "
                              "about 0.39 exact success after 60 batches (0.54 with 5 files), measured over 5 seeds",
            "seeds": list(SEEDS), "train": {**TRAIN, **BATCH, "lr": ToolLearner.default_lr,
                                            "policy": "uniform (env.make_policy())"},
            "arms": list(arms(world())), "pilotrl_switch_at": SWITCH,
            "prs_stages": {f"w={w:g}": prs_stages(w) for w in WEIGHTS},
            "hacking_eval_batch": EVAL,
            "credit_score_batch": {**SCORE_BATCH, "agent": "scripted_agent_setup(): scripted_policy(2.0), 5 files"},
            "verdict_rule": "effect = mean final exact success (iteration 90) minus the control's; measurable if "
                            "|effect| > 2 standard errors of the difference of means (unpaired, sample variances)",
            "verdicts": dict(zip(table.arm, table.verdict)),
            "check_world": repr(check_env), "check_arms": list(CHECK_ARMS),
            "check_verdicts": dict(zip(check.arm, check.verdict)),
            "seconds": {"training": round(train_seconds, 1), "check_world": round(check_seconds, 1),
                        "credit_scores": round(score_seconds, 1)},
            "torch": torch.__version__}
    write_meta(OUT / "meta.json", meta, script=__file__, indent=1, default=float)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table[["arm", "final_mean", "final_std", "final_min", "final_max", "auc_mean", "final_effect",
                     "final_se", "verdict"]].round(3).to_string(index=False))
        print(check[["arm", "final_mean", "final_std", "final_min", "final_max", "auc_mean", "verdict"]]
              .round(3).to_string(index=False))
        print(hack.groupby("label", sort=False)[["p_rerun_after_pass", "checks_per_episode", "timeout_share",
                                                  "exact_success"]].mean().round(3))
        print(scores.round(3).to_string(index=False))
    print(f"training {train_seconds:.1f} s, credit scores {score_seconds:.1f} s")


if __name__ == "__main__":
    main()
