"""Exercise 09 (notebook 09_multiagent): the exact Shapley value of a 3-player team.

Graded against ``labkit.core.games.exact_shapley``; the reference solution is
``labkit.course.solutions.shapley3``.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like
from labkit.core.games import exact_shapley

PLAYERS = (0, 1, 2)


def _coalitions() -> list[frozenset]:
    """Every coalition, in the order of the bit masks 0 ... 7 (exact_shapley's table order)."""
    return [frozenset(i for i in PLAYERS if mask >> i & 1) for mask in range(8)]


def _reference(v):
    table = torch.tensor([float(v[S]) for S in _coalitions()], dtype=F64)
    return exact_shapley(table)


def _game(values: list[float]) -> dict:
    """A 3-player game from its 8 values, in the order {}, {0}, {1}, {0,1}, {2}, {0,2}, {1,2}, {0,1,2}."""
    return dict(zip(_coalitions(), [float(x) for x in values]))


def _cases(gen):
    cases = []
    for i in range(5):
        vals = torch.round(rand(gen, 8), decimals=2).tolist()
        vals[0] = 0.0
        cases.append(Case(f"random #{i}", dict(v=_game(vals))))
    cases += [
        Case("redundant solvers", dict(v=_game([0, 0, 1, 1, 1, 1, 1, 1]))),
        # the edges, graded once the cases above pass
        Case("player 2 is a null player", dict(v=_game([0, 0.2, 0.5, 1.0, 0, 0.2, 0.5, 1.0])), frozenset({"null"})),
        Case("players 1 and 2 are interchangeable", dict(v=_game([0, 0.3, 0.1, 0.6, 0.1, 0.6, 0.4, 1.0])), frozenset({"symmetric"})),
        Case("v(empty team) is not 0", dict(v=_game([0.2, 0.4, 0.5, 0.8, 0.3, 0.6, 0.7, 1.0])), frozenset({"v_empty"})),
    ]
    return cases


def _variant(how):
    def variant(v):
        N = frozenset(PLAYERS)
        out = []
        for i in PLAYERS:
            if how == "loo":
                out.append(v[N] - v[N - {i}])
                continue
            if how == "equal_split":
                out.append((v[N] - v[frozenset()]) / len(PLAYERS))
                continue
            others = [S for S in _coalitions() if i not in S]
            out.append(sum(v[S | {i}] - v[S] for S in others) / len(others))
        return torch.tensor(out, dtype=F64)
    return variant


def _efficiency_broken(case, got, want):
    v = case.args["v"]
    return abs(float(got.sum()) - (v[frozenset(PLAYERS)] - v[frozenset()])) > 1e-5


EXERCISE = register(Exercise(
    notebook="09", name="shapley3", title="Exact Shapley for 3 players",
    signature="shapley3(v) -> tensor (3,)",
    prompt=(
        "Write the exact Shapley value of a 3-player team (Shapley 1953; as in Shapley-based agent credit,\n"
        "e.g. SHARP, and the survey arXiv 2604.09459, section 6).\n"
        "  v: dict from frozenset of players (subsets of {0, 1, 2}, the empty one included) to the team value\n"
        "Return a (3,) tensor (or a list) with\n"
        "  phi_i = sum over S not containing i of |S|! (n - |S| - 1)! / n! * (v(S + {i}) - v(S)),  n = 3\n"
        "i.e. player i's marginal contribution averaged over the 3! orders in which the team could form."),
    cases=_cases, reference=_reference,
    rules=(
        Rule("that is leave-one-out, v(N) - v(N without i), not Shapley: average the marginal contribution "
             "over every order in which the team could form", looks_like(_variant("loo")), every=True),
        Rule("weight coalition S by |S|! (n - |S| - 1)! / n! (1/3, 1/6, 1/6, 1/3 for |S| = 0, 1, 1, 2), not equally",
             looks_like(_variant("unweighted")), every=True),
        Rule("you split the team's value equally; Shapley pays each player its own marginal contribution "
             "v(S + {i}) - v(S), averaged over the orders in which the team could form",
             looks_like(_variant("equal_split")), every=True),
        Rule("your credits do not sum to v(N) - v(empty) (efficiency): every marginal contribution is "
             "v(S + {i}) - v(S), with v(empty) where S is empty", _efficiency_broken),
        Rule("a null player (one who never changes v) must get 0",
             lambda c, g, w: abs(float(g[2])) > 1e-6, frozenset({"null"})),
        Rule("two players who are interchangeable in v must get equal credit",
             lambda c, g, w: abs(float(g[1] - g[2])) > 1e-6, frozenset({"symmetric"})),
    ),
))
