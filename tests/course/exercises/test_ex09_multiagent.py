"""Exercise 09 (notebook 09_multiagent): exact Shapley for 3 players.

The reference solution passes on three seeds, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations


import exercise_checks as checks

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
    (shapley_equal_split, "split the team's value equally"),
    (shapley_forgot_empty, 'efficiency'),
]

EDGE_WRONG = [
    (shapley_forgot_empty, 'efficiency'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    NOTEBOOK = NOTEBOOK
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
