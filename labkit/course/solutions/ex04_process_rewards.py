"""Solutions to exercises 04a and 04b (notebook 04_process_rewards): PURE's min-form returns, SPO's
segment credit with its planted mistake fixed.

Checked by ``check(pure_min_form, "04a")`` and ``check(spo_credit, "04b")``; the exercises are in
``labkit.course.exercises.ex04_process_rewards`` (04c, a reading, has its solution there: the lab's run).
"""
from __future__ import annotations

import torch

__all__ = ["pure_min_form", "spo_credit"]


def pure_min_form(step_scores, outcome, temperature):
    """04a · PURE min-form returns (Cheng et al. 2025, arXiv 2504.08662): a response is worth its worst step.

    Inputs:
        step_scores: (S,) the process reward model's probability that each step is right.
        outcome: the verifier's 0/1 outcome R of the response.
        temperature: T of the soft minimum (> 0).

    Formula:
        r_s = 2 p_s - 1,   w = softmax(-r / T),   G_s = sum_{s' >= s} w_{s'} r_{s'} + R

    Defaults:
        none: the temperature T is an argument (PURE uses 0.1).

    Degenerate input:
        one step: w = 1; ties in the worst score share the weight; a tiny T needs torch.softmax
        (a plain exp overflows).

    Deviations from the reference:
        one response, so no RLOO baseline: these are ``labkit.credit.pure``'s returns.

    Returns:
        (S,) float64 return of every step.

    Cost:
        one PRM pass per response (already done: ``step_scores``).
    """
    r = 2 * step_scores.double() - 1
    w = torch.softmax(-r / temperature, dim=0)
    shaped = w * r
    shaped[-1] = shaped[-1] + outcome  # the verifiable reward arrives with the last step
    return shaped.flip(0).cumsum(0).flip(0)  # reverse cumulative sum: from step s to the end



def spo_credit(token_probs, mask, values, outcome, threshold, interval):
    """04b · SPO's segment credit (SPO-chain, Guo et al. 2025, arXiv 2505.23564), for one response of a padded batch.

    Inputs:
        token_probs: (T,) the probability of each sampled token (0 at the padded positions).
        mask: (T,) True on the generated tokens, False on padding.
        values: (T,) V(t), the Monte Carlo value of the prefix that ends just before token t.
        outcome: the verifier's reward R;  threshold: the cut probability;  interval: the cut spacing.

    Formula:
        uncertain tokens: generated tokens with p < threshold; cuts c_0, c_1, ...: the 1st,
        (1 + interval)-th, ... of them.  A_j = V(c_{j+1}) - V(c_j), the last segment R - V(c_last);
        A_j goes to the uncertain tokens of segment j, 0 elsewhere.

    Defaults:
        none: the paper's threshold 0.9 and interval 5 are arguments here.

    Degenerate input:
        no uncertain token: no cut, credit 0 everywhere; one token: R - V(0) if it is uncertain.

    Deviations from the reference:
        none: equal to ``labkit.credit.mc.spo`` (credit on the low-probability tokens) with the values given.

    Returns:
        (T,) float64 credit of every position.

    Cost:
        the values cost k continuations per cut (already sampled: ``values``).
    """
    uncertain = mask.bool() & (token_probs < threshold)  # the fix: padding (p = 0) is never uncertain
    positions = uncertain.nonzero().flatten().tolist()
    cuts = positions[::interval]
    credit = torch.zeros(len(token_probs), dtype=torch.float64)
    for j, start in enumerate(cuts):
        if j + 1 < len(cuts):
            end, v_next = cuts[j + 1], float(values[cuts[j + 1]])
        else:
            end, v_next = len(token_probs), float(outcome)  # after the last segment: the outcome
        for t in range(start, end):
            if uncertain[t]:
                credit[t] = v_next - float(values[start])
    return credit
