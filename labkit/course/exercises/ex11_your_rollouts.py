"""Exercises of notebook 11_your_rollouts: 11a, the trajectories of a dump that give GRPO no
gradient; 11b, REINFORCE++'s whitening with a planted bug; 11c, the agreement of two estimators
when the diagnosis compares them on a small sample.

11a is graded against ``labkit.core.stats.constant_groups``, 11b against ``labkit.core.stats.whiten``;
``reveal_solution("11a")`` / ``("11b")`` print the reference solutions
(labkit/course/solutions/ex11_your_rollouts.py), ``reveal_solution("11c")`` the lab's run.
"""
from __future__ import annotations

import torch

from labkit.core.paths import data_path
from labkit.core.stats import constant_groups, whiten
from labkit.course.exercises.cases import group_members, rand, random_group_ids, random_prefix_mask
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import OFF_MASK, looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.diagnose import diagnose


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


# --------------------------------------------------------------------------- 11b: find the bug in the whitening
def _whiten_reference(credit, mask):
    return whiten(credit.to(F64), mask, eps=1e-8)


def _whiten_cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (4, 8), shortest=2, tool_output=True)
        B, T = mask.shape
        credit = torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=2)
        if i >= 3:  # a per-trajectory credit (REINFORCE++'s reward on every token): ties within each row
            credit = credit[:, :1].expand(B, T).clone()
            credit[0, 0] += 0.5
        credit = torch.where(mask, credit, 3.0 if i % 2 else -2.0)  # padding and tool output hold junk
        cases.append(Case(f"random #{i}", dict(credit=credit, mask=mask)))
    cases += [
        Case("a tool's answer mid-turn", dict(credit=torch.tensor([[1.0, 0.0, 2.0, 3.0], [0.5, 0.5, 7.0, 7.0]], dtype=F64),
                                             mask=torch.tensor([[True, False, True, True], [True, True, False, False]]))),
        Case("padding holds zeros", dict(credit=torch.tensor([[1.0, 2.0, 0.0, 0.0], [3.0, 4.0, 5.0, 0.0]], dtype=F64),
                                         mask=torch.tensor([[True, True, False, False], [True, True, True, False]]))),
        # the edges, graded once the cases above pass
        Case("one verdict for the whole batch", dict(credit=torch.tensor([[1.0, 1.0, 9.0], [1.0, 1.0, 1.0]], dtype=F64),
                                                     mask=torch.tensor([[True, True, False], [True, True, True]])),
             frozenset({"constant"})),
        Case("nothing generated", dict(credit=torch.tensor([[0.3, 0.2], [0.1, 0.4]], dtype=F64),
                                       mask=torch.zeros(2, 2, dtype=torch.bool)), frozenset({"empty"})),
    ]
    return cases


def _whiten_variant(how):
    def variant(credit, mask):
        x = credit.to(F64)
        if not bool(mask.any()):
            return torch.zeros_like(x)
        if how == "per_row":
            out = torch.zeros_like(x)
            for b in range(x.shape[0]):
                out[b] = whiten(x[b:b + 1], mask[b:b + 1], eps=1e-8)[0]
            return out
        vals = x if how == "after" else x[mask]
        mean = vals.mean()
        var = vals.var(unbiased=how == "unbiased")
        return torch.where(mask, (x - mean) / torch.sqrt(var + 1e-8), torch.zeros((), dtype=F64))
    return variant


def _buggy_whiten(credit, mask):
    """REINFORCE++'s whitening of token credit over a batch: subtract the mean, divide by the
    standard deviation (population variance, eps = 1e-8 inside the square root), both taken
    over the generated tokens; padding and tool output get 0."""
    mean = credit.mean()
    var = ((credit - mean) ** 2).mean()
    white = (credit - mean) / torch.sqrt(var + 1e-8)
    return torch.where(mask, white, torch.zeros_like(white))


