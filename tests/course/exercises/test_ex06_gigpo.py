"""Exercise 06 (notebook 06_gigpo): GiGPO's anchor-group step term.

The reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks

EXERCISE = "06a"


# --------------------------------------------------------------------------- typical wrong answers
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


WRONG = [
    (gigpo_singleton_raw, 'anchor group of one'),
    (gigpo_batch_mean, 'sum to zero within an anchor group'),
    (gigpo_reward_not_return, "not the turn's own reward"),
    (gigpo_undiscounted, 'discount the returns by gamma'),
    (gigpo_std_normalised, 'do not divide by the std'),
]

EDGE_WRONG = [
    (gigpo_singleton_raw, 'anchor group of one'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG
