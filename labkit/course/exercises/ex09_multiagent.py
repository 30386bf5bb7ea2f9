"""Exercises of notebook 09_multiagent: 09a, the mixer of a written credit function (QLLM); 09b,
exact Shapley with a planted bug; 09c, which role gets the most Shapley credit when the solvers
are weak.

09a is graded against ``labkit.credit.judge.effect_mixer``, 09b against
``labkit.core.games.exact_shapley``; ``reveal_solution("09a")`` / ``("09b")`` print the reference
solutions (labkit/course/solutions/ex09_multiagent.py), ``reveal_solution("09c")`` the lab's run.
"""
from __future__ import annotations

import math

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.core.games import exact_shapley
from labkit.credit.judge import effect_mixer
from labkit.envs import TeamTask


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


# --------------------------------------------------------------------------- 09b: find the bug in exact Shapley
def _shapley_reference(values):
    return exact_shapley(values)


def _table(n: int, winning) -> torch.Tensor:
    """The (2**n,) value table of a 0/1 game: v(S) = 1 where ``winning(S)`` (S a bitmask)."""
    return torch.tensor([1.0 if winning(s) else 0.0 for s in range(2 ** n)], dtype=F64)


def _shapley_cases(gen):
    cases = []
    for i in range(5):
        n = randint(gen, 3, 5)
        values = torch.round(rand(gen, 2 ** n), decimals=2)
        values[0] = 0.0  # nobody, no value: TeamTask's v of the empty team
        cases.append(Case(f"random #{i}", dict(values=values)))
    cases += [
        # planner (player 0) and either solver: the notebook's redundancy game
        Case("planner and two redundant solvers", dict(values=_table(3, lambda s: s & 1 and s & 6))),
        Case("all three needed", dict(values=_table(3, lambda s: s == 7))),
        Case("four players, only player 3 matters", dict(values=_table(4, lambda s: s & 8))),
        # the edges, graded once the cases above pass
        Case("one player", dict(values=torch.tensor([0.0, 0.7], dtype=F64)), frozenset({"one_player"})),
        # SCAR's games start from the prompt's value: the empty coalition is worth something
        Case("v(empty) is not 0", dict(values=torch.tensor([0.4, 0.5, 0.7, 1.0], dtype=F64)), frozenset({"offset"})),
    ]
    return cases


def _shapley_variant(how):
    def variant(values):
        v = values.to(F64)
        n = len(v).bit_length() - 1
        full = 2 ** n - 1
        phi = torch.zeros(n, dtype=F64)
        for i in range(n):
            if how == "loo":
                phi[i] = v[full] - v[full ^ (1 << i)]
                continue
            for s in range(2 ** n):
                if s >> i & 1:
                    continue
                size = bin(s).count("1")
                if how == "wrong_factorial":
                    w = math.factorial(size) * math.factorial(n - size) / math.factorial(n)
                elif how == "banzhaf":
                    w = 1 / 2 ** (n - 1)
                else:
                    w = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                before = 0.0 if (how == "empty_zero" and s == 0) else v[s]
                phi[i] += w * (v[s | 1 << i] - before)
        return phi.flip(0) if how == "bit_order" else phi
    return variant


def _buggy_shapley(values):
    """Exact Shapley value of every player of a game given by its table of coalition values.

    values[S] is v(S) for the coalition whose bitmask is S (bit i set: player i is in it).
    Each player's marginal contribution v(S + i) - v(S) to every coalition S without it is
    weighted by the share of the n! orderings in which exactly S comes before it.
    """
    n = int(math.log2(len(values)))
    phi = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        for S in range(len(values)):
            if S >> i & 1:  # coalitions that already hold i add nothing
                continue
            size = bin(S).count("1")
            weight = math.factorial(size) * math.factorial(n - size) / math.factorial(n)
            phi[i] += weight * (values[S | 1 << i] - values[S])
    return phi


