"""Exercise 09 (notebook 09_multiagent): the mixer of a written credit function (QLLM).

Graded against ``labkit.credit.judge.effect_mixer``; ``reveal_solution(9)`` prints the reference
solution, ``mixer_credit`` in labkit/course/solutions/ex09_multiagent.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like, wrong
from labkit.credit.judge import effect_mixer


def _reference(q, effects):
    return effect_mixer(q, effects)


def _case(q: list[float], effects: list[int]) -> dict:
    return dict(q=torch.tensor(q, dtype=F64), effects=torch.tensor(effects, dtype=torch.long))


def _cases(gen):
    cases = []
    for i in range(5):
        n = randint(gen, 3, 6)
        q = torch.round(0.1 + 0.9 * rand(gen, n), decimals=2)
        # every effect once (a helper, a null agent, a harmful one), the rest at random
        effects = torch.cat([torch.tensor([1, 0, -1]), torch.randint(-1, 2, (n - 3,), generator=gen)])
        effects = effects[torch.randperm(n, generator=gen)]
        cases.append(Case(f"random #{i}", dict(q=q, effects=effects)))
    cases += [
        Case("planner and two solvers all helped", _case([0.9, 0.9, 0.9], [1, 1, 1])),
        Case("six roles: a free rider idles, the saboteur sabotages",
             _case([0.8, 0.7, 0.6, 0.75, 0.7, 0.5], [1, 1, 0, 1, 0, -1])),
        # the edges, graded once the cases above pass
        Case("nobody helped, two saboteurs sabotaged", _case([0.2, 0.1, 0.3], [0, -1, -1]), frozenset({"no_helper"})),
        Case("one agent helped", _case([0.9, 0.4, 0.5], [0, 1, 0]), frozenset({"one_helper"})),
    ]
    return cases


def _variant(how):
    def variant(q, effects):
        e = effects.to(F64)
        if how == "vdn":
            return q.clone()
        if how == "harm_ignored":
            e = e.clamp(min=0)
        helpers = float((effects != 0).sum()) if how == "h_counts_harm" else float((effects == 1).sum())
        if how == "team_size":
            helpers = float(len(q))
        if helpers == 0:
            return torch.zeros_like(q)
        return e / helpers if how == "no_utility" else e * q / helpers
    return variant


EXERCISE = register(Exercise(
    notebook="09", name="mixer_credit", title="A QLLM-style mixer",
    signature="mixer_credit(q, effects) -> tensor (n,)",
    prompt=(
        "Write the mixer of a written credit function (QLLM, Jiang et al., arXiv 2504.12961).\n"
        "QLLM has a language model write the mixer of a value-decomposition critic: the team's value\n"
        "Q_tot = sum_i w_i(s) * Q_i from each agent's own utility Q_i, with weights w_i(s) read off the\n"
        "state s. Here the weights come from what the state says each agent's action did.\n"
        "  q: (n,) tensor, each agent's utility Q_i\n"
        "  effects: (n,) long tensor: +1 helped, 0 did nothing that matters, -1 acted against the team\n"
        "Return a (n,) tensor (or a list) with\n"
        "  credit_i = w_i * q_i,  w_i = effects_i / h,  h = number of agents with effects_i = +1\n"
        "and every credit 0 when no agent helped (h = 0): nothing to share, nothing to break.\n"
        "The credits add up to the mixer's team value Q_tot."),
    cases=_cases, reference=_reference,
    rules=(
        Rule("that is each agent's own utility (VDN's credit, exact only for a team whose value is the sum of "
             "its members'): weight it by what the state says the agent did, w_i = effects_i / h",
             looks_like(_variant("vdn")), every=True),
        Rule("multiply each weight by the agent's own utility: credit_i = effects_i / h * q_i",
             looks_like(_variant("no_utility")), every=True),
        Rule("divide by h, the number of agents that helped (effects = +1), not by the team's size",
             looks_like(_variant("team_size")), every=True),
        Rule("an agent that acted against the team (effects = -1) gets the weight -1/h: a negative credit, "
             "not 0", looks_like(_variant("harm_ignored")), every=True),
        Rule("h counts only the agents that helped (effects = +1): one that acted against the team is no helper",
             looks_like(_variant("h_counts_harm")), every=True),
        Rule("with no agent that helped (h = 0) every credit is 0: there is nothing to share and nothing "
             "to break", wrong, frozenset({"no_helper"})),
    ),
))
