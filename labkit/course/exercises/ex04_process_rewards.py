"""Exercises 04a-04c (notebook 04_process_rewards): PURE's min-form returns from a process reward
model (04a), SPO's segment credit with a planted mistake to find (04b), and SPO's hit rate when it
cuts at almost every uncertain token (04c, a reading).

04a is graded against ``labkit.credit.process.pure`` (its returns, before the RLOO baseline), 04b
against ``labkit.credit.mc.spo``; ``reveal_solution("04a")`` and ``reveal_solution("04b")`` print
the reference solutions in labkit/course/solutions/ex04_process_rewards.py. 04c is graded against
the lab's own run, ``measure_spo_hit_rate`` below.
"""
from __future__ import annotations

import functools

import torch

from labkit.core.credit import Cost
from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import looks_like, nonzero_where_false, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts, outcome_rollouts
from labkit.credit import mc, process


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


# --------------------------------------------------------------------------- 04b: find the bug in SPO's segment credit
def _spo_reference(token_probs, mask, values, outcome, threshold, interval):
    mask = mask.bool()
    rewards = torch.zeros(len(mask), dtype=F64)
    rewards[int(mask.nonzero().max())] = outcome
    logprobs = torch.where(mask, token_probs.to(F64).clamp(min=1e-12).log(), 0.0)
    ro = one_token_rollouts(rewards[None], mask[None], logprobs=logprobs[None])

    def value_fn(rollouts, cuts, k):  # the Monte Carlo values, already sampled: the case's ``values``
        return torch.where(cuts, values.to(F64)[None], 0.0), Cost()
    return mc.spo(ro, value_fn=value_fn, k=1, threshold=threshold, interval=interval).token[0]


def _spo_row(gen, threshold, min_low=1):
    """A padded response of 3 to 8 tokens: confident tokens (p >= 0.91) and uncertain ones (p <=
    0.65), probability 0 on the 0 to 3 padded positions, values everywhere (padding included:
    what a batched value sampler leaves there is not the response's)."""
    while True:
        n, pad = randint(gen, 3, 8), randint(gen, 0, 3)
        unsure = rand(gen, n) < 0.4
        p = torch.where(unsure, 0.05 + 0.6 * rand(gen, n), 0.91 + 0.09 * rand(gen, n))
        p = torch.round(p, decimals=2)
        p = torch.where((p - threshold).abs() < 1e-9, p + 0.01, p)  # no probability on the threshold itself
        if int((p < threshold).sum()) >= min_low:
            break
    probs = torch.cat([p, torch.zeros(pad, dtype=F64)])
    mask = torch.arange(n + pad) < n
    values = torch.round(rand(gen, n + pad), decimals=2)
    return probs, mask, values


def _spo_cases(gen):
    cases = []
    for i in range(6):
        threshold = [0.9, 0.75, 0.5][i % 3]
        probs, mask, values = _spo_row(gen, threshold)
        cases.append(Case(f"random #{i}", dict(token_probs=probs, mask=mask, values=values,
                                               outcome=float(rand(gen, 1) < 0.5), threshold=threshold,
                                               interval=randint(gen, 1, 3))))
    probs = torch.tensor([0.98, 0.6, 0.95, 0.3, 0.99, 0.2, 0.97, 0.0, 0.0], dtype=F64)
    mask = torch.arange(9) < 7
    values = torch.tensor([0.5, 0.5, 0.4, 0.4, 0.7, 0.7, 0.9, 0.3, 0.8], dtype=F64)
    cases += [
        Case("three cuts, two padded positions", dict(token_probs=probs, mask=mask, values=values, outcome=1.0,
                                                      threshold=0.9, interval=1)),
        Case("a cut at every 2nd uncertain token", dict(token_probs=probs, mask=mask, values=values, outcome=1.0,
                                                        threshold=0.9, interval=2)),
        # the edges, graded once the cases above pass
        Case("no uncertain token", dict(token_probs=torch.tensor([0.95, 0.99, 0.92, 0.0], dtype=F64),
                                        mask=torch.tensor([True, True, True, False]),
                                        values=torch.tensor([0.4, 0.5, 0.6, 0.2], dtype=F64), outcome=1.0,
                                        threshold=0.9, interval=1), frozenset({"no_cut"})),
        Case("one token", dict(token_probs=torch.tensor([0.4], dtype=F64), mask=torch.tensor([True]),
                               values=torch.tensor([0.6], dtype=F64), outcome=1.0, threshold=0.9, interval=1),
             frozenset({"one_token"})),
        Case("every token uncertain", dict(token_probs=torch.tensor([0.5, 0.3, 0.6], dtype=F64),
                                           mask=torch.tensor([True, True, True]),
                                           values=torch.tensor([0.2, 0.7, 0.4], dtype=F64), outcome=0.0,
                                           threshold=0.9, interval=1), frozenset({"all_low"})),
    ]
    return cases


