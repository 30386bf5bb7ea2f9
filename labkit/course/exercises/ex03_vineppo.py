"""Exercise 03 (notebook 03_vineppo): VinePPO's step advantage from the outcomes of forked vines.

Graded against ``labkit.credit.mc.vineppo`` with the vines' mean as its values;
``reveal_solution(3)`` prints the reference solution, ``vineppo_advantage`` in
labkit/course/solutions/ex03_vineppo.py.
"""
from __future__ import annotations

import torch

from labkit.core.credit import Cost
from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import mc


def _reference(vine_outcomes, rewards):
    S, K = vine_outcomes.shape
    r = one_token_rollouts(rewards.to(F64)[None])
    values = vine_outcomes.to(F64).mean(1)[None]
    return mc.vineppo(r, value_fn=lambda rollouts, k: (values, Cost()), k=K).token[0]


def _cases(gen):
    cases = []
    for i in range(6):
        S, K = randint(gen, 2, 6), randint(gen, 2, 9)
        vines = (rand(gen, S, K) < rand(gen, S, 1)).to(F64)
        rewards = torch.zeros(S, dtype=F64)
        rewards[-1] = float(rand(gen, 1) < 0.5)
        if i >= 4:  # intermediate rewards too (a format bonus, a step cost)
            rewards[:-1] = torch.round(0.2 * torch.randn(S - 1, generator=gen, dtype=F64), decimals=1)
        cases.append(Case(f"random #{i}", dict(vine_outcomes=vines, rewards=rewards)))
    cases += [
        Case("step rewards", dict(vine_outcomes=torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]], dtype=F64),
                                  rewards=torch.tensor([-0.1, 0.2, 1.0], dtype=F64))),
        # the edges, graded once the cases above pass
        Case("one step", dict(vine_outcomes=torch.tensor([[1.0, 0.0, 1.0]], dtype=F64), rewards=torch.tensor([1.0], dtype=F64)),
             frozenset({"one_step"})),
        Case("K = 1 vine", dict(vine_outcomes=torch.tensor([[1.0], [0.0], [1.0]], dtype=F64),
                                rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64)), frozenset({"one_vine"})),
        Case("every vine fails", dict(vine_outcomes=torch.zeros(3, 4, dtype=F64), rewards=torch.tensor([0.0, 0.0, 0.0], dtype=F64)),
             frozenset({"all_fail"})),
    ]
    return cases


def _variant(how):
    def variant(vine_outcomes, rewards):
        v = vine_outcomes.to(F64).sum(1) if how == "sum" else vine_outcomes.to(F64).mean(1)
        r = rewards.to(F64)
        v_next = torch.cat([v[1:], v.new_zeros(1)])
        if how == "sum":
            return r + v_next - v
        if how == "flip":
            return r + v - v_next
        if how == "no_reward":
            return v_next - v
        raise ValueError(f"how: unknown mistake {how!r}")
    return variant


def _last_broken(case, got, want):
    v = case.args["vine_outcomes"].to(F64).mean(1)
    return abs(float(got[-1]) - (float(case.args["rewards"][-1]) - float(v[-1]))) > 1e-5


EXERCISE = register(Exercise(
    notebook="03", name="vineppo_advantage", title="VinePPO step advantage",
    signature="vineppo_advantage(vine_outcomes, rewards) -> tensor (S,)",
    prompt=(
        "Write VinePPO's step advantage from vine values (Kazemnejad et al. 2024, arXiv 2410.01679).\n"
        "  vine_outcomes: (S, K) float tensor; row i holds the outcomes (0/1) of K continuations\n"
        "                 ('vines') sampled from the prefix that ends just before step i\n"
        "  rewards: (S,) float tensor, the reward received inside each step (the outcome on the last)\n"
        "Return the (S,) step advantages (gamma = 1):\n"
        "  V_i = mean of row i,   A_i = r_i + V_{i+1} - V_i,   V_S = 0 after the final step"),
    cases=_cases, reference=_reference,
    rules=(
        Rule("V_i is the MEAN outcome of the K vines, not their sum", looks_like(_variant("sum")), every=True),
        Rule("the advantage is what the step added: r_i + V_{i+1} - V_i (after minus before), not before minus after",
             looks_like(_variant("flip")), every=True),
        Rule("add the reward received inside the step: A_i = r_i + V_{i+1} - V_i",
             looks_like(_variant("no_reward")), every=True),
        Rule("you bootstrapped past the end of the trajectory: after the final step V = 0, so the last "
             "step's advantage is r - V_last", _last_broken),
    ),
))
