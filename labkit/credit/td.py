"""Temporal-difference credit: a value estimate V(s_t) at every generated position turns the
outcome into per-token advantages by bootstrapping.

    delta_t = r_t + gamma * V_{t'} - V_t          (t' = the next generated position; V = 0 past the end)
    A_t     = delta_t + gamma * lam * A_{t'}

lam = 1 gives the Monte Carlo return minus V (unbiased, high variance); lam = 0 gives the one-step
TD error (low variance, as biased as V is wrong). The values come from a critic, which is an
explicit argument: a (B, T) tensor, or a callable ``critic(rollouts) -> (B, T) tensor``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import (as_tensor, check_bool, check_finite, check_number, check_probability_table,
                                check_shape, resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, next_masked, whiten
from labkit.core.turns import action_discounts
from labkit.credit.registry import register

Values = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]


def _resolve_values(rollouts: Rollouts, values: Values) -> tuple[torch.Tensor, Cost]:
    """Evaluate the critic if it is a callable (one auxiliary call per sequence) and check it."""
    values, called = resolve_input("values", values, rollouts,
                                   expected="a (B, T) tensor of values or a critic rollouts -> (B, T)")
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    v = as_tensor("values", values)
    check_shape("values", v, (rollouts.batch_size, rollouts.horizon))
    check_finite("values", torch.where(rollouts.mask, v, torch.zeros((), dtype=v.dtype)))
    return v.to(rollouts.rewards.dtype), cost


def _gae_recursion(r: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, gamma: float | torch.Tensor,
                   lam: float) -> torch.Tensor:
    """A_t = delta_t + gamma lam A_{t+1}, delta_t = r_t + gamma V_{t+1} - V_t, backwards over the
    columns of (B, T) tensors; columns off ``mask`` carry the next value and the running
    advantage through unchanged and get A = 0; no bootstrap past the last masked column.
    ``gamma`` may be a (B, T) tensor of per-position discounts (POAD)."""
    delta = r + gamma * next_masked(v, mask) - v
    return discounted_returns(delta, mask, gamma * lam)


def _token_gae(rollouts: Rollouts, values: Values, gamma: float, lam: float, *,
               per_action: bool) -> tuple[torch.Tensor, torch.Tensor, Cost]:
    """Token-level GAE's advantages, returns (A + V) and cost; ``per_action`` discounts only
    between actions (POAD), otherwise between every pair of tokens (``gae``)."""
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    lam = check_number("lam", lam, low=0.0, high=1.0)
    v, cost = _resolve_values(rollouts, values)
    r, m = rollouts.rewards, rollouts.mask
    discount = action_discounts(rollouts, gamma).to(r.dtype) if per_action else gamma
    adv = _gae_recursion(r, v, m, discount, lam)
    return adv, torch.where(m, adv + v, 0), cost


@register("gae", level="token", inputs={"values": "token_values"}, status="implemented", paper="1506.02438",
          equation=r"A_t = \delta_t + \gamma \lambda A_{t+1},\quad \delta_t = r_t + \gamma V_{t+1} - V_t",
          symbols="t+1: next generated token (tool tokens skipped); V: critic value; V = 0 past the end; gamma = "
                  "lambda = 1; no whitening by default")
def gae(rollouts: Rollouts, *, values: Values, gamma: float = 1.0, lam: float = 1.0,
        whiten_advantages: bool = False) -> Credit:
    """Generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438): discounted TD errors.

    Inputs:
        rollouts: ``rewards``, ``mask`` (tool output between generated tokens is skipped).
        ``values`` (token_values): the critic's V at every position, a (B, T) tensor or a callable
        ``critic(rollouts) -> (B, T)``.

    Formula:
        delta_t = r_t + gamma * V_{t'} - V_t          (t' = the next generated position; V = 0 past the end)
        A_t     = delta_t + gamma * lam * A_{t'}
        (as in the module docstring). Follows verl's ``compute_gae_advantage_return``: positions
        off the mask (tool output) carry the next value and the running advantage through
        unchanged, and there is no bootstrap past a trajectory's last generated token (terminal
        V = 0). lam = 1 gives the Monte Carlo return minus V; lam = 0 the one-step TD error
        (``td0``).

    Defaults:
        gamma = lam = 1 as in verl; whiten_advantages = False.

    Degenerate input:
        a one-token trajectory gets A = r - V; an all-masked row gets 0. With
        ``whiten_advantages=True`` a batch with one generated token (or all-equal advantages)
        gets 0 everywhere (``labkit.core.stats.whiten``: 0 / sqrt(eps)). Groups play no role.

    Deviations from the reference:
        verl always whitens the advantages over the batch; labkit only does so with
        ``whiten_advantages=True``, so by default the credit keeps the scale of the exact
        advantage it is scored against. Whitened, labkit divides by the population std and verl
        (``masked_whiten``) by the unbiased one: labkit's credit is verl's times about
        1 + 1/(2n), n = generated tokens. Unwhitened it equals verl's returns minus values, and
        ``info["returns"]`` equals verl's returns, on generated tokens (tests/bridges/test_bridges_verl_parity.py;
        off the mask verl carries the running advantage, labkit gives 0).
        At tool output inside a response: carry, as verl's GAE (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``returns`` (B, T) = A + V, the critic's regression
        target, and ``gamma``, ``lam``.

    Cost:
        a callable critic counts one auxiliary call per trajectory (``aux_calls`` = B); a values
        tensor costs nothing here.
    """
    adv, returns, cost = _token_gae(rollouts, values, gamma, lam, per_action=False)
    if check_bool("whiten_advantages", whiten_advantages):
        adv = whiten(adv, rollouts.mask)
    return Credit.from_tokens(rollouts, adv, "gae", cost=cost, returns=returns, gamma=gamma, lam=lam)


@register("td0", level="token", inputs={"values": "token_values"}, status="implemented", paper="Sutton 1988",
          equation=r"A_t = r_t + \gamma V_{t+1} - V_t",
          symbols="t+1: next generated token; V: critic value; V = 0 past the end; gamma = 1; never whitened")
def td0(rollouts: Rollouts, *, values: Values, gamma: float = 1.0) -> Credit:
    """One-step TD error (Sutton 1988; Schulman et al. 2016, arXiv:1506.02438): GAE with lam = 0.

    Inputs:
        rollouts: ``rewards``, ``mask``.
        ``values`` (token_values): the critic's V at every position, as in ``gae``.

    Formula:
        A_t = r_t + gamma * V_{t'} - V_t      (t' = the next generated position; V = 0 past the end)
        This is ``gae`` with lam = 0. With exact values its expectation given (s_t, a_t) is the
        exact advantage; with a learned critic it inherits the critic's error at every step.
        Same mask conventions as ``gae``.

    Defaults:
        gamma = 1.

    Degenerate input:
        as ``gae``: a one-token trajectory gets r - V; an all-masked row gets 0. Groups play no role.

    Deviations from the reference:
        never whitened (verl's GAE whitens over the batch; ``td0`` has no whitening option).
        At tool output inside a response: carry, the TD error bootstraps on the value after it
        (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info`` as ``gae``'s: ``returns`` (B, T) = A + V, ``gamma``,
        ``lam`` (0).

    Cost:
        as ``gae``: a callable critic counts one auxiliary call per trajectory (``aux_calls`` = B);
        a values tensor costs nothing here.
    """
    credit = gae(rollouts, values=values, gamma=gamma, lam=0.0)
    credit.method = "td0"
    return credit


@register("poad", level="token", inputs={"values": "token_values"}, status="implemented", paper="2405.15821",
          equation=r"A_t = \delta_t + d_t \lambda A_{t+1},\quad \delta_t = r_t + d_t V_{t+1} - V_t",
          symbols="d_t = 1 if token t+1 is in the same action (turn), else gamma; V: critic value before token t; "
                  "V = 0 past the end; gamma = lambda = 1")
def poad(rollouts: Rollouts, *, values: Values, gamma: float = 1.0, lam: float = 1.0) -> Credit:
    """POAD (Wen et al. 2024, arXiv:2405.15821): token-level credit inside a multi-token action by
    Bellman backups with action decomposition (BAD): no discount and no reward between the tokens
    of one action, the discount only between actions.

    Inputs:
        rollouts: ``rewards``, ``mask``, ``turn_ids`` (an action is a turn).
        ``values`` (token_values): the critic's value before every token, a (B, T) tensor or a
        callable ``critic(rollouts) -> (B, T)``.

    Formula:
        d_t     = 1 if the next generated token t' belongs to the same turn (action), else gamma
                  (``labkit.core.turns.action_discounts``)
        delta_t = r_t + d_t * V_{t'} - V_t          (V = the critic's value before token t; 0 past the end)
        A_t     = delta_t + d_t * lam * A_{t'}
        Inside an action delta_t = V(o, w_1..w_j) - V(o, w_1..w_{j-1}): what choosing token w_j
        changed in the value of the unfinished action; the action's last token carries the
        reward and the discounted value of the next observation. Summed over one action's tokens
        (lam = 0) the deltas telescope to the action-level TD error r + gamma V(o') - V(o), the
        same number turn-level credit gives the whole action. Token-level GAE (``gae``)
        discounts between every pair of tokens instead, so a k-token action's future is shrunk by
        gamma^k rather than gamma, and every non-final token gets (gamma - 1) V of a
        bias: the discrepancy between token-level and action-level optimisation POAD removes.

    Defaults:
        gamma = lam = 1 (as ``gae``; with gamma = 1 and a critic over token prefixes POAD and
        ``gae`` coincide, the difference is the discount). No whitening.

    Degenerate input:
        every action one token (a tabular world's turns): d_t = gamma everywhere and POAD equals
        ``gae`` exactly. A one-token trajectory gets r - V; an all-masked row gets 0. Groups play
        no role.

    Deviations from the reference:
        the paper trains the critic with BAD's backups inside PPO; here the critic is an explicit
        argument (notebook 05 fits a tabular critic on returns discounted per action). How the
        paper applies lam inside an action could not be read; here lam mixes at every token
        boundary (lam = 0: pure one-token backups; lam = 1: the Monte Carlo return). The paper's
        Q-learning form (a max over the next token) is not built: this is its on-policy (PPO) form.
        At tool output inside a response: carry, one discount between an action and the next
        (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``returns`` (B, T) = A + V, the critic's target
        (lam = 1: returns discounted per action), and ``gamma``, ``lam``.

    Cost:
        a callable critic counts one auxiliary call per trajectory (``aux_calls`` = B); a values
        tensor costs nothing here.
    """
    adv, returns, cost = _token_gae(rollouts, values, gamma, lam, per_action=True)
    return Credit.from_tokens(rollouts, adv, "poad", cost=cost, returns=returns, gamma=gamma, lam=lam)


# --------------------------------------------------------------------------- turn level
def _resolve_turn_values(rollouts: Rollouts, values: Values, present: torch.Tensor) -> tuple[torch.Tensor, Cost]:
    """Like ``_resolve_values`` but for one value per turn, (B, n_turns)."""
    values, called = resolve_input("values", values, rollouts,
                                   expected="a (B, n_turns) tensor of turn values or a critic rollouts -> that")
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    v = as_tensor("values", values)
    check_shape("values", v, tuple(present.shape))
    if not v.is_floating_point():
        v = v.to(rollouts.rewards.dtype)
    check_finite("values", torch.where(present, v, torch.zeros((), dtype=v.dtype)))
    return v.to(rollouts.rewards.dtype), cost


# Turn-PPO and AgentPRM both compute turn-level GAE: one function realises both catalogued papers.
@register("turn_gae", level="turn", inputs={"values": "turn_values"}, status="implemented",
          paper="2512.17008; 2511.08325",
          equation=r"A_k = \delta_k + \gamma \lambda A_{k+1},\quad \delta_k = r_k + \gamma V_{k+1} - V_k",
          symbols="k: turn; r_k: reward inside turn k; V_k: critic value before turn k; V = 0 after the last turn; "
                  "gamma = lambda = 1")
def turn_gae(rollouts: Rollouts, *, values: Values, gamma: float = 1.0, lam: float = 1.0) -> Credit:
    """Turn-level GAE (Turn-PPO, arXiv:2512.17008; AgentPRM, arXiv:2511.08325): GAE over turns, not tokens.

    Inputs:
        rollouts: ``rewards``, ``turn_ids``.
        ``values`` (turn_values): the critic's value before every turn, a (B, n_turns) tensor
        (n_turns = the batch's largest turn count; entries past a trajectory's last turn are
        ignored) or a callable ``critic(rollouts) -> (B, n_turns)``.

    Formula:
        r_k     = reward received inside turn k,      V_k = the critic's value before turn k
        delta_k = r_k + gamma * V_{k+1} - V_k         (V = 0 after the last turn: no bootstrap)
        A_k     = delta_k + gamma * lam * A_{k+1}

        and every token of turn k takes A_k. One discount per turn, not per token: a long tool
        call does not shrink the future more than a short one, which is the point of the
        turn-level MDP. With every turn one token it equals token-level ``gae``; with
        gamma = lam = 1 it is the reward-to-go minus V_k.

    Defaults:
        gamma = lam = 1 (as ``gae``); no whitening.

    Degenerate input:
        a one-turn trajectory gets r - V_0; absent turns get 0. Groups play no role.

    Deviations from the reference:
        none documented beyond the choice of no whitening (verl's token-level GAE whitens over
        the batch; this estimator has no whitening option).

    Returns:
        credit at level "turn"; ``info``: ``returns`` (B, n_turns) = A + V, the critic's
        regression target, and ``gamma``, ``lam``.

    Cost:
        a callable critic counts one auxiliary call per trajectory (``aux_calls`` = B); a values
        tensor costs nothing here.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    lam = check_number("lam", lam, low=0.0, high=1.0)
    r, present = rollouts.view(rollouts.rewards, "turn", "sum")
    v, cost = _resolve_turn_values(rollouts, values, present)
    v = torch.where(present, v, torch.zeros((), dtype=v.dtype))
    # turns are numbered 0, 1, ... without gaps, so absent turns only follow the last one and
    # carrying the (zero) running values through them is the same as stopping there
    adv = _gae_recursion(r, v, present, gamma, lam)
    returns = torch.where(present, adv + v, 0)
    return Credit.from_level(rollouts, adv, "turn", "turn_gae", cost=cost, returns=returns,
                             gamma=gamma, lam=lam)


@register("archer", level="turn", inputs={"q_values": "turn_q_values", "v_values": "turn_values"},
          status="implemented", paper="2402.19446",
          equation="A_{i,k} = Q(o_k, a_k) - V(o_k)",
          symbols="k: turn (every token of turn k takes A_{i,k}); o_k, a_k: observation, action; Q, V: off-policy "
                  "turn-level TD critic")
def archer(rollouts: Rollouts, *, critic=None, q_values=None, v_values=None, pi=None) -> Credit:
    """ARCHER (Zhou et al. 2024, arXiv:2402.19446): turn-level advantage A_k = Q(o_k, a_k) - V(o_k).

    Inputs:
        rollouts: ``turn_ids`` (which turns exist).
        ``q_values`` (turn_q_values) and ``v_values`` (turn_values): the two (B, n_turns)
        tensors Q(o_k, a_k) and V(o_k). Instead of the pair, ``critic``: anything with
        ``q_values(rollouts)`` and ``v_values(rollouts, pi)`` giving (B, n_turns), e.g.
        ``labkit.learn.critics.TurnQCritic`` (``pi`` is passed on); not both.

    Formula:
        A_k = Q(o_k, a_k) - V(o_k)       from an off-policy turn-level TD critic
        and every token of turn k takes A_k. With an exact critic the expectation of A_k over pi
        is 0 at every observation.

    Defaults:
        no numeric options.

    Degenerate input:
        absent turns get 0; entries past a trajectory's last turn are ignored. Groups play no
        role. ``critic`` together with ``q_values`` / ``v_values``, or only one of the two
        tensors, is refused.

    Deviations from the reference:
        ARCHER then trains the token-level policy against this turn advantage (its low-level
        REINFORCE/PPO step); that part is the training loop's, not this estimator's.

    Returns:
        credit at level "turn"; ``info``: ``q_values`` and ``v_values`` (B, n_turns), as used.

    Cost:
        a critic counts one auxiliary call per trajectory (``aux_calls`` = B); the two tensors
        cost nothing here.
    """
    _, present = rollouts.view(rollouts.rewards, "turn", "sum")
    if pi is not None:  # checked even where the tensors make it unused: a bad table is a bad call
        pi = check_probability_table("pi", pi)
    if critic is not None:
        if q_values is not None or v_values is not None:
            raise ValueError("critic: give either critic or q_values and v_values, not both")
        if not (hasattr(critic, "q_values") and hasattr(critic, "v_values")):
            raise TypeError("critic: expected an object with q_values(rollouts) and v_values(rollouts, pi)")
        q, v = critic.q_values(rollouts), critic.v_values(rollouts, pi)
        cost = Cost(aux_calls=rollouts.batch_size)
    else:
        if q_values is None or v_values is None:
            raise ValueError("q_values: archer needs a critic, or both q_values and v_values")
        q, v, cost = q_values, v_values, Cost()
    out = []
    for name, x in (("q_values", q), ("v_values", v)):
        x = as_tensor(name, x)
        check_shape(name, x, tuple(present.shape))
        x = x.to(rollouts.rewards.dtype) if not x.is_floating_point() else x
        check_finite(name, torch.where(present, x, torch.zeros((), dtype=x.dtype)))
        out.append(torch.where(present, x, torch.zeros((), dtype=x.dtype)))
    adv = out[0] - out[1]
    return Credit.from_level(rollouts, adv, "turn", "archer", cost=cost, q_values=out[0], v_values=out[1])
