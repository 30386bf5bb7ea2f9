"""Hand-built batches of steps that the process-reward and judge tests share."""

import torch

from labkit.core.rollouts import Rollouts


def two_rows(group=(0, 0)):
    """Row 0: 2 steps (tokens 0-1, token 2), reward 1. Row 1: 3 one-token steps, reward 0."""
    tokens = torch.tensor([[4, 5, 6], [4, 5, 6]])
    mask = torch.ones(2, 3, dtype=torch.bool)
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    step_ids = torch.tensor([[0, 0, 1], [0, 1, 2]])
    truth = {"step_correct": torch.tensor([[True, False, False], [True, True, False]])}
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, step_ids=step_ids,
                    group_ids=torch.tensor(group), truth=truth)


SCORES = torch.tensor([[0.9, 0.6, 0.0], [0.75, 0.25, 1.0]], dtype=torch.float64)  # r = [.8, .2], [.5, -.5, 1]


def close_to(a, b):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=1e-9)