def _spo_variant(how):
    def variant(token_probs, mask, values, outcome, threshold, interval):
        low = (token_probs < threshold) & mask.bool()
        low_pos = low.nonzero().flatten().tolist()
        cuts = low_pos if how == "every_low" else low_pos[::interval]
        ends = cuts[1:] + [len(token_probs)]
        credit = torch.zeros(len(token_probs), dtype=F64)
        for j, (c, end) in enumerate(zip(cuts, ends)):
            v_next = float(values[cuts[j + 1]]) if j + 1 < len(cuts) else (0.0 if how == "no_outcome" else outcome)
            taking = mask.bool() if how == "all_tokens" else low
            for t in range(c, end):
                if taking[t]:
                    credit[t] = v_next - float(values[c])
        return credit
    return variant


def spo_credit_buggy(token_probs, mask, values, outcome, threshold, interval):
    """SPO-chain segment credit for one padded response: A_j = V(next cut) - V(this cut) on the
    uncertain tokens of segment j (the last segment ends at the outcome). Returns tensor (T,)."""
    uncertain = token_probs < threshold
    positions = uncertain.nonzero().flatten().tolist()
    cuts = positions[::interval]  # every interval-th uncertain token starts a segment
    credit = torch.zeros(len(token_probs), dtype=torch.float64)
    for j, start in enumerate(cuts):
        if j + 1 < len(cuts):
            end, v_next = cuts[j + 1], values[cuts[j + 1]]
        else:
            end, v_next = len(token_probs), outcome
        advantage = v_next - values[start]
        for t in range(start, end):
            if uncertain[t]:
                credit[t] = advantage
    return credit


SPO_EXERCISE = register(Exercise(
    notebook="04", letter="b", kind="debug", path="deep dive", buggy=spo_credit_buggy,
    name="spo_credit", title="SPO's segment credit",
    signature="spo_credit(token_probs, mask, values, outcome, threshold, interval) -> tensor (T,)",
    prompt=(
        "Find the bug in SPO-chain's segment credit for one response of a padded batch (Guo et al. 2025,\n"
        "arXiv 2505.23564, section 1 of the notebook). It has exactly one planted mistake, of the kind people\n"
        "make in real RL code. What it should compute:\n"
        "  token_probs: (T,) probability of each sampled token (the padded positions hold 0)\n"
        "  mask: (T,) bool, True on the response's generated tokens, False on padding\n"
        "  values: (T,) V(t), the Monte Carlo value of the prefix that ends just before token t\n"
        "  outcome: the verifier's reward R;  threshold: the cut probability;  interval: cut spacing\n"
        "The uncertain tokens are the generated tokens with p < threshold; the 1st, (1 + interval)-th, ...\n"
        "of them are the cuts c_0, c_1, ... Segment j runs from c_j up to (not including) c_{j+1}:\n"
        "  A_j = V(c_{j+1}) - V(c_j),   and the last segment gets A = R - V(c_last)\n"
        "Return the (T,) credit: A_j on the uncertain tokens of segment j, 0 on every other token\n"
        "(confident tokens, tokens before the first cut, padding)."),
    cases=_spo_cases, reference=_spo_reference,
    rules=(
        Rule("padding got credit: a padded position's probability is 0, below any threshold, so it became an "
             "uncertain token and a cut. Only generated tokens (mask True) can be uncertain",
             nonzero_where_false("mask")),
        Rule("after the last segment the value is the outcome: the last segment gets R - V(c_last), not "
             "0 - V(c_last)", looks_like(_spo_variant("no_outcome")), every=True),
        Rule("only the segment's uncertain tokens take its credit: confident tokens (p >= threshold) get 0",
             looks_like(_spo_variant("all_tokens")), every=True),
        Rule("every interval-th uncertain token starts a segment (the 1st, (1 + interval)-th, ...), not every "
             "uncertain token", looks_like(_spo_variant("every_low")), every=True),
        Rule("a response with no uncertain token has no cut and no credited token: its credit is 0 everywhere",
             wrong, frozenset({"no_cut"})),
    ),
))


