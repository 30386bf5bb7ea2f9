"""Exercises of notebook 07_critical_actions: CARL's selection of the most uncertain turns (07a),
IGPO's information-gain credit with a planted mistake (07b), and IGPO's agreement with the exact
advantage at a discount the notebook does not print (07c, a reading).

07a is graded against ``labkit.credit.entropy.carl``'s ``info["kept"]``, 07b against
``labkit.credit.information.igpo`` (normalize=False); ``reveal_solution("07a")`` and
``reveal_solution("07b")`` print the reference solutions in
labkit/course/solutions/ex07_critical_actions.py, ``reveal_solution("07c")`` the lab's own run.
"""
from __future__ import annotations

import functools
import math

import torch

from labkit.course.exercises.cases import rand, randint, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import ZERO_DISCOUNT, looks_like, nonzero_where_false
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts, outcome_rollouts, pad_turns, prefix_ids
from labkit.course.presets import toolworld_setup
from labkit.credit.entropy import carl
from labkit.credit.information import igpo
from labkit.envs.toolworld import success_prob
from labkit.scoring import pearson, rank_correlation, recall_at_k


def _reference(entropies, present, fraction):
    present = present.bool()
    H = torch.where(present, entropies.to(F64), 0.0)
    r = one_token_rollouts(torch.zeros(present.shape, dtype=F64), present, turn_ids=prefix_ids(present), entropies=H)
    kept = carl(r, top_fraction=fraction).info["kept"]
    return pad_turns(kept, present.shape, torch.bool)


def _cases(gen):
    cases = []
    for i in range(6):
        present = random_prefix_mask(gen, (2, 4), (3, 6), shortest=1, first_full=True)
        B, N = present.shape
        H = torch.round(2.0 * rand(gen, B, N), decimals=3)
        H = torch.where(present, H, 9.9)  # padding may hold anything: it must never be kept
        cases.append(Case(f"random #{i}", dict(entropies=H, present=present, fraction=[0.3, 0.5, 0.25][i % 3])))
    full = torch.ones(2, 4, dtype=torch.bool)
    cases += [
        # the edges, graded once the cases above pass
        Case("an episode with no turn", dict(entropies=torch.tensor([[0.4, 0.9, 0.1], [0.0, 0.0, 0.0]], dtype=F64),
                                             present=torch.tensor([[True, True, True], [False, False, False]]), fraction=0.5),
             frozenset({"empty_row"})),
        Case("one turn in the batch", dict(entropies=torch.tensor([[1.2]], dtype=F64), present=torch.tensor([[True]]), fraction=0.3),
             frozenset({"one_turn"})),
        Case("all entropies equal", dict(entropies=torch.full((2, 4), 0.7, dtype=F64), present=full, fraction=0.3),
             frozenset({"ties"})),
        Case("equal entropies across rows", dict(entropies=torch.tensor([[0.1, 1.5, 0.2], [1.5, 0.3, 1.5]], dtype=F64),
                                                 present=torch.ones(2, 3, dtype=torch.bool), fraction=0.34), frozenset({"ties"})),
        Case("fraction = 1", dict(entropies=torch.tensor([[0.5, 0.1, 0.0], [0.3, 9.9, 9.9]], dtype=F64),
                                  present=torch.tensor([[True, True, True], [True, False, False]]), fraction=1.0),
             frozenset({"fraction1"})),
    ]
    return cases


def _variant(how):
    def variant(entropies, present, fraction):
        present = present.bool()
        H = entropies.to(F64)
        out = torch.zeros_like(present)
        if how == "per_row":
            for b in range(len(H)):
                n = int(present[b].sum())
                if n:
                    k = max(1, math.ceil(fraction * n - 1e-9))
                    idx = torch.sort(-torch.where(present[b], H[b], -math.inf), stable=True).indices[:k]
                    out[b, idx] = True
            return out
        flat_p = present.flatten()
        n = int(flat_p.sum())
        k = {"floor": max(int(fraction * n), 0), "lowest": max(1, math.ceil(fraction * n - 1e-9)),
             "all_entries": max(1, math.ceil(fraction * flat_p.numel() - 1e-9))}[how]
        score = torch.where(flat_p, -H.flatten() if how == "lowest" else H.flatten(), -math.inf)
        idx = torch.sort(-score, stable=True).indices[:min(k, n)]
        flat = torch.zeros_like(flat_p)
        flat[idx] = True
        return flat.view(present.shape)
    return variant


def _count_broken(case, got, want):
    return int(got.sum()) != int(want.sum())


def _ties_broken(case, got, want):
    H = case.args["entropies"].to(F64)
    return (int(got.sum()) == int(want.sum()) and not bool(torch.equal(got, want))
            and torch.equal(torch.sort(H[got]).values, torch.sort(H[want]).values))


