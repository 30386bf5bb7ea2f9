"""Speed of the core data path on this machine: sampling, exact truth, estimators, gradients.

Prints figures (no assertions; targets are judged by reading them). The notebooks' sliders
re-run `gradient_sweep` with 50 batches of 32, so its time is what a student waits per move.
"""
from __future__ import annotations

import time

import torch

from labkit.course import nb01_reinforce_variance as nb01
from labkit.credit import get_estimator
from labkit.envs import TeamTask


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    torch.set_num_threads(2)
    print(f"{'what':58s} {'seconds':>8s}")
    for T in (10, 100, 200):
        env, policy, _ = nb01.chain_setup(T)
        print(f"{'exact truth (DP solve + gradient), T=%d' % T:58s} {timed(lambda: nb01.chain_setup(T)):8.3f}")
        print(f"{'sample 1600 trajectories, T=%d' % T:58s} {timed(lambda: env.sample(policy, 1600, seed=0)):8.3f}")
    env, policy, _ = nb01.chain_setup(200)
    ro = env.sample(policy, 1600, group_size=8, seed=0)
    for name in nb01.EPISODE_ESTIMATORS:
        fn = get_estimator(name)
        print(f"{'estimator %s on 1600 x 200' % name:58s} {timed(lambda: fn(ro)):8.3f}")
    team = TeamTask()
    policies = team.make_policies()
    print(f"{'TeamTask: sample 512 episodes of the six-role team':58s} "
          f"{timed(lambda: team.sample(policies, 64, group_size=8, seed=0)):8.3f}")
    for T in (30, 200):
        t = timed(lambda: nb01.gradient_sweep("horizon", [T], n_batches=50, progress=False), repeat=2)
        print(f"{'one slider move (6 estimators x 50 batches of 32), T=%d' % T:58s} {t:8.3f}")


if __name__ == "__main__":
    main()
