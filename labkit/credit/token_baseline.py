"""The optimal token baseline: a group baseline for every position, weighted by how much the
policy's randomness has moved the path so far.

GRPO subtracts one number per prompt group from every token. The variance-minimising baseline of
a token-level policy gradient is instead, for each position t, the group's reward-to-go weighted
by the squared norm of the score function accumulated up to t (arXiv:2602.07078):

    B_t = sum_i G_{i,t} W_{i,t} / sum_i W_{i,t},   W_{i,t} = sum_{j <= t} (1 - 2 pi_{i,j} + sum_v pi_{i,j}(v)^2)

where pi_{i,j} is the probability of the token trajectory i sampled at j and sum_v pi(v)^2 the
squared probabilities over the vocabulary at that position: ||grad log pi||^2 of a softmax's
logits. A path through confident tokens (pi near 1) has W near 0 and hardly weighs on the
baseline; one through uncertain tokens weighs more.

Two alignments, as verl has two functions: ``optimal_token_baseline`` compares trajectories at
the same column of the batch (responses right-padded from column 0, the single-turn case), and
``tir_optimal_token_baseline`` at the same count of generated tokens, so that tool outputs
between turns (positions off the mask) do not shift one trajectory's tokens against another's.
"""
from __future__ import annotations

import torch

from labkit.core.checks import (ROUND_OFF, check_bool, check_in_range, check_number, log_probabilities,
                                per_position, resolve_input)
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns
from labkit.credit.registry import register

_EQUATION = (r"A_{i,t} = G_{i,t} - \frac{\sum_{j \in g(i)} G_{j,t} W_{j,t}}{\sum_{j \in g(i)} W_{j,t} + \epsilon},"
             r"\quad W_{i,t} = \sum_{t' \le t} \left(1 - 2\pi_{i,t'} + \sum_v \pi_{i,t'}(v)^2\right)")
_SYMBOLS = ("G: reward-to-go; pi_{i,t}: probability of the sampled token (exp of rollouts.logprobs); "
            "sum_v pi(v)^2: sum_pi_squared; g(i): the prompt group (a group of one: baseline 0); eps = 1e-8")


def _inputs(rollouts: Rollouts, sum_pi_squared, rollout_is_weights) -> tuple[torch.Tensor, torch.Tensor]:
    """(G, w): reward-to-go and the per-position score-norm proxy, float64, 0 off the mask."""
    mask = rollouts.mask
    if rollouts.logprobs is None:
        raise ValueError("rollouts: needs logprobs (the sampling policy's log-probability of every token); "
                         "this batch has none")
    logp = log_probabilities("rollouts.logprobs", rollouts.logprobs, mask)
    s2, _ = resolve_input("sum_pi_squared", sum_pi_squared, rollouts,
                          expected="the policy's sum over the vocabulary of squared probabilities, (B, T)")
    s2 = per_position("sum_pi_squared", s2, mask)
    check_in_range("sum_pi_squared", s2, low=0.0, high=1.0 + ROUND_OFF, where=mask,
                   what="sums of squared probabilities")
    w = torch.where(mask, 1.0 - 2.0 * logp.exp() + s2, torch.zeros((), dtype=torch.float64))
    if rollout_is_weights is not None:
        rho = per_position("rollout_is_weights", rollout_is_weights, mask)
        check_in_range("rollout_is_weights", rho, low=0.0, where=mask, what="importance weights")
        w = w * rho ** 2
    # in float64: the undiscounted reward-to-go is then one reverse cumulative sum
    return discounted_returns(rollouts.rewards.to(torch.float64), mask, 1.0), w


