"""Solution to exercise 05a (notebook 05_why_agents_harder): returns discounted once per turn.

Checked by ``check(turn_returns, "05a")``; the exercise is ``labkit.course.exercises.ex05_why_agents_harder``.
"""
from __future__ import annotations

import torch

__all__ = ["turn_returns"]


def turn_returns(rewards, turn_ids, gamma):
    """05a · Returns discounted per turn (POAD, Wen et al. 2024, arXiv 2405.15821; Turn-PPO, arXiv 2512.17008).

    Inputs:
        rewards: (L,) the rewards of one episode's positions.
        turn_ids: (L,) the turn of each position (0, 1, 2, ... in order; -1 for tool output and padding).
        gamma: the discount per turn.

    Formula:
        r_k = sum of the rewards inside turn k,   G_k = r_k + gamma G_{k+1}

    Defaults:
        none: gamma is an argument.

    Degenerate input:
        G = 0 after the last turn; tool output and padding (turn id -1) carry no reward and no discount.

    Deviations from the reference:
        none: equal to ``labkit.credit.turn_gae`` with V = 0 and lam = 1.

    Returns:
        (n_turns,) float64 discounted return of every turn.

    Cost:
        none beyond the episode.
    """
    n_turns = int(turn_ids.max()) + 1
    r = torch.zeros(n_turns, dtype=torch.float64)
    for t, k in enumerate(turn_ids.tolist()):
        if k >= 0:
            r[k] += rewards[t]
    G = torch.zeros(n_turns, dtype=torch.float64)
    running = 0.0
    for k in reversed(range(n_turns)):
        running = r[k] + gamma * running
        G[k] = running
    return G

