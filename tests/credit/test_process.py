"""Process-reward credit (labkit.credit.process): PURE (min / sum form), SPRO and Turn-Level Reward Design.

Hand-computed cases on tiny hand-built Rollouts, the degenerate inputs each docstring promises,
and bad arguments raising errors that name the argument.
"""

import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, estimate
from labkit.credit.episode import grpo
from labkit.credit.process import turn_reward_design

from step_batches import SCORES, close_to, two_rows
from turn_batches import scored_turns, turn_values

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- Turn-Level Reward Design
def test_turn_reward_design_hand_computed():
    ro = scored_turns([3, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    v = torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 0, 0]])
    c = turn_reward_design(ro, turn_rewards=v, turn_weight=0.5, eps=0.0)
    s = 0.5 / math.sqrt(0.5)  # (x - mean) / std for a pair {1, 0}
    # index 0: {1, 0} -> +s, -s; index 1: {0, 1} -> -s, +s; index 2: only row 0 (raw 1); row 2 alone (raw 1)
    T = torch.tensor([[s, -s, 1.0], [-s, s, 0], [1.0, 0, 0]], dtype=torch.float64)
    assert torch.allclose(c.info["turn_term"], T)
    later = torch.tensor([[s - s + 1, -s + 1, 1], [-s + s, s, 0], [1, 0, 0]], dtype=torch.float64)
    O = torch.tensor([s, -s, 1.0], dtype=torch.float64)
    want = torch.where(c.present.bool(), 0.5 * later + O[:, None], 0.0)
    assert torch.allclose(turn_values(c), want)


