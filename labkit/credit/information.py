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



def information_gains(rollouts: Rollouts, success_prob: SuccessProb, *, final: str = "outcome"
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Cost]:
    """Every turn's information-gain reward, read from checked success probabilities.

    r_{i,k} = p_{i,k} - p_{i,k-1} on turns k < n_i; the last turn's reward follows ``final``
    ("outcome": s_i; "ig_plus_outcome": the gain + s_i; "ig": the gain alone). ``success_prob``
    is a (B, N + 1) tensor (or a callable rollouts -> that), N the batch's largest number of
    turns; columns past a trajectory's end are ignored.

    Returns (r (B, N) 0 off the turns, present (B, N) bool, p as read (B, N + 1), Cost): a
    callable is counted as one policy forward per probability read, a tensor costs nothing.
    """
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
    return r, present, p, cost


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
    ig, present, p, cost = information_gains(rollouts, success_prob, final=final)
    B, N = present.shape
    r = ig.clone()
    if check_bool("normalize", normalize) and bool(present.any()):
        pool_ids = rollouts.group_ids[:, None].expand(B, N)[present]
        r = torch.zeros_like(r)
        r[present] = group_normalize(ig[present], pool_ids, eps=eps).normalized
    adv = discounted_returns(r, present, gamma)
    return Credit.from_level(rollouts, adv, "turn", "igpo", cost=cost, ig=ig, turn_rewards=r,
                             success_prob=p, gamma=gamma, final=final)


A2TGPO_RESCALES = ("count", "none")


@register("a2tgpo", level="turn", inputs={"success_prob": "success_prob"},
          status="stand-in", paper="2605.06200",
          replaces="the policy's probability of the answer after every turn, the information-gain signal: the exact "
                   "success probability of the state after the turn (DP, or Monte Carlo); the per-turn clip range is "
                   "reported, not applied (the lab's losses clip every turn alike)",
          equation=r"A_{i,k} = w\,\frac{s_i - \bar{s}_g}{\sigma_g} + \frac{\sum_{j \ge k} \gamma^{j-k} z_{i,j}}"
                   r"{\sqrt{\sum_{j=k}^{n_i - 1} \gamma^{2(j-k)}}},\quad z_{i,k} = \frac{r_{i,k} - "
                   r"\bar{r}_{g,k}}{\sigma_{g,k}},\quad r_{i,k} = p_{i,k} - p_{i,k-1}",
          symbols="p_k: success prob after turn k (exact DP; p_n = the outcome s_i); (g, k): the task group's turns "
                  "with index k; n_i: trajectory i's turns; w = 1; gamma = 1; clip range per turn "
                  "0.2 (1 + tanh|z|), reported in info")
