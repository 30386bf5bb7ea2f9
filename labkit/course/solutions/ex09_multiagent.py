"""Solution to exercise 09a (notebook 09_multiagent): the mixer of a written credit function (QLLM).

Checked by ``check(mixer_credit, "09a")``; the exercise is ``labkit.course.exercises.ex09_multiagent``.
"""
from __future__ import annotations

import torch

__all__ = ["mixer_credit"]


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
