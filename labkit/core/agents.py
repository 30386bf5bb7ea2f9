"""Agent-level views of ``Rollouts`` shared by the multi-agent and judge estimators.

A multi-agent batch has one position per agent action, ``agent_ids`` the acting agent and each
agent's own reward on its positions. These views read per-agent tables (B, n) off it: who acted,
what each agent earned, a team's coalition values, and GRPO normalisation inside pools of
(task group, agent) entries. The parallel of ``labkit.core.turns`` for agents.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import as_tensor, check_int, check_shape, resolve_input
from labkit.core.games import game_table
from labkit.core.rollouts import Rollouts
from labkit.core.segments import segment_reduce
from labkit.core.stats import group_normalize

__all__ = ["CoalitionValues", "n_agents_of", "agent_rewards", "agent_step_counts", "coalition_table",
           "normalize_pools", "group_index"]

CoalitionValues = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]


def n_agents_of(rollouts: Rollouts) -> int:
    """Number of agents: ``rollouts.info["n_agents"]`` if set, else the largest agent id + 1."""
    n = rollouts.info.get("n_agents")
    if n is None:
        return int(rollouts.agent_ids.max()) + 1
    n = check_int("info['n_agents']", n, low=1)
    seen = int(rollouts.agent_ids.max()) + 1
    if seen > n:
        raise ValueError(f"info['n_agents']: is {n} but agent_ids go up to {seen - 1}")
    return n


def agent_rewards(rollouts: Rollouts, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-agent rewards R[b, i] (sum of agent i's rewards in trajectory b) and whether agent i
    acted in trajectory b, both (B, n); n defaults to ``n_agents_of(rollouts)``."""
    n = n_agents_of(rollouts) if n is None else n
    R, present = segment_reduce(rollouts.agent_ids, rollouts.rewards, "sum", n_segments=n)
    return R.to(torch.float64), present


def agent_step_counts(rollouts: Rollouts, n: int) -> torch.Tensor:
    """How many positions (actions) agent i has in trajectory b, (B, n) long."""
    ones = rollouts.mask.to(torch.float64)
    return segment_reduce(rollouts.agent_ids, ones, "sum", n_segments=n)[0].round().long()


def coalition_table(rollouts: Rollouts, coalition_values, n: int, name: str = "coalition_values") -> torch.Tensor:
    """The (B, 2**n) coalition values of every trajectory's game, float64, from a tensor or a
    callable ``rollouts -> tensor``; errors name ``name``."""
    coalition_values, _ = resolve_input(name, coalition_values, rollouts,
                                        expected=f"a (B, 2**n) tensor of coalition values (n = {n}) or a "
                                                 "callable rollouts -> (B, 2**n)")
    v = as_tensor(name, coalition_values)
    check_shape(name, v, (rollouts.batch_size, 2 ** n))
    v, _ = game_table(name, v)
    return v


def normalize_pools(values: torch.Tensor, present: torch.Tensor, pool: torch.Tensor,
                    weight: torch.Tensor | None = None, eps: float = 1e-6,
                    normalize_std: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GRPO-normalise entries of ``values`` (B, n) inside pools: (v - mean_pool) / (std_pool + eps).

    ``pool`` (B, n) long names the pool of every entry; only ``present`` entries count and get a
    value (others 0). ``weight`` (B, n) long repeats an entry in the statistics (e.g. once per
    action it took), default 1. Degenerate pools follow ``grpo``: a pool of one sample has
    mean 0 and std 1; an all-equal pool gives 0 (0 / eps). Returns (normalised, mean, std), (B, n).
    """
    out = torch.zeros_like(values)
    mean_full = torch.zeros_like(values)
    std_full = torch.ones_like(values)
    if not bool(present.any()):
        return out, mean_full, std_full
    adv, mean, std, _ = group_normalize(values[present], pool[present], eps=eps, normalize_std=normalize_std,
                                        weight=None if weight is None else weight[present])
    out[present] = adv
    mean_full[present] = mean
    std_full[present] = std
    return out, mean_full, std_full


def group_index(rollouts: Rollouts) -> torch.Tensor:
    """Every trajectory's task group as 0, 1, ... (B,) long: pool ids built from it stay small
    whatever the group ids are."""
    return torch.unique(rollouts.group_ids, return_inverse=True)[1]