def a2tgpo(rollouts: Rollouts, *, success_prob: SuccessProb, gamma: float = 1.0, eps: float = 1e-6,
           outcome_weight: float = 1.0, rescale: str = "count", clip: float = 0.2,
           clip_spread: float = 1.0) -> Credit:
    """A2TGPO (arXiv:2605.06200): information-gain turn credit, normalised per turn position.

    Inputs:
        rollouts: ``rewards`` (the outcome s_i), ``group_ids`` (task groups), ``turn_ids``.
        ``success_prob`` (success_prob): as ``igpo``'s, (B, N + 1): p_{i,0} before the first
        turn, p_{i,k} after turn k; or a callable ``rollouts -> (B, N + 1)``.

    Formula:
        r_{i,k} = p_{i,k} - p_{i,k-1}        every turn (``information_gains``, final = "ig":
                                             the last turn's gain is s_i - p_{i,n-1} when p_n = s_i)
        z_{i,k} = (r_{i,k} - mean_{g,k} r) / (std_{g,k} r + eps)   over the turns with the SAME
                                             index k of the task group g's trajectories
        G_{i,k} = sum_{j >= k} gamma^{j-k} z_{i,j}                 (return-to-go of z)
        c_{i,k} = sqrt(sum_{j=k}^{n_i-1} gamma^{2(j-k)})           (= sqrt(n_i - k) at gamma = 1)
        A^O_i   = (s_i - mean_g s) / (std_g s + eps)                (GRPO's outcome advantage)
        A_{i,k} = outcome_weight * A^O_i + G_{i,k} / c_{i,k}       (rescale = "count")
                = outcome_weight * A^O_i + G_{i,k}                 (rescale = "none")
        clip_{i,k} = clip * (1 + clip_spread * tanh|z_{i,k}|)      (reported, see Returns)

        With independent unit-variance z, c_{i,k}^2 is the variance of G_{i,k}, so the rescaled
        sum keeps unit variance however many turns remain. Every token of turn k takes A_{i,k}.

    Defaults:
        gamma = 1 (IGPO's), eps = 1e-6, unbiased stds, outcome_weight = 1, rescale = "count",
        clip = 0.2 (PPO's), clip_spread = 1 (so a turn's range lies in [0.2, 0.4)).

    Degenerate input:
        a (group, turn index) pool with one turn has nothing to compare with and gets z = 0
        (GiGPO's rule for a lone anchor), so the late turns of a group's one longest trajectory
        add nothing beyond the outcome term; a pool whose gains are all equal gets 0. The outcome
        term follows ``grpo`` (a group of one: its raw score / (1 + eps); all equal: 0). A
        trajectory with no generated turn gets 0.

    Deviations from the reference:
        STAND-IN, as ``igpo``: p_k is the exact success probability of the state after turn k
        (DP in the bench), not the policy's own probability of the gold answer, so the
        information gain is far better informed here than in practice. The rest follows the
        catalog's description only (the paper and its code are not readable here); labkit's
        choices: z-scores per (task group, turn index); a variance rescale by the count of
        discounted terms, sqrt(sum gamma^{2(j-k)}), not a measured std; the outcome enters as
        GRPO's group advantage added once per turn (IGPO instead puts s_i on the last turn).
        The adaptive clip range cannot act inside a credit: labkit reports it per turn as
        ``info["clip_range"]`` (its rule, wider for turns whose gain stands out, is labkit's
        guess) and the lab's losses do not read it.

    Returns:
        credit at level "turn"; ``info``: ``ig`` the raw gains r, ``turn_rewards`` the z-scores,
        ``accumulated`` G / c, ``scale`` c, ``outcome_term`` A^O (B,), ``clip_range`` (B, N)
        (0 off the turns), ``success_prob`` (as read), and the settings ``gamma``, ``rescale``,
        ``outcome_weight``.

    Cost:
        as ``igpo``: a callable is counted as one policy forward per probability read
        (sum over trajectories of n_i + 1); a tensor costs nothing here.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    eps = check_number("eps", eps, low=0.0)
    outcome_weight = check_number("outcome_weight", outcome_weight, low=0.0)
    check_choice("rescale", rescale, A2TGPO_RESCALES)
    clip = check_number("clip", clip, low=0.0)
    clip_spread = check_number("clip_spread", clip_spread, low=0.0)
    ig, present, p, cost = information_gains(rollouts, success_prob, final="ig")
    B, N = present.shape
    dtype = p.dtype

    # one pool per (task group, turn index): turns at the same position of the group's episodes
    z = torch.zeros_like(ig)
    if bool(present.any()):
        pool_ids = (rollouts.group_ids[:, None] * N + torch.arange(N)[None, :])[present]
        z[present] = group_normalize(ig[present], pool_ids, eps=eps, singleton="zero").normalized
    G = discounted_returns(z, present, gamma)
    if rescale == "count":
        # variance of a discounted sum of independent unit-variance terms: sum of gamma^(2 lag)
        scale = discounted_returns(present.to(dtype), present, gamma * gamma).sqrt()
    else:
        scale = present.to(dtype)
    acc = torch.where(present, G / scale.clamp(min=1.0), 0)  # scale >= 1 on every turn
    a_out = group_normalize(rollouts.scores.to(dtype), rollouts.group_ids, eps=eps).normalized
    adv = torch.where(present, outcome_weight * a_out[:, None] + acc, 0)
    clip_range = torch.where(present, clip * (1 + clip_spread * torch.tanh(z.abs())), 0)
    return Credit.from_level(rollouts, adv, "turn", "a2tgpo", cost=cost, ig=ig, turn_rewards=z, accumulated=acc,
                             scale=torch.where(present, scale, 0), outcome_term=a_out, clip_range=clip_range,
                             success_prob=p, gamma=gamma, rescale=rescale, outcome_weight=outcome_weight)
