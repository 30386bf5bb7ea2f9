"""Temporally scheduled token selection: which tokens get credit depends on how far training is.

The trajectory-percentile schedule (TP-Schedule) of Zhang et al. 2026 keeps, early in training,
only the last tokens of every response (a late percentile of the trajectory) and widens the
window step by step until every token is optimised again. The estimator here is one stage of that
schedule, chosen by ``progress``; ``labkit.learn.temporal_schedule`` strings the stages over a run.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.credit.entropy import _base_estimator
from labkit.credit.registry import register

SCHEDULE_MODES = ("linear", "sigmoid", "gamma")
SIGMOID_STEEPNESS = 8.0   # the reference code's k for the sigmoid curve
GAMMA_POWER = 2.0         # the reference code's default exponent for the gamma curve


def prefix_ratio(progress: float, *, magnitude: float = 0.99, mode: str = "linear") -> float:
    """The share of every trajectory's generated tokens left out of the update at schedule
    ``progress`` in [0, 1]: ``magnitude`` at 0, falling to 0 at 1 along ``mode``'s curve
    ("linear": m (1 - p); "sigmoid": m times a logistic step centred at p = 1/2 with steepness 8,
    rescaled to run from 1 to 0; "gamma": (m (1 - p))^2). ValueErrors name the argument."""
    p = check_number("progress", progress, low=0.0, high=1.0)
    m = check_number("magnitude", magnitude, low=0.0, high=1.0)
    mode = check_choice("mode", mode, SCHEDULE_MODES)
    if mode == "linear":
        return m * (1.0 - p)
    if mode == "gamma":
        return (m * (1.0 - p)) ** GAMMA_POWER
    k = SIGMOID_STEEPNESS
    sig = 1.0 / (1.0 + math.exp(k * (p - 0.5)))
    start, end = 1.0 / (1.0 + math.exp(-k * 0.5)), 1.0 / (1.0 + math.exp(k * 0.5))
    return m * (sig - end) / (start - end)


def percentile_window(rollouts: Rollouts, ratio: float) -> torch.Tensor:
    """(B, T) bool: the generated positions at or after the ``ratio`` percentile of their own
    trajectory, i.e. a trajectory with L generated positions keeps its positions with index
    i >= min(floor(ratio * L), L - 1) (counted over the mask), so at least its last one."""
    ratio = check_number("ratio", ratio, low=0.0, high=1.0)
    mask = rollouts.mask
    index = mask.long().cumsum(1) - 1                      # position within the generated tokens
    length = mask.sum(1)
    cut = torch.minimum((length.to(torch.float64) * ratio).floor().long(), (length - 1).clamp(min=0))
    return mask & (index >= cut[:, None])


@register("tp_schedule", level="token", status="implemented", paper="2605.25381",
          equation=r"A_{i,t} = \mathbf{1}\left[\,n_{i,t} \ge \min(\lfloor \rho(p)\, L_i \rfloor,\ L_i - 1)\right] "
                   r"A^{\text{base}}_{i,t},\quad \rho(p) = m\,(1 - p)",
          symbols="n_{i,t}: index of token t among trajectory i's L_i generated tokens; p: schedule progress in "
                  "[0, 1] (progress = 0); m: initial magnitude = 0.99; rho: the share left out (linear mode; "
                  "sigmoid and gamma curves as options); base = grpo")
def tp_schedule(rollouts: Rollouts, *, progress: float = 0.0, magnitude: float = 0.99, mode: str = "linear",
                base: str = "grpo", base_kwargs: dict[str, Any] | None = None) -> Credit:
    """TP-Schedule, temporal scheduling of token selection (Zhang et al. 2026, arXiv:2605.25381): one stage.

    Inputs:
        rollouts: ``mask`` (the generated positions) and what the base estimator reads
        (``grpo``: ``rewards``, ``group_ids``).

    Formula:
        rho      = prefix_ratio(progress, magnitude, mode)     (linear: m (1 - p))
        keep_i,t = n_i,t >= min(floor(rho * L_i), L_i - 1)     n_i,t: index of t among i's L_i
                                                              generated positions
        A_i,t    = A^base_i,t if keep_i,t, else 0

        Early in training (p = 0) only the last 1 % of every trajectory (at least its final
        token) carries credit; as p grows the window widens toward the start; at p = 1 every
        generated token carries the base credit. ``labkit.learn.temporal_schedule`` maps the
        training iteration to p (the reference's linear ramp from 0 % to 80 % of the run).

    Defaults:
        progress = 0 (the schedule's first stage: the narrowest window), magnitude = 0.99 and
        mode = "linear" (the reference's run scripts), base = "grpo", base_kwargs = None.

    Degenerate input:
        progress = 1 or magnitude = 0 returns the base credit on every token. A trajectory of
        one generated position keeps it. A batch whose base credit is zero stays zero.
        Refused: progress or magnitude outside [0, 1], an unknown ``mode``, and
        ``base="tp_schedule"``.

    Deviations from the reference:
        the reference code moves the left-out prefix into the prompt, so those tokens leave the
        loss and its token-mean is taken over the kept suffix only; here their credit is set to
        0, so under a token-mean loss the kept tokens' share of the update is scaled by the
        kept fraction (the direction of the gradient is the same). The paper's other criteria
        (forking tokens, entropy-shaped advantages) are not built; ``base`` may be any
        registered estimator.

    Returns:
        credit at level "token"; ``info``: ``kept`` (B, T) bool, ``prefix_ratio`` rho,
        ``share_kept`` (kept / generated positions), ``progress``, ``base`` and ``base_info``.

    Cost:
        the base estimator's, passed through unchanged.
    """
    progress = check_number("progress", progress, low=0.0, high=1.0)
    rho = prefix_ratio(progress, magnitude=magnitude, mode=mode)
    base_fn = _base_estimator(base, base_kwargs, "tp_schedule")
    base_credit = base_fn(rollouts, **(base_kwargs or {}))
    kept = percentile_window(rollouts, rho)
    token = torch.where(kept, base_credit.token, torch.zeros((), dtype=base_credit.token.dtype))
    n = int(rollouts.mask.sum())
    return Credit.from_tokens(rollouts, token, "tp_schedule", cost=base_credit.cost, kept=kept, prefix_ratio=rho,
                              share_kept=int(kept.sum()) / max(n, 1), progress=progress, base=base,
                              base_info=base_credit.info)
