"""Exercises of notebook 09_multiagent: 09a, a QLLM-style mixer; 09b, exact Shapley with a planted bug;
09c, the reading of who gets the most Shapley credit.

For 09a and 09b the reference solution passes on every seed the tests try, the starting code fails
cleanly, and each typical wrong answer (written the way a reader would get it wrong; for 09b the
planted bug among them) fails with the hint that names its mistake. For 09c the lab's reading passes,
each known misreading gets its own hint, and no failure shows the lab's answer."""
from __future__ import annotations

import math

import pytest
import torch

import exercise_checks as checks
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex09_multiagent import _buggy_shapley
from labkit.course.solutions import mixer_credit, shapley_values

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


# --------------------------------------------------------------------------- 09b: find the bug in exact Shapley
def _marginals(values, weight):
    n = int(math.log2(len(values)))
    phi = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        for S in range(len(values)):
            if not S >> i & 1:
                size = bin(S).count("1")
                phi[i] += weight(n, size) * (values[S | 1 << i] - values[S])
    return phi


def shapley_leave_one_out(values):
    n = int(math.log2(len(values)))
    full = len(values) - 1
    return torch.stack([values[full] - values[full ^ (1 << i)] for i in range(n)]).double()


def shapley_banzhaf(values):
    return _marginals(values, lambda n, size: 1 / 2 ** (n - 1))


def shapley_bits_reversed(values):
    return shapley_values(values).flip(0)


def shapley_empty_is_zero(values):
    n = int(math.log2(len(values)))
    phi = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        for S in range(len(values)):
            if not S >> i & 1:
                size = bin(S).count("1")
                before = 0.0 if S == 0 else values[S]   # "nobody is worth nothing"
                phi[i] += math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n) * (values[S | 1 << i] - before)
    return phi


WRONG_B = [
    (_buggy_shapley, "number n - |S| - 1, not n - |S|"),
    (shapley_leave_one_out, "that is leave-one-out"),
    (shapley_banzhaf, "Banzhaf value"),
    (shapley_bits_reversed, "player i is bit i"),
]

EDGE_WRONG_B = [
    (shapley_empty_is_zero, "v(empty) need not be 0"),
]


class TestExercise09b(checks.ExerciseTests):
    EXERCISE = "09b"
    BUGGY_HINT = "n - |S| - 1, not n - |S|"
    WRONG = WRONG_B
    EDGE_WRONG = EDGE_WRONG_B



def test_the_planted_bug_is_one_line_of_the_solution():
    import inspect

    buggy = inspect.getsource(_buggy_shapley).splitlines()
    fixed = [line for line in inspect.getsource(shapley_values).split('"""')[-1].splitlines()
             if not line.strip().startswith("#")]
    differ = [(a, b) for a, b in zip(buggy[-9:], fixed[-9:]) if a.strip() != b.strip()]
    assert len(differ) == 1 and "n - size - 1" in differ[0][1], differ


def test_the_solution_is_the_library_shapley_and_is_efficient():
    from labkit.core.games import exact_shapley

    gen = torch.Generator().manual_seed(5)
    for n in range(1, 6):
        values = torch.rand(2 ** n, generator=gen, dtype=torch.float64)
        phi = shapley_values(values)
        assert torch.allclose(phi, exact_shapley(values))
        assert math.isclose(float(phi.sum()), float(values[-1] - values[0]), abs_tol=1e-12)


# --------------------------------------------------------------------------- 09c: the reading
READING = "09c"


def test_the_lab_reading_is_the_solvers_and_passes():
    ex = EXERCISES[READING]
    assert ex.lab_value() == "solver"
    assert check("solver", READING, verbose=False).passed
    assert check(" Solver ", READING, verbose=False).passed


@pytest.mark.parametrize("answer, hint", [
    ("checker", "leave-one-out's largest credit"),
    ("planner", "the top at the slider's start"),
    ("saboteur", "read the Shapley bars"),
    ("free rider", "read the Shapley bars"),
])
def test_a_misreading_gets_its_hint_and_never_the_lab_answer(answer, hint, capsys):
    result = check(answer, READING)
    out = capsys.readouterr().out
    assert not result.passed and hint in result.hint
    assert "'solver'" not in out and '"solver"' not in out


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          (0.5, "answer with one of"), ("the solvers", "is not one of the choices")])
def test_a_non_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, READING, verbose=False)
    assert not result.passed and hint in result.hint


def test_the_misreadings_are_what_they_say():
    from labkit.core.games import exact_shapley, leave_one_out_values
    from labkit.envs import TeamTask

    weak = TeamTask.preset("mixed", p_plan=0.5)
    values = weak.truth(weak.scripted_policies(4.0)).values
    assert weak.roles[int(leave_one_out_values(values).argmax())] == "checker"
    start = TeamTask.preset("mixed")
    assert start.roles[int(exact_shapley(start.truth(start.scripted_policies(4.0)).values).argmax())] == "planner"
    # the two solvers share the top: the answer is a role, not an agent
    phi = exact_shapley(values)
    assert float(phi[1]) == pytest.approx(float(phi[2])) and float(phi[1]) > float(phi[3]) + 0.02