def test_turn_reward_design_degenerate_and_bad_arguments():
    ro = scored_turns([3, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    c = turn_reward_design(ro, turn_rewards=torch.zeros(3, 3))
    assert torch.allclose(c.token, grpo(ro).token.to(torch.float64))
    assert turn_reward_design(ro, turn_rewards=lambda r: torch.zeros(3, 3)).cost.aux_calls == 3
    with pytest.raises(ValueError, match="^turn_rewards"):
        turn_reward_design(ro)
    with pytest.raises(ValueError, match="^turn_rewards"):
        turn_reward_design(ro, turn_rewards=torch.zeros(3, 2))
    with pytest.raises(TypeError, match="^turn_weight"):
        turn_reward_design(ro, turn_rewards=torch.zeros(3, 3), turn_weight="big")


def test_turn_reward_design_return_to_go_hand_computed():
    ro = scored_turns([3, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    v = torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 0, 0]])
    c = turn_reward_design(ro, turn_rewards=v, turn_weight=0.5, normalize_std=False, baseline="return_to_go")
    # returns G = 0.5 * (turn rewards from n on) + outcome: row 0 [2, 1.5, 1.5], row 1 [0.5, 0.5], row 2 [1.5]
    G = torch.tensor([[2.0, 1.5, 1.5], [0.5, 0.5, 0], [1.5, 0, 0]], dtype=torch.float64)
    assert torch.allclose(c.info["turn_term"], G)
    # baseline of turn n: the other rows of the task still playing at n; row 0's turn 2 and row 2
    # play alone (baseline 0)
    assert torch.allclose(c.info["subtracted"], torch.tensor([[0.5, 0.5, 0], [2.0, 1.5, 0], [0, 0, 0]],
                                                            dtype=torch.float64))
    want = torch.tensor([[1.5, 1.0, 1.5], [-1.5, -1.0, 0], [1.5, 0, 0]], dtype=torch.float64)
    assert torch.allclose(turn_values(c), want)
    assert c.info["baseline"] == "return_to_go"
    # with the std: pairs {2, 0.5} and {1.5, 0.5} have unbiased stds 1.5 / sqrt(2) and 1 / sqrt(2)
    s = turn_reward_design(ro, turn_rewards=v, turn_weight=0.5, eps=0.0, baseline="return_to_go")
    scaled = torch.tensor([[1.5 / (1.5 / math.sqrt(2)), 1.0 / (1 / math.sqrt(2)), 1.5],
                           [-1.5 / (1.5 / math.sqrt(2)), -1.0 / (1 / math.sqrt(2)), 0], [1.5, 0, 0]],
                          dtype=torch.float64)
    assert torch.allclose(turn_values(s), scaled)


def test_turn_reward_design_baselines_differ_by_the_turns_a_trajectory_has_left():
    # the same cost on every turn: the turn-index form cancels it (only the outcome is left),
    # the return-to-go form keeps it (a longer row pays more)
    ro = scored_turns([3, 3, 1], [1.0, 1.0, 1.0], [0, 0, 0])
    cost = torch.tensor([[-0.1, -0.1, -0.1], [-0.1, -0.1, -0.1], [-0.1, 0, 0]])
    index = turn_reward_design(ro, turn_rewards=cost, normalize_std=False)
    assert torch.allclose(turn_values(index), torch.zeros(3, 3, dtype=torch.float64))
    rtg = turn_reward_design(ro, turn_rewards=cost, normalize_std=False, baseline="return_to_go")
    # first-turn returns 0.7, 0.7, 0.9 against the others' mean
    assert torch.allclose(turn_values(rtg)[:, 0], torch.tensor([-0.1, -0.1, 0.2], dtype=torch.float64))


def test_turn_reward_design_bad_baseline_names_the_argument():
    ro = scored_turns([2, 1], [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="^baseline"):
        turn_reward_design(ro, turn_rewards=torch.zeros(2, 2), baseline="per_turn")


def test_the_estimators_are_registered():
    assert {"pure", "spro", "capo"} <= set(ESTIMATORS)


# --------------------------------------------------------------------------- PURE
def test_pure_sum_form_by_hand():
    ro = two_rows()
    c = estimate("pure", ro, step_scores=SCORES, form="sum")
    # returns: row 0 [0.8 + 0.2 + 1, 0.2 + 1]; row 1 [0.5 - 0.5 + 1, -0.5 + 1, 1]
    assert close_to(c.info["returns"], [[2.0, 1.2, 0.0], [1.0, 0.5, 1.0]])
    # RLOO: each row's baseline is the other row's total return
    assert close_to(c.info["baseline"], [1.0, 2.0])
    assert close_to(c.values, [[1.0, 0.2, 0.0], [-1.0, -1.5, -1.0]])
    assert close_to(c.token, [[1.0, 1.0, 0.2], [-1.0, -1.5, -1.0]])
    assert c.level == "step" and c.method == "pure_sum" and c.cost.aux_calls == 0


def test_pure_min_form_large_temperature_is_the_mean_step_reward():
    c = estimate("pure", two_rows(), step_scores=SCORES, form="min", temperature=1e9)
    assert close_to(c.info["weights"], [[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    assert close_to(c.info["returns"], [[1.5, 1.1, 0.0], [1 / 3, 1 / 6, 1 / 3]])
    assert close_to(c.values, [[1.5 - 1 / 3, 1.1 - 1 / 3, 0.0], [1 / 3 - 1.5, 1 / 6 - 1.5, 1 / 3 - 1.5]])


def test_pure_min_form_small_temperature_is_the_hard_minimum():
    c = estimate("pure", two_rows(), step_scores=SCORES, form="min", temperature=1e-3)
    # all weight on the lowest step: row 0's 0.2 (its last), row 1's -0.5 (its middle)
    assert close_to(c.info["weighted_rewards"], [[0.0, 0.2, 0.0], [0.0, -0.5, 0.0]])
    assert close_to(c.info["returns"], [[1.2, 1.2, 0.0], [-0.5, -0.5, 0.0]])
    assert close_to(c.values, [[1.7, 1.7, 0.0], [-1.7, -1.7, -1.2]])


def test_pure_min_form_default_temperature_by_hand():
    c = estimate("pure", two_rows(group=(0, 1)), step_scores=SCORES)  # T = 0.1, two groups of one
    w0 = [math.exp(-8.0), math.exp(-2.0)]
    w0 = [x / sum(w0) for x in w0]
    e = [math.exp(-5.0), math.exp(5.0), math.exp(-10.0)]
    w1 = [x / sum(e) for x in e]
    assert close_to(c.info["weights"], [w0 + [0.0], w1])
    g0 = [0.8 * w0[0] + 0.2 * w0[1] + 1, 0.2 * w0[1] + 1]
    g1 = [0.5 * w1[0] - 0.5 * w1[1] + 1.0 * w1[2], -0.5 * w1[1] + 1.0 * w1[2], 1.0 * w1[2]]
    assert close_to(c.info["baseline"], [0.0, 0.0])  # groups of one: raw returns
    assert close_to(c.values, [g0 + [0.0], g1])


def test_pure_padding_pays_under_sum_form_only():
    """A response padded with two extra good steps (p = 0.9) gains under sum form, barely under min form."""
    tokens = torch.zeros(2, 4, dtype=torch.long)
    ro = Rollouts(tokens=tokens, mask=torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]).bool(),
                  rewards=torch.tensor([[0.0, 1.0, 0, 0], [0, 0, 0, 1.0]]),
                  step_ids=torch.tensor([[0, 1, -1, -1], [0, 1, 2, 3]]), group_ids=torch.tensor([0, 1]))
    p = torch.tensor([[0.9, 0.6, 0, 0], [0.9, 0.9, 0.9, 0.6]], dtype=torch.float64)
    s = estimate("pure", ro, step_scores=p, form="sum").values[:, 0]
    m = estimate("pure", ro, step_scores=p, form="min").values[:, 0]
    assert s[1] - s[0] == pytest.approx(1.6)
    assert abs(float(m[1] - m[0])) < 0.01


def test_pure_degenerate_inputs():
    # one step: min and sum agree; a row with nothing generated gets nothing
    ro = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.tensor([[True, True], [False, False]]),
                  rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]), step_ids=torch.tensor([[0, 0], [-1, -1]]))
    p = torch.tensor([[0.7], [0.0]], dtype=torch.float64)
    a = estimate("pure", ro, step_scores=p, form="min")
    b = estimate("pure", ro, step_scores=p, form="sum")
    assert close_to(a.values, b.values) and bool(torch.isfinite(a.token).all())
    assert close_to(a.token[1], [0.0, 0.0])
    # a callable scorer is charged one call per trajectory
    c = estimate("pure", ro, step_scores=lambda r: p)
    assert c.cost.aux_calls == 2 and close_to(c.values, a.values)


