"""Exercises of notebook 01_reinforce_variance: 01a GRPO's advantage, 01b (find the bug) REINFORCE++ on a
padded batch, 01c (run and interpret) REINFORCE's noise-to-signal at batch 64.

The reference solutions pass on every seed the tests try, the templates fail cleanly, each typical wrong
answer (written the way a reader would get it wrong; for 01b the planted bug among them) fails with the
hint that names its mistake, and the reading is graded against the lab's own run."""
from __future__ import annotations

import pytest
import torch

from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.reveal import solution_source

import exercise_checks as checks

EXERCISE = "01a"


# --------------------------------------------------------------------------- typical wrong answers
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


WRONG = [
    (grpo_batch_mean, 'do not sum to zero within a group'),
    (grpo_biased_std, 'biased std'),
    (grpo_no_singleton_rule, 'group-of-one rule'),
    (grpo_singleton_zero, 'group-of-one rule'),
    (grpo_no_eps, 'add eps outside the std'),
    (grpo_no_std, 'Dr. GRPO'),
]

EDGE_WRONG = [
    (grpo_no_singleton_rule, 'group-of-one rule'),
    (grpo_singleton_zero, 'group-of-one rule'),
    (grpo_no_eps, 'add eps outside the std'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


def test_the_nan_remark_is_made_only_for_a_nan_answer():
    assert "NaN" in check(grpo_no_singleton_rule, EXERCISE, seed=0, verbose=False).hint
    assert "NaN" not in check(grpo_singleton_zero, EXERCISE, seed=0, verbose=False).hint


def test_a_float32_wrong_answer_gets_the_same_hint():
    assert "biased std" in check(checks.as_float32(grpo_biased_std), EXERCISE, seed=0, verbose=False).hint


# --------------------------------------------------------------------------- 01b: find the bug
def pp_no_mask(rewards, mask):
    returns = rewards.flip(1).cumsum(1).flip(1)
    g = returns[mask]
    return (returns - g.mean()) / torch.sqrt(g.var(unbiased=False) + 1e-8)   # padding keeps a credit


def pp_per_row(rewards, mask):
    returns = rewards.flip(1).cumsum(1).flip(1)
    out = torch.zeros_like(returns)
    for b in range(returns.shape[0]):                     # each trajectory whitened on its own
        g = returns[b][mask[b]]
        if len(g):
            out[b] = (returns[b] - g.mean()) / torch.sqrt(g.var(unbiased=False) + 1e-8) * mask[b]
    return out


def pp_unbiased(rewards, mask):
    returns = rewards.flip(1).cumsum(1).flip(1)
    g = returns[mask]
    return (returns - g.mean()) / torch.sqrt(g.var() + 1e-8) * mask   # torch.var's default divides by n - 1


def pp_eps_outside(rewards, mask):
    returns = rewards.flip(1).cumsum(1).flip(1)
    g = returns[mask]
    return (returns - g.mean()) / g.std(unbiased=False) * mask   # 0 / 0 when every return is equal


PP_WRONG = [
    (EXERCISES["01b"].buggy, "padding leaks into the whitening"),
    (pp_no_mask, "credit off the mask must be 0"),
    (pp_per_row, "whitens over the whole batch"),
    (pp_unbiased, "population variance"),
]

PP_EDGE_WRONG = [(pp_eps_outside, "eps inside the square root")]


class TestExercise01b(checks.ExerciseTests):
    EXERCISE = "01b"
    WRONG = PP_WRONG
    EDGE_WRONG = PP_EDGE_WRONG



def test_01b_is_a_deep_dive_bug_hunt_with_an_honest_looking_template():
    ex = EXERCISES["01b"]
    assert ex.kind == "debug" and ex.path == "deep dive"
    assert ex.template.startswith("def reinforce_pp_advantage(rewards, mask):")
    assert "expected" not in ex.prompt.lower() and "bug" not in ex.template.lower()


# --------------------------------------------------------------------------- 01c: run and interpret
def test_01c_the_lab_value_is_the_dashboards_reading(torch_is_locked):
    ex = EXERCISES["01c"]
    assert ex.kind == "interpret" and ex.path == "deep dive" and ex.tolerance == 0.02
    # seeded float64 on the CPU; the dashboard at batch 64 printed 0.99 (REINFORCE relative variance)
    if torch_is_locked:  # another torch samples other episodes
        assert ex.lab_value() == pytest.approx(0.99144, abs=1e-4)
    assert check(ex.lab_value(), "01c", verbose=False).passed
    assert check(round(ex.lab_value(), 2), "01c", verbose=False).passed


def test_01c_a_wrong_value_gets_the_general_hint_and_never_the_lab_value(capsys):
    ex = EXERCISES["01c"]
    outside = ex.lab_value() + 0.03
    result = check(outside, "01c")
    out = capsys.readouterr().out
    assert not result.passed and result.hint == ex.hint
    assert f"{ex.lab_value():.3f}" not in out and f"{ex.lab_value():.2f}" not in out.replace(f"{outside}", "")


@pytest.mark.parametrize("index", range(4))
def test_01c_each_misreading_gets_its_own_hint(index):
    ex = EXERCISES["01c"]
    m = ex.misreadings[index]
    value = m.value()
    assert abs(value - ex.lab_value()) > ex.tolerance
    result = check(value, "01c", verbose=False)
    assert not result.passed and result.hint == m.hint


@pytest.mark.parametrize("answer, hint", [(..., "enter your reading"), (None, "enter your reading"),
                                          ("0.99", "answer with a number"), (float("nan"), "finite number")])
def test_01c_no_reading_gets_told_what_to_enter(answer, hint):
    result = check(answer, "01c", verbose=False)
    assert not result.passed and hint in result.hint


def test_01c_reveal_prints_the_measurement():
    text = solution_source("01c")
    assert "def reinforce_noise_at_batch_64" in text and "gradient_study" in text
