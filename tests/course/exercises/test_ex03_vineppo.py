"""Notebook 03_vineppo's exercises: 03a VinePPO's step advantage, 03b the value error read at K = 4,
03c a GRPO training loop (the first half's capstone).

For 03a and 03c the reference solution passes, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake.
For 03b the lab's value passes, a reading just outside the tolerance gets the general hint, each
misreading its own, and no failure prints the lab's number."""
from __future__ import annotations

import functools
import math

import pytest
import torch

import exercise_checks as checks
from torch_lock import torch_is_locked
from labkit.course.exercises import EXERCISES, check
from labkit.course.solutions import SOLUTIONS

EXERCISE = "03a"


# --------------------------------------------------------------------------- typical wrong answers
def vine_sum(vine_outcomes, rewards):
    V = vine_outcomes.sum(1)
    return rewards + torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_flipped(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + V - torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])


def vine_no_reward(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)]) - V


def vine_bootstrap_past_end(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    return rewards + torch.cat([V[1:], V[-1:]]) - V  # "after the last step the value stays"


def vine_step_by_step(vine_outcomes, rewards):
    V = vine_outcomes.mean(1)
    inner = torch.stack([rewards[i] + V[i + 1] - V[i] for i in range(len(V) - 1)])  # empty for one step
    return torch.cat([inner, (rewards[-1] - V[-1])[None]])


WRONG = [
    (vine_sum, 'MEAN outcome'),
    (vine_flipped, 'after minus before'),
    (vine_no_reward, 'add the reward received inside the step'),
    (vine_bootstrap_past_end, 'bootstrapped past the end'),
]

EDGE_WRONG = [
    (vine_step_by_step, 'raised RuntimeError'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise03a(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# =========================================================================== 03b: a reading
@pytest.fixture(scope="module")
def reading():
    torch.set_num_threads(1)
    ex = EXERCISES["03b"]
    return ex, ex.lab_value()


def test_03b_the_lab_value_is_in_its_measured_band_and_passes(reading, capsys):
    ex, value = reading
    # seeded float64 vines: 0.0806 on torch 2.13 (CPU); between K = 3's 0.101 and K = 9's 0.056
    assert 0.06 < value < 0.10
    assert check(value, "03b").passed
    assert check(round(value, 3), "03b").passed
    assert "agrees with the lab's own run" in capsys.readouterr().out


def test_03b_a_reading_just_outside_the_tolerance_gets_the_general_hint(reading, capsys):
    ex, value = reading
    result = check(value + ex.tolerance + 0.002, "03b")
    assert not result.passed and result.hint == ex.hint
    assert f"{value:.3f}" not in capsys.readouterr().out


@pytest.mark.parametrize("index", range(3))
def test_03b_each_misreading_gets_its_own_hint(reading, index, capsys):
    ex, value = reading
    m = ex.misreadings[index]
    wrong = m.value()
    assert abs(wrong - value) > ex.tolerance
    result = check(wrong, "03b")
    assert not result.passed and result.hint == m.hint
    assert f"{value:.3f}" not in capsys.readouterr().out


@pytest.mark.parametrize("answer,hint", [(..., "enter your reading"), (None, "enter your reading"),
                                         ("0.08", "answer with a number"), (math.nan, "finite number")])
def test_03b_a_non_reading_is_told_what_to_enter(answer, hint):
    result = check(answer, "03b", verbose=False)
    assert not result.passed and hint in result.hint


# =========================================================================== 03c: the capstone
# Every graded case trains the tiny model twice (about 0.3 s of one core), so a loop's runs are
# memoised per case (its rewards and the parameters it left, restored on a repeat) and the
# graded seeds are fewer than the other exercises' eight: the fixed cases decide every hint.
CAPSTONE = "03c"
CAPSTONE_SEEDS = (0, 999_999)
_MEMO: dict = {}


def memo(fn):
    """``fn``, a training loop, run once per (case, loop): a repeat restores the parameters it left."""
    def loop(learner, optimizer, iterations, seed):
        key = (fn.__name__, learner.prompts_per_batch, learner.n_per_prompt, optimizer.param_groups[0]["lr"],
               iterations, seed)
        if key not in _MEMO:
            rewards = fn(learner, optimizer, iterations, seed)
            _MEMO[key] = rewards, [p.detach().clone() for p in learner.parameters()]
        rewards, params = _MEMO[key]
        with torch.no_grad():
            for p, q in zip(learner.parameters(), params):
                p.copy_(q)
        return rewards
    return functools.wraps(fn)(loop)


def reader_loop(learner, optimizer, iterations, seed, *, zero_grad=True, sign=1.0, advantage="group",
                tokens="mean", same_seed=False, step=True, returns="rewards", eps=1e-6, one_rule=True):
    """A GRPO loop as a reader writes it; each keyword makes one typical mistake."""
    rewards = []
    for i in range(1, iterations + 1):
        batch = learner.collect(i, seed=seed if same_seed else seed * 1_000_003 + i)
        s, g = batch.scores.double(), batch.group_ids
        if advantage == "batch":
            adv = (s - s.mean()) / (s.std() + eps)
        else:
            adv = torch.empty_like(s)
            for gid in g.unique():
                m = g == gid
                if one_rule and m.sum() == 1:
                    adv[m] = s[m] / (1 + eps)
                else:
                    std = s[m].std(unbiased=advantage != "biased")
                    adv[m] = (s[m] - s[m].mean()) / (std + eps)
        logp = learner.logprobs(batch, torch.arange(len(batch)))
        mask = batch.mask.float()
        weighted = adv[:, None] * logp * mask
        if tokens == "sum":
            loss = -weighted.sum(1).mean()
        elif tokens == "batch":
            loss = -weighted.sum() / mask.sum()
        else:
            loss = -(weighted.sum(1) / mask.sum(1)).mean()
        loss = sign * loss
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        rewards.append(float(loss) if returns == "loss" else float(batch.scores.mean()))
    return rewards


def _wrong(name, **mistake):
    def fn(learner, optimizer, iterations, seed):
        return reader_loop(learner, optimizer, iterations, seed, **mistake)
    fn.__name__ = name
    return memo(fn)


CAPSTONE_WRONG = [
    (_wrong("loop_without_zero_grad", zero_grad=False), "gradients accumulated"),
    (_wrong("loop_ascending", sign=-1.0), "climbed the loss"),
    (_wrong("loop_batch_mean", advantage="batch"), "normalised over the whole batch"),
    (_wrong("loop_biased_std", advantage="biased"), "unbiased"),
    (_wrong("loop_token_sum", tokens="sum"), "summed over each sequence's tokens"),
    (_wrong("loop_token_mean_over_batch", tokens="batch"), "all tokens of the batch at once"),
    (_wrong("loop_without_step", step=False), "did not move"),
    (_wrong("loop_returning_losses", returns="loss"), "the list you return"),
    (_wrong("loop_without_eps", eps=0.0), "std 0"),
]
# the same seed every batch shows only where the second batch's groups are not all alike, which
# the grader's fixed case was chosen for under the lock's torch (another torch samples otherwise)
if torch_is_locked():
    CAPSTONE_WRONG.append((_wrong("loop_same_seed", same_seed=True), "sampled the same batch"))
CAPSTONE_EDGE_WRONG = [(_wrong("loop_std_of_one", one_rule=False), "a group of one")]
REWARDS_HINT = "the list you return"


@pytest.mark.usefixtures("one_torch_thread")
class TestExercise03c(checks.ExerciseTests):
    EXERCISE = CAPSTONE
    WRONG = CAPSTONE_WRONG
    EDGE_WRONG = CAPSTONE_EDGE_WRONG
    ZEROS_HINT = REWARDS_HINT  # zeros returned by a loop that trained right: the rewards are what is wrong

    @pytest.fixture(autouse=True)
    def _memoised_solution(self, monkeypatch):
        monkeypatch.setitem(SOLUTIONS, CAPSTONE, memo(SOLUTIONS[CAPSTONE]))

    @pytest.mark.parametrize("seed", CAPSTONE_SEEDS)
    def test_the_solution_passes(self, seed, capsys):
        checks.assert_solution_passes(self.EXERCISE, seed, capsys)

    def test_a_typical_wrong_answer_fails_with_its_hint(self, wrong, capsys):
        checks.assert_fails_with_hint(self.EXERCISE, *wrong, capsys, seed=0)

    def test_the_hint_does_not_depend_on_the_seed(self, wrong):
        """The fixed case "seed 10" shows every named mistake, so the random case cannot change the hint;
        one more seed per answer would cost a training run each."""
        checks.assert_hint_does_not_depend_on_the_seed(self.EXERCISE, *wrong, seeds=(0,))

    def test_a_main_case_mistake_is_named_before_any_edge_case_failure(self, wrong):
        checks.assert_main_mistake_named_before_edge_failures(self.EXERCISE, *wrong, seed=0)

    @pytest.mark.parametrize("seed", CAPSTONE_SEEDS[:1])
    def test_an_answer_of_zeros_gets_the_placeholder_hint(self, seed):
        super().test_an_answer_of_zeros_gets_the_placeholder_hint(seed)

    @pytest.mark.parametrize("seed", CAPSTONE_SEEDS[:1])
    def test_a_flipped_sign_gets_the_sign_hint(self, seed):
        """Minus the rewards of a loop that trained right: for a loop the sign that matters is the
        loss's (loop_ascending above); flipped rewards are a wrong list."""
        result = check(checks.sign_flipped_answer(self.EXERCISE), self.EXERCISE, seed=seed, verbose=False)
        assert not result.passed and REWARDS_HINT in result.hint and not result.case.tags, result.hint

    def test_an_edge_case_mistake_passes_the_main_cases_and_gets_its_hint(self, edge_wrong):
        fn, hint = edge_wrong
        result = check(fn, self.EXERCISE, seed=0, verbose=False)
        assert not result.passed and hint in result.hint and result.case.tags, result.hint
        checks.assert_hint_does_not_depend_on_the_seed(self.EXERCISE, fn, hint, seeds=(0,))


def test_03c_the_lab_reference_is_train_and_two_correct_loops_agree_to_round_off():
    """The reference is labkit.learn.loop.train's run; the solution's loop (not memoised) gives the
    same numbers to far below the tolerance, and the fixed case moves the model."""
    from labkit.course.exercises import ex03_vineppo as ex

    case = next(c for c in ex.CAPSTONE.cases(torch.Generator().manual_seed(0)) if c.name == "seed 10")
    want = ex._capstone_reference(**case.args)
    got = ex._call(SOLUTIONS[CAPSTONE], dict(case.args))
    assert float((got - want).abs().max()) < 1e-5
    n = case.args["iterations"]
    assert float(want[n:].abs().max()) > 0.1 and 0 <= float(want[:n].min()) <= float(want[:n].max()) <= 1
