"""Exercise 09 (notebook 09_multiagent): a QLLM-style mixer.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks
from labkit.course.exercises import check
from labkit.course.solutions import mixer_credit

EXERCISE = "09a"


# --------------------------------------------------------------------------- typical wrong answers
def mixer_vdn(q, effects):
    return q.clone()


def mixer_forgot_utility(q, effects):
    h = int((effects == 1).sum())
    return effects.double() / h if h else torch.zeros(len(q), dtype=torch.float64)


def mixer_over_team_size(q, effects):
    return effects.double() * q / len(q)


def mixer_saboteur_gets_zero(q, effects):
    helped = (effects == 1).double()
    h = int(helped.sum())
    return helped * q / h if h else torch.zeros(len(q), dtype=torch.float64)


def mixer_counts_the_saboteur(q, effects):
    h = int((effects != 0).sum())
    return effects.double() * q / h if h else torch.zeros(len(q), dtype=torch.float64)


def mixer_divides_by_zero(q, effects):
    return effects.double() * q / (effects == 1).sum()


def mixer_charges_harm_without_helpers(q, effects):
    return effects.double() * q / max(int((effects == 1).sum()), 1)


WRONG = [
    (mixer_vdn, "VDN's credit"),
    (mixer_forgot_utility, "multiply each weight by the agent's own utility"),
    (mixer_over_team_size, "not by the team's size"),
    (mixer_saboteur_gets_zero, "a negative credit"),
    (mixer_counts_the_saboteur, "h counts only the agents that helped"),
]

EDGE_WRONG = [
    (mixer_divides_by_zero, "no agent that helped"),
    (mixer_charges_harm_without_helpers, "no agent that helped"),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


def test_the_solution_is_the_mixer_the_written_rule_uses():
    from labkit.credit.judge import effect_mixer

    gen = torch.Generator().manual_seed(3)
    for n in range(1, 7):
        q = torch.rand(n, generator=gen, dtype=torch.float64)
        effects = torch.randint(-1, 2, (n,), generator=gen)
        assert torch.allclose(mixer_credit(q, effects), effect_mixer(q, effects))


def test_a_float_effects_answer_and_a_list_answer_pass():
    assert check(lambda q, e: mixer_credit(q, e).tolist(), EXERCISE, seed=0, verbose=False).passed
