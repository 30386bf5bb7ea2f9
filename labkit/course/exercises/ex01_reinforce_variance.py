"""Exercises of notebook 01_reinforce_variance: 01a, GRPO's group-relative advantage; 01b (find the
bug), REINFORCE++'s batch whitening on a padded batch; 01c (run and interpret), REINFORCE's
noise-to-signal at a batch size the notebook does not print.

01a is graded against ``labkit.credit.episode.grpo``, 01b against ``episode.reinforce_pp``, 01c
against the lab's own gradient study (``labkit.scoring.gradient_study``) on the dashboard's chain;
``reveal_solution("01a")`` (or "01b", "01c") prints the lab's solution: ``grpo_advantage`` and
``reinforce_pp_advantage`` in labkit/course/solutions/ex01_reinforce_variance.py, 01c's ``measure`` here.
"""
from __future__ import annotations

import functools

import torch

from labkit.core.stats import constant_groups
from labkit.course import presets
from labkit.course.exercises.cases import group_members, rand, randint, random_group_ids, random_prefix_mask
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import OFF_MASK, looks_like
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import episode, get_estimator
from labkit.scoring import gradient_study

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


# --------------------------------------------------------------------------- 01b: find the bug
#: REINFORCE++'s eps (OpenRLHF's), inside the square root
PP_EPS = 1e-8


def _pp_reference(rewards, mask):
    return episode.reinforce_pp(one_token_rollouts(rewards, mask), eps=PP_EPS).token


def _pp_cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 4), (3, 7), shortest=1)
        B, T = mask.shape
        mask[randint(gen, 0, B - 1), : T - 1] = True
        mask[randint(gen, 0, B - 1), T - 1:] = False  # one row at least is padded
        # outcome rewards on the last generated token, sometimes an intermediate one before it
        rewards = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            on = mask[b].nonzero().flatten()
            if len(on):
                rewards[b, on[-1]] = float(randint(gen, 0, 1))
                if rand(gen, 1).item() < 0.4:
                    rewards[b, on[0]] = round(float(torch.randn(1, generator=gen, dtype=F64)), 1)
        returns = rewards.flip(1).cumsum(1).flip(1)[mask]
        if bool((returns == returns[0]).all()):
            rewards[0, 0] += 0.5  # returns not all equal: that is an edge case of its own
        cases.append(Case(f"random #{i}", dict(rewards=rewards, mask=mask)))
    cases += [
        Case("a success and a short failure", dict(rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=F64),
                                                   mask=torch.tensor([[True, True, True], [True, False, False]]))),
        # the edges, graded once the cases above pass
        Case("one generated token in the batch", dict(rewards=torch.tensor([[1.0, 0.0]], dtype=F64),
                                                      mask=torch.tensor([[True, False]])), frozenset({"single"})),
        Case("every return equal", dict(rewards=torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=F64),
                                        mask=torch.tensor([[True, True, False], [True, False, False]])),
             frozenset({"zero_var"})),
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=F64),
                                                  mask=torch.tensor([[True, True, True], [False, False, False]])),
             frozenset({"empty_row"})),
    ]
    return cases


def _pp_variant(how):
    """Typical mistakes: whitening over every entry, padding included, then masking (the bug
    planted in 01b); the unbiased variance; whitening each trajectory on its own."""
    def variant(rewards, mask):
        G = torch.where(mask, rewards.to(F64), 0.0).flip(1).cumsum(1).flip(1)
        if how == "padding":
            return (G - G.mean()) / torch.sqrt(G.var(unbiased=False) + PP_EPS) * mask
        if how == "unbiased":
            g = G[mask]
            return torch.where(mask, (G - g.mean()) / torch.sqrt(g.var() + PP_EPS), 0.0) if len(g) > 1 else G * 0
        out = torch.zeros_like(G)   # "per_row"
        for b in range(G.shape[0]):
            g = G[b][mask[b]]
            if len(g):
                out[b] = torch.where(mask[b], (G[b] - g.mean()) / torch.sqrt(g.var(unbiased=False) + PP_EPS), 0.0)
        return out
    return variant


def buggy_reinforce_pp_advantage(rewards, mask):
    """REINFORCE++ credit: every generated token's return-to-go, whitened over the batch.

    rewards, mask: (B, T); each row is its generated tokens followed by padding.
    Returns (B, T) advantages, 0 on padding.
    """
    eps = 1e-8
    # return-to-go with gamma = 1: the sum of the rewards from t to the end of the row
    returns = rewards.flip(1).cumsum(1).flip(1)
    mean = returns.mean()
    var = returns.var(unbiased=False)
    advantages = (returns - mean) / torch.sqrt(var + eps)
    return advantages * mask


