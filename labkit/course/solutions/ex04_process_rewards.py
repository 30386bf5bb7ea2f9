"""Solution to exercise 04a (notebook 04_process_rewards): PURE's min-form returns.

Checked by ``check(pure_min_form, "04a")``; the exercise is ``labkit.course.exercises.ex04_process_rewards``.
"""
from __future__ import annotations

import torch

__all__ = ["pure_min_form"]


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