@pytest.mark.parametrize("kw,name", [
    ({}, "step_scores"),
    ({"step_scores": SCORES * 2}, "step_scores"),
    ({"step_scores": SCORES[:, :2]}, "step_scores"),
    ({"step_scores": SCORES, "temperature": 0.0}, "temperature"),
    ({"step_scores": SCORES, "form": "max"}, "form"),
    ({"step_scores": SCORES, "verifiable_weight": float("nan")}, "verifiable_weight"),
])
def test_pure_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        estimate("pure", two_rows(), **kw)


# --------------------------------------------------------------------------- SPRO
def three_in_a_group():
    """Lengths 3, 2, 1 in one group; outcomes 1, 0, 0; log-ratios chosen by hand."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]]).bool()
    rewards = torch.tensor([[0, 0, 1.0], [0, 0, 0], [0, 0, 0]])
    # both shifted by -1 so that they are log-probabilities; SPRO only reads their difference
    ref = torch.full((3, 3), -1.0, dtype=torch.float64)
    lp = torch.tensor([[0.2, 0.4, -0.2], [-0.2, 0.2, 0.0], [0.6, 0.0, 0.0]], dtype=torch.float64) - 1.0
    ro = Rollouts(tokens=torch.zeros(3, 3, dtype=torch.long), mask=mask, rewards=rewards, logprobs=lp)
    return ro, ref


def test_spro_by_hand():
    ro, ref = three_in_a_group()
    c = estimate("spro", ro, ref_logprobs=ref, beta=0.5, normalize_std=False)
    assert close_to(c.info["cpr"], [[0.1, 0.3, 0.2], [-0.1, 0.0, 0.0], [0.3, 0.0, 0.0]])
    # baselines over the responses still generating: t0 (0.1 - 0.1 + 0.3) / 3, t1 (0.3 + 0) / 2, t2 0.2 alone
    assert close_to(c.info["msa"], [[0.0, 0.15, 0.0], [-0.2, -0.15, 0.0], [0.2, 0.0, 0.0]])
    assert close_to(c.info["outcome_advantage"], [2 / 3, -1 / 3, -1 / 3])
    assert close_to(c.token, [[2 / 3, 2 / 3 + 0.15, 2 / 3], [-1 / 3 - 0.2, -1 / 3 - 0.15, 0.0], [-1 / 3 + 0.2, 0, 0]])
    assert c.level == "token"


def test_spro_without_a_policy_change_is_grpo():
    ro, _ = three_in_a_group()
    c = estimate("spro", ro, ref_logprobs=ro.logprobs)
    g = estimate("grpo", ro)
    assert close_to(c.info["msa"], torch.zeros(3, 3)) and close_to(c.token, g.token)


def test_spro_group_of_one_has_no_masked_advantage():
    ro, ref = three_in_a_group()
    ro = ro.with_(group_ids=torch.tensor([0, 1, 2]))
    c = estimate("spro", ro, ref_logprobs=ref, normalize_std=False)
    assert close_to(c.info["msa"], torch.zeros(3, 3))
    assert close_to(c.info["outcome_advantage"], [1.0, 0.0, 0.0])  # GRPO's group of one: raw outcome


def test_spro_bad_arguments():
    ro, ref = three_in_a_group()
    with pytest.raises(ValueError, match="^ref_logprobs"):
        estimate("spro", ro)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        estimate("spro", ro, ref_logprobs=ref[:, :2])
    with pytest.raises(ValueError, match="^beta"):
        estimate("spro", ro, ref_logprobs=ref, beta=-1.0)
    with pytest.raises(ValueError, match="^rollouts.logprobs"):
        estimate("spro", ro.with_(logprobs=None), ref_logprobs=ref)