EXERCISE_B = register(Exercise(
    notebook="11", letter="b", kind="debug", path="deep dive", buggy=_buggy_whiten,
    name="whiten_credit", title="Whitening with a planted bug",
    signature="whiten_credit(credit, mask) -> tensor (B, T)",
    prompt=(
        "The function below should whiten token credit over a batch as REINFORCE++ does (Hu 2025,\n"
        "arXiv 2501.03262; labkit.core.stats.whiten, which the diagnosis's reinforce_pp runs on your file):\n"
        "  credit: (B, T) float tensor;  mask: (B, T) bool, the generated tokens (False: padding, tool output)\n"
        "  out = (credit - mean) / sqrt(var + 1e-8) on the mask, 0 off it,\n"
        "  mean and var (the population variance) taken over the entries where mask is True, the whole batch.\n"
        "An empty mask gives all zeros. It has exactly one planted mistake of the kind people make.\n"
        "Find it and fix it."),
    cases=_whiten_cases, reference=_whiten_reference,
    rules=(
        OFF_MASK,
        Rule("the mean and the variance must come from the generated tokens only: padding and tool output "
             "leak into them when the mask is applied after normalising (nearly half the agent file is tool output)",
             looks_like(_whiten_variant("after")), every=True),
        Rule("REINFORCE++ divides by the population std (var with unbiased=False); the unbiased variance is "
             "verl's masked_whiten", looks_like(_whiten_variant("unbiased")), every=True),
        Rule("whiten over the whole batch's generated tokens, not each trajectory on its own (one mean and one "
             "std for the batch)", looks_like(_whiten_variant("per_row")), every=True),
        Rule("credit that is the same on every generated token whitens to 0 (0 / sqrt(1e-8)), not NaN: keep eps "
             "inside the square root", wrong, frozenset({"constant"})),
        Rule("an empty mask (nothing generated) gives all zeros, not NaN: NaN times a mask of 0 is still NaN",
             wrong, frozenset({"empty"})),
    ),
))


# --------------------------------------------------------------------------- 11c: agreement on a small sample
ARITHMETIC_SAMPLE = data_path("sample_rollouts", "arithmetic_lm.jsonl")


def _grpo_carl_on_64():
    """The diagnosis of the shipped arithmetic sample with its estimator comparison run on 64
    trajectories (``sample=64``, whole groups drawn with seed 0): the rank agreement of GRPO's
    credit with CARL's."""
    dx = diagnose(ARITHMETIC_SAMPLE, sample=64, seed=0, progress=False)
    return float(dx.comparison.agreement.loc["grpo", "carl"])


def _grpo_carl_whole_file():
    return float(diagnose(ARITHMETIC_SAMPLE, progress=False).comparison.agreement.loc["grpo", "carl"])


def _grpo_reinforce_on_64():
    dx = diagnose(ARITHMETIC_SAMPLE, sample=64, seed=0, progress=False)
    return float(dx.comparison.agreement.loc["grpo", "reinforce"])


EXERCISE_C = register(Reading(
    notebook="11", letter="c", name="grpo_carl_64", title="Agreement on a small sample",
    prompt=(
        "Run the diagnosis of the arithmetic sample (labkit.diagnose.diagnose) with its estimator comparison\n"
        "on 64 trajectories instead of the whole file: sample=64 (seed 0, the default). Read the rank agreement\n"
        "of GRPO (Shao et al. 2024, arXiv 2402.03300) with CARL (arXiv 2512.04949) in its agreement matrix.\n"
        "Enter it to within 0.01."),
    measure=_grpo_carl_on_64, tolerance=0.01,
    hint="read the agreement matrix of the diagnosis run with sample=64: row grpo, column carl",
    misreadings=(
        Misreading(_grpo_carl_whole_file, "that is the whole file's agreement, printed above: run the diagnosis "
                                          "with sample=64"),
        Misreading(_grpo_reinforce_on_64, "that is REINFORCE's column: read the column carl"),
        Misreading(lambda: 1 - _grpo_carl_on_64(), "that is 1 minus the agreement: enter the correlation itself"),
    ),
))
