"""Information-gain credit: a turn is worth how much it moved the probability of success.

IGPO turns a sparse outcome into dense turn rewards without a critic or Monte Carlo rollouts,
by asking the policy itself after every turn how likely it now is to produce the right answer.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import (as_tensor, check_bool, check_choice, check_finite, check_in_range, check_number,
                                check_shape, resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, group_normalize
from labkit.core.turns import turn_rewards
from labkit.credit.registry import register

SuccessProb = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]
IGPO_FINALS = ("outcome", "ig_plus_outcome", "ig")


@register("igpo", level="turn", inputs={"success_prob": "success_prob"}, status="stand-in", paper="2510.14967",
          replaces="the policy's teacher-forced probability of the gold answer after every turn: the exact success "
                   "probability of the state after the turn (DP, or Monte Carlo)",
          equation=r"A_{i,k} = \sum_{l \ge k} \gamma^{l-k} \tilde{r}_{i,l},\quad r_{i,k} = p_{i,k} - p_{i,k-1}",
          symbols="p_k: success prob after turn k (exact DP); last turn's r = s_i; r~: r z-scored over all turns "
                  "of the task group; gamma = 1")
def igpo(rollouts: Rollouts, *, success_prob: SuccessProb, gamma: float = 1.0, eps: float = 1e-6,
         final: str = "outcome", normalize: bool = True) -> Credit:
    """IGPO, information-gain policy optimisation (Wang et al. 2025, arXiv:2510.14967): turn information gain.

    Inputs:
        rollouts: ``rewards`` (the outcome s_i), ``group_ids`` (task groups), ``turn_ids``.
        ``success_prob`` (success_prob): (B, N + 1), N = the batch's largest number of turns:
        p_{i,0} before the first turn, p_{i,k} after turn k; or a callable ``rollouts -> (B, N + 1)``.
        For a trajectory with n_i turns, p_{i,0..n_i} are read and later columns ignored.

    Formula:
        r_{i,k} = p_{i,k} - p_{i,k-1}                    for turns k < n_i (information gain)
        r_{i,n} = s_i                                    final = "outcome" (the paper)
                = p_{i,n} - p_{i,n-1} + s_i              final = "ig_plus_outcome"
                = p_{i,n} - p_{i,n-1}                    final = "ig" (p_n = the outcome itself)
        r~_{i,k} = (r_{i,k} - mean_g r) / (std_g r + eps)    pooled over ALL turns of ALL
                                                            trajectories of task group g
        A_{i,k} = sum_{j >= k} gamma^{j-k} r~_{i,j}

        and every token of turn k takes A_{i,k}. s_i is the trajectory's total reward.
        With final = "ig" and normalize=False the credits telescope: A_{i,k} = s_i - p_{i,k-1} at
        gamma = 1, the outcome minus the value before turn k.

    Defaults:
        gamma = 1, eps = 1e-6, unbiased std (as ``grpo``), final = "outcome", normalize = True.

    Degenerate input:
        a pool with one entry (one one-turn trajectory) gets mean 0 and std 1 (``grpo``'s
        singleton rule); a pool whose rewards are all equal gets 0; ``normalize=False`` skips
        the step. A trajectory with no generated turn gets 0 (it has nothing to credit).

    Deviations from the reference:
        STAND-IN: in the paper p_k is the policy's own teacher-forced probability of the
        ground-truth answer given the context after turn k (exp of the mean token log-prob).
        labkit has no answer to teacher-force in a tabular task, so p_k is a stand-in: the
        success probability of the state after turn k, from exact DP (``labkit.envs.tabular``)
        or Monte Carlo. That stand-in is far better informed than a policy's belief, so IGPO
        looks better here than it may in practice. The pooled group normalisation is our
        reading of the paper (Sec. 3), not checked against its code.

    Returns:
        credit at level "turn"; ``info``: ``ig`` the raw turn rewards r, ``turn_rewards`` the
        normalised r~, ``success_prob`` (as read), and the settings ``gamma``, ``final``.

    Cost:
        a callable is counted as one policy forward per probability read (the paper's
        teacher-forced passes: ``policy_forwards`` = sum over trajectories of n_i + 1); a tensor
        costs nothing here.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    eps = check_number("eps", eps, low=0.0)
    check_choice("final", final, IGPO_FINALS)
    _, present = turn_rewards(rollouts)
    B, N = present.shape
    n_turns = present.sum(1)
    success_prob, called = resolve_input("success_prob", success_prob, rollouts,
                                         expected="a (B, N + 1) tensor of success probabilities or a callable "
                                                  "rollouts -> that")
    cost = Cost(policy_forwards=int((n_turns + 1).sum())) if called else Cost()
    p = as_tensor("success_prob", success_prob)
    check_shape("success_prob", p, (B, N + 1))
    if not p.is_floating_point():
        p = p.to(torch.float64)
    p = p.to(torch.promote_types(p.dtype, rollouts.rewards.dtype))
    used = torch.arange(N + 1)[None, :] <= n_turns[:, None]
    check_finite("success_prob", torch.where(used, p, torch.zeros((), dtype=p.dtype)))
    check_in_range("success_prob", p, low=0.0, high=1.0, where=used, what="probabilities")

    r = torch.where(present, p[:, 1:] - p[:, :-1], 0)
    rows = (n_turns > 0).nonzero().flatten()  # a row with no generated turn has nothing to credit
    last = n_turns[rows] - 1
    s = rollouts.scores.to(p.dtype)[rows]
    if final == "outcome":
        r[rows, last] = s
    elif final == "ig_plus_outcome":
        r[rows, last] = r[rows, last] + s
    ig = r.clone()

    if check_bool("normalize", normalize) and bool(present.any()):
        pool_ids = rollouts.group_ids[:, None].expand(B, N)[present]
        r = torch.zeros_like(r)
        r[present] = group_normalize(ig[present], pool_ids, eps=eps).normalized
    adv = discounted_returns(r, present, gamma)
    return Credit.from_level(rollouts, adv, "turn", "igpo", cost=cost, ig=ig, turn_rewards=r,
                             success_prob=p, gamma=gamma, final=final)
