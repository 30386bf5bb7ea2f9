"""Tool output inside a response: what a backward pass does when it meets positions the policy
did not generate, and how to run any estimator under each of three conventions.

A multi-turn response interleaves generated tokens with tool output (``Rollouts.mask`` False
inside the row). A *tool span* is a run of such positions with generated positions on both
sides in the same row; leading prompt and trailing padding are not spans. The three conventions,
stated on the running quantity of a backward pass (the return G, or GAE's accumulator A and the
next value V'), with e the last generated position before a span and n the first one after it:

* **carry**: the span is skipped as if it were absent. G (and A, V') passes it unchanged and the
  discount between e and n is applied once: ``G_e = r_e + gamma G_n``, ``delta_e = r_e +
  gamma V_n - V_e``, ``A_e = delta_e + gamma lam A_n``.
* **reset**: the span ends the backward pass: ``G_e = r_e``, ``A_e = delta_e = r_e - V_e``. The
  tokens before a tool output get none of the reward after it. What a scan computes that zeroes
  its running return wherever the mask is 0 (padding and tool output alike).
* **through** (the span dropped from the loss only): the span's positions are treated as
  generated while the estimator runs (reward 0, one discount per position, TD errors on the
  critic's values there, the span counted in batch statistics and in the column alignment), and
  their credit is dropped afterwards. What a framework computes when the tool mask reaches the
  loss but not the advantage, or does not line up with the tokens.

With gamma = 1 and no values, carry and through give the same reward-to-go (the span's rewards
are 0 and nothing discounts); they can still differ through what the estimator does with it
(REINFORCE++ whitens over the span's positions too, the multi-turn optimal token baseline counts
them when it aligns trajectories).

**The lab's convention is carry**: ``labkit.core.stats.discounted_returns`` (``Rollouts.returns``,
GAE, TD(0), POAD, REINFORCE++, ReMax, the optimal token baselines) carries the running value
across every position off the mask and discounts once between consecutive generated positions;
credit on positions off the mask is 0. This is the one place that says so; the estimators'
docstrings point here.

verl 0.9.1 (``verl/trainer/ppo/core_algos.py``), at positions with ``response_mask`` 0 inside a
response:

* ``compute_gae_advantage_return``: carry (the next value and the running advantage pass
  unchanged); the advantage stored on the span is the carried one, not 0, and the loss masks it.
* ``compute_reinforce_plus_plus_outcome_advantage``: carry (its returns are 0 on the span; before
  a fix in 2026 its scan zeroed the running return at every 0 of the mask: reset).
* ``compute_remax_outcome_advantage``: a reverse cumulative sum of the masked rewards, no
  discount: carry (the same as through); the span keeps its reward-to-go as advantage.
* ``compute_multi_turn_optimal_token_baseline_advantage``: carry (undiscounted G; W does not grow
  on the span; trajectories aligned by their count of generated tokens). The single-turn
  ``compute_optimal_token_baseline_advantage`` aligns by column, so on multi-turn data it
  compares tokens as through would, while G and W carry.
* ``compute_grpo_outcome_advantage`` and ``compute_reinforce_plus_plus_baseline_outcome_advantage``
  compute no reward-to-go (the total score, then a group mean and a std or a whitening over the
  masked tokens): the conventions do not apply; the span gets 0.

How each convention is run (``run_under``), as transforms of the batch:

* carry: the estimator on the batch as it is.
* through: ``through_spans`` marks the spans generated (with the step, turn and agent of the
  position before them, so a span belongs to the turn it answers), the estimator runs, and the
  credit is read back on the original batch (spans get 0). Per-position inputs (``values``,
  ``sum_pi_squared``) and ``logprobs`` / ``entropies`` must then be valid on the spans too.
* reset: ``reset_rewards`` recharges the reward of every e by minus what the carrying pass would
  bring back across the span (d_e X_n: X_n = G_n for a return, V_n + lam A_n for GAE, both from
  the reset pass, which is the carrying one with discount 0 across every span), so the carrying
  pass computes the reset one exactly. It applies to the estimators listed in ``RECURSIONS``; an
  estimator at episode level, or one listed with None, computes no reward-to-go and runs as under
  carry (a framework's reset bug does not touch it).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.stats import discounted_returns, next_masked
from labkit.core.turns import action_discounts
from labkit.credit.registry import get_estimator

__all__ = ["CONVENTIONS", "RECURSIONS", "tool_spans", "piece_ids", "through_spans", "reset_rewards", "run_under"]

CONVENTIONS = ("carry", "reset", "through")

#: What each estimator's backward pass is, for ``reset``: "returns" (a reward-to-go with the
#: option ``gamma``), "gae" (TD errors on ``values``, discount ``gamma``, trace ``lam``),
#: "gae_per_action" (as "gae", discounting only between turns: POAD), or None (no reward-to-go:
#: the credit reads only each trajectory's total score).
RECURSIONS: dict[str, str | None] = {
    "gae": "gae", "td0": "gae", "poad": "gae_per_action",
    "reinforce_pp": "returns", "remax": "returns",
    "optimal_token_baseline": "returns", "tir_optimal_token_baseline": "returns",
    "reinforce_pp_baseline": None,
}


def tool_spans(rollouts: Rollouts) -> torch.Tensor:
    """Positions off the mask with a generated position before and after them in the same row,
    (B, T) bool: the tool output inside a response."""
    m = check_rollouts(rollouts).mask
    before = m.long().cumsum(1) > 0
    after = m.long().flip(1).cumsum(1).flip(1) > 0
    return ~m & before & after


def piece_ids(rollouts: Rollouts) -> torch.Tensor:
    """The number of tool spans before every generated position of its row, (B, T) long, -1 off
    the mask: the pieces of a response that ``reset`` treats as separate."""
    spans = tool_spans(rollouts)
    starts = spans & ~torch.cat([torch.zeros_like(spans[:, :1]), spans[:, :-1]], 1)
    count = starts.long().cumsum(1)
    return torch.where(rollouts.mask, count, torch.full_like(count, -1))


def _fill_forward(ids: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    """``ids`` with every position in ``fill`` given the value of the nearest position before it
    that is not in ``fill`` (spans always have one)."""
    T = ids.shape[1]
    src = torch.where(fill, torch.zeros_like(ids), torch.arange(T).expand_as(ids))
    return ids.gather(1, src.cummax(1).values)


def through_spans(rollouts: Rollouts) -> Rollouts:
    """The batch with every tool span marked generated: its positions take the step, turn and
    agent of the position before the span (the turn it answers) and keep their tokens, zero
    rewards, log-probabilities, entropies and states as given (which must then be valid there).
    The ``through`` convention runs an estimator on this batch."""
    spans = tool_spans(rollouts)
    if not bool(spans.any()):
        return rollouts
    labels = {name: _fill_forward(getattr(rollouts, name), spans)
              for name in ("step_ids", "turn_ids", "agent_ids")}
    try:
        return rollouts.with_(mask=rollouts.mask | spans, **labels)
    except ValueError as err:
        raise ValueError(f"rollouts: the tool spans cannot be treated as generated ({err})") from None


def _discounts(rollouts: Rollouts, gamma: float, per_action: bool) -> torch.Tensor:
    """The discount between every generated position and the next one, (B, T) float64."""
    if per_action:
        return action_discounts(rollouts, gamma)
    return torch.where(rollouts.mask, torch.tensor(gamma, dtype=torch.float64), torch.zeros((), dtype=torch.float64))


def reset_rewards(rollouts: Rollouts, *, gamma: float = 1.0, lam: float = 1.0, values: torch.Tensor | None = None,
                  per_action: bool = False) -> Rollouts:
    """The batch with rewards recharged so that labkit's carrying backward pass computes the
    ``reset`` convention's: the last generated token e before every tool span gets
    r_e - d_e X_n, n the first token after the span, d_e the discount between them, X_n what the
    pass would carry back: G_n (the reset return after the span) without ``values``, and
    V_n + lam A_n (the reset GAE after the span) with them. ``per_action`` discounts only between
    turns (POAD). Rewards change (so do the total scores); nothing else does."""
    check_rollouts(rollouts)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    lam = check_number("lam", lam, low=0.0, high=1.0)
    spans = tool_spans(rollouts)
    if not bool(spans.any()):
        return rollouts
    mask = rollouts.mask
    r = rollouts.rewards.to(torch.float64)
    d = _discounts(rollouts, gamma, per_action)
    v = None if values is None else torch.as_tensor(values).to(torch.float64)
    # the last generated position before each span: the next generated one is in another piece
    pieces = piece_ids(rollouts)
    last = mask & (next_masked(pieces + 1, mask) - 1 > pieces)
    # the reset pass itself is the carrying one with discount 0 across every span
    cut = torch.where(last, torch.zeros((), dtype=torch.float64), d)
    if v is None:
        carried = discounted_returns(r, mask, cut)
    else:
        carried = v + lam * discounted_returns(r + cut * next_masked(v, mask) - v, mask, cut * lam)
    charge = torch.where(last, d * next_masked(carried, mask), torch.zeros((), dtype=torch.float64))
    return rollouts.with_(rewards=(r - charge).to(rollouts.rewards.dtype))


def _estimator(estimator: str | Callable) -> tuple[str, Callable]:
    if isinstance(estimator, str):
        return estimator, get_estimator(estimator)
    spec = getattr(estimator, "spec", None)
    if spec is None:
        raise TypeError(f"estimator: expected a registered estimator or its name, got {type(estimator).__name__}")
    return spec.name, estimator


def _reset_batch(name: str, fn: Callable, rollouts: Rollouts, kwargs: dict) -> Rollouts:
    """The batch an estimator runs on under ``reset`` (the batch itself if it has no backward pass)."""
    if fn.spec.level == "episode":
        return rollouts
    if name not in RECURSIONS:
        raise ValueError(f"estimator: {name!r} is not in tool_spans.RECURSIONS, so what its backward pass "
                         f"is (and what a reset would change) is not known; known: {sorted(RECURSIONS)}")
    kind = RECURSIONS[name]
    if kind is None or (name == "reinforce_pp" and kwargs.get("group_baseline", False)):
        return rollouts
    gamma = kwargs.get("gamma", 1.0)
    if kind == "returns":
        return reset_rewards(rollouts, gamma=gamma)
    lam = 0.0 if name == "td0" else kwargs.get("lam", 1.0)
    values = kwargs.get("values")
    if callable(values):
        values = values(rollouts)
    return reset_rewards(rollouts, gamma=gamma, lam=lam, values=values, per_action=kind == "gae_per_action")


def run_under(convention: str, estimator: str | Callable, rollouts: Rollouts, **kwargs: Any) -> Credit:
    """Run ``estimator`` (a registered name or function) on ``rollouts`` under ``convention``
    ("carry", "reset" or "through"; see the module docstring), with its options ``kwargs``.

    Returns the estimator's Credit on ``rollouts`` itself: tool spans get 0 under every
    convention; ``info["convention"]`` says which ran. Under ``through`` per-position inputs in
    ``kwargs`` are read on the spans too.
    """
    check_choice("convention", convention, CONVENTIONS)
    check_rollouts(rollouts)
    name, fn = _estimator(estimator)
    if convention == "carry":
        batch = rollouts
    elif convention == "reset":
        batch = _reset_batch(name, fn, rollouts, kwargs)
    else:
        batch = through_spans(rollouts)
    credit = fn(batch, **kwargs)
    info = dict(credit.info, convention=convention)
    if credit.level == "token":
        out = Credit.from_tokens(rollouts, credit.token, credit.method, cost=credit.cost, **info)
    else:
        out = Credit.from_level(rollouts, credit.values, credit.level, credit.method, cost=credit.cost, **info)
    return out
