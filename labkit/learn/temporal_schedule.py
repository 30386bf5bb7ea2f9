"""Temporal Scheduling for RLVR (Zhang et al. 2026, arXiv:2605.25381) over a training run.

``temporal_schedule`` turns the registered one-stage estimator ``tp_schedule``
(``labkit.credit.temporal``) into a ``Schedule`` that ``labkit.learn.loop.train`` runs: each
iteration gets the stage whose token window matches how far the run is.
"""
from __future__ import annotations

from functools import partial

from labkit.core.checks import check_choice, check_int, check_number
from labkit.credit.temporal import SCHEDULE_MODES, prefix_ratio, tp_schedule
from labkit.learn.schedules import Schedule

__all__ = ["schedule_progress", "temporal_schedule", "chain_comparison"]


def schedule_progress(iteration: int, iterations: int, *, start: float = 0.0, end: float = 0.8) -> float:
    """How far the schedule is at ``iteration`` (counted from 1) of a run of ``iterations``:
    (iteration - s) / (e - s) clipped to [0, 1], with s = int(start * iterations) and
    e = int(end * iterations) (the reference's ramp). ValueErrors name the argument; ``end``
    must resolve to a later iteration than ``start``."""
    iterations = check_int("iterations", iterations, low=1)
    it = check_int("iteration", iteration, low=1)
    start = check_number("start", start, low=0.0, high=1.0)
    end = check_number("end", end, low=0.0, high=1.0)
    s, e = int(start * iterations), int(end * iterations)
    if e <= s:
        raise ValueError(f"end: must resolve to a later iteration than start, got start {start} -> {s}, "
                         f"end {end} -> {e} of {iterations} iterations")
    return min(max((it - s) / (e - s), 0.0), 1.0)


def temporal_schedule(iterations: int, *, start: float = 0.0, end: float = 0.8, magnitude: float = 0.99,
                      mode: str = "linear", base: str = "grpo", name: str = "TP-Schedule") -> Schedule:
    """TP-Schedule over a run (Zhang et al. 2026, arXiv:2605.25381): the credited window widens from the trajectories' last tokens to all of them.

    Formula:
        at iteration it:  p = schedule_progress(it, iterations, start, end)
                          credit = tp_schedule(rollouts, progress=p, magnitude, mode, base)
        so with the defaults the left-out share of every trajectory falls linearly from 99 % at
        the first iteration to 0 at 80 % of the run, and the rest of the run is plain ``base``.

    Defaults:
        start = 0, end = 0.8, magnitude = 0.99, mode = "linear" (the reference's run scripts),
        base = "grpo"; ``iterations`` is the run's length (``train``'s ``iterations``).

    Degenerate input:
        iterations past ``iterations`` stay at p = 1 (plain ``base``). Bad numbers raise
        ValueErrors naming the argument (``end`` when the ramp is empty, ``mode`` for an
        unknown curve).

    Deviations from the reference:
        see ``tp_schedule``: the left-out prefix gets zero credit instead of being moved into
        the prompt. One stage per iteration (the reference recomputes the ratio every step).

    Returns:
        a ``Schedule`` with one stage per iteration, each named by its left-out share
        ("rho=0.990", ...), labelled ``name``.

    Cost:
        the base estimator's every iteration.
    """
    iterations = check_int("iterations", iterations, low=1)
    mode = check_choice("mode", mode, SCHEDULE_MODES)
    magnitude = check_number("magnitude", magnitude, low=0.0, high=1.0)
    stages, names = [], []
    for it in range(1, iterations + 1):
        p = schedule_progress(it, iterations, start=start, end=end)
        stages.append((it, partial(tp_schedule, progress=p, magnitude=magnitude, mode=mode, base=base)))
        names.append(f"rho={prefix_ratio(p, magnitude=magnitude, mode=mode):.3f}")
    return Schedule(stages, name=name, names=names)


def chain_comparison(*, horizon: int = 40, n_bifurcations: int = 3, iterations: int = 30, seeds=range(5),
                     batch_size: int = 32, group_size: int = 8):
    """TP-Schedule against plain GRPO on a BifurcationChain (uniform start, GRPO loss, one run
    per seed and arm): a DataFrame with one row per (arm, seed) and its final exact success
    probability ``final_J`` (the chain's exact J after ``iterations`` batches). Seeded and exact,
    a few seconds for the defaults."""
    import pandas as pd

    from labkit.envs import BifurcationChain
    from labkit.envs.chain.learner import ChainLearner
    from labkit.learn.loop import train
    from labkit.policies import TabularSoftmaxPolicy

    iterations = check_int("iterations", iterations, low=1)
    rows = []
    for arm in ("grpo", "tp_schedule"):
        for s in seeds:
            env = BifurcationChain(horizon=horizon, n_bifurcations=n_bifurcations, seed=0)
            learner = ChainLearner(env, TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0),
                                   batch_size=batch_size, group_size=group_size)
            estimator = temporal_schedule(iterations) if arm == "tp_schedule" else "grpo"
            curve = train(learner, estimator, iterations=iterations, kind="grpo", eval_every=iterations,
                          seed=int(s), progress=False)
            rows.append({"arm": arm, "seed": int(s), "final_J": float(curve.success.dropna().iloc[-1])})
    return pd.DataFrame(rows)
