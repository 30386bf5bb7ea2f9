"""Hand-built batches with known answers that the diagnose tests share."""
from __future__ import annotations

import torch

from labkit.core.rollouts import Rollouts


def tool_toy(observations, groups=None, final_rewards=None) -> Rollouts:
    """Each row: action token 5, one tool-output token (the observation), action token 6."""
    B = len(observations)
    tokens = torch.tensor([[5, o, 6] for o in observations])
    mask = torch.tensor([[True, False, True]] * B)
    rewards = torch.zeros(B, 3)
    rewards[:, 2] = torch.tensor(final_rewards if final_rewards is not None else [1.0] * B)
    turns = torch.tensor([[0, -1, 1]] * B)
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, turn_ids=turns, step_ids=turns.clone(),
                    group_ids=torch.tensor(groups if groups is not None else [0] * B))


# --------------------------------------------------------------------------- the tree
def reasoning_like(n_groups=6, size=8, T=60, seed=0) -> Rollouts:
    g = torch.Generator().manual_seed(seed)
    B = n_groups * size
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lengths - 1] = torch.randint(0, 2, (B,), generator=g).float()
    return Rollouts(tokens=torch.randint(0, 30, (B, T), generator=g), mask=mask, rewards=rewards,
                    group_ids=torch.arange(n_groups).repeat_interleave(size))
