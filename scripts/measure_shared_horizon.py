"""Does the horizon hurt GRPO once the policy's parameters are shared across positions?

    python scripts/measure_shared_horizon.py                       # T = 10, 40, 100; 3 seeds
    python scripts/measure_shared_horizon.py --seeds 5 --horizons 10 100

With a tabular policy the noise that routine tokens add to GRPO's gradient lands in parameters
that never decide the outcome, so the horizon cannot hurt learning by construction. This trains
GRPO on notebook 01's chain (two bifurcations, chain seed 0) with the tabular policy and with a
policy whose weights every position shares (``labkit.envs.chain.shared_policy``), at several
horizons, and prints the exact success J (dynamic programming) after a fixed number of episodes,
the same at every horizon.

Training is the frontier's GRPO arm on the chain (``labkit.bench.frontier``): batches of 32
episodes in groups of 8, GRPO credit, one PPO-clip epoch per batch, Adam, gradient norm clipped
to 1 (``labkit.learn.loop.train``), from the uniform policy; J is read after 5, 10 and 30 batches
(160, 320 and 960 episodes) at every horizon. Every rate of ``LRS`` is run, and printed. The
headline holds per policy the rate chosen at the shortest horizon (the smallest rate within
``LR_TIE`` of the best mean J after 320 episodes: a rate that works where the horizon adds no
noise) for every horizon; a second table gives each cell the best rate of the sweep, so a
horizon effect is not just a rate tuned for short chains. Nothing is written; about two minutes
on one core with 3 seeds.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from labkit.envs.chain import BifurcationChain, ChainLearner, shared_policy
from labkit.learn.loop import train
from labkit.policies import TabularSoftmaxPolicy

HORIZONS = (10, 40, 100)
LRS = (0.03, 0.1, 0.3, 1.0)
BATCH, GROUP = 32, 8          # the frontier's GRPO arm on the chain: 4 groups of 8
CHECKPOINTS = (5, 10, 30)     # J is read after this many batches
CHOOSE_AT = 10                # the learning rate is chosen by J after this many batches
LR_TIE = 0.01                 # rates within this much mean J of the best count as equally good
POLICIES = {
    "tabular": lambda env: TabularSoftmaxPolicy(env.n_states, env.n_actions),
    "shared": lambda env: shared_policy(env),
}


def run(policy: str, horizon: int, lr: float, seed: int) -> dict[int, float]:
    """Exact J after each of ``CHECKPOINTS`` batches of GRPO from the uniform policy."""
    env = BifurcationChain(horizon=horizon, n_bifurcations=2, seed=0)
    learner = ChainLearner(env, POLICIES[policy](env), batch_size=BATCH, group_size=GROUP)
    curve = train(learner, "grpo", iterations=max(CHECKPOINTS), lr=lr, seed=seed, progress=False,
                  eval_every=CHECKPOINTS[0])
    success = curve.set_index("iteration")["success"]
    return {it: float(success.loc[it]) for it in CHECKPOINTS}


def measure(horizons: list[int], seeds: list[int]) -> pd.DataFrame:
    """One row per (policy, lr, T, seed, checkpoint): the exact J there."""
    rows = []
    for policy in POLICIES:
        for lr in LRS:
            for T in horizons:
                for s in seeds:
                    rows += [{"policy": policy, "lr": lr, "T": T, "seed": s, "episodes": it * BATCH, "J": J}
                             for it, J in run(policy, T, lr, s).items()]
    return pd.DataFrame(rows)


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, min, max and the seeds' J per (episodes, policy, lr, T)."""
    return (runs.groupby(["episodes", "policy", "lr", "T"])["J"]
            .agg(mean="mean", min="min", max="max", seeds=lambda j: " ".join(f"{v:.2f}" for v in j)))


def chosen_lr(cells: pd.DataFrame, policy: str, horizon: int) -> float:
    """The smallest rate whose mean J after ``CHOOSE_AT`` batches at ``horizon`` is within
    ``LR_TIE`` of the best rate's (a gentler rate that does as well is preferred)."""
    means = cells.loc[(CHOOSE_AT * BATCH, policy)]["mean"].xs(horizon, level="T")
    return float(means[means >= means.max() - LR_TIE].index.min())


def _band(c) -> str:
    return f"{c['mean']:.3f} [{c['min']:.3f}, {c['max']:.3f}]"


def headline(cells: pd.DataFrame, horizons: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two (policy, episodes) x T tables of "mean [min, max]": with the rate chosen at the
    shortest horizon held for every T, and with the best rate of ``LRS`` for each cell (by mean
    J, its rate in parentheses: what any rate of the sweep could reach)."""
    fixed, best = {}, {}
    for (episodes, policy, lr, T), c in cells.iterrows():
        if lr == chosen_lr(cells, policy, horizons[0]):
            fixed[(policy, f"lr {lr:g}", episodes), T] = _band(c)
        key = (policy, episodes), T
        if key not in best or c["mean"] > best[key][0]:
            best[key] = (c["mean"], f"{_band(c)} ({lr:g})")
    table = lambda d: pd.Series(d).unstack()[horizons].rename_axis(columns="T").sort_index()
    return table(fixed), table({k: v[1] for k, v in best.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per cell (default 3)")
    parser.add_argument("--horizons", type=int, nargs="+", default=list(HORIZONS))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    seeds, horizons = list(range(args.seeds)), sorted(args.horizons)
    start = time.perf_counter()
    cells = summary(measure(horizons, seeds))
    pd.set_option("display.width", 160)
    print(f"Exact J of GRPO (mean [min, max] over {len(seeds)} seeds), the rate chosen at T = {horizons[0]} "
          f"held for every horizon:\n")
    fixed, best = headline(cells, horizons)
    print(fixed.to_string())
    print("\nThe best rate of the sweep for each cell (rate in parentheses):\n")
    print(best.to_string())
    print("\nEvery rate, every seed:\n")
    print(cells.round(3).to_string())
    print(f"\n{time.perf_counter() - start:.0f} s on one thread")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
