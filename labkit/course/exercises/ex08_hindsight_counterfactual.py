"""Exercises of notebook 08_hindsight_counterfactual: HCA's return-conditioned hindsight ratio
(08a), a leave-one-out baseline with a planted mistake (08b), and GRPO's sign agreement at a tool
noise the notebook does not print (08c, a reading).

08a is graded against ``labkit.credit.hindsight.hca``, 08b against ``labkit.credit.episode.rloo``
(the leave-one-out baseline C3 puts under context-matched alternatives);
``reveal_solution("08a")`` and ``reveal_solution("08b")`` print the reference solutions in
labkit/course/solutions/ex08_hindsight_counterfactual.py, ``reveal_solution("08c")`` the lab's own run.
"""
from __future__ import annotations

import functools

import torch

from labkit.course.exercises.cases import group_members, rand, randint, random_group_ids
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts, outcome_rollouts
from labkit.course.presets import scripted_agent_setup
from labkit.credit import episode, get_estimator, hindsight
from labkit.scoring import luck_regression


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


# --------------------------------------------------------------------------- 08b: find the bug in a leave-one-out baseline
def _loo_reference(returns, group_ids):
    r = one_token_rollouts(returns.to(F64)[:, None], group_ids=group_ids)
    return episode.rloo(r).token[:, 0]


def _loo_cases(gen):
    cases = []
    for i in range(6):
        ids = random_group_ids(gen, 2, 3)
        ids = ids[torch.randperm(len(ids), generator=gen)]  # a batch holds its contexts interleaved
        # each return a mean of four 0/1 replays, as C3's continuations give
        returns = torch.round(4 * rand(gen, len(ids))) / 4
        cases.append(Case(f"random #{i}", dict(returns=returns, group_ids=ids)))
    cases += [
        Case("two contexts", dict(returns=torch.tensor([1.0, 0.0, 0.5, 0.25, 0.75], dtype=F64),
                                  group_ids=torch.tensor([0, 0, 0, 1, 1]))),
        Case("a context whose alternatives all return the same",
             dict(returns=torch.tensor([0.5, 0.5, 0.5, 1.0, 0.0], dtype=F64), group_ids=torch.tensor([0, 0, 0, 1, 1]))),
        # the edges, graded once the cases above pass
        Case("a context with one alternative", dict(returns=torch.tensor([0.75, 1.0, 0.25], dtype=F64),
                                                    group_ids=torch.tensor([0, 1, 1])), frozenset({"singleton"})),
    ]
    return cases


def _loo_variant(how):
    def variant(returns, group_ids):
        x = returns.to(F64)
        out = torch.zeros_like(x)
        groups = [torch.arange(len(x))] if how == "batch" else group_members(group_ids)
        for members in groups:
            n = len(members)
            if n < 2:
                continue
            total = x[members].sum()
            others = (total - x[members]) / (n if how == "divide_by_n" else n - 1)
            out[members] = x[members] - (x[members].mean() if how == "with_itself" else others)
        return out
    return variant


def buggy_loo_credit(returns, group_ids):
    """Leave-one-out credit: each alternative's return minus the mean return of the other
    alternatives of its context (C3's baseline; RLOO's, with prompts for contexts).

    returns: (B,) float tensor, each alternative's return.
    group_ids: (B,) int tensor, alternatives with the same id share a context.
    A context with one alternative has nothing to compare with: its credit is 0.
    Returns the (B,) credits.
    """
    credit = torch.zeros(len(returns), dtype=torch.float64)
    for i in range(len(returns)):
        same_context = group_ids == group_ids[i]
        n = int(same_context.sum())
        if n > 1:
            baseline = returns[same_context].mean()
            credit[i] = returns[i] - baseline
    return credit


