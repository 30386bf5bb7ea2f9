"""A small hand-built Rollouts that the core tests share."""

import torch

from labkit.core.rollouts import Rollouts


def small_rollouts(B=3, T=5, **kw):
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 3:] = False  # a shorter trajectory
    rewards = torch.zeros(B, T)
    rewards[0, -1] = 1.0
    rewards[1, 2] = 1.0
    args = dict(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rewards)
    args.update(kw)
    return Rollouts(**args)