def _group_baseline(G: torch.Tensor, W: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor,
                    handle_zero_tail: bool, eps: float, count_empty: bool) -> torch.Tensor:
    """B_t per group and column of (B, T') tensors; a group of one gets 0. ``count_empty``:
    whether a row with nothing generated counts towards its group's size."""
    _, inverse, _ = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n = int(inverse.max()) + 1 if inverse.numel() else 0
    length = mask.sum(1)
    counted = torch.ones_like(length) if count_empty else (length > 0).long()
    size = torch.zeros(n, dtype=torch.long).index_add_(0, inverse, counted)
    W = torch.where(mask, W, torch.zeros((), dtype=W.dtype))   # G is already 0 off the mask
    num = torch.zeros(n, G.shape[1], dtype=torch.float64).index_add_(0, inverse, G * W)
    den = torch.zeros(n, G.shape[1], dtype=torch.float64).index_add_(0, inverse, W)
    # per group and column first (n x T), then one gather to the rows; a group of one gets 0
    per_group = torch.where((size > 1)[:, None], num / (den + eps), torch.zeros((), dtype=torch.float64))
    base = per_group.index_select(0, inverse)
    if handle_zero_tail:
        # past the second-longest trajectory only the longest one is left: its baseline there
        # would be its own return (advantage 0), so it is set to 0 instead
        top = torch.full((n,), -1, dtype=torch.long).scatter_reduce(0, inverse, length, "amax")
        is_top = length == top[inverse]
        n_top = torch.zeros(n, dtype=torch.long).index_add_(0, inverse, is_top.long())
        second = torch.full((n,), -1, dtype=torch.long).scatter_reduce(
            0, inverse, torch.where(is_top, -1, length), "amax")
        lone = (is_top & (n_top[inverse] == 1) & (size[inverse] > 1)).nonzero().flatten()
        if lone.numel():
            cols = torch.arange(G.shape[1])[None, :]
            tail = cols >= second[inverse[lone]][:, None]
            base[lone] = torch.where(tail, torch.zeros((), dtype=torch.float64), base[lone])
    return base


def _otb(rollouts: Rollouts, name: str, sum_pi_squared, rollout_is_weights, handle_zero_tail: bool,
         eps: float, by_generated: bool) -> Credit:
    handle_zero_tail = check_bool("handle_zero_tail", handle_zero_tail)
    eps = check_number("eps", eps, low=0.0)
    G, w = _inputs(rollouts, sum_pi_squared, rollout_is_weights)
    mask = rollouts.mask
    W = w.cumsum(1)
    if by_generated:
        # each trajectory's k-th generated token goes to column k
        length = mask.sum(1)
        width = max(1, int(length.max()))
        col = (mask.cumsum(1) - 1).clamp(min=0)
        rows = torch.arange(rollouts.batch_size)[:, None].expand_as(mask)
        packed_mask = torch.arange(width)[None, :] < length[:, None]
        packed = []
        for x in (G, W):
            out = torch.zeros(rollouts.batch_size, width, dtype=torch.float64)
            out[rows[mask], col[mask]] = x[mask]
            packed.append(out)
        base_packed = _group_baseline(packed[0], packed[1], packed_mask, rollouts.group_ids, handle_zero_tail, eps,
                                      count_empty=False)
        base = torch.zeros_like(G)
        base[mask] = base_packed[rows[mask], col[mask]]
    else:
        base = _group_baseline(G, W, mask, rollouts.group_ids, handle_zero_tail, eps, count_empty=True)
    dtype = rollouts.rewards.dtype
    return Credit.from_tokens(rollouts, (G - base).to(dtype), name, baseline=base.to(dtype),
                              path_variance=W.to(dtype), returns=G)


@register("optimal_token_baseline", level="token", needs=("logprobs",),
          inputs={"sum_pi_squared": "sum_pi_squared"}, status="implemented", paper="2602.07078",
          equation=_EQUATION, symbols=_SYMBOLS + "; t: the batch column")
