"""Exercise 11 (notebook 11_your_rollouts): the trajectories of a dump that give GRPO no gradient.

Graded against ``labkit.core.stats.constant_groups``; ``reveal_solution(11)`` prints the reference
solution, ``no_gradient_rows`` in labkit/course/solutions/ex11_your_rollouts.py.
"""
from __future__ import annotations

import torch

from labkit.core.stats import constant_groups
from labkit.course.exercises.cases import group_members, rand, random_group_ids
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like


def _reference(scores, group_ids):
    return constant_groups(torch.as_tensor(scores, dtype=F64), torch.as_tensor(group_ids))


def _cases(gen):
    cases = []
    for i in range(5):
        gids = random_group_ids(gen, 2, 4)
        scores = (rand(gen, len(gids)) < 0.5).to(F64)             # 0/1 outcomes: all-equal groups happen
        if i % 2:
            gids = gids[torch.randperm(len(gids), generator=gen)]  # a dump is not sorted by group
        cases.append(Case(f"random #{i}", dict(scores=scores, group_ids=gids)))
    cases += [
        Case("whole batch equal, two groups", dict(scores=torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=F64),
                                                    group_ids=torch.tensor([3, 3, 7, 7]))),
        Case("groups interleaved", dict(scores=torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], dtype=F64),
                                        group_ids=torch.tensor([0, 1, 0, 1, 2, 2]))),
        # a real spread with a small std: a std threshold (or any tolerance above 0.05) marks it
        Case("a narrow real spread", dict(scores=torch.tensor([0.2, 0.25, 0.9, 0.3, 0.9], dtype=F64),
                                          group_ids=torch.tensor([5, 5, 8, 5, 8]))),
        # the edges, graded once the cases above pass
        Case("a group of one", dict(scores=torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=F64),
                                    group_ids=torch.tensor([0, 0, 0, 1])), frozenset({"single"})),
        Case("equal but for round-off", dict(scores=torch.tensor([0.3, 0.1 + 0.2, 0.5, 0.5], dtype=F64),
                                             group_ids=torch.tensor([0, 0, 1, 1])), frozenset({"close"})),
        Case("a spread of one in a million", dict(scores=torch.tensor([0.5, 0.5 + 1e-6, 1.0, 1.0], dtype=F64),
                                                  group_ids=torch.tensor([0, 0, 1, 1])), frozenset({"close"})),
        # ten times the tolerance: a threshold of 1e-8 or wider (torch.isclose's atol) marks it
        Case("a spread of 1e-8", dict(scores=torch.tensor([1.0, 1.0, 0.25, 0.25 + 1e-8, 0.0], dtype=F64),
                                      group_ids=torch.tensor([4, 4, 6, 6, 9])), frozenset({"close"})),
    ]
    return cases


def _variant(how):
    def variant(scores, group_ids):
        s = torch.as_tensor(scores, dtype=F64)
        g = torch.as_tensor(group_ids)
        if how == "batch":          # the whole batch compared, not each group
            return torch.full_like(s, bool(s.max() == s.min()), dtype=torch.bool)
        out = torch.zeros(len(s), dtype=torch.bool)
        for members in group_members(g):
            vals = s[members]
            if how == "singleton":  # a group of one counted as zero-variance
                out[members] = bool(vals.max() == vals.min())
        return out
    return variant


def _unmarked_round_off(case, got, want):
    """A rule test: a group equal to within 1e-9 (the lab marks it) is left unmarked, as exact
    equality leaves round-off such as 0.1 + 0.2 against 0.3."""
    return bool((want & ~got).any())


def _marked_real_spread(case, got, want):
    """A rule test: a group whose spread is a real difference (the lab leaves it) is marked, as
    a tolerance wider than 1e-9 marks it."""
    return bool((got & ~want).any())


EXERCISE = register(Exercise(
    notebook="11", name="no_gradient_rows", title="Trajectories GRPO learns nothing from",
    signature="no_gradient_rows(scores, group_ids) -> bool tensor (n,)",
    prompt=(
        "Mark the trajectories that get no GRPO gradient (Shao et al. 2024, arXiv 2402.03300).\n"
        "They are those in a group of two or more whose scores are ALL equal, so that every advantage is 0.\n"
        "  scores: (n,) float tensor, each trajectory's total reward;  group_ids: (n,) int tensor (any order)\n"
        "Return a bool tensor (n,). A group of one is NOT marked: GRPO's group-of-one rule gives it its raw\n"
        "score. Equal means equal to within 1e-9 (max - min <= 1e-9): round-off such as 0.1 + 0.2 against 0.3\n"
        "leaves GRPO's advantages near 1e-10, no gradient; a spread of 1e-6 already gives them about 0.4."),
    cases=_cases, reference=_reference, output="bool",
    rules=(
        Rule("compare each trajectory with its own GROUP (same group id), not with the whole batch",
             looks_like(_variant("batch")), every=True),
        Rule("a group of one is not marked: GRPO's group-of-one rule gives it its raw score, so it still "
             "adds a gradient", looks_like(_variant("singleton")), frozenset({"single"}), every=True),
        # told by what the answer marks, so any tolerance too narrow or too wide gets its hint
        Rule("scores equal but for round-off (0.3 and 0.1 + 0.2) give GRPO no gradient: allow max - min <= 1e-9, "
             "not exact equality", _unmarked_round_off, frozenset({"close"})),
        Rule("a spread of 1e-8 or 1e-6 is a real difference (GRPO's advantages are about 0.4 at 1e-6): the "
             "tolerance is max - min <= 1e-9, not wider (torch.isclose's default atol is 1e-8)",
             _marked_real_spread, frozenset({"close"})),
        Rule("compare the spread of the scores, max - min <= 1e-9, not their std against a threshold: a group "
             "whose scores differ still gives GRPO a gradient", _marked_real_spread, every=True),
    ),
))
