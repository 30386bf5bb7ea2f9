"""Exercise 09 (notebook 09_multiagent): exact Shapley for 3 players.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_checks as checks  # noqa: E402

NOTEBOOK = "09"


# --------------------------------------------------------------------------- typical wrong answers
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


WRONG = [
    (shapley_leave_one_out, 'leave-one-out'),
    (shapley_unweighted, 'not equally'),
    (shapley_equal_split, 'null player'),
    (shapley_forgot_empty, 'efficiency'),
]


# --------------------------------------------------------------------------- the tests
def test_the_exercise_states_what_to_write():
    checks.assert_states_what_to_write(NOTEBOOK)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_solution_passes(seed, capsys):
    checks.assert_solution_passes(NOTEBOOK, seed, capsys)


def test_the_solution_docstring_follows_the_house_order():
    checks.assert_solution_docstring_in_house_order(NOTEBOOK)


def test_the_template_runs_and_fails_the_check():
    checks.assert_template_fails_cleanly(NOTEBOOK)


def test_there_are_at_least_three_typical_wrong_answers():
    assert len(WRONG) >= 3


@pytest.mark.parametrize("fn,hint", WRONG, ids=checks.ids(WRONG))
def test_a_typical_wrong_answer_fails_with_its_hint(fn, hint, capsys):
    checks.assert_fails_with_hint(NOTEBOOK, fn, hint, capsys)


@pytest.mark.parametrize("fn,hint", WRONG, ids=checks.ids(WRONG))
def test_the_hint_does_not_depend_on_the_seed(fn, hint):
    checks.assert_hint_does_not_depend_on_the_seed(NOTEBOOK, fn, hint)
