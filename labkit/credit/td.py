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

from labkit._checks import as_tensor, check_finite, check_number, check_shape
from labkit.credit._registry import register
from labkit.rollouts import Cost, Credit, Rollouts

Values = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]


def _resolve_values(rollouts: Rollouts, values: Values) -> tuple[torch.Tensor, Cost]:
    """Evaluate the critic if it is a callable (one auxiliary call per sequence) and check it."""
    cost = Cost()
    if callable(values) and not isinstance(values, torch.Tensor):
        values = values(rollouts)
        cost = Cost(aux_calls=rollouts.batch_size)
    v = as_tensor("values", values)
    check_shape("values", v, (rollouts.batch_size, rollouts.horizon))
    check_finite("values", torch.where(rollouts.mask, v, torch.zeros((), dtype=v.dtype)))
    return v.to(rollouts.rewards.dtype), cost


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over the masked entries (verl's ``masked_whiten``); 0 off-mask."""
    vals = x[mask]
    if vals.numel() == 0:
        return torch.zeros_like(x)
    mu, var = vals.mean(), vals.var(unbiased=False)
    return torch.where(mask, (x - mu) / torch.sqrt(var + eps), torch.zeros((), dtype=x.dtype))


@register("gae")
def gae(rollouts: Rollouts, *, values: Values, gamma: float = 1.0, lam: float = 1.0,
        whiten_advantages: bool = False) -> Credit:
    """Generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438), token level.

    Formula in the module docstring. Follows verl's ``compute_gae_advantage_return``: positions
    off the mask (tool output) carry the next value and the running advantage through unchanged,
    and there is no bootstrap past a trajectory's last generated token (terminal V = 0).
    Defaults gamma = lam = 1 as in verl. ``info["returns"]`` = A + V, the critic's regression
    target. Deliberate difference: verl always whitens the advantages over the batch; labkit
    only does so with ``whiten_advantages=True``, so by default the credit keeps the scale of
    the exact advantage it is scored against. Degenerate input: a one-token trajectory gets
    A = r - V; an all-masked row gets 0.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    lam = check_number("lam", lam, low=0.0, high=1.0)
    v, cost = _resolve_values(rollouts, values)
    r, m = rollouts.rewards, rollouts.mask
    B, T = r.shape
    adv = torch.zeros_like(r)
    next_value = torch.zeros(B, dtype=r.dtype)
    running = torch.zeros(B, dtype=r.dtype)
    for t in range(T - 1, -1, -1):
        delta = r[:, t] + gamma * next_value - v[:, t]
        new_running = delta + gamma * lam * running
        running = torch.where(m[:, t], new_running, running)
        next_value = torch.where(m[:, t], v[:, t], next_value)
        adv[:, t] = torch.where(m[:, t], running, 0)
    returns = torch.where(m, adv + v, 0)
    if whiten_advantages:
        adv = whiten(adv, m)
    return Credit.from_tokens(rollouts, adv, "gae", cost=cost, returns=returns, gamma=gamma, lam=lam)


@register("td0")
def td0(rollouts: Rollouts, *, values: Values, gamma: float = 1.0) -> Credit:
    """One-step TD error as credit: A_t = r_t + gamma V_{t'} - V_t (GAE with lam = 0).

    With exact values its expectation given (s_t, a_t) is the exact advantage; with a learned
    critic it inherits the critic's error at every step. Same mask conventions as ``gae``.
    """
    credit = gae(rollouts, values=values, gamma=gamma, lam=0.0)
    credit.method = "td0"
    return credit