EXERCISE = register(Exercise(
    notebook="07", name="carl_select", title="CARL's critical-turn selection",
    signature="carl_select(entropies, present, fraction) -> bool tensor (B, N)",
    prompt=(
        "Write CARL's selection of critical turns (Shen et al. 2025, arXiv 2512.04949): only the turns where\n"
        "the policy was most uncertain get a gradient.\n"
        "  entropies: (B, N) float tensor, the policy's entropy at each turn\n"
        "  present: (B, N) bool, which turns were played (others are padding: never keep them)\n"
        "  fraction: float in (0, 1]\n"
        "Return a (B, N) bool tensor keeping the ceil(fraction * n) present turns with the LARGEST entropy,\n"
        "n = number of present turns in the whole batch (one cut-off for the batch). Ties: keep the\n"
        "earlier turn in row-major order (row by row, left to right)."),
    cases=_cases, reference=_reference, output="bool",
    rules=(
        Rule("a turn that is not present (padding) must never be kept", nonzero_where_false("present")),
        Rule("rank all turns of the batch together (one cut-off for the batch), not row by row",
             looks_like(_variant("per_row")), every=True),
        Rule("keep ceil(fraction * n) turns (at least one), not int(fraction * n)", looks_like(_variant("floor")), every=True),
        Rule("n counts the present turns only, not every entry of the padded table", looks_like(_variant("all_entries")), every=True),
        Rule("CARL keeps the most uncertain turns: the LARGEST entropy, not the smallest", looks_like(_variant("lowest")), every=True),
        Rule("keep exactly ceil(fraction * n) of the n present turns", _count_broken),
        Rule("break ties by position: among equal entropies keep the earlier turns (row-major order)", _ties_broken),
    ),
))


# --------------------------------------------------------------------------- 07b: find the bug in IGPO's credit
def _igpo_reference(p, outcome, gamma):
    N = len(p) - 1
    r = outcome_rollouts(N, outcome, turn_ids=torch.arange(N)[None])
    return igpo(r, success_prob=p.to(F64)[None], gamma=gamma, normalize=False).token[0]


def _igpo_cases(gen):
    cases = []
    for i in range(6):
        N = randint(gen, 2, 6)
        outcome = float(rand(gen, 1) < 0.6)
        p = torch.round(0.05 + 0.9 * rand(gen, N + 1), decimals=2)
        p[-1] = outcome  # after the last turn the chance of success is the outcome itself
        cases.append(Case(f"random #{i}", dict(p=p, outcome=outcome, gamma=[0.9, 1.0, 0.5][i % 3])))
    cases += [
        Case("the chance of success rises turn by turn", dict(p=torch.tensor([0.2, 0.3, 0.6, 0.8, 1.0], dtype=F64),
                                                               outcome=1.0, gamma=0.9)),
        # the edges, graded once the cases above pass
        Case("one turn", dict(p=torch.tensor([0.4, 1.0], dtype=F64), outcome=1.0, gamma=0.9), frozenset({"one_turn"})),
        Case("gamma = 0", dict(p=torch.tensor([0.3, 0.5, 0.2, 0.0], dtype=F64), outcome=0.0, gamma=0.0),
             frozenset({"gamma0"})),
    ]
    return cases


def _igpo_variant(how):
    def variant(p, outcome, gamma):
        p = p.to(F64)
        n = len(p) - 1
        gain = p[1:] - p[:-1]
        if how == "reversed":
            gain = -gain
        elif how == "shifted":  # turn k paid p[k] - p[k - 1], the turn before's gain (p[-1] wraps round)
            gain = torch.stack([p[k] - p[k - 1] for k in range(n)])
        r = gain.clone()
        if how == "ig_plus_outcome":
            r[-1] = gain[-1] + outcome
        elif how != "ig_on_last":
            r[-1] = outcome
        g = 1.0 if how == "no_discount" else gamma
        out = torch.zeros(n, dtype=F64)
        running = 0.0
        for k in (range(n) if how == "forward" else reversed(range(n))):
            running = r[k] + g * running
            out[k] = running
        return out
    return variant


def buggy_igpo_credit(p, outcome, gamma):
    """IGPO's credit of each turn of one trajectory, before any group normalisation.

    p: (N + 1,) float tensor, the chance of success: p[0] before the first turn, p[k + 1] after turn k.
    outcome: the trajectory's 0/1 outcome. gamma: the discount over turns.
    Returns the (N,) credits.
    """
    n = len(p) - 1
    rewards = torch.zeros(n, dtype=torch.float64)
    for k in range(n - 1):
        rewards[k] = p[k] - p[k + 1]   # information gain of turn k
    rewards[n - 1] = outcome           # the last turn is paid the outcome
    credit = torch.zeros(n, dtype=torch.float64)
    running = 0.0
    for k in reversed(range(n)):       # discounted sum of the rewards from turn k on
        running = rewards[k] + gamma * running
        credit[k] = running
    return credit


