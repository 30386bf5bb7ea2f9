"""Exercise 01 (notebook 01_reinforce_variance): GRPO's group-relative advantage.

Graded against ``labkit.credit.episode.grpo``; ``reveal_solution(1)`` prints the reference solution,
``grpo_advantage`` in labkit/course/solutions/ex01_reinforce_variance.py.
"""
from __future__ import annotations

import torch

from labkit.core.stats import constant_groups
from labkit.course.exercises.cases import group_members, rand, random_group_ids
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import episode

#: GRPO's eps (verl's), in the exercise's formula and in the reference call alike
GRPO_EPS = 1e-6

SINGLETON_HINT = ("a group of one should get its raw score / (1 + eps) (the group-of-one rule: mean 0, std 1, "
                  "as verl does)")


def _reference(scores, group_ids):
    s = torch.as_tensor(scores, dtype=F64)
    r = one_token_rollouts(s[:, None], group_ids=torch.as_tensor(group_ids))
    return episode.grpo(r, eps=GRPO_EPS).token[:, 0]


def _random_ids(gen, min_groups: int) -> torch.Tensor:
    """Group ids of ``min_groups`` to 3 groups of 2 to 5 members, interleaved as in a real batch."""
    ids = random_group_ids(gen, min_groups, 3)
    return ids[torch.randperm(len(ids), generator=gen)]


def _random_scores(gen, ids, *, binary: bool, constant: str = "none") -> torch.Tensor:
    """Scores for ``ids`` (0/1 outcomes, or normal ones to two decimals), drawn again until the
    groups whose scores are all equal are as asked: ``constant`` "none", or "some" (beside a mixed one)."""
    while True:
        s = (rand(gen, len(ids)) < 0.5).to(F64) if binary else \
            torch.round(torch.randn(len(ids), generator=gen, dtype=F64), decimals=2)
        equal = constant_groups(s, ids)
        if (not equal.any()) if constant == "none" else (equal.any() and not equal.all()):
            return s


def _cases(gen):
    # the main cases: the formula itself, no group of one and no all-equal group (those are the edges)
    cases = [Case(f"random #{i}", dict(scores=_random_scores(gen, ids, binary=bool(i % 2)), group_ids=ids))
             for i, ids in ((i, _random_ids(gen, 1)) for i in range(6))]
    cases += [
        Case("two groups of three", dict(scores=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=F64),
                                         group_ids=torch.tensor([0, 0, 0, 1, 1, 1]))),
        # the edges, graded once the cases above pass
        Case("group of one", dict(scores=torch.tensor([0.7], dtype=F64), group_ids=torch.tensor([3])),
             frozenset({"singleton"})),
        Case("a group of one beside a group of three", dict(scores=torch.tensor([1.0, 0.0, 1.0, 2.0], dtype=F64),
                                                            group_ids=torch.tensor([0, 0, 0, 7])), frozenset({"singleton"})),
        Case("zero variance", dict(scores=torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=F64), group_ids=torch.tensor([0, 0, 0, 0])),
             frozenset({"zero_var"})),
        Case("an all-equal group beside a mixed one", dict(scores=torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0], dtype=F64),
                                                         group_ids=torch.tensor([2, 2, 2, 5, 5])), frozenset({"zero_var"})),
    ]
    ids = _random_ids(gen, 2)
    cases.append(Case("random 0/1 scores, some groups all equal",
                      dict(scores=_random_scores(gen, ids, binary=True, constant="some"), group_ids=ids),
                      frozenset({"zero_var"})))
    return cases


def _sums_to_zero_broken(case, got, want):
    ids = case.args["group_ids"]
    return any(len(idx) > 1 and abs(float(got[idx].sum())) > 1e-5 for idx in group_members(ids))


def _singleton_broken(case, got, want):
    ids, s = case.args["group_ids"], case.args["scores"]
    return any(len(idx) == 1 and abs(float(got[idx[0]]) - float(s[idx[0]]) / (1 + GRPO_EPS)) > 1e-5
               for idx in group_members(ids))


def _zero_var_broken(case, got, want):
    ids, s = case.args["group_ids"], case.args["scores"]
    return any(len(idx) > 1 and bool((s[idx] == s[idx[0]]).all()) and bool((got[idx].abs() > 1e-5).any())
               for idx in group_members(ids))


def _variant(scores, group_ids, *, unbiased=True, divide=True, eps=GRPO_EPS):
    out = torch.zeros_like(scores, dtype=F64)
    for idx in group_members(group_ids):
        s = scores[idx].to(F64)
        if len(idx) == 1:
            out[idx] = s / (1 + GRPO_EPS) if divide else s
            continue
        a = s - s.mean()
        out[idx] = a / (s.std(unbiased=unbiased) + eps) if divide else a
    return out


EXERCISE = register(Exercise(
    notebook="01", name="grpo_advantage", title="GRPO advantage",
    signature="grpo_advantage(scores, group_ids) -> tensor (n,)",
    prompt=(
        "Write GRPO's group-relative advantage (Shao et al. 2024, arXiv 2402.03300).\n"
        "  scores: (n,) float tensor, one outcome score per trajectory\n"
        "  group_ids: (n,) long tensor; trajectories with the same id answered the same prompt\n"
        "Return the (n,) advantages\n"
        "  A_i = (s_i - mean_group(i)) / (std_group(i) + eps),  eps = 1e-6, std unbiased (torch.std's default)\n"
        "A group of one has nothing to compare with: give it mean 0 and std 1, i.e. s / (1 + eps)\n"
        "(verl's convention). A group whose scores are all equal gets 0."),
    cases=_cases, reference=_reference,
    rules=(
        # first: a batch mean breaks this on every finite case, whatever it does to a group of one
        Rule("your advantages do not sum to zero within a group: subtract each group's own mean, not the batch's",
             _sums_to_zero_broken),
        Rule(SINGLETON_HINT + "; torch.std of one value is NaN", not_finite, frozenset({"singleton"})),
        Rule("a group whose scores are all equal should get 0: add eps outside the std, "
             "A = (s - mean) / (std + eps), so 0 / (0 + eps) = 0, not 0 / 0", not_finite, frozenset({"zero_var"})),
        Rule(SINGLETON_HINT, _singleton_broken, frozenset({"singleton"})),
        Rule("a group whose scores are all equal should get 0 for everyone", _zero_var_broken, frozenset({"zero_var"})),
        Rule("you used the biased std (dividing by n); GRPO uses the unbiased one (n - 1), torch.std's default",
             looks_like(lambda scores, group_ids: _variant(scores, group_ids, unbiased=False)), every=True),
        Rule("you did not divide by the group std (that is Dr. GRPO, arXiv 2503.20783): A = (s - mean) / (std + eps)",
             looks_like(lambda scores, group_ids: _variant(scores, group_ids, divide=False)), every=True),
        Rule("add eps outside the std: A = (s - mean) / (std + eps), eps = 1e-6 (without it a group whose std "
             "is small comes out too large)", looks_like(lambda scores, group_ids: _variant(scores, group_ids, eps=0.0)),
             every=True),
    ),
))
