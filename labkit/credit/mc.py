"""Monte Carlo credit: values measured by sampling continuations ("vines") instead of learned.

Both estimators here need V at the start of every step: the expected final reward of a prefix,
estimated as the mean reward of k fresh continuations of it. That sampler is an explicit
argument, ``value_fn(rollouts, k) -> (V, cost)``, where V is (B, S) — V[b, i] estimates the value
of trajectory b's prefix just before its step i — and cost is a ``Cost`` of the sampling.
The environment or model supplies it: ``BifurcationChain.vine_value_fn`` (re-runs the chain
from a state), ``labkit.envs.tabular.Truth.step_value_fn`` (exact values, zero cost), and later the
tiny LM's forked continuations.
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.core.checks import as_tensor, check_choice, check_finite, check_int, check_number, check_shape
from labkit.credit._registry import register
from labkit.core.stats import whiten
from labkit.core.rollouts import Cost, Credit, Rollouts

ValueFn = Callable[[Rollouts, int], tuple[torch.Tensor, Cost]]


def _step_values(rollouts: Rollouts, value_fn: ValueFn, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Cost]:
    """Run value_fn; return V at step starts, V after each step (0 past the end), step rewards, cost."""
    if not callable(value_fn):
        raise TypeError("value_fn: expected a callable (rollouts, k) -> (values, cost)")
    k = check_int("k", k, low=1)
    r_step, present = rollouts.view(rollouts.rewards, "step", "sum")
    v_start, cost = value_fn(rollouts, k)
    v_start = as_tensor("value_fn result", v_start).to(r_step.dtype)
    check_shape("value_fn result", v_start, tuple(r_step.shape))
    check_finite("value_fn result", torch.where(present, v_start, 0))
    if not isinstance(cost, Cost):
        raise TypeError("value_fn: must return (values, Cost)")
    v_start = torch.where(present, v_start, 0)
    # the value after step i is the value before step i + 1; after the last step the episode is over
    v_next = torch.cat([v_start[:, 1:], torch.zeros_like(v_start[:, :1])], dim=1)
    v_next = torch.where(torch.cat([present[:, 1:], torch.zeros_like(present[:, :1])], dim=1), v_next, 0)
    return v_start, v_next, r_step, cost


@register("vineppo")
def vineppo(rollouts: Rollouts, *, value_fn: ValueFn, k: int = 9, gamma: float = 1.0,
            whiten_advantages: bool = False) -> Credit:
    """VinePPO (Kazemnejad et al. 2024, arXiv:2410.01679): step credit from Monte Carlo values of prefixes.

    Formula:
        V_i = mean reward of k continuations sampled from the prefix before step i,  V_S = 0
        A_i = r_i + gamma * V_{i+1} - V_i         (r_i: reward received inside step i)

        and every token of step i takes A_i. Unbiased values make A_i an unbiased (noisy)
        estimate of the step's true advantage, with no critic to learn. ``info["step_values"]``
        holds the V_i estimates.

    Defaults:
        as the paper: k = 9, gamma = 1 (applied per step); whiten_advantages = False.
        ``value_fn`` (required) is the continuation sampler (see the module docstring).

    Degenerate input:
        a one-step trajectory gets r - V_0; with k = 1 values are single-sample and very noisy
        (the notebook's K slider shows how noisy). Absent steps (padding) get 0. With
        ``whiten_advantages=True`` a batch with one generated token (or all-equal advantages)
        gets 0 everywhere (0 / sqrt(eps)). Groups play no role.

    Deviations from the reference:
        VinePPO whitens advantages over the batch; labkit does only with ``whiten_advantages=True``.

    Cost:
        whatever ``value_fn`` reports (k continuations per step); an exact value_fn costs nothing.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    v_start, v_next, r_step, cost = _step_values(rollouts, value_fn, k)
    adv = r_step + gamma * v_next - v_start
    credit = Credit.from_level(rollouts, adv, "step", "vineppo", cost=cost, step_values=v_start, k=k)
    if whiten_advantages:
        credit = Credit.from_tokens(rollouts, whiten(credit.token, rollouts.mask), "vineppo",
                                    cost=cost, step_values=v_start, k=k)
    return credit


@register("math_shepherd")
def math_shepherd(rollouts: Rollouts, *, value_fn: ValueFn, k: int = 8, mode: str = "soft") -> Credit:
    """Math-Shepherd step labels (Wang et al. 2024, arXiv:2312.08935), used directly as credit.

    Formula:
        Step i is judged by what happens after it: k continuations are sampled from the prefix
        that ends with step i, and

            soft label_i = fraction of them that reach the right answer  (= r_i + V_{i+1})
            hard label_i = 1 if any of them does, else 0                (the paper's "HE" rule)

        The final step's label is the trajectory's own outcome. Labels are probabilities of
        success, not advantages: a correct step of a weak policy can score low.

    Defaults:
        k = 8 continuations per step boundary, mode = "soft".

    Degenerate input:
        A one-step trajectory gets its own outcome as the label (no continuation is sampled
        after the last step). With k = 1 the soft label is a single 0/1 sample. Absent steps
        (padding) get 0. mode = "hard" needs outcome rewards in {0, 1} (it thresholds the
        estimate at > 0, which equals "any continuation succeeded" only for 0/1 rewards): any
        other reward on a generated position raises a ValueError naming ``rollouts.rewards``.

    Deviations from the reference:
        Math-Shepherd trains a PRM on these labels; the lab skips the PRM and uses the labels
        themselves (what a perfect PRM fit would output).

    Cost:
        What ``value_fn`` reports: k continuations per step boundary (``policy_forwards``,
        ``policy_tokens``); an exact value_fn costs nothing.
    """
    check_choice("mode", mode, ("soft", "hard"))
    if mode == "hard":
        r = rollouts.rewards[rollouts.mask]
        bad = r[(r != 0) & (r != 1)]
        if bad.numel():
            raise ValueError(f"rollouts.rewards: math_shepherd mode='hard' needs rewards in {{0, 1}} (success or not), "
                             f"got {sorted(set(bad.tolist()))[:5]}; use mode='soft' or binarise the rewards")
    _, v_next, r_step, cost = _step_values(rollouts, value_fn, k)
    label = r_step + v_next
    if mode == "hard":
        label = (label > 0).to(label.dtype)
    present = rollouts.view(rollouts.rewards, "step", "sum")[1]
    label = torch.where(present, label, 0)
    return Credit.from_level(rollouts, label, "step", f"math_shepherd_{mode}", cost=cost, k=k)
