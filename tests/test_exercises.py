"""The course's autograded exercises, tested both ways: every reference solution passes its check,
and typical wrong answers (written the way a reader would get them wrong) each fail with the hint
that names their mistake. Also: a reader's exception is reported with its case, not raised, and
check's own bad arguments raise errors that name the argument."""
from __future__ import annotations

import inspect
import math
import re

import pytest
import torch

from labkit.course import solutions
from labkit.course.exercises import EXERCISES, CheckResult, Exercise, check, get_exercise, list_exercises
from labkit.course.solutions import SOLUTIONS


# --------------------------------------------------------------------------- wrong answers, per notebook
# 00 reward-to-go
def rtg_forward(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in range(rewards.shape[1]):          # walks forwards: the past, not the future
            if mask[b, t]:
                running = rewards[b, t] + gamma * running
                G[b, t] = running
    return G


def rtg_tool_output_discounts(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            running = rewards[b, t] + gamma * running   # tool output counted as a step
            if mask[b, t]:
                G[b, t] = running
    return G


def rtg_credit_everywhere(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            if mask[b, t]:
                running = rewards[b, t] + gamma * running
            G[b, t] = running                       # tool output and padding get credit too
    return G


def rtg_leaves_out_own_reward(rewards, mask, gamma):
    G = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            if mask[b, t]:
                G[b, t] = gamma * running
                running = rewards[b, t] + gamma * running
    return G


# 11 trajectories with no GRPO gradient
def nograd_whole_batch(scores, group_ids):
    return torch.full(scores.shape, bool(scores.max() == scores.min()))


def nograd_singletons_marked(scores, group_ids):
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = bool(s.max() == s.min())     # a group of one is "all equal" too
    return out


def nograd_std_threshold(scores, group_ids):
    out = torch.zeros(len(scores), dtype=torch.bool)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        out[group_ids == g] = len(s) > 1 and bool(s.std() < 0.5)
    return out


def nograd_assumes_sorted(scores, group_ids):
    # takes groups as consecutive runs of equal ids: a shuffled dump breaks it
    out = torch.zeros(len(scores), dtype=torch.bool)
    start = 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or group_ids[i] != group_ids[start]:
            s = scores[start:i]
            out[start:i] = len(s) >= 2 and bool(s.max() == s.min())
            start = i
    return out


# 01 GRPO advantage
def grpo_batch_mean(scores, group_ids):
    return (scores - scores.mean()) / (scores.std() + 1e-6)


def grpo_biased_std(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s / 1.000001 if len(s) == 1 else (s - s.mean()) / (s.std(unbiased=False) + 1e-6)
    return adv


def grpo_no_singleton_rule(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = (s - s.mean()) / (s.std() + 1e-6)  # std of one value: NaN
    return adv


def grpo_singleton_zero(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        if len(s) > 1:
            adv[group_ids == g] = (s - s.mean()) / (s.std() + 1e-6)
    return adv


def grpo_no_eps(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s / 1.000001 if len(s) == 1 else (s - s.mean()) / s.std()
    return adv


def grpo_no_std(scores, group_ids):
    adv = torch.zeros_like(scores)
    for g in group_ids.unique():
        s = scores[group_ids == g]
        adv[group_ids == g] = s if len(s) == 1 else s - s.mean()
    return adv


# 02 GAE
def gae_bootstrap_past_end(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue
            nxt = t + 1
            while nxt < T and not mask[b, nxt]:
                nxt += 1
            v_next = values[b, nxt] if nxt < T else values[b, t]  # "the value stays after the end"
            delta = rewards[b, t] + gamma * v_next - values[b, t]
            running = delta + gamma * lam * running
            adv[b, t] = running
    return adv


def gae_forgot_lambda(rewards, values, mask, gamma, lam):
    return _gae_with(rewards, values, mask, gamma, gamma)  # A_t = delta_t + gamma A_{t'}


def _gae_with(rewards, values, mask, gamma, discount):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        nv, na = 0.0, 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                adv[b, t] = rewards[b, t] + gamma * nv - values[b, t] + discount * na
                nv, na = values[b, t], adv[b, t]
    return adv


def gae_tool_tokens_as_steps(rewards, values, mask, gamma, lam):
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        if not mask[b].any():
            continue
        last = int(mask[b].nonzero().max())
        running, v_next = 0.0, 0.0
        for t in reversed(range(last + 1)):  # stops at the end, but walks through tool output as steps
            delta = rewards[b, t] + gamma * v_next - values[b, t]
            running = delta + gamma * lam * running
            adv[b, t] = running
            v_next = values[b, t]
    return adv * mask


def gae_credit_off_mask(rewards, values, mask, gamma, lam):
    # verl-style: the running advantage is carried through tool output AND written there
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        nv, na = 0.0, 0.0
        for t in reversed(range(T)):
            if mask[b, t]:
                adv[b, t] = rewards[b, t] + gamma * nv - values[b, t] + gamma * lam * na
                nv, na = values[b, t], adv[b, t]
            else:
                adv[b, t] = na
    return adv


# 03 VinePPO
def vine_sum(vine_outcomes, rewards):
    V = vine_outcomes.sum(1)
    return rewards + torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_flipped(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + V - torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])


def vine_no_reward(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_bootstrap_past_end(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + torch.cat([V[1:], V[-1:]]) - V  # "after the last step the value stays"


# 04 PURE
def pure_sum_form(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    r[-1] += outcome
    return r.flip(0).cumsum(0).flip(0)


def pure_soft_max(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    shaped = torch.softmax(r / temperature, 0) * r
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


def pure_p_not_r(step_scores, outcome, temperature):
    p = step_scores.clone()
    shaped = torch.softmax(-p / temperature, 0) * p
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


def pure_forward_cumsum(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    shaped = torch.softmax(-r / temperature, 0) * r
    shaped[-1] += outcome
    return shaped.cumsum(0)


def pure_naive_exp(step_scores, outcome, temperature):
    r = 2 * step_scores - 1
    e = torch.exp(-r / temperature)
    shaped = e / e.sum() * r
    shaped[-1] += outcome
    return shaped.flip(0).cumsum(0).flip(0)


# 05 turn returns
def turns_discounted_per_token(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    G = torch.zeros(len(rewards), dtype=torch.float64)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if turn_ids[t] >= 0:
            running = rewards[t] + gamma * running
            G[t] = running
    return torch.stack([G[turn_ids == k][0] for k in range(n)])  # the turn's first token


def turns_last_reward_only(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k][-1] for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in reversed(range(n)):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_forward(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in range(n):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_absolute_discount(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    disc = r * gamma ** torch.arange(n, dtype=torch.float64)
    return disc.flip(0).cumsum(0).flip(0)


# 06 GiGPO step term
def _turn_returns(turn_rewards, present, gamma):
    R = torch.zeros_like(turn_rewards, dtype=torch.float64)
    for b in range(len(R)):
        running = 0.0
        for k in reversed(range(R.shape[1])):
            if present[b, k]:
                running = turn_rewards[b, k] + gamma * running
                R[b, k] = running
    return R


def _anchor_centre(R, present, anchors, singleton_raw=False, std=False, pool_all=False):
    out = torch.zeros_like(R)
    keys = {int(a) for a in anchors[present]}
    for key in keys:
        sel = present & ((anchors == key) | pool_all)
        vals = R[present & (anchors == key)]
        pool = R[sel]
        if len(vals) == 1 and not singleton_raw:
            continue
        centred = R - pool.mean() if len(vals) > 1 or not singleton_raw else R
        if std:
            centred = centred / (vals.std() + 1e-6)
        out = torch.where(present & (anchors == key), centred, out)
    return out


def gigpo_singleton_raw(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, gamma), present, anchors, singleton_raw=True)


def gigpo_batch_mean(turn_rewards, present, anchors, gamma):
    R = _turn_returns(turn_rewards, present, gamma)
    return torch.where(present, R - R[present].mean(), 0.0)


def gigpo_reward_not_return(turn_rewards, present, anchors, gamma):
    return _anchor_centre(torch.where(present, turn_rewards, 0.0).double(), present, anchors)


def gigpo_undiscounted(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, 1.0), present, anchors)


def gigpo_std_normalised(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, gamma), present, anchors, std=True)


# 07 CARL
def carl_floor(entropies, present, fraction):
    n = int(present.sum())
    k = int(fraction * n)
    order = torch.argsort(torch.where(present, entropies, -1.0).flatten(), descending=True, stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_lowest(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    order = torch.argsort(torch.where(present, entropies, math.inf).flatten(), stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_keeps_padding(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    order = torch.argsort(entropies.flatten(), descending=True, stable=True)  # padding not masked out
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.view(present.shape)


def carl_per_row(entropies, present, fraction):
    keep = torch.zeros_like(present)
    for b in range(len(present)):
        n = int(present[b].sum())
        if n == 0:
            continue
        k = max(1, math.ceil(fraction * n - 1e-9))
        order = torch.argsort(torch.where(present[b], entropies[b], -1.0), descending=True, stable=True)
        keep[b, order[:k]] = True
    return keep


def carl_late_ties(entropies, present, fraction):
    k = max(1, math.ceil(fraction * int(present.sum()) - 1e-9))
    flat = torch.where(present, entropies, -1.0).flatten().flip(0)  # ties go to the LATER turn
    order = torch.argsort(flat, descending=True, stable=True)
    keep = torch.zeros(present.numel(), dtype=torch.bool)
    keep[order[:k]] = True
    return keep.flip(0).view(present.shape)


# 08 HCA
def hca_inverted(pi, h, z):
    return (1 - h / pi) * z


def hca_forgot_z(pi, h, z):
    return torch.where(h > 0, 1 - pi / h.clamp(min=1e-12), torch.zeros_like(h))


def hca_sign_flipped(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else (pi / h - 1) * z


def hca_nan_on_failure(pi, h, z):
    return (1 - pi / h) * z


def hca_log_ratio(pi, h, z):
    return torch.zeros_like(pi) if z == 0 else torch.log(h / pi) * z


# 09 Shapley
N3 = frozenset({0, 1, 2})


def shapley_leave_one_out(v):
    return [v[N3] - v[N3 - {i}] for i in range(3)]


def shapley_unweighted(v):
    out = []
    for i in range(3):
        others = [S for S in v if i not in S]
        out.append(sum(v[S | {i}] - v[S] for S in others) / len(others))
    return out


def shapley_equal_split(v):
    return [(v[N3] - v[frozenset()]) / 3] * 3


def shapley_forgot_empty(v):
    # marginals from the empty coalition taken as v({i}) alone, as if v(empty) were 0
    w = {0: 1 / 3, 1: 1 / 6, 2: 1 / 3}
    out = []
    for i in range(3):
        total = 0.0
        for S in v:
            if i not in S:
                before = 0.0 if not S else v[S]
                total += w[len(S)] * (v[S | {i}] - before)
        out.append(total)
    return out


# 10 rank correlation
def rank_pearson(credit, truth, mask):
    a, b = credit[mask], truth[mask]
    if a.std() == 0 or b.std() == 0 or len(a) < 2:
        return 0.0
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def rank_plain_ranks(credit, truth, mask):
    a = credit[mask].argsort(stable=True).argsort().double()
    b = truth[mask].argsort(stable=True).argsort().double()
    a, b = a - a.mean(), b - b.mean()
    d = a.norm() * b.norm()
    return 0.0 if d == 0 else float(a @ b / d)


def rank_ignores_mask(credit, truth, mask):
    return solutions.rank_correlation(credit, truth, torch.ones_like(mask))


def rank_nan_on_constant(credit, truth, mask):
    def ranks(x):
        return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()
    a, b = ranks(credit[mask]), ranks(truth[mask])
    a, b = a - a.mean(), b - b.mean()
    return float(a @ b / (a.norm() * b.norm()))


WRONG = [
    ("00", rtg_forward, "BEFORE each token"),
    ("00", rtg_tool_output_discounts, "tool output is not a step"),
    ("00", rtg_credit_everywhere, "credit off the mask must be 0"),
    ("00", rtg_leaves_out_own_reward, "own reward"),
    ("01", grpo_batch_mean, "do not sum to zero within a group"),
    ("01", grpo_biased_std, "biased std"),
    ("01", grpo_no_singleton_rule, "group-of-one rule"),
    ("01", grpo_singleton_zero, "group-of-one rule"),
    ("01", grpo_no_eps, "add eps outside the std"),
    ("01", grpo_no_std, "Dr. GRPO"),
    ("02", gae_bootstrap_past_end, "bootstrapped past the end"),
    ("02", gae_forgot_lambda, "gamma * lam"),
    ("02", gae_tool_tokens_as_steps, "tool output is not a step"),
    ("02", gae_credit_off_mask, "credit off the mask must be 0"),
    ("03", vine_sum, "MEAN outcome"),
    ("03", vine_flipped, "after minus before"),
    ("03", vine_no_reward, "add the reward received inside the step"),
    ("03", vine_bootstrap_past_end, "bootstrapped past the end"),
    ("04", pure_sum_form, "sum form"),
    ("04", pure_soft_max, "WORST step"),
    ("04", pure_p_not_r, "2p - 1"),
    ("04", pure_forward_cumsum, "reverse cumulative sum"),
    ("04", pure_naive_exp, "torch.softmax"),
    ("05", turns_discounted_per_token, "discounted per token, not per turn"),
    ("05", turns_last_reward_only, "sum of every reward inside it"),
    ("05", turns_forward, "to the END"),
    ("05", turns_absolute_discount, "gamma^(j - k)"),
    ("06", gigpo_singleton_raw, "anchor group of one"),
    ("06", gigpo_batch_mean, "sum to zero within an anchor group"),
    ("06", gigpo_reward_not_return, "not the turn's own reward"),
    ("06", gigpo_undiscounted, "discount the returns by gamma"),
    ("06", gigpo_std_normalised, "do not divide by the std"),
    ("07", carl_floor, "ceil(fraction * n)"),
    ("07", carl_lowest, "LARGEST entropy"),
    ("07", carl_keeps_padding, "never be kept"),
    ("07", carl_per_row, "not row by row"),
    ("07", carl_late_ties, "break ties by position"),
    ("08", hca_inverted, "not (1 - h / pi)"),
    ("08", hca_forgot_z, "multiply by the outcome Z"),
    ("08", hca_sign_flipped, "POSITIVE credit"),
    ("08", hca_nan_on_failure, "don't divide by h when Z = 0"),
    ("08", hca_log_ratio, "not a log-ratio"),
    ("09", shapley_leave_one_out, "leave-one-out"),
    ("09", shapley_unweighted, "not equally"),
    ("09", shapley_equal_split, "null player"),
    ("09", shapley_forgot_empty, "efficiency"),
    ("10", rank_pearson, "rank the values first"),
    ("10", rank_plain_ranks, "average rank"),
    ("10", rank_ignores_mask, "where mask is True"),
    ("10", rank_nan_on_constant, "return 0.0, not NaN"),
    ("11", nograd_whole_batch, "its own GROUP"),
    ("11", nograd_singletons_marked, "a group of one is not marked"),
    ("11", nograd_std_threshold, "exact equality"),
    ("11", nograd_assumes_sorted, "differs from the lab's"),
]


# --------------------------------------------------------------------------- the tests
def test_there_is_one_exercise_per_notebook_00_to_11():
    assert sorted(EXERCISES) == [f"{i:02d}" for i in range(0, 12)]
    assert sorted(SOLUTIONS) == sorted(EXERCISES)
    assert len(list_exercises()) == 12


@pytest.mark.parametrize("notebook", sorted(EXERCISES))
def test_every_exercise_states_what_to_write(notebook):
    ex = EXERCISES[notebook]
    assert ex.name in ex.signature and "->" in ex.signature
    assert "arXiv" in ex.prompt or "1953" in ex.prompt
    assert ex.signature in str(ex)
    # at least one degenerate case besides the random draws, and the cases are reproducible
    cases = ex.cases(torch.Generator().manual_seed(0))
    assert any(not c.name.startswith("random") for c in cases)
    again = ex.cases(torch.Generator().manual_seed(0))
    assert [c.name for c in cases] == [c.name for c in again]


@pytest.mark.parametrize("notebook", sorted(EXERCISES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_solution_passes(notebook, seed, capsys):
    result = check(SOLUTIONS[notebook], notebook, seed=seed)
    assert result.passed, str(result)
    assert result.hint is None and bool(result)
    out = capsys.readouterr().out
    assert out.startswith("\u2713") and f"all {result.n_cases} cases pass" in out


def test_every_exercise_has_at_least_three_typical_wrong_answers():
    counts = {nb: sum(1 for n, _, _ in WRONG if n == nb) for nb in EXERCISES}
    assert min(counts.values()) >= 3, counts


@pytest.mark.parametrize("notebook,fn,hint", WRONG, ids=[f"{n}-{f.__name__}" for n, f, _ in WRONG])
def test_a_typical_wrong_answer_fails_with_its_hint(notebook, fn, hint, capsys):
    result = check(fn, notebook)
    assert not result.passed
    assert hint in result.hint, f"{fn.__name__}: got hint {result.hint!r}"
    # the failing case is shown, small, with both answers
    out = capsys.readouterr().out
    assert out.startswith("\u2717") and result.hint in out and f"case '{result.case.name}'" in out
    assert len(out) < 1200


@pytest.mark.parametrize("notebook,fn,hint", WRONG[::5], ids=[f"{n}-{f.__name__}" for n, f, _ in WRONG[::5]])
def test_the_hint_does_not_depend_on_the_seed(notebook, fn, hint):
    for seed in (1, 2):
        result = check(fn, notebook, seed=seed, verbose=False)
        assert not result.passed and hint in result.hint, (seed, result.hint)


def test_a_function_that_raises_is_reported_with_its_case():
    def broken(scores, group_ids):
        if len(scores) == 1:
            raise IndexError("no neighbour")
        return solutions.grpo_advantage(scores, group_ids)

    result = check(broken, "01", verbose=False)
    assert not result.passed and isinstance(result.error, IndexError)
    assert "raised IndexError: no neighbour" in result.hint
    assert len(result.case.args["scores"]) == 1


def test_a_wrong_return_type_or_shape_is_named():
    assert "shape (" in check(lambda scores, group_ids: scores[:1], "01", verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: "no idea", "01", verbose=False).hint
    assert "should return a tensor" in check(lambda scores, group_ids: None, "01", verbose=False).hint


def test_changing_an_input_in_place_is_reported():
    def in_place(scores, group_ids):
        out = solutions.grpo_advantage(scores, group_ids)
        scores.zero_()
        return out

    assert "in place" in check(in_place, "01", verbose=False).hint


def test_a_list_answer_is_accepted():
    assert check(lambda v: solutions.shapley3(v).tolist(), "09", verbose=False).passed
    assert check(lambda scores, group_ids: solutions.grpo_advantage(scores, group_ids).tolist(), 1, verbose=False)


def test_the_exercise_can_be_named_several_ways():
    ex = EXERCISES["02"]
    assert get_exercise(2) is get_exercise("02") is get_exercise("2") is get_exercise("gae") is get_exercise(ex) is ex
    assert ex.check(solutions.gae, verbose=False).passed


@pytest.mark.parametrize("kwargs,name,error", [
    (dict(fn=42, exercise="01"), "fn", TypeError),
    (dict(fn=solutions.gae, exercise="12"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise="nope"), "exercise", ValueError),
    (dict(fn=solutions.gae, exercise=2.0), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise=True), "exercise", TypeError),
    (dict(fn=solutions.gae, exercise="02", seed=-1), "seed", ValueError),
    (dict(fn=solutions.gae, exercise="02", seed="a"), "seed", TypeError),
    (dict(fn=solutions.gae, exercise="02", verbose="yes"), "verbose", TypeError),
])
def test_bad_arguments_to_check_name_the_argument(kwargs, name, error):
    with pytest.raises(error, match=f"^{name}:"):
        check(**kwargs)


def test_the_result_is_a_small_object():
    result = check(grpo_biased_std, "01", verbose=False)
    assert isinstance(result, CheckResult) and isinstance(get_exercise(1), Exercise)
    assert result.got.shape == result.want.shape
    assert str(result) == repr(result) and str(result).count("\n") == 3


def test_parameter_names_are_free_and_a_wrong_arity_shows_the_signature():
    assert check(lambda s, g: solutions.grpo_advantage(s, g), "01", verbose=False).passed
    result = check(lambda scores: scores, "01", verbose=False)
    assert "raised TypeError" in result.hint and "grpo_advantage(scores, group_ids)" in result.hint


@pytest.mark.parametrize("notebook", sorted(SOLUTIONS))
def test_solution_docstrings_follow_the_house_order(notebook):
    # the layout tests/test_docstrings.py asks of every registered estimator
    sections = ("Formula:", "Defaults:", "Degenerate input:", "Deviations from the reference:", "Cost:")
    citation = re.compile(r"arXiv[: ]?\d{4}\.\d{4,5}|\b(19|20)\d{2}\b")
    doc = inspect.getdoc(SOLUTIONS[notebook])
    lines = [line.strip() for line in doc.splitlines()]
    positions = [lines.index(h) for h in sections]
    assert positions == sorted(positions) and all(doc.count(h) == 1 for h in sections)
    assert citation.search(doc.split("\n\n")[0]) and doc.startswith(notebook)


def test_a_notebook_cell_shows_the_result_once(capsys):
    result = check(grpo_biased_std, "01")
    printed = capsys.readouterr().out
    result._ipython_display_()  # what IPython calls for a cell's last value
    assert printed and capsys.readouterr().out == ""
    quiet = check(grpo_biased_std, "01", verbose=False)
    quiet._ipython_display_()
    assert capsys.readouterr().out == printed


def test_float32_answers_are_graded_like_float64_ones():
    def f32(fn):
        return lambda *args: fn(*[a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                                  for a in args]).float()

    assert check(f32(solutions.grpo_advantage), "01", verbose=False).passed
    assert check(f32(solutions.gae), "02", verbose=False).passed
    assert "biased std" in check(f32(grpo_biased_std), "01", verbose=False).hint
    assert "sum form" in check(f32(pure_sum_form), "04", verbose=False).hint


@pytest.mark.parametrize("notebook", sorted(EXERCISES))
def test_the_template_runs_and_fails_the_check(notebook):
    ex = EXERCISES[notebook]
    space: dict = {}
    exec(ex.template, space)
    result = check(space[ex.name], notebook, verbose=False)
    assert not result.passed and "should return a tensor" in result.hint


def test_the_nan_remark_is_made_only_for_a_nan_answer():
    assert "NaN" in check(grpo_no_singleton_rule, "01", verbose=False).hint
    assert "NaN" not in check(grpo_singleton_zero, "01", verbose=False).hint


def test_every_notebook_from_00_to_11_ends_with_its_exercise():
    # the task, the reader's empty function and check(); the solution is named, not on the page
    import json
    from pathlib import Path

    from labkit.course.exercises import EXERCISES
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    for key, ex in EXERCISES.items():
        path = next(notebooks.glob(f"{key}_*.ipynb"))
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert f"get_exercise({int(key)})" in code[-2], path.name
        assert f"def {ex.name}(" in code[-1] and code[-1].rstrip().endswith(f"check({ex.name}, {int(key)})"), path.name
        assert f"labkit.course.solutions.{ex.name}" in text, path.name
        body = code[-1].split(f"def {ex.name}(")[1].split("check(")[0]
        assert not re.search(r"^\s+return\b", body, re.M), f"{path.name}: the solution is on the page"


def test_a_function_that_never_returns_is_stopped_with_a_hint():
    def spins(rewards, mask, gamma):
        t = 0
        while t < rewards.shape[1]:   # the index never moves
            pass
    result = check(spins, "00", verbose=False, timeout=0.2)
    assert not result.passed and "did not return within 0.2 s" in result.hint
    # a bare `except Exception` in the reader's code cannot swallow the stop
    def swallows(rewards, mask, gamma):
        while True:
            try:
                pass
            except Exception:
                pass
    assert "did not return" in check(swallows, "00", verbose=False, timeout=0.2).hint
    # and the limit is off again afterwards: the solution passes with no alarm pending
    assert check(solutions.reward_to_go, "00", verbose=False, timeout=0.2).passed


@pytest.mark.parametrize("timeout", [0, -1, "10"])
def test_a_bad_timeout_names_the_argument(timeout):
    with pytest.raises((TypeError, ValueError), match="^timeout"):
        check(solutions.reward_to_go, "00", verbose=False, timeout=timeout)
