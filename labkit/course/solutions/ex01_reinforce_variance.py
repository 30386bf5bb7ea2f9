"""Solution to exercise 01a (notebook 01_reinforce_variance): GRPO's group-relative advantage.

Checked by ``check(grpo_advantage, "01a")``; the exercise is ``labkit.course.exercises.ex01_reinforce_variance``.
"""
from __future__ import annotations

import torch

__all__ = ["grpo_advantage", "reinforce_pp_advantage"]


def grpo_advantage(scores, group_ids, eps=1e-6):
    """01a · GRPO advantage (Shao et al. 2024, arXiv 2402.03300): each score against its group's.

    Inputs:
        scores: (n,) one outcome score per trajectory.
        group_ids: (n,) integer prompt group of each trajectory.

    Formula:
        A_i = (s_i - mean_group) / (std_group + eps)      (std unbiased, torch.std's default)

    Defaults:
        eps = 1e-6 (verl's).

    Degenerate input:
        a group of one gets mean 0 and std 1 (its raw score / (1 + eps)); an all-equal group gets 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.grpo`` (checked by ``check(grpo_advantage, "01a")``).

    Returns:
        (n,) float64 advantage, one per trajectory.

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    adv = torch.zeros_like(scores)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        if len(s) == 1:
            mean, std = 0.0, 1.0  # the group-of-one rule
        else:
            mean, std = s.mean(), s.std()  # torch.std is the unbiased one (n - 1)
        adv[members] = (s - mean) / (std + eps)
    return adv



def reinforce_pp_advantage(rewards, mask, eps=1e-8):
    """01b · REINFORCE++ on a padded batch (Hu 2025, arXiv 2501.03262): returns whitened over the generated tokens.

    Inputs:
        rewards: (B, T) rewards, 0 on padding.
        mask: (B, T) bool, True on the generated tokens (each row: its tokens, then padding).

    Formula:
        G_t = r_t + G_{t+1};  A_t = (G_t - mean) / sqrt(var + eps), mean and population var
        over the generated tokens of the whole batch.

    Defaults:
        gamma = 1; eps = 1e-8 (OpenRLHF's), inside the square root.

    Degenerate input:
        all-equal returns (or one generated token) give 0 everywhere; padding and a row with
        nothing generated get 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.reinforce_pp`` with gamma = 1.

    Returns:
        (B, T) float64 advantage, 0 on padding.

    Cost:
        none beyond the rewards.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    returns = rewards.flip(1).cumsum(1).flip(1)   # return-to-go, gamma = 1
    generated = returns[mask]                      # the mask first: padding stays out of the statistics
    if len(generated) == 0:
        return torch.zeros_like(returns)
    mean = generated.mean()
    var = generated.var(unbiased=False)
    advantages = (returns - mean) / torch.sqrt(var + eps)
    return advantages * mask
