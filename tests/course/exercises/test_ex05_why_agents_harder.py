"""Exercises 05a-05c (notebook 05_why_agents_harder): returns discounted per turn, the per-episode mean loss's
token weights with a planted mistake, and a reading of the luck share at tool noise 0.35 and 15 turns.

For 05a and 05b the reference solution passes on every seed the tests try, the starting point fails, and each
typical wrong answer (written the way a reader would get it wrong; for 05b the planted bug among them) fails
with the hint that names its mistake. For 05c the lab's own value passes, a value just outside the tolerance
gets the general hint, each misreading its own hint, and no failure shows the lab's value."""
from __future__ import annotations

import math

import pytest
import torch

from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex05_why_agents_harder import episode_mean_weights_buggy

import exercise_checks as checks

EXERCISE = "05a"


# --------------------------------------------------------------------------- typical wrong answers
def turns_discounted_per_token(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    G = torch.zeros(len(rewards), dtype=torch.float64)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if turn_ids[t] >= 0:
            running = rewards[t] + gamma * running
            G[t] = running
    return torch.stack([G[turn_ids == k][0] for k in range(n)])  # the turn's first token


def turns_last_reward_only(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k][-1] for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in reversed(range(n)):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_forward(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    G, running = torch.zeros(n, dtype=torch.float64), 0.0
    for k in range(n):
        running = r[k] + gamma * running
        G[k] = running
    return G


def turns_absolute_discount(rewards, turn_ids, gamma):
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    disc = r * gamma ** torch.arange(n, dtype=torch.float64)
    return disc.flip(0).cumsum(0).flip(0)


def turns_discount_through_log(rewards, turn_ids, gamma):
    # gamma ** (j - k) written as exp((j - k) * log(gamma)): NaN at gamma = 0
    n = int(turn_ids.max()) + 1
    r = torch.stack([rewards[turn_ids == k].sum() for k in range(n)])
    log_gamma = torch.log(torch.tensor(gamma, dtype=torch.float64))
    return torch.stack([(torch.exp(torch.arange(n - k, dtype=torch.float64) * log_gamma) * r[k:]).sum()
                        for k in range(n)])


WRONG = [
    (turns_discounted_per_token, 'discounted per token, not per turn'),
    (turns_last_reward_only, 'sum of every reward inside it'),
    (turns_forward, 'to the END'),
    (turns_absolute_discount, 'gamma^(j - k)'),
]

EDGE_WRONG = [
    (turns_discount_through_log, 'with gamma = 0 nothing is carried back'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise05a(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# --------------------------------------------------------------------------- 05b: find the bug in the loss weights
def weights_token_mean(advantages, attention_mask, tool_mask):
    """Every generated token of the batch weighs the same (PPO-clip's token mean)."""
    generated = attention_mask & ~tool_mask
    return advantages * generated / generated.sum()


def weights_tool_tokens_counted(advantages, attention_mask, tool_mask):
    """Tool output masked out of the numerator, but counted in each episode's n_b."""
    generated = attention_mask & ~tool_mask
    n_real = attention_mask.sum(1, keepdim=True)
    return advantages * generated / n_real.clamp(min=1) / (n_real > 0).sum()


def weights_padding_kept(advantages, attention_mask, tool_mask):
    """Tool output masked, padding forgotten."""
    keep = ~tool_mask
    n = keep.sum(1, keepdim=True)
    return advantages * keep / n.clamp(min=1) / (n > 0).sum()


def weights_every_episode_counted(advantages, attention_mask, tool_mask):
    """Right, except that B' counts every row, an empty episode too."""
    generated = attention_mask & ~tool_mask
    n = generated.sum(1, keepdim=True)
    return advantages * generated / n.clamp(min=1) / len(advantages)


def weights_zero_over_zero(advantages, attention_mask, tool_mask):
    """Right, except that an empty episode divides 0 by 0."""
    generated = attention_mask & ~tool_mask
    n = generated.sum(1, keepdim=True)
    return advantages * generated / n / (n > 0).sum()


class TestExercise05b(checks.ExerciseTests):
    EXERCISE = "05b"
    WRONG = [
        (episode_mean_weights_buggy, "tool output is in your loss"),
        (weights_token_mean, "that is the token mean"),
        (weights_tool_tokens_counted, "not in the denominator"),
        (weights_padding_kept, "padding got a weight"),
    ]
    EDGE_WRONG = [
        (weights_every_episode_counted, "B' is the number of episodes with at least one generated token"),
        (weights_zero_over_zero, "B' is the number of episodes with at least one generated token"),
    ]

    def test_the_template_runs_and_fails_the_check(self):
        # a find-the-bug exercise starts from the buggy function: it runs and gets its bug's hint
        ex = EXERCISES[self.EXERCISE]
        space: dict = {"torch": torch}
        exec(ex.template, space)
        result = check(space[ex.name], self.EXERCISE, seed=0, verbose=False)
        assert not result.passed and "tool output is in your loss" in result.hint
        checks.assert_the_lab_answer_is_not_shown(result, str(result))

    def test_the_buggy_function_is_the_template_and_looks_honest(self):
        ex = EXERCISES[self.EXERCISE]
        assert ex.kind == "debug" and ex.path == "deep dive" and "def episode_mean_weights(" in ex.template
        assert "bug" not in ex.template.lower() and "#" not in ex.template


# --------------------------------------------------------------------------- 05c: reading the luck share
class TestReading05c:
    ex = EXERCISES["05c"]

    def test_the_lab_value_passes_and_is_the_exact_split_of_a_seeded_batch(self, torch_is_locked):
        value = self.ex.lab_value()
        # exact dynamic programming on one seeded batch: the same number on every machine with the
        # lock's torch (another torch samples another batch)
        if torch_is_locked:
            assert abs(value - 0.16850) < 5e-4, value
        assert check(value, "05c", verbose=False).passed
        assert check(value - 0.0045, "05c", verbose=False).passed

    def test_a_reading_just_outside_the_tolerance_and_each_misreading_get_their_hints(self, capsys):
        checks.assert_reading_graded("05c", capsys)

    @pytest.mark.parametrize("which, words", [(0, "where it starts"), (1, "set turns to 15"),
                                              (2, "set tool noise to 0.35"), (3, "skill share"),
                                              (4, "success probability"), (5, "GRPO's correlation")])
    def test_each_misreading_gets_its_own_hint(self, which, words, capsys, torch_is_locked):
        m = self.ex.misreadings[which]
        value = m.value() if callable(m.value) else m.value
        if abs(value - self.ex.lab_value()) <= self.ex.tolerance:
            assert not torch_is_locked, "a misreading must differ from the lab's value"
            pytest.skip("this torch samples a batch where the misreading coincides with the lab's value")
        result = check(value, "05c")
        assert not result.passed and words in result.hint, result.hint
        assert f"{self.ex.lab_value():.3f}" not in capsys.readouterr().out

    @pytest.mark.parametrize("answer, words", [(..., "enter your reading"), (None, "enter your reading"),
                                               ("0.2", "answer with a number"), (math.nan, "finite number")])
    def test_no_reading_gets_told_what_to_enter(self, answer, words):
        result = check(answer, "05c", verbose=False)
        assert not result.passed and words in result.hint, result.hint

    def test_the_exercise_states_its_settings_and_tolerance(self):
        assert self.ex.kind == "interpret" and self.ex.path == "deep dive" and self.ex.letter == "c"
        for words in ("tool noise = 0.35", "turns = 15", "tolerance 0.005", "arXiv"):
            assert words in " ".join(self.ex.prompt.split()), words
