"""Exercises of notebook 11_your_rollouts: 11a, the trajectories of a dump that give GRPO no
gradient; 11b, RLOO advantages of a dump's rows with a planted bug (the rows grouped by position,
not by prompt); 11c, the agreement of two estimators when the diagnosis compares them on a small
sample.

11a is graded against ``labkit.core.stats.constant_groups``, 11b against ``labkit.credit``'s ``rloo``;
``reveal_solution("11a")`` / ``("11b")`` print the reference solutions
(labkit/course/solutions/ex11_your_rollouts.py), ``reveal_solution("11c")`` the lab's run.
"""
from __future__ import annotations

import itertools

import torch

from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.core.stats import constant_groups
from labkit.course.exercises.cases import group_members, rand, random_group_ids
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.credit.episode import rloo
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


# --------------------------------------------------------------------------- 11b: find the bug in the grouping
#: short prompts a case draws from (a case's prompts are distinct strings of this pool)
PROMPTS = ("2+2", "7-3", "9*3", "5+8", "6/2", "4*4", "8-5", "3+9")


def _prompt_ids(prompts):
    """Group ids 0, 1, ... in order of first appearance: rows with the same prompt share one."""
    ids = {p: i for i, p in enumerate(dict.fromkeys(prompts))}
    return torch.tensor([ids[p] for p in prompts], dtype=torch.long)


def _rloo_reference(scores, prompts):
    # the library's estimator on the dump as the diagnosis reads it: one row per completion,
    # its score as the reward of a one-token trajectory, the prompt as the group
    s = torch.as_tensor(scores, dtype=F64)
    ro = Rollouts(tokens=torch.zeros(len(s), 1, dtype=torch.long), mask=torch.ones(len(s), 1, dtype=torch.bool),
                  rewards=s[:, None], group_ids=_prompt_ids(prompts))
    return rloo(ro).values[:, 0]


def _rloo_cases(gen):
    cases = []
    for i in range(5):
        gids = random_group_ids(gen, 2, 4)
        pool = [PROMPTS[int(j)] for j in torch.randperm(len(PROMPTS), generator=gen)]
        if i % 2 == 0:
            gids = gids[torch.randperm(len(gids), generator=gen)]  # a dump is not sorted by prompt
        scores = (rand(gen, len(gids)) < 0.5).to(F64) if i < 3 else torch.round(rand(gen, len(gids)), decimals=2)
        cases.append(Case(f"random #{i}", dict(scores=scores, prompts=[pool[int(g)] for g in gids])))
    cases += [
        Case("rows not sorted by prompt", dict(scores=torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0], dtype=F64),
                                               prompts=["2+2", "7-3", "2+2", "7-3", "7-3"])),
        Case("three completions and two", dict(scores=torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0], dtype=F64),
                                               prompts=["9*3", "9*3", "9*3", "5+8", "5+8"])),
        # two logging steps in one file: the prompt sampled again at the second step is still one group
        Case("a prompt again at a later step", dict(scores=torch.tensor([1.0, 0.0, 0.5, 0.5, 1.0, 1.0], dtype=F64),
                                                    prompts=["4*4", "4*4", "6/2", "6/2", "4*4", "4*4"])),
        # the edge, graded once the cases above pass
        Case("a prompt with one completion", dict(scores=torch.tensor([1.0, 0.5, 0.0, 0.0], dtype=F64),
                                                  prompts=["8-5", "3+9", "8-5", "8-5"]), frozenset({"single"})),
    ]
    return cases


def _rloo_variant(how):
    def variant(scores, prompts):
        s = torch.as_tensor(scores, dtype=F64)
        n = len(s)
        if how == "runs":        # consecutive rows with one prompt (itertools.groupby on an unsorted file)
            groups = [list(rows) for _, rows in itertools.groupby(range(n), key=lambda i: prompts[i])]
        elif how == "blocks":    # blocks of n / (number of prompts) rows, as a trainer's rewards.view(-1, k)
            k = n // len(set(prompts))
            groups = [list(range(a, min(a + k, n))) for a in range(0, n, k)]
        elif how == "batch":     # the whole file as one group
            groups = [list(range(n))]
        else:                    # by prompt, but the row itself left in its baseline
            groups = [torch.nonzero(_prompt_ids(prompts) == g).flatten().tolist()
                      for g in range(len(set(prompts)))]
        out = torch.zeros(n, dtype=F64)
        for rows in groups:
            if len(rows) < 2:
                continue
            g = s[rows]
            out[rows] = g - g.mean() if how == "with_self" else g - (g.sum() - g) / (len(rows) - 1)
        return out
    return variant