EXERCISE_B = register(Exercise(
    notebook="01", letter="b", kind="debug", path="deep dive",
    name="reinforce_pp_advantage", title="REINFORCE++ on a padded batch",
    signature="reinforce_pp_advantage(rewards, mask) -> tensor (B, T)",
    prompt=(
        "Find the bug. The function below should compute REINFORCE++'s credit (Hu 2025, arXiv 2501.03262)\n"
        "on a padded batch, as labkit.credit.episode.reinforce_pp does with gamma = 1:\n"
        "  rewards: (B, T) float tensor, 0 on padding; mask: (B, T) bool, True on the generated tokens\n"
        "  (each row: its generated tokens, then padding)\n"
        "  G_t = r_t + G_{t+1} (the return-to-go), A_t = (G_t - mean) / sqrt(var + eps),  eps = 1e-8\n"
        "mean and var (the population variance, dividing by n) are taken over the generated tokens of the\n"
        "whole batch; padding gets 0. The code has exactly one planted mistake, of the kind people make\n"
        "in real RL code; fix it and check."),
    cases=_pp_cases, reference=_pp_reference, buggy=buggy_reinforce_pp_advantage,
    rules=(
        OFF_MASK,
        Rule("padding leaks into the whitening: the mean and variance must be taken over the generated "
             "tokens only (select them with the mask BEFORE normalising, not after)",
             looks_like(_pp_variant("padding")), every=True),
        Rule("REINFORCE++ whitens over the whole batch, not each trajectory on its own: one mean and one "
             "variance for every generated token of the batch", looks_like(_pp_variant("per_row")), every=True),
        Rule("use the population variance (divide by n, var(unbiased=False)) as REINFORCE++ does",
             looks_like(_pp_variant("unbiased")), every=True),
        Rule("when every generated token's return is equal, each gets 0: (G - mean) / sqrt(0 + eps), with eps "
             "inside the square root", not_finite, frozenset({"zero_var", "single"})),
    ),
))


# --------------------------------------------------------------------------- 01c: run and interpret
def reinforce_noise_at_batch_64():
    """REINFORCE's relative variance (noise-to-signal of one batch gradient) on the "Try it"
    dashboard's chain at T = 30, noise 0, slip 0, batch 64: its 50 batches, seeded as it seeds them."""
    env, policy, truth = presets.chain_setup(30, noise_std=0.0, slip=0.0, env_seed=0, policy_seed=0)
    batches = env.sample(policy, 50 * 64, group_size=8, seed=1)
    study = gradient_study(policy, batches.split(50), get_estimator("reinforce"), truth.grad, whole=batches)
    return study["relative_variance"]


@functools.lru_cache(maxsize=None)
def _dashboard(batch_size: int) -> tuple:
    """The dashboard's chain, policy, truth and 50 batches at T = 30 and ``batch_size`` (kept: a
    wrong reading is compared with several misreadings, each a study of the same batches)."""
    env, policy, truth = presets.chain_setup(30, noise_std=0.0, slip=0.0, env_seed=0, policy_seed=0)
    whole = env.sample(policy, 50 * batch_size, group_size=8, seed=1)
    return policy, truth, whole


def _dashboard_study(estimator: str, batch_size: int, what: str):
    policy, truth, whole = _dashboard(batch_size)
    return lambda: gradient_study(policy, whole.split(50), get_estimator(estimator), truth.grad, whole=whole)[what]


EXERCISE_C = register(Reading(
    notebook="01", letter="c", name="reinforce_noise", title="What a bigger batch buys",
    prompt=(
        "Read it off the \"Try it\" dashboard (REINFORCE, Williams 1992; the baselines of arXiv 2402.03300).\n"
        "Set horizon 30, noise 0, slip 0 and batch 64 (the start settings with the batch doubled). The\n"
        "dashboard's summary line then prints REINFORCE's relative variance E||g - E g||^2 / ||E g||^2\n"
        "over its 50 batches (lesson.dial(batch_size=64) returns the same numbers). Enter that relative\n"
        "variance, to two decimals (tolerance 0.02). Then compare it with batch 32: the noise-to-signal\n"
        "of one batch falls about as 1 / batch size."),
    measure=reinforce_noise_at_batch_64, tolerance=0.02,
    hint="read it again: the dashboard at horizon 30, noise 0, slip 0, batch 64, and in its summary line the "
         "number after 'REINFORCE relative variance'",
    misreadings=(
        Misreading(lambda: _dashboard_study("reinforce", 32, "relative_variance")(),
                   "that is the reading at batch 32, the dashboard's start: move the batch slider to 64"),
        Misreading(lambda: _dashboard_study("grpo", 64, "relative_variance")(),
                   "that is a group baseline's relative variance (GRPO, RLOO and Dr. GRPO nearly agree here); "
                   "the question asks for plain REINFORCE's"),
        Misreading(lambda: _dashboard_study("reinforce_baseline", 64, "relative_variance")(),
                   "that is REINFORCE with a batch-mean baseline; the question asks for plain REINFORCE's"),
        Misreading(lambda: _dashboard_study("reinforce", 64, "cosine")(),
                   "that is the cosine of one batch gradient; the question asks for the relative variance "
                   "(noise-to-signal), the number in the summary line"),
    ),
))