# --------------------------------------------------------------------------- 04c: a reading off the explorer
def measure_spo_hit_rate(k=9, threshold=0.99):
    """SPO's first-wrong-step hit rate on the 32 reference rollouts with K = 9 continuations per
    cut and cut p < 0.99, as the explorer of section 8 runs it (its sampler seed is 3)."""
    from labkit.credit import get_estimator
    from labkit.envs.arithmetic.lm import ArithmeticLM
    from labkit.envs.arithmetic.truth import load_reference
    from labkit.scoring import first_error_hit_rate

    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    spo = get_estimator("spo")(ref, value_fn=env.cut_value_fn(seed=3), k=k, threshold=threshold)
    return first_error_hit_rate(spo.token, ref)["hit_rate"]


@functools.lru_cache(maxsize=None)
def _spo_run(k, threshold):
    """SPO's credit on the reference rollouts at one explorer setting, and the rollouts (the
    misreadings' runs, kept: a wrong reading is told its hint without sampling again)."""
    from labkit.credit import get_estimator
    from labkit.envs.arithmetic.truth import load_reference

    env = _arithmetic_env()
    ref, _ = load_reference(env)
    return get_estimator("spo")(ref, value_fn=env.cut_value_fn(seed=3), k=k, threshold=threshold).token, ref


@functools.lru_cache(maxsize=1)
def _arithmetic_env():
    from labkit.envs.arithmetic.lm import ArithmeticLM

    return ArithmeticLM.load()


def _spo_misread(k, threshold, column="hit_rate"):
    """A zero-argument function: the explorer's ``column`` for SPO at another setting (or the
    other column at the asked setting)."""
    def value():
        from labkit.envs.arithmetic.truth import truth_step_advantage
        from labkit.scoring import first_error_hit_rate, step_rank_correlation

        token, ref = _spo_run(k, threshold)
        if column == "hit_rate":
            return first_error_hit_rate(token, ref)["hit_rate"]
        return step_rank_correlation(token, truth_step_advantage(ref), ref, within=True)
    return value


SPO_READING = register(Reading(
    notebook="04", letter="c", name="spo_hit_rate_099", title="SPO cutting at every doubt",
    prompt=(
        "SPO (Guo et al. 2025, arXiv 2505.23564) cuts a response where the sampled token was unlikely.\n"
        "Section 1 cut at p < 0.9. Does cutting at more tokens find the first wrong step more often?\n"
        "In the explorer (section 8) pick SPO, set K = 9 and cut p < 0.99,\n"
        "and read the first-wrong-step hit rate off the line above the chart. Enter it as a number;\n"
        "tolerance 0.01."),
    measure=measure_spo_hit_rate,
    tolerance=0.01,
    hint="read the hit rate of SPO with K = 9 and cut p < 0.99 (both knobs moved), off the explorer's line",
    misreadings=(
        Misreading(_spo_misread(9, 0.9), "that is SPO at cut p < 0.9, section 1's setting: move the cut p < slider "
                                         "to 0.99"),
        Misreading(_spo_misread(4, 0.99), "that is SPO at K = 4, where the explorer starts: set K to 9"),
        Misreading(_spo_misread(9, 0.99, "rank_corr_within"),
                   "that is the within-rollout rank correlation: read the hit rate"),
        Misreading(0.260, "that is the chance hit rate, a random pick: read SPO's own hit rate"),
    ),
))
