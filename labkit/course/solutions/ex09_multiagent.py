"""Solutions to the exercises of notebook 09_multiagent: 09a, the mixer of a written credit function
(QLLM); 09b, exact Shapley with its planted bug fixed.

Checked by ``check(mixer_credit, "09a")`` and ``check(shapley_values, "09b")``; the exercises are in
``labkit.course.exercises.ex09_multiagent``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["mixer_credit", "shapley_values"]


def mixer_credit(q, effects):
    """09a · A QLLM-style mixer (Jiang et al. 2025, arXiv 2504.12961): credit = state weight x own utility.

    Inputs:
        q: (n,) each agent's utility Q_i.
        effects: (n,) what the state says agent i's action did: +1 helped, 0 nothing that
        matters, -1 acted against the team.

    Formula:
        credit_i = w_i * q_i,  w_i = effects_i / h,  h = number of agents with effects_i = +1
        Q_tot = sum_i credit_i (the mixer's team value)

    Defaults:
        none.

    Degenerate input:
        no helper (h = 0): every credit is 0, a harmful agent's too (nothing to share, nothing
        to break). An agent whose action did nothing gets 0 whatever its utility.

    Deviations from the reference:
        none: equal to ``labkit.credit.judge.effect_mixer``.

    Returns:
        (n,) float64 credit of every agent.

    Cost:
        none: no coalition value is read, only the agents' own utilities and the state's effects.
    """
    helpers = sum(1 for e in effects.tolist() if e == 1)
    credit = torch.zeros(len(q), dtype=torch.float64)
    if helpers == 0:
        return credit
    for i in range(len(q)):
        credit[i] = float(effects[i]) / helpers * float(q[i])
    return credit


def shapley_values(values):
    """09b · Exact Shapley values from a table of coalition values (Shapley 1953; survey arXiv 2604.09459).

    Inputs:
        values: (2**n,) v(S) for the coalition whose bitmask is S (bit i set: player i is in S).

    Formula:
        phi_i = sum over S without i of |S|! (n - |S| - 1)! / n! * (v(S + i) - v(S))
        (the weight is the share of the n! orderings in which exactly S comes before i: |S|! ways
        to order S, (n - |S| - 1)! ways to order the players after i)

    Defaults:
        none.

    Degenerate input:
        one player: phi_0 = v({0}) - v(empty). v(empty) need not be 0; the credits add up to
        v(N) - v(empty) in every game.

    Deviations from the reference:
        none: equal to ``labkit.core.games.exact_shapley`` (which builds the weights as one matrix).

    Returns:
        (n,) float64 Shapley value of every player.

    Cost:
        reads all 2**n coalition values; n 2**(n-1) marginal contributions.
    """
    n = int(math.log2(len(values)))
    phi = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        for S in range(len(values)):
            if S >> i & 1:  # coalitions that already hold i add nothing
                continue
            size = bin(S).count("1")
            # the buggy version had (n - size)!: it counted i among the players that come after i
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            phi[i] += weight * (values[S | 1 << i] - values[S])
    return phi
