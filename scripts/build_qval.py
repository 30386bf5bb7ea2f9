"""QVal against exact truth: does QVal's cheap ranking of the bench's estimators agree with the
ranking the exact advantage gives? Every number is cached in data/qval/ (seeded; about five
minutes on one core).

    python scripts/build_qval.py

For every chain task of the full bench (``FULL_CHAIN_HORIZONS``) and every seed, the bench's
batch is built, every registered estimator that applies is run with the bench's inputs, and each
credit is scored twice: by the bench's exact metric (Spearman with the exact advantage, the
``rank_correlation`` the leaderboard ranks by) and by QVal (``labkit.bench.qval.qval_score``:
Spearman with reference Q labels). The labels: k = 1 and k = 4 Monte Carlo continuations per
(state, token) pair under the sampling policy (``chain_q_estimate``), and the exact Q of that
policy (what QVal's labels tend to as k grows: it separates the Monte Carlo noise from the choice
of Q rather than A as the target). A fourth label centres the same Monte Carlo Q by a vine
estimate of V at the state (both from ``ADV_K`` continuations): QVal's statistic aimed at the
advantage rather than at Q. A ToolWorld task (``TOOL_TASK``) is scored the same way with
``toolworld_q_estimate``, as a check outside the chain.

Writes ``cells.csv`` (task, seed, estimator, truth, one column per QVal label), ``agreement.csv``
(per task and pooled: the Spearman agreement of the two seed-mean rankings with a bootstrap
interval over seeds, whether they pick the same best estimator, and the agreement of a single
batch's QVal ranking) and ``meta.json`` (settings, label costs, timings, provenance stamp).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labkit.bench.qval import (QVAL_DIR, chain_q_estimate, compare_rankings, qval_cells,  # noqa: E402
                               toolworld_q_estimate)
from labkit.bench.suite import FULL_CHAIN_HORIZONS, chain_task, toolworld_task  # noqa: E402
from labkit.core.cache import write_meta  # noqa: E402
from labkit.credit import ESTIMATORS  # noqa: E402
from labkit.envs import BifurcationChain  # noqa: E402
from labkit.envs.tabular import exact_truth  # noqa: E402
from labkit.envs.toolworld import ToolWorld  # noqa: E402

SEEDS = tuple(range(12))
TOOL_SEEDS = SEEDS
KS = (1, 4)                      # Monte Carlo continuations per pair
ADV_K = 4                        # the centred variant: Q and V each from this many continuations
LABEL_SEED = 500                 # the labels' own random stream: seed + LABEL_SEED
TOOL_TASK = dict(max_turns=20, noise=0.2)
N_BOOT = 2000
COLUMNS = [f"qval_mc{k}" for k in KS] + ["qval_exact_q", f"qval_adv_mc{ADV_K}"]
COSTS: dict = {}


def _labels(task, env, q_estimate, exact_q):
    """QVal's label makers for one task: Q from k continuations per pair (each k of ``KS``), the
    exact Q, and Q centred by an ADV_K-vine estimate of V at the state."""
    def mc(k):
        def fn(inst, seed):
            q, cost = q_estimate(env, inst.inputs["policy"], inst.rollouts, k, seed=seed + LABEL_SEED)
            COSTS.setdefault(f"{task.name}/k={k}", cost.as_dict())
            return q
        return fn

    def adv(inst, seed):
        q, _ = q_estimate(env, inst.inputs["policy"], inst.rollouts, ADV_K, seed=seed + LABEL_SEED)
        v, _ = env.vine_value_fn(inst.inputs["policy"], seed=seed + LABEL_SEED + 1)(inst.rollouts, ADV_K)
        return q - v
    exact = lambda inst, seed: exact_q(inst.inputs["policy"]).q_value(inst.rollouts)  # noqa: E731
    return {**{f"mc{k}": mc(k) for k in KS}, "exact_q": exact, f"adv_mc{ADV_K}": adv}


def chain_labels(task):
    p = task.params
    env = BifurcationChain(horizon=p["horizon"], n_bifurcations=p["n_bifurcations"], seed=0)
    return _labels(task, env, chain_q_estimate, lambda policy: exact_truth(env.mdp(), policy))


def tool_labels(task):
    p = task.params
    env = ToolWorld(p["n_files"], max_turns=p["max_turns"], mislead=p["noise"], noise=p["noise"], flaky=p["noise"])
    return _labels(task, env, toolworld_q_estimate, env.truth)


def main() -> None:
    torch.set_num_threads(1)
    QVAL_DIR.mkdir(parents=True, exist_ok=True)
    names = sorted(ESTIMATORS)
    rows, seconds = [], {}
    t0 = time.perf_counter()
    for T in FULL_CHAIN_HORIZONS:
        task = chain_task(T)
        labels = chain_labels(task)
        t = time.perf_counter()
        for s in SEEDS:
            rows += qval_cells(task, s, names, labels)
        seconds[task.name] = round(time.perf_counter() - t, 1)
    chain_cells = pd.DataFrame(rows)
    task = toolworld_task(**TOOL_TASK)
    labels = tool_labels(task)
    t = time.perf_counter()
    tool_rows = [r for s in TOOL_SEEDS for r in qval_cells(task, s, names, labels)]
    seconds[task.name] = round(time.perf_counter() - t, 1)
    cells = pd.DataFrame(rows + tool_rows)
    agreement = pd.concat([compare_rankings(chain_cells, columns=COLUMNS, n_boot=N_BOOT, seed=0).assign(world="chain"),
                           compare_rankings(pd.DataFrame(tool_rows), columns=COLUMNS, n_boot=N_BOOT, seed=0)
                           .query("task != 'all'").assign(world="toolworld")], ignore_index=True)
    cells.round(6).to_csv(QVAL_DIR / "cells.csv", index=False)
    agreement.round(4).to_csv(QVAL_DIR / "agreement.csv", index=False)
    meta = {"chain_tasks": [chain_task(T).name for T in FULL_CHAIN_HORIZONS], "chain_seeds": list(SEEDS),
            "tool_task": task.name, "tool_seeds": list(TOOL_SEEDS), "mc_k": list(KS), "label_seed": LABEL_SEED,
            "reference_policy": "the policy that sampled the batch (uniform on the chain, the scripted agent on "
                                "ToolWorld): the policy the exact truth belongs to",
            "truth_metric": "Spearman rho of the credit with the exact advantage over generated positions "
                            "(the bench's rank_correlation)",
            "qval_metric": "Spearman rho of the credit with the Q labels over the same positions",
            "labels": {"mc1, mc4": "mean return of k continuations forced through the recorded action",
                       "exact_q": "the exact Q of the sampling policy (the limit of the Monte Carlo labels)",
                       f"adv_mc{ADV_K}": f"Q from {ADV_K} continuations minus V from {ADV_K} vines at the state"},
            "agreement": "Spearman rho between the seed-mean truth metric and the seed-mean QVal over the "
                         f"applicable estimators; {N_BOOT} bootstrap draws of seeds, 95 % percentile interval",
            "label_cost_one_batch": COSTS, "estimators": sorted(cells.estimator.unique()),
            "seconds": seconds | {"total": round(time.perf_counter() - t0, 1)}, "torch": torch.__version__}
    write_meta(QVAL_DIR / "meta.json", meta, script=__file__, indent=1, default=float)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(agreement.round(3).to_string(index=False))
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