def optimal_token_baseline(rollouts: Rollouts, *, sum_pi_squared, rollout_is_weights=None,
                           handle_zero_tail: bool = True, eps: float = 1e-8) -> Credit:
    """Optimal token baseline (arXiv:2602.07078): a per-position group baseline weighted by path variance.

    Inputs:
        rollouts: ``rewards``, ``mask``, ``group_ids``, ``logprobs`` (the sampling policy's).
        ``sum_pi_squared`` (sum_pi_squared): (B, T) float tensor, sum over the vocabulary of pi(v)^2 at every
            position (or a callable rollouts -> that tensor); one reduction of the logits the
            policy's forward pass already computes.
        rollout_is_weights: optional (B, T) truncated importance weights rho; W is scaled by rho^2.

    Formula:
        w_t = 1 - 2 pi_t + sum_v pi_t(v)^2 (the squared norm of d log pi / d logits),
        W_t = sum_{t' <= t} w_t' (the path's accumulated variance), and for each column t of the
        batch B_t = sum_i G_{i,t} W_{i,t} / (sum_i W_{i,t} + eps) over the prompt group;
        A_{i,t} = G_{i,t} - B_t. Trajectories are compared at the same column, which is the same
        generated token when responses are right-padded from column 0 (single turn).

    Defaults:
        rollout_is_weights = None, handle_zero_tail = True, eps = 1e-8 (verl's).

    Degenerate input:
        a group of one gets baseline 0 (its return is its credit); a column where every W is 0
        (deterministic tokens so far) gets baseline 0; with ``handle_zero_tail`` the group's
        single longest trajectory gets baseline 0 past the second-longest one's length.

    Deviations from the reference:
        none from verl's ``compute_optimal_token_baseline_advantage`` (tested); verl computes in
        float32, labkit in float64. With tool outputs between turns use
        ``tir_optimal_token_baseline``.
        At tool output inside a response: G and W carry, but trajectories are compared by column,
        as under through (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``baseline`` (B, T), each position's B_t,
        ``path_variance`` (B, T), W, and ``returns`` (B, T) float64, G.

    Cost:
        none beyond the sampled batch and its forward pass (sum_pi_squared is a reduction of its logits).
    """
    return _otb(rollouts, "optimal_token_baseline", sum_pi_squared, rollout_is_weights, handle_zero_tail, eps,
                by_generated=False)


@register("tir_optimal_token_baseline", level="token", needs=("logprobs",),
          inputs={"sum_pi_squared": "sum_pi_squared"}, status="implemented", paper="2602.07078",
          equation=_EQUATION, symbols=_SYMBOLS + "; t: the count of tokens the trajectory generated")
def tir_optimal_token_baseline(rollouts: Rollouts, *, sum_pi_squared, rollout_is_weights=None,
                               handle_zero_tail: bool = True, eps: float = 1e-8) -> Credit:
    """Optimal token baseline for tool-integrated, multi-turn trajectories (arXiv:2602.07078).

    Inputs:
        rollouts: ``rewards``, ``mask`` (tool outputs off it), ``group_ids``, ``logprobs``.
        ``sum_pi_squared`` (sum_pi_squared): (B, T) float tensor, sum over the vocabulary of pi(v)^2 at every
            position (or a callable rollouts -> that tensor).
        rollout_is_weights: optional (B, T) truncated importance weights rho; W is scaled by rho^2.

    Formula:
        as ``optimal_token_baseline``, but trajectory i's k-th generated token is compared with
        the k-th generated token of the others in its group, wherever tool outputs put it in the
        batch: B_k = sum_i G_{i,(k)} W_{i,(k)} / (sum_i W_{i,(k)} + eps).

    Defaults:
        rollout_is_weights = None, handle_zero_tail = True, eps = 1e-8 (verl's).

    Degenerate input:
        a trajectory that generated nothing leaves its group (it cannot be compared), so a group
        with one trajectory that generated gets baseline 0; the other rules as
        ``optimal_token_baseline``. Without positions off the mask inside a response the two
        functions agree (tested).

    Deviations from the reference:
        none from verl's ``compute_multi_turn_optimal_token_baseline_advantage`` (tested);
        float64 instead of float32.
        At tool output inside a response: carry for G, W and the alignment, as verl's
        (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``baseline`` (B, T), each generated token's B_k (0 off
        the mask), ``path_variance`` (B, T), W, and ``returns`` (B, T) float64, G.

    Cost:
        none beyond the sampled batch and its forward pass (sum_pi_squared is a reduction of its logits).
    """
    return _otb(rollouts, "tir_optimal_token_baseline", sum_pi_squared, rollout_is_weights, handle_zero_tail, eps,
                by_generated=True)
