"""Speed of the core data path on this machine: sampling, exact truth, estimators, gradients.

Prints figures (no assertions; targets are judged by reading them). Notebook 01's slider re-runs
its gradient sweep at one setting with 50 batches of 32 (``slider_move``: the same work), so its
time is what a student waits per move.
"""
from __future__ import annotations

import time

import torch

from labkit.course.presets import EPISODE_ESTIMATORS, chain_setup
from labkit.credit import get_estimator
from labkit.envs import TeamTask
from labkit.scoring import gradient_study


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def slider_move(horizon: int, *, n_batches: int = 50, batch_size: int = 32) -> None:
    """One move of notebook 01's slider: the chain and its exact truth by DP, ``n_batches`` fresh
    batches in groups of 8, and every episode-level estimator's gradient study on them."""
    env, policy, truth = chain_setup(horizon, n_bifurcations=min(2, horizon))
    whole = env.sample(policy, n_batches * batch_size, group_size=8, seed=1)
    batches = whole.split(n_batches)
    for name in EPISODE_ESTIMATORS:
        gradient_study(policy, batches, get_estimator(name), truth.grad, whole=whole)


def main() -> None:
    torch.set_num_threads(2)
    print(f"{'what':58s} {'seconds':>8s}")
    for T in (10, 100, 200):
        env, policy, _ = chain_setup(T)
        print(f"{'exact truth (DP solve + gradient), T=%d' % T:58s} {timed(lambda: chain_setup(T)):8.3f}")
        print(f"{'sample 1600 trajectories, T=%d' % T:58s} {timed(lambda: env.sample(policy, 1600, seed=0)):8.3f}")
    env, policy, _ = chain_setup(200)
    ro = env.sample(policy, 1600, group_size=8, seed=0)
    for name in EPISODE_ESTIMATORS:
        fn = get_estimator(name)
        print(f"{'estimator %s on 1600 x 200' % name:58s} {timed(lambda: fn(ro)):8.3f}")
    team = TeamTask()
    policies = team.make_policies()
    print(f"{'TeamTask: sample 512 episodes of the six-role team':58s} "
          f"{timed(lambda: team.sample(policies, 64, group_size=8, seed=0)):8.3f}")
    for T in (30, 200):
        t = timed(lambda: slider_move(T), repeat=2)
        print(f"{'one slider move (6 estimators x 50 batches of 32), T=%d' % T:58s} {t:8.3f}")


if __name__ == "__main__":
    main()
