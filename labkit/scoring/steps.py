"""Step-level credit against step-level truth: does the most negative step credit fall on the first
wrong step, and does the credit order a rollout's steps as the truth does? And where is that
step (``first_error_positions``, what a heatmap outlines)?

Both read a batch whose rollouts carry step labels; the hit rate also reads each rollout's
``truth["first_error_step"]`` (-1 when every step is right), as the tiny LM's reference rollouts
have it (``labkit.envs.arithmetic.truth.load_reference``).
"""
from __future__ import annotations

import pandas as pd
import torch

from labkit.core.checks import as_tensor, check_shape
from labkit.core.rollouts import Rollouts
from labkit.scoring.agreement import rank_correlation


def first_error_positions(rollouts: Rollouts) -> torch.Tensor:
    """(B, T) bool: the generated positions of each rollout's first wrong step, the cells a
    heatmap outlines. A rollout whose every step is right (``first_error_step`` -1) has none,
    and neither has padding: both carry -1 (a step id of -1 marks a position that is not
    generated), so comparing the two alone would "find" a wrong step on the padding of every
    correct rollout."""
    first = rollouts.truth.get("first_error_step")
    if first is None:
        raise ValueError("rollouts: truth has no 'first_error_step' (the tiny LM's reference rollouts carry it)")
    first = as_tensor("rollouts.truth['first_error_step']", first)
    check_shape("rollouts.truth['first_error_step']", first, (rollouts.batch_size,))
    has_wrong_step = (first >= 0)[:, None]
    return (rollouts.step_ids == first[:, None]) & has_wrong_step & rollouts.mask


def first_error_hit_rate(credit: torch.Tensor, rollouts: Rollouts) -> dict[str, float]:
    """How often the most negative step credit falls on the first wrong step, over rollouts that
    have one. Ties share the hit (counted in expectation). Returns the rate, the chance rate of
    a uniformly random step pick, and the number of rollouts scored."""
    first = rollouts.truth["first_error_step"]
    step_credit, present = rollouts.view(credit, "step", "mean")
    hits, chance, n = 0.0, 0.0, 0
    for b in (first >= 0).nonzero().flatten().tolist():
        steps = present[b].nonzero().flatten()
        if int(first[b]) not in steps.tolist():
            continue
        vals = step_credit[b, steps]
        lowest = vals <= vals.min() + 1e-6 * max(1.0, float(vals.abs().max()))  # equal up to float32 rounding: a tie
        hits += float(lowest[steps.tolist().index(int(first[b]))]) / int(lowest.sum())
        chance += 1.0 / len(steps)
        n += 1
    return {"hit_rate": hits / max(n, 1), "chance": chance / max(n, 1), "rollouts": n}


def first_error_hits(credit: torch.Tensor, rollouts: Rollouts) -> pd.DataFrame:
    """``first_error_hit_rate`` rollout by rollout: one row per rollout with a wrong step (and
    that step present), with ``row`` (its index in ``rollouts``), ``hit`` (1 if the most
    negative step credit is on the first wrong step; a tie of m steps counts 1/m) and
    ``chance`` (1 / its number of steps). The mean of ``hit`` is ``first_error_hit_rate``."""
    if credit.shape != rollouts.mask.shape:
        raise ValueError(f"credit: expected shape {tuple(rollouts.mask.shape)} (per token), got {tuple(credit.shape)}")
    rows = []
    for b in (rollouts.truth["first_error_step"] >= 0).nonzero().flatten().tolist():
        one = first_error_hit_rate(credit[b:b + 1], rollouts.select([b]))  # the same rule, on one row
        if one["rollouts"]:
            rows.append({"row": b, "hit": one["hit_rate"], "chance": one["chance"]})
    return pd.DataFrame(rows, columns=["row", "hit", "chance"])


def step_rank_correlation(credit: torch.Tensor, truth_adv: torch.Tensor, rollouts: Rollouts, *,
                          within: bool = False) -> float:
    """Spearman's rho between the credit's per-step mean and the truth's (``truth_adv``: a (B, T)
    per-token truth advantage that is constant within a step, such as the tiny LM's Monte Carlo
    ``truth_step_advantage``).

    ``within=False``: pooled over every step of every rollout; it rewards any credit that is
    lower on failed rollouts than on successful ones, which outcome credit already is.
    ``within=True``: the mean over rollouts of the rho among one rollout's own steps, the
    question "which step?" (rollouts with one step or a constant truth are skipped; credit that is
    constant within a rollout scores 0 there). Either returns 0 when there is nothing to rank.
    """
    shape = tuple(rollouts.mask.shape)
    credit, truth_adv = as_tensor("credit", credit), as_tensor("truth_adv", truth_adv)
    check_shape("credit", credit, shape)
    check_shape("truth_adv", truth_adv, shape)
    truth, present = rollouts.view(truth_adv.double(), "step", "mean")
    # float64 before averaging: the float32 mean of a step's equal token credits can differ in
    # the last bit between steps of different lengths, which would break ties at random
    est = rollouts.view(credit.double(), "step", "mean")[0]
    if not within:
        return rank_correlation(est, truth, present)
    rhos = [rank_correlation(est[b:b + 1], truth[b:b + 1], present[b:b + 1])
            for b in range(rollouts.batch_size)
            if int(present[b].sum()) >= 2 and float(truth[b][present[b]].std()) > 0]
    return sum(rhos) / len(rhos) if rhos else 0.0
