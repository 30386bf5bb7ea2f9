"""Exercise 08 (notebook 08_hindsight_counterfactual): HCA's return-conditioned hindsight ratio.

Graded against ``labkit.credit.hindsight.hca``; ``reveal_solution(8)`` prints the reference
solution, ``hca_credit`` in labkit/course/solutions/ex08_hindsight_counterfactual.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.references import outcome_rollouts
from labkit.credit import hindsight


def _reference(pi, h, z):
    N = len(pi)
    r = outcome_rollouts(N, z, turn_ids=torch.arange(N)[None], states=torch.zeros(1, N, dtype=torch.long),
                         logprobs=pi.to(F64).log()[None])
    return hindsight.hca(r, hindsight=h.to(F64)[None]).token[0]


def _cases(gen):
    cases = []
    for i in range(6):
        N = randint(gen, 2, 6)
        pi = torch.round(0.05 + 0.9 * rand(gen, N), decimals=2)
        h = torch.round(0.05 + 0.9 * rand(gen, N), decimals=2)
        cases.append(Case(f"random #{i}", dict(pi=pi, h=h, z=1.0 if i != 3 else 0.0)))
    cases += [
        Case("hindsight equals the policy", dict(pi=torch.tensor([0.2, 0.6, 0.9], dtype=F64),
                                                 h=torch.tensor([0.2, 0.6, 0.9], dtype=F64), z=1.0)),
        # the edges, graded once the cases above pass
        Case("one turn", dict(pi=torch.tensor([0.5], dtype=F64), h=torch.tensor([0.8], dtype=F64), z=1.0),
             frozenset({"one_turn"})),
        Case("failed episode, an action success never took (h = 0)",
             dict(pi=torch.tensor([0.3, 0.5, 0.2], dtype=F64), h=torch.tensor([0.4, 0.0, 0.1], dtype=F64), z=0.0),
             frozenset({"failed_h0"})),
    ]
    return cases


def _variant(how):
    def variant(pi, h, z):
        pi, h = pi.to(F64), h.to(F64)
        with torch.no_grad():
            if how == "inverted":
                c = 1 - h / pi
            else:
                c = torch.log(h / pi)
        return torch.where(torch.as_tensor(z) > 0, c * z, torch.zeros_like(c))
    return variant


EXERCISE = register(Exercise(
    notebook="08", name="hca_credit", title="HCA's hindsight ratio",
    signature="hca_credit(pi, h, z) -> tensor (N,)",
    prompt=(
        "Write return-conditioned hindsight credit (Harutyunyan et al. 2019, arXiv 1912.02503) for one episode.\n"
        "  pi: (N,) float tensor, pi(a_t | s_t), the policy's probability of the action taken at turn t\n"
        "  h:  (N,) float tensor, h(a_t | s_t, Z), the hindsight probability given the outcome\n"
        "  z:  float, the outcome Z (0 or 1)\n"
        "Return the (N,) credits  (1 - pi / h) * Z.\n"
        "A failed episode (Z = 0) gets 0 everywhere, even where h = 0 (success never took that action)."),
    cases=_cases, reference=_reference,
    # minus the credit is (pi / h - 1) * Z: the shared hint for a flipped sign, with what it means here
    sign_note="an action that success made more likely (h > pi) gets POSITIVE credit: (1 - pi / h) * Z, "
              "not (pi / h - 1) * Z",
    rules=(
        Rule("a failed episode (Z = 0) gets 0 on every turn, even where h = 0: don't divide by h when Z = 0 "
             "(0 * inf is NaN)", not_finite, frozenset({"failed_h0"})),
        NOT_FINITE,
        Rule("multiply by the outcome Z: a failed episode (Z = 0) gets credit 0 on every turn",
             lambda c, g, w: c.args["z"] == 0 and bool((g.abs() > 1e-9).any())),
        Rule("the ratio is pi / h (the policy's probability over the hindsight one): credit = (1 - pi / h) * Z, not (1 - h / pi) * Z",
             looks_like(_variant("inverted")), every=True),
        Rule("HCA's credit is 1 - pi / h, not a log-ratio", looks_like(_variant("log")), every=True),
    ),
))
