"""Notebook 04, steps, segments and process rewards: between VinePPO's vines and the agents, which
of the reasoning-side credit families finds the step where the tiny LM went wrong, and what does
each one cost?

Everything runs on the same 32 reference rollouts as notebooks 02 and 03 (``load_reference``),
whose cached 256-vine Monte Carlo step advantages are the truth. ``Method`` names one estimator
with its settings; ``credit_quality`` scores one credit against the truth (first-wrong-step hit
rate, step-level rank correlation, cost); ``cross_family_table`` does it for a list of methods.
Each runner is seeded and returns plain data.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.rollouts import Credit, Rollouts
# Defined in nb02 (the notebook calls them as lesson.<name> too)
from labkit.course.nb02_critics_gae import first_error_hit_rate, step_table, truth_step_advantage  # noqa: F401
from labkit.scoring import rank_correlation


@dataclass(frozen=True)
class Method:
    """One row of the cross-family table: an estimator run with fixed settings.

    ``run(rollouts) -> Credit`` computes the credit; ``family`` is the survey's methodology
    family, ``notebook`` where the lab teaches it, ``setup`` what had to exist before the call
    (a trained critic, a reward model, a tuned policy) and what that cost, ``stand_in`` whether
    a part the paper gets from an LLM judge is simulated here.
    """

    name: str
    family: str
    notebook: str
    run: Callable[[Rollouts], Credit] = field(repr=False)
    setup: str = ""
    stand_in: bool = False


def step_rank_correlation(credit: torch.Tensor, rollouts: Rollouts, *, within: bool = False) -> float:
    """Spearman's rho between the credit's per-step mean and the Monte Carlo truth step advantage.

    ``within=False``: pooled over every step of every rollout; it rewards any credit that is
    lower on failed rollouts than on successful ones, which outcome credit already is.
    ``within=True``: the mean over rollouts of the rho among one rollout's own steps, the
    question "which step?" (rollouts with one step or a constant truth are skipped; credit that is
    constant within a rollout scores 0 there). Either returns 0 when there is nothing to rank.
    """
    truth, present = rollouts.view(truth_step_advantage(rollouts).double(), "step", "mean")
    # float64 before averaging: the float32 mean of a step's equal token credits can differ in
    # the last bit between steps of different lengths, which would break ties at random
    est = rollouts.view(torch.as_tensor(credit).double(), "step", "mean")[0]
    if not within:
        return rank_correlation(est, truth, present)
    rhos = [rank_correlation(est[b:b + 1], truth[b:b + 1], present[b:b + 1])
            for b in range(rollouts.batch_size)
            if int(present[b].sum()) >= 2 and float(truth[b][present[b]].std()) > 0]
    return sum(rhos) / len(rhos) if rhos else 0.0


def credit_quality(credit: Credit, rollouts: Rollouts) -> dict:
    """How well one credit matches the truth of ``rollouts`` (from ``load_reference``), and what it cost.

    ``hit_rate``: how often the most negative step credit is the first wrong step (ties share
    the hit), over rollouts that have a wrong step; ``rank_corr`` and ``rank_corr_within``:
    ``step_rank_correlation`` pooled and within rollouts; then the ``Cost`` fields the
    estimator reported.
    """
    if not isinstance(credit, Credit):
        raise TypeError(f"credit: expected a Credit, got {type(credit).__name__}")
    hits = first_error_hit_rate(credit.token, rollouts)
    return {"hit_rate": hits["hit_rate"], "chance": hits["chance"],
            "rank_corr": step_rank_correlation(credit.token, rollouts),
            "rank_corr_within": step_rank_correlation(credit.token, rollouts, within=True), **credit.cost.as_dict()}


def cross_family_table(methods: Sequence[Method], rollouts: Rollouts, *, progress: bool = True) -> pd.DataFrame:
    """Every method in ``methods`` run on ``rollouts`` and scored by ``credit_quality``.

    One row per method, in the given order, with its family, notebook, set-up note, stand-in
    flag and the seconds the call took on this machine (a wall-clock figure: it varies between
    machines and runs, unlike the forward-pass counts).
    """
    methods = list(methods)
    if not methods:
        raise ValueError("methods: need at least one Method")
    for m in methods:
        if not isinstance(m, Method):
            raise TypeError(f"methods: expected Method entries, got {type(m).__name__}")
    rows = []
    for m in tqdm(methods, desc="methods", disable=not progress):
        start = time.perf_counter()
        credit = m.run(rollouts)
        seconds = time.perf_counter() - start
        rows.append({"method": m.name, "family": m.family, "notebook": m.notebook,
                     **credit_quality(credit, rollouts), "seconds": seconds, "setup": m.setup,
                     "stand_in": m.stand_in})
    return pd.DataFrame(rows)
