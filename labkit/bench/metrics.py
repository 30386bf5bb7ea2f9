"""Metrics beyond rank correlation: trajectory lengths, policy-gradient quality and luck weight.

* ``trajectory_lengths``: min / median / max / mean of the scored batch's generated length, in
  the task's unit (tokens for token-level worlds, turns for ToolWorld, agents for TeamTask).
* ``gradient_metrics``: the estimator's credit turned into a policy gradient on a tabular policy,
  sub-batch by sub-batch (``labkit.scoring.gradient_study`` on the credit computed once for the
  whole batch), against the exact gradient of J: mean cosine and total variance.
* ``luck_weight``: on ToolWorld, where every turn's exact outcome splits into skill (A_t) and luck
  (the tools' random answers from t on), how much of the credit follows luck rather than skill
  (a ratio of the coefficients of ``labkit.scoring.skill_luck_fit``; not notebook 05's
  ``luck_share``, the share of the outcomes' variance that is luck).
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_int
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.scoring import gradient_study, luck_after, skill_luck_fit

__all__ = ["trajectory_lengths", "gradient_metrics", "luck_weight"]


def trajectory_lengths(lengths) -> dict:
    """{"min", "median", "max", "mean"} of a 1-D tensor of per-trajectory lengths (floats);
    a ValueError naming ``lengths`` when it is empty or not 1-D."""
    x = as_tensor("lengths", lengths).to(torch.float64)
    if x.dim() != 1 or x.numel() == 0:
        raise ValueError(f"lengths: expected a non-empty 1-D tensor, got shape {tuple(x.shape)}")
    # torch.median returns the lower middle value; the usual median averages the two middles
    s = x.sort().values
    n = s.numel()
    median = float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)
    return {"min": float(s[0]), "median": median, "max": float(s[-1]), "mean": float(s.mean())}


def gradient_metrics(policy, rollouts: Rollouts, credit: Credit, exact_grad: torch.Tensor, *,
                     n_batches: int = 4) -> dict:
    """``gradient_cosine`` (mean over ``n_batches`` consecutive sub-batches of cos(g_i, exact
    gradient)) and ``gradient_variance`` (total variance of the g_i) of ``credit``'s
    policy-gradient estimate on a tabular ``policy``. The credit is computed once on the whole
    batch and split, so no estimator is re-run (a group statistic sees the whole batch, as when
    it was scored). A ValueError naming ``n_batches`` when it does not divide the batch."""
    n_batches = check_int("n_batches", n_batches, low=2)
    if rollouts.batch_size % n_batches:
        raise ValueError(f"n_batches: {n_batches} does not divide the batch size {rollouts.batch_size}")
    token = credit.token
    size = rollouts.batch_size // n_batches
    chunks = {}
    batches = rollouts.split(n_batches)
    for i, b in enumerate(batches):
        chunks[id(b)] = token[i * size:(i + 1) * size]
    stats = gradient_study(policy, batches, lambda b: Credit.from_tokens(b, chunks[id(b)], "bench"), exact_grad)
    return {"gradient_cosine": stats["cosine"], "gradient_variance": stats["variance"]}


def luck_weight(rollouts: Rollouts, credit: Credit, skill: torch.Tensor, luck: torch.Tensor) -> float | None:
    """|b_luck| / (|b_skill| + |b_luck|) of the least-squares fit (``skill_luck_fit``), over every
    played position,

        credit_t ~ b0 + b_skill * skill_t + b_luck * luck_after_t,

    with skill_t the exact advantage of the action and luck_after_t the sum of the tools' luck
    from t to the end (``ToolTruth.skill_luck``). 0: the credit ignores luck (the exact advantage);
    1: it follows luck only. None when the fit is degenerate (fewer than three positions, no
    spread in skill or luck, or both coefficients zero)."""
    m = rollouts.mask
    c = credit.token.to(torch.float64)[m]
    if c.numel() < 3:
        return None
    fit = skill_luck_fit(c, {"skill": skill.to(torch.float64)[m], "luck_after": luck_after(luck).to(torch.float64)[m]})
    bs, bl = abs(fit["skill"]), abs(fit["luck_after"])
    if bs != bs or bl != bl:  # a regressor without spread was dropped (NaN)
        return None
    return bl / (bs + bl) if bs + bl > 1e-12 else None
