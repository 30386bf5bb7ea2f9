"""Exercise 04 (notebook 04_process_rewards): PURE's min-form returns from a process reward model.

Graded against ``labkit.credit.process.pure`` (its returns, before the RLOO baseline);
``reveal_solution(4)`` prints the reference solution, ``pure_min_form`` in
labkit/course/solutions/ex04_process_rewards.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.references import outcome_rollouts
from labkit.credit import process


def _reference(step_scores, outcome, temperature):
    p = step_scores.to(F64)
    r = outcome_rollouts(len(p), outcome)
    return process.pure(r, step_scores=p[None], form="min", temperature=temperature).info["returns"][0]


def _cases(gen):
    cases = []
    for i in range(6):
        S = randint(gen, 2, 6)
        p = torch.round(rand(gen, S), decimals=2)
        temperature = [0.1, 0.5, 1.0][i % 3]
        cases.append(Case(f"random #{i}", dict(step_scores=p, outcome=float(rand(gen, 1) < 0.5), temperature=temperature)))
    cases += [
        # the edges, graded once the cases above pass
        Case("one step", dict(step_scores=torch.tensor([0.3], dtype=F64), outcome=1.0, temperature=0.1),
             frozenset({"one_step"})),
        Case("a tie for the worst step", dict(step_scores=torch.tensor([0.9, 0.2, 0.8, 0.2], dtype=F64), outcome=0.0,
                                              temperature=0.1), frozenset({"tie"})),
        Case("all steps equal", dict(step_scores=torch.tensor([0.6, 0.6, 0.6], dtype=F64), outcome=1.0, temperature=0.1),
             frozenset({"tie"})),
        Case("temperature 0.001 (near the hard minimum)", dict(step_scores=torch.tensor([0.95, 0.05, 0.9], dtype=F64),
                                                               outcome=1.0, temperature=0.001), frozenset({"cold"})),
    ]
    return cases


def _variant(how):
    def variant(step_scores, outcome, temperature):
        p = step_scores.to(F64)
        r = p if how == "p" else 2 * p - 1
        if how == "sum":
            shaped = r.clone()
        else:
            shaped = torch.softmax((r if how == "softmax_plus" else -r) / temperature, 0) * r
        if how != "no_outcome":
            shaped[-1] += outcome
        if how == "forward":
            return shaped.cumsum(0)
        return shaped.flip(0).cumsum(0).flip(0)
    return variant


EXERCISE = register(Exercise(
    notebook="04", name="pure_min_form", title="PURE min-form returns",
    signature="pure_min_form(step_scores, outcome, temperature) -> tensor (S,)",
    prompt=(
        "Write PURE's min-form credit for one response (Cheng et al. 2025, arXiv 2504.08662).\n"
        "  step_scores: (S,) float tensor, the PRM's probability p_s that step s is good\n"
        "  outcome: float, the verifiable reward R received at the last step;  temperature: T > 0\n"
        "Return the (S,) returns G_s:\n"
        "  r_s = 2 p_s - 1,   w = softmax(-r / T) over the steps,   r'_s = w_s r_s\n"
        "  G_s = sum_{s' >= s} r'_{s'} + R\n"
        "The weights concentrate on the worst step, so the return is about the minimum step reward."),
    cases=_cases, reference=_reference,
    rules=(
        Rule("your weights overflow at a small temperature: compute them with torch.softmax (it subtracts the "
             "max before exp)", not_finite, frozenset({"cold"})),
        Rule("you summed the step rewards (the sum form PURE argues against): weight them by w = softmax(-r / T) "
             "over the response's steps", looks_like(_variant("sum")), every=True),
        Rule("the soft minimum puts the weight on the WORST step: w = softmax(-r / T), not softmax(+r / T)",
             looks_like(_variant("softmax_plus")), every=True),
        Rule("the step reward is r = 2p - 1 (p(good) - p(bad)), not p", looks_like(_variant("p")), every=True),
        Rule("add the verifiable reward R at the last step, so every return G_s includes it",
             looks_like(_variant("no_outcome")), every=True),
        Rule("G_s sums from step s to the END (a reverse cumulative sum), not from the start",
             looks_like(_variant("forward")), every=True),
    ),
))
