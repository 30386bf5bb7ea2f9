"""How an exercise's plain tensors become a call to the lab's own estimator, its reference answer.

The reader writes a method on small tensors (scores, a mask, per-turn tables); the lab's
estimators take a ``Rollouts``. These adapters build the smallest batch that carries the same
information, so the reference is the registered estimator itself, not a second implementation.
"""
from __future__ import annotations

import torch

from labkit.core.rollouts import Rollouts
from labkit.course.exercises.grader import F64

__all__ = ["one_token_rollouts", "outcome_rollouts", "prefix_ids", "pad_turns"]


def one_token_rollouts(rewards: torch.Tensor, mask: torch.Tensor | None = None, **kw) -> Rollouts:
    """A batch whose every position is one token (token ids 0): steps and turns are positions."""
    rewards = rewards.to(F64)
    mask = torch.ones_like(rewards, dtype=torch.bool) if mask is None else mask
    return Rollouts(tokens=torch.zeros(rewards.shape, dtype=torch.long), mask=mask,
                    rewards=torch.where(mask, rewards, 0.0), **kw)


def outcome_rollouts(length: int, outcome: float, **kw) -> Rollouts:
    """One trajectory of ``length`` one-token positions whose only reward is ``outcome``, on the last."""
    rewards = torch.zeros(1, length, dtype=F64)
    rewards[0, -1] = outcome
    return one_token_rollouts(rewards, **kw)


def prefix_ids(present: torch.Tensor) -> torch.Tensor:
    """Labels 0, 1, 2, ... on the present entries of each row, -1 elsewhere."""
    return torch.where(present, present.long().cumsum(1) - 1, -1)


def pad_turns(table: torch.Tensor, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A per-turn table (B, N') from an estimator widened to the exercise's (B, N) with zeros:
    the estimator's table ends at the longest episode, the exercise's at its padding."""
    out = torch.zeros(shape, dtype=dtype)
    out[:, : table.shape[1]] = table
    return out