IGPO_EXERCISE = register(Exercise(
    notebook="07", letter="b", kind="debug", path="deep dive", buggy=buggy_igpo_credit,
    name="igpo_credit", title="IGPO's information gain",
    signature="igpo_credit(p, outcome, gamma) -> tensor (N,)",
    prompt=(
        "Find the bug. The function below should compute IGPO's credit (Wang et al. 2025, arXiv 2510.14967) for\n"
        "the N turns of one trajectory, without the group normalisation:\n"
        "  p: (N + 1,) float tensor, the chance of success: p[0] before the first turn, p[k + 1] after turn k\n"
        "  outcome: float, the trajectory's outcome (0 or 1)\n"
        "  gamma: float in [0, 1], the discount over turns\n"
        "Turn k's reward is its information gain r_k = p[k + 1] - p[k] (how much the turn raised the chance of\n"
        "success); the last turn's reward is the outcome instead. Turn k's credit is the discounted sum of the\n"
        "rewards from turn k on: A_k = sum_(j >= k) gamma^(j - k) r_j.\n"
        "It has exactly one planted mistake, of the kind people make. Fix it and check."),
    cases=_igpo_cases, reference=_igpo_reference,
    sign_note="a turn that raised the chance of success gets a positive reward, and the outcome counts with its sign",
    rules=(
        Rule("the information gain is the chance AFTER the turn minus the chance before it, p[k + 1] - p[k]: a "
             "turn that raised the chance of success earns a positive reward, not a negative one",
             looks_like(_igpo_variant("reversed")), every=True),
        Rule("turn k's gain uses the chance after turn k: p[k + 1] - p[k], not p[k] - p[k - 1] (the turn "
             "before's gain; for k = 0, p[-1] wraps round to the end)", looks_like(_igpo_variant("shifted")), every=True),
        Rule("the last turn's reward is the outcome itself, not its information gain",
             looks_like(_igpo_variant("ig_on_last")), every=True),
        Rule("the last turn's reward is the outcome alone: its information gain is not added to it",
             looks_like(_igpo_variant("ig_plus_outcome")), every=True),
        Rule("sum the rewards from turn k ON (the later turns), not those before it",
             looks_like(_igpo_variant("forward")), every=True),
        Rule("discount the later rewards: turn j counts gamma ** (j - k) in turn k's credit",
             looks_like(_igpo_variant("no_discount")), every=True),
        ZERO_DISCOUNT,
        NOT_FINITE,
    ),
))


# --------------------------------------------------------------------------- 07c: a reading of IGPO's discount
def igpo_pearson_at_gamma_08():
    """IGPO's Pearson correlation with the exact advantage at gamma = 0.8, over every turn of
    notebook 07's batch (32 tasks x 8 episodes, seed 1) from the warmed-up policy, with the
    exact DP success probability as the stand-in p_k. Returns a float."""
    env, policy = toolworld_setup(5, max_turns=30, warmup_iterations=20, seed=0)   # the notebook's set-up
    truth = env.truth(policy)
    ro = env.sample(policy, 32, group_size=8, seed=1)
    p = success_prob(env, truth, ro)                      # stand-in: p_k from the DP
    credit = igpo(ro, success_prob=p, gamma=0.8).token
    exact = truth.advantage(ro)
    return pearson(credit[ro.mask], exact[ro.mask], constant=0.0)


@functools.lru_cache(maxsize=1)
def _igpo_readings() -> dict:
    """The numbers a reader might take instead: Pearson at the neighbouring discounts, and the
    other columns at 0.8 (computed once, on the first wrong reading that needs them)."""
    env, policy = toolworld_setup(5, max_turns=30, warmup_iterations=20, seed=0)
    truth = env.truth(policy)
    ro = env.sample(policy, 32, group_size=8, seed=1)
    p = success_prob(env, truth, ro)
    exact, m = truth.advantage(ro), ro.mask
    out = {}
    for g in (0.7, 0.8, 0.9):
        c = igpo(ro, success_prob=p, gamma=g).token
        out[g] = {"pearson": pearson(c[m], exact[m], constant=0.0), "spearman": rank_correlation(c, exact, m),
                  "decisive_recall": recall_at_k(c, m, ro.truth["decisive"] & m)}
    return out


IGPO_READING = register(Reading(
    notebook="07", letter="c", name="igpo_pearson", title="IGPO's agreement at γ = 0.8",
    prompt=(
        "Read IGPO's Pearson correlation with the exact advantage at the discount gamma = 0.8, over all turns of\n"
        "this notebook's batch (the warmed-up policy's 32 tasks x 8 episodes, the exact DP success probability as\n"
        "the stand-in p_k): the IGPO slider at 0.8 shows it, or run lesson.igpo_gamma_sweep at gammas=(0.8,).\n"
        "Enter it within 0.01."),
    measure=igpo_pearson_at_gamma_08, tolerance=0.01,
    hint="read the Pearson column of IGPO at gamma = 0.8 on this notebook's batch (ro, truth, p)",
    misreadings=(
        Misreading(lambda: _igpo_readings()[0.8]["spearman"],
                   "that is the Spearman (rank) correlation: the exercise asks for Pearson"),
        Misreading(lambda: _igpo_readings()[0.8]["decisive_recall"],
                   "that is the decisive-turn recall: the exercise asks for the Pearson correlation"),
        Misreading(lambda: _igpo_readings()[0.7]["pearson"], "that is the correlation at gamma = 0.7: set gamma to 0.8"),
        Misreading(lambda: _igpo_readings()[0.9]["pearson"], "that is the correlation at gamma = 0.9: set gamma to 0.8"),
    ),
))