def _buggy_rloo(scores, prompts):
    """RLOO advantages of a dump's rows: each completion's score minus the mean score of the
    other completions of its prompt; a prompt with a single completion gets 0."""
    adv = torch.zeros(len(scores), dtype=torch.float64)
    for prompt, rows in itertools.groupby(range(len(scores)), key=lambda i: prompts[i]):
        rows = list(rows)
        if len(rows) < 2:
            continue
        group = scores[rows].double()
        adv[rows] = group - (group.sum() - group) / (len(rows) - 1)
    return adv


EXERCISE_B = register(Exercise(
    notebook="11", letter="b", kind="debug", path="deep dive", buggy=_buggy_rloo,
    name="rloo_by_prompt", title="RLOO on a dump",
    signature="rloo_by_prompt(scores, prompts) -> tensor (n,)",
    prompt=(
        "The function below should give each row of a rollout dump (TRL's completions table, a verl dump)\n"
        "its RLOO advantage (Ahmadian et al. 2024, arXiv 2402.14740; labkit.credit's rloo, which the\n"
        "diagnosis runs on your file):\n"
        "  scores: (n,) float tensor, one row per completion, in the file's order\n"
        "  prompts: list of n strings, the prompt each completion answered\n"
        "  A_i = s_i - the mean of s_j over the OTHER rows j with the same prompt\n"
        "A prompt with a single completion in the file gets 0: it has nothing to compare with.\n"
        "It has exactly one planted mistake of the kind people make. Find it and fix it."),
    cases=_rloo_cases, reference=_rloo_reference,
    rules=(
        Rule("group the rows by their prompt, wherever they sit in the file: a dump is not sorted by prompt, "
             "and itertools.groupby only joins rows that are next to each other",
             looks_like(_rloo_variant("runs")), every=True),
        Rule("group the rows by their prompt, not in blocks of consecutive rows: a prompt's completions need not "
             "sit together, and prompts may have different numbers of them", looks_like(_rloo_variant("blocks")),
             every=True),
        Rule("the baseline is the mean of the other completions of the SAME prompt, not of the whole file",
             looks_like(_rloo_variant("batch")), every=True),
        Rule("leave the row itself out of its baseline: the mean of the n - 1 OTHER completions of its prompt, "
             "so A_i = n / (n - 1) * (s_i - the prompt's mean)", looks_like(_rloo_variant("with_self")), every=True),
        Rule("a prompt with one completion in the file has nothing to compare with: RLOO gives it 0 here "
             "(verl's vectorised RLOO), not its raw score and not NaN", wrong, frozenset({"single"})),
    ),
))


# --------------------------------------------------------------------------- 11c: agreement on a small sample
ARITHMETIC_SAMPLE = data_path("sample_rollouts", "arithmetic_lm.jsonl")


def grpo_carl_on_64():
    """The diagnosis of the shipped arithmetic sample with its estimator comparison run on 64
    trajectories (``sample=64``, whole groups drawn with seed 0): the rank agreement of GRPO's
    credit with CARL's."""
    sample = data_path("sample_rollouts", "arithmetic_lm.jsonl")
    dx = diagnose(sample, sample=64, seed=0, progress=False)
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
    measure=grpo_carl_on_64, tolerance=0.01,
    hint="read the agreement matrix of the diagnosis run with sample=64: row grpo, column carl",
    misreadings=(
        Misreading(_grpo_carl_whole_file, "that is the whole file's agreement, printed above: run the diagnosis "
                                          "with sample=64"),
        Misreading(_grpo_reinforce_on_64, "that is REINFORCE's column: read the column carl"),
        Misreading(lambda: 1 - grpo_carl_on_64(), "that is 1 minus the agreement: enter the correlation itself"),
    ),
))
