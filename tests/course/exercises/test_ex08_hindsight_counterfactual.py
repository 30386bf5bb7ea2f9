"""Exercise 08 (notebook 08_hindsight_counterfactual): HCA's hindsight ratio.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks

EXERCISE = "08a"


# --------------------------------------------------------------------------- typical wrong answers
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


WRONG = [
    (hca_inverted, 'not (1 - h / pi)'),
    (hca_forgot_z, 'multiply by the outcome Z'),
    (hca_sign_flipped, 'POSITIVE credit'),
    (hca_nan_on_failure, "don't divide by h when Z = 0"),
    (hca_log_ratio, 'not a log-ratio'),
]

EDGE_WRONG = [
    (hca_nan_on_failure, "don't divide by h when Z = 0"),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