LOO_EXERCISE = register(Exercise(
    notebook="08", letter="b", kind="debug", path="deep dive", buggy=buggy_loo_credit,
    name="loo_credit", title="A leave-one-out baseline",
    signature="loo_credit(returns, group_ids) -> tensor (B,)",
    prompt=(
        "Find the bug. The function below should compute leave-one-out credit, the baseline C3 (Chen et al.\n"
        "2026, arXiv 2603.06859) puts under context-matched alternatives and RLOO (arXiv 2402.14740) under\n"
        "the answers to one prompt:\n"
        "  returns: (B,) float tensor, each alternative's return\n"
        "  group_ids: (B,) int tensor, alternatives with the same id share a context\n"
        "credit_i = G_i - (1 / (n - 1)) * sum of G_j over the OTHER alternatives j of i's context, n = the\n"
        "context's size; a context with one alternative gets credit 0.\n"
        "It has exactly one planted mistake, of the kind people make. Fix it and check."),
    cases=_loo_cases, reference=_loo_reference,
    sign_note="an alternative that returned more than the others of its context gets POSITIVE credit: "
              "G_i - baseline, not baseline - G_i",
    rules=(
        Rule("a context with one alternative gets credit 0: there is no other alternative to average "
             "(n - 1 = 0, don't divide by it)", not_finite, frozenset({"singleton"})),
        NOT_FINITE,
        Rule("leave the alternative out of its own baseline: the baseline of i is the mean of the OTHER n - 1 "
             "alternatives of its context, not the context's mean (which holds G_i itself and shrinks every "
             "credit by (n - 1) / n)", looks_like(_loo_variant("with_itself")), every=True),
        Rule("the others' mean divides their sum by their number, n - 1, not by n",
             looks_like(_loo_variant("divide_by_n")), every=True),
        Rule("compare an alternative only with the others of its own context (the same group id), not with "
             "the whole batch", looks_like(_loo_variant("batch")), every=True),
    ),
))


# --------------------------------------------------------------------------- 08c: a reading of the noise sweep
def grpo_sign_agreement_at_noise_02():
    """GRPO's sign agreement with the exact advantage at tool noise 0.2, on the noise sweep's
    batch (16 tasks x 8 episodes, seed 2) of notebook 08's world and scripted agent: the share
    of turns with |A| > 0.05 whose credit has A's sign. Returns a float."""
    env, policy = scripted_agent_setup(0.2)          # notebook 08's world and agent, tools erring 20 % of the time
    truth = env.truth(policy)
    ro = env.sample(policy, 16, group_size=8, seed=2)
    table = luck_regression(ro, truth, {"GRPO": get_estimator("grpo")(ro)})
    return float(table.sign_agree.iloc[0])


@functools.lru_cache(maxsize=1)
def _grpo_readings() -> dict:
    """The numbers a reader might take instead: the sweep's GRPO row at the printed noise levels,
    the correlation column at 0.2, and the core batch's sign agreement at noise 0.3 (computed
    once, on the first wrong reading that needs them)."""
    out = {}
    for noise in (0.1, 0.2, 0.3):
        env, policy = scripted_agent_setup(noise)
        truth = env.truth(policy)
        ro = env.sample(policy, 16, group_size=8, seed=2)
        out[noise] = luck_regression(ro, truth, {"GRPO": get_estimator("grpo")(ro)}).iloc[0]
    env, policy = scripted_agent_setup(0.3)
    truth = env.truth(policy)
    ro = env.sample(policy, 32, group_size=8, seed=1)
    out["core"] = luck_regression(ro, truth, {"GRPO": get_estimator("grpo")(ro)}).iloc[0]
    return out


GRPO_READING = register(Reading(
    notebook="08", letter="c", name="grpo_sign_agree", title="GRPO's sign agreement at noise 0.2",
    prompt=(
        "Read GRPO's sign agreement with the exact advantage (sign_agree: the share of turns with |A| > 0.05\n"
        "whose credit has A's sign) at tool noise 0.2, on the noise sweep's batch: 16 tasks x 8 episodes,\n"
        "seed 2, as the deep dive's sweep draws at 0.1, 0.3 and 0.5 (lesson.noise_sweep at noises=(0.2,)).\n"
        "Enter it within 0.005."),
    measure=grpo_sign_agreement_at_noise_02, tolerance=0.005,
    hint="read the sign_agree column of GRPO's row in the sweep at noise 0.2 (16 tasks x 8 episodes, seed 2)",
    misreadings=(
        Misreading(lambda: float(_grpo_readings()[0.2].corr_exact),
                   "that is GRPO's correlation with the exact advantage: the exercise asks for sign_agree"),
        Misreading(lambda: float(_grpo_readings()[0.1].sign_agree),
                   "that is the sweep's value at noise 0.1: run it at noise 0.2"),
        Misreading(lambda: float(_grpo_readings()[0.3].sign_agree),
                   "that is the sweep's value at noise 0.3: run it at noise 0.2"),
        Misreading(lambda: float(_grpo_readings()["core"].sign_agree),
                   "that is the core batch's value (noise 0.3, 32 tasks x 8 episodes): run the sweep's batch at "
                   "noise 0.2"),
    ),
))
