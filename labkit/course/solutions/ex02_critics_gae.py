"""Solution to exercise 02a (notebook 02_critics_gae): GAE's backward loop.

Checked by ``check(gae, "02a")``; the exercise is ``labkit.course.exercises.ex02_critics_gae``.
"""
from __future__ import annotations

import torch

__all__ = ["gae", "padded_gae"]


def gae(rewards, values, mask, gamma, lam):
    """02a · GAE's backward loop (Schulman et al. 2016, arXiv 1506.02438): discounted TD errors.

    Inputs:
        rewards, mask: (B, T), as in exercise 00.
        values: (B, T) the critic's value before every token.
        gamma, lam: the discount and GAE's lambda.

    Formula:
        delta_t = r_t + gamma V_{t'} - V_t,   A_t = delta_t + gamma lam A_{t'}
        t' the next generated position (tool output skipped).

    Defaults:
        none: gamma and lam are arguments.

    Degenerate input:
        V = A = 0 after the last generated token (no bootstrap past the end), so a one-token
        trajectory gets r - V; positions off the mask get 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.gae`` (no whitening).

    Returns:
        (B, T) float64 advantage, 0 off the mask.

    Cost:
        none beyond the critic's values.
    """
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        next_value, next_adv = 0.0, 0.0  # nothing after the end: no bootstrap
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue  # tool output / padding: skipped, gets no credit
            delta = rewards[b, t] + gamma * next_value - values[b, t]
            adv[b, t] = delta + gamma * lam * next_adv
            next_value, next_adv = values[b, t], adv[b, t]
    return adv



def padded_gae(rewards, values, mask, gamma, lam):
    """02b · GAE on a padded batch (Schulman et al. 2016, arXiv 1506.02438): no bootstrap from padding.

    Inputs:
        rewards, values: (B, T); values[b, t] = V(s_t), whatever the critic says on padding.
        mask: (B, T) bool, each row its generated tokens, then padding.
        gamma, lam: the discount and GAE's lambda.

    Formula:
        delta_t = r_t + gamma V(s_{t+1}) - V(s_t),   A_t = delta_t + gamma lam A_{t+1}
        with V(s_{t+1}) = A_{t+1} = 0 after a row's last generated token.

    Defaults:
        none: gamma and lam are arguments.

    Degenerate input:
        padding and a row with nothing generated get 0; lam = 0 leaves the one-step TD error.

    Deviations from the reference:
        none: equal to ``labkit.credit.gae`` on a padded batch (no whitening).

    Returns:
        (B, T) float64 advantage, 0 on padding.

    Cost:
        none beyond the critic's values.
    """
    B, T = rewards.shape
    advantages = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue
            # the episode ends at its last generated token: padding's value is no next state
            next_value = values[b, t + 1] if t + 1 < T and mask[b, t + 1] else 0.0
            delta = rewards[b, t] + gamma * next_value - values[b, t]
            running = delta + gamma * lam * running
            advantages[b, t] = running
    return advantages