EXERCISE_B = register(Exercise(
    notebook="09", letter="b", kind="debug", path="deep dive", buggy=_buggy_shapley,
    name="shapley_values", title="Exact Shapley values",
    signature="shapley_values(values) -> tensor (n,)",
    prompt=(
        "The function below should compute the exact Shapley value of every player (Shapley 1953; the\n"
        "survey's multi-agent credit, arXiv 2604.09459, section 6), as labkit.core.games.exact_shapley does:\n"
        "  values: (2**n,) float tensor, values[S] = v(S) for the coalition with bitmask S (bit i: player i)\n"
        "  phi_i = sum over S without i of |S|! (n - |S| - 1)! / n! * (v(S + i) - v(S))\n"
        "Return a (n,) tensor. The credits add up to v(N) - v(empty).\n"
        "It has exactly one planted mistake of the kind people make. Find it and fix it."),
    cases=_shapley_cases, reference=_shapley_reference,
    rules=(
        Rule("a coalition S of size |S| has weight |S|! (n - |S| - 1)! / n!: the players that come after i "
             "number n - |S| - 1, not n - |S| (your credits no longer add up to v(N) - v(empty))",
             looks_like(_shapley_variant("wrong_factorial")), every=True),
        Rule("that is leave-one-out, v(N) - v(N without i): Shapley averages the marginal contribution over "
             "every coalition S without i", looks_like(_shapley_variant("loo")), every=True),
        Rule("every coalition weighted alike (1 / 2**(n-1)) is the Banzhaf value: Shapley weights S by the "
             "share of orderings in which S comes before i, |S|! (n - |S| - 1)! / n!",
             looks_like(_shapley_variant("banzhaf")), every=True),
        Rule("player i is bit i of the coalition's index (values[1 << i] is v({i})): your credits come out in "
             "the reverse order", looks_like(_shapley_variant("bit_order")), every=True),
        Rule("v(empty) need not be 0 (in SCAR's games it is the prompt's value): the contribution of joining "
             "nobody is v({i}) - v(empty)", looks_like(_shapley_variant("empty_zero")), frozenset({"offset"}),
             every=True),
    ),
))


# --------------------------------------------------------------------------- 09c: who gets the most credit
def _top_agent_weak_solvers():
    """Exact Shapley credit of the mixed team's six agents with weak solvers (solver skill with a
    plan 0.5; the other knobs at the slider's start), played by the slider's scripted team
    (logit 4); the role of the agent with the most credit."""
    env = TeamTask.preset("mixed", sabotage=0.5, catch=0.8, p_plan=0.5, unchecked_pass=0.6)
    values = env.truth(env.scripted_policies(4.0)).values
    credit = exact_shapley(values)
    return env.roles[int(credit.argmax())].replace("_", " ")


EXERCISE_C = register(Reading(
    notebook="09", letter="c", name="top_agent", title="Top Shapley credit with weak solvers",
    prompt=(
        "Run the mixed team of 'The mixed team: move the knobs' with weak solvers: solver skill with a plan\n"
        "0.5, the other sliders at their start (saboteur strength 0.5, checker catches 0.8, unreviewed answer\n"
        "passes 0.6). Which role gets the most exact Shapley credit (Shapley 1953; survey arXiv 2604.09459,\n"
        "section 6)? Answer with one of 'planner', 'solver', 'checker', 'free rider', 'saboteur'."),
    measure=_top_agent_weak_solvers, choices=("planner", "solver", "checker", "free rider", "saboteur"),
    hint="read the Shapley bars (not leave-one-out's) at solver skill with a plan 0.5, the other sliders at "
         "their start",
    misreadings=(
        Misreading("checker", "that is leave-one-out's largest credit at this setting: read the Shapley bars"),
        Misreading("planner", "that is the top at the slider's start (solver skill 0.9): move solver skill "
                              "with a plan to 0.5"),
    ),
))
