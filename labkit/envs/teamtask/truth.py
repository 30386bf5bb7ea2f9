"""Exact truth of a TeamTask: coalition values, team success J and per-agent gradients under
fixed policies, by enumerating every joint action (computed by ``TeamTask.truth``)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(eq=False)
class TeamTruth:
    """Exact quantities of a TeamTask under fixed policies (float64, detached).

    values (2**n,): expected coalition values (column = bitmask); J: exact team success v(N);
    grads: per agent dJ/dlogits (n_obs_i, n_actions_i); pi: per agent action probabilities.
    """

    values: torch.Tensor
    J: float
    grads: list
    pi: list
    agent_names: list

    def grad_norms(self) -> torch.Tensor:
        """||dJ/dlogits_i|| per agent, (n,)."""
        return torch.stack([g.norm() for g in self.grads])
