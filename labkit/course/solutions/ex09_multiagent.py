"""Solution to exercise 09 (notebook 09_multiagent): the exact Shapley value of a 3-player team.

Checked by ``check(shapley3, "09")``; the exercise is ``labkit.course.exercises.ex09_multiagent``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["shapley3"]


def shapley3(v):
    """09 · Exact Shapley for 3 players (Shapley 1953): each player's average marginal contribution.

    Inputs:
        v: the value of every coalition of the players 0, 1, 2 (a dict frozenset -> float).

    Formula:
        phi_i = sum_{S not containing i} |S|! (n - |S| - 1)! / n! * (v(S + {i}) - v(S))

    Defaults:
        n = 3 players, 0, 1 and 2.

    Degenerate input:
        a null player gets 0; interchangeable players get equal credit; the credits sum to
        v(N) - v(empty) even when v(empty) is not 0.

    Deviations from the reference:
        none: equal to ``labkit.core.games.exact_shapley``.

    Returns:
        (3,) float64 Shapley value of each player.

    Cost:
        all 2^n coalition values (8 here).
    """
    players = [0, 1, 2]
    n = len(players)
    phi = []
    for i in players:
        others = [p for p in players if p != i]
        total = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for S in _subsets_of_size(others, size):
                total += weight * (v[S | {i}] - v[S])
        phi.append(total)
    return torch.tensor(phi, dtype=torch.float64)


def _subsets_of_size(items, size):
    """Every subset of ``items`` with ``size`` members, each once, as frozensets."""
    if size == 0:
        return [frozenset()]
    return [frozenset([items[j]]) | rest for j in range(len(items))
            for rest in _subsets_of_size(items[j + 1:], size - 1)]

