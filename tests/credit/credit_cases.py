"""Hand-built batches and views that several credit test files share."""

import torch

from labkit.core.rollouts import Rollouts


def first_of_turn(rollouts, x):
    return rollouts.view(x, "turn", "first")[0]


def two_steps(reward=1.0, n=4):
    """One trajectory of n tokens, steps [0, 0, 1, 1], outcome on the last token."""
    rewards = torch.zeros(1, n)
    rewards[0, -1] = reward
    return Rollouts(tokens=torch.zeros(1, n, dtype=torch.long), mask=torch.ones(1, n, dtype=torch.bool),
                    rewards=rewards, step_ids=torch.tensor([[0, 0, 1, 1]]))


def empty():
    """Row 0 generated nothing; row 1 one token with reward 0 (a batch with nothing generated at
    all is refused by Rollouts, so "nothing generated" is a row's property)."""
    return Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long),
                    mask=torch.tensor([[False, False, False], [True, False, False]]), rewards=torch.zeros(2, 3),
                    group_ids=torch.tensor([0, 1]))
