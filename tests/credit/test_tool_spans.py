"""Tool output inside a response (labkit.credit.tool_spans): the three conventions on small
cases worked by hand, the transforms' invariants, and verl 0.9.1's functions (where verl is
installed) carrying across tool output as labkit does.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.credit import tool_spans as ts

G = 0.5
# positions: action, action, tool, tool, action, action, padding
MASK = torch.tensor([[1, 1, 0, 0, 1, 1, 0]], dtype=torch.bool)
REWARDS = torch.tensor([[0.0, 0.5, 0.0, 0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
VALUES = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.0]], dtype=torch.float64)


def batch(mask=MASK, rewards=REWARDS, **kw) -> Rollouts:
    return Rollouts(tokens=torch.zeros(mask.shape, dtype=torch.long), mask=mask, rewards=rewards, **kw)


def returns_under(convention: str, ro: Rollouts, gamma: float) -> torch.Tensor:
    """The plain returns each convention's batch gives (through: read on the original mask)."""
    if convention == "reset":
        return ts.reset_rewards(ro, gamma=gamma).returns(gamma)
    if convention == "through":
        return torch.where(ro.mask, ts.through_spans(ro).returns(gamma), 0.0)
    return ro.returns(gamma)


def test_spans_are_the_gaps_inside_a_row_not_prompt_or_padding():
    mask = torch.tensor([[0, 1, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    ro = batch(mask, torch.zeros(2, 6, dtype=torch.float64))
    assert ts.tool_spans(ro).tolist() == [[False, False, True, False, False, False], [False] * 6]
    assert ts.piece_ids(ro).tolist() == [[-1, 0, -1, 1, -1, -1], [0, 0, 0, -1, -1, -1]]


@pytest.mark.parametrize("convention, expected", [
    # carry: G_1 = 0.5 + 0.5 * G_4 (one discount across the span), G_0 = 0.5 * G_1
    ("carry", [0.375, 0.75, 0, 0, 0.5, 1.0, 0]),
    # reset: the action before the span sees only its own reward
    ("reset", [0.25, 0.5, 0, 0, 0.5, 1.0, 0]),
    # through: two more discounts, one per tool position: G_1 = 0.5 + 0.5^3 * G_4
    ("through", [0.28125, 0.5625, 0, 0, 0.5, 1.0, 0]),
])
def test_returns_by_hand_under_each_convention(convention, expected):
    got = returns_under(convention, batch(), G)
    assert torch.allclose(got, torch.tensor([expected], dtype=torch.float64), atol=1e-12)


def test_gae_by_hand_under_each_convention():
    lam = 0.5
    ro = batch()
    gae = {c: ts.run_under(c, "gae", ro, values=VALUES, gamma=G, lam=lam).token[0] for c in ts.CONVENTIONS}
    # after the span: delta_5 = 1 - 0.6, delta_4 = 0 + 0.5 * 0.6 - 0.5; A_4 = delta_4 + 0.25 A_5
    a5, a4 = 0.4, -0.2 + 0.25 * 0.4
    for c in ts.CONVENTIONS:
        assert gae[c][4:6].tolist() == pytest.approx([a4, a5])
        assert gae[c][[2, 3, 6]].abs().max() == 0   # spans and padding get no credit
    # carry: delta_1 bootstraps on V_4 across the span
    d1 = 0.5 + G * 0.5 - 0.2
    assert gae["carry"][1].item() == pytest.approx(d1 + G * lam * a4)
    # reset: no bootstrap and no trace across the span
    assert gae["reset"][1].item() == pytest.approx(0.5 - 0.2)
    # through: the span's TD errors on its own values, discounted at each position
    a3 = (0 + G * 0.5 - 0.4) + G * lam * a4
    a2 = (0 + G * 0.4 - 0.3) + G * lam * a3
    assert gae["through"][1].item() == pytest.approx((0.5 + G * 0.3 - 0.2) + G * lam * a2)
    for c in ts.CONVENTIONS:
        d0 = 0 + G * 0.2 - 0.1
        assert gae[c][0].item() == pytest.approx(d0 + G * lam * gae[c][1].item())


def test_td0_reset_drops_the_bootstrap_and_poad_discounts_per_turn():
    turns = torch.tensor([[0, 1, -1, -1, 2, 3, -1]])
    ro = batch(step_ids=turns, turn_ids=turns)
    td = ts.run_under("reset", "td0", ro, values=VALUES, gamma=G).token[0]
    assert td[:2].tolist() == pytest.approx([0 + G * 0.2 - 0.1, 0.5 - 0.2])
    # every action its own turn: POAD is GAE under carry and reset
    for c in ("carry", "reset"):
        assert torch.allclose(ts.run_under(c, "poad", ro, values=VALUES, gamma=G).token,
                              ts.run_under(c, "gae", ro, values=VALUES, gamma=G).token)
    # through: the span joins the turn it answers, so POAD does not discount inside it
    poad = ts.run_under("through", "poad", ro, values=VALUES, gamma=G, lam=0.0).token[0]
    assert poad[1].item() == pytest.approx(0.5 + 1.0 * 0.3 - 0.2)


def test_reset_equals_cutting_the_response_into_separate_rows():
    torch.manual_seed(0)
    mask = torch.rand(4, 12) < 0.6
    mask[:, 0] = True
    rewards = torch.where(mask, torch.randn(4, 12, dtype=torch.float64), 0.0)
    values = torch.randn(4, 12, dtype=torch.float64)
    ro = batch(mask, rewards)
    pieces = ts.piece_ids(ro)
    for gamma, lam in ((0.9, 1.0), (0.8, 0.6), (1.0, 0.0)):
        got = ts.run_under("reset", "gae", ro, values=values, gamma=gamma, lam=lam).token
        want = torch.zeros_like(got)
        for k in range(int(pieces.max()) + 1):
            one = pieces == k
            if bool(one.any()):
                sub = batch(one, torch.where(one, rewards, 0.0))
                want += get_estimator("gae")(sub, values=values, gamma=gamma, lam=lam).token
        assert torch.allclose(got, want, atol=1e-12)
        plain = ts.reset_rewards(ro, gamma=gamma).returns(gamma)
        cut = sum(torch.where(pieces == k, batch(pieces == k, torch.where(pieces == k, rewards, 0.0)).returns(gamma)
                              if bool((pieces == k).any()) else 0.0, 0.0) for k in range(int(pieces.max()) + 1))
        assert torch.allclose(plain, cut, atol=1e-12)


def test_gamma_one_without_values_carry_and_through_give_the_same_returns():
    ro = batch()
    assert torch.equal(returns_under("carry", ro, 1.0), returns_under("through", ro, 1.0))
    # ... but REINFORCE++ whitens over the span's positions too under through
    carry = ts.run_under("carry", "reinforce_pp", ro)
    through = ts.run_under("through", "reinforce_pp", ro)
    assert carry.info["batch_mean"] != through.info["batch_mean"]


def test_estimators_without_a_reward_to_go_ignore_the_convention_reset():
    ro = batch(MASK.repeat(2, 1), torch.cat([REWARDS, 0 * REWARDS]), group_ids=torch.tensor([0, 0]))
    for name in ("grpo", "reinforce_pp_baseline"):
        assert torch.equal(ts.run_under("reset", name, ro).token, ts.run_under("carry", name, ro).token)
    # GRPO reads only the score: the span changes nothing under through either
    assert torch.equal(ts.run_under("through", "grpo", ro).token, ts.run_under("carry", "grpo", ro).token)


def test_run_under_gives_credit_on_the_original_batch_and_names_the_convention():
    ro = batch()
    for c in ts.CONVENTIONS:
        credit = ts.run_under(c, get_estimator("reinforce_pp"), ro, gamma=G)
        assert credit.info["convention"] == c and credit.present.tolist() == ro.mask.tolist()


def test_bad_arguments_are_named():
    ro = batch()
    with pytest.raises(ValueError, match="^convention"):
        ts.run_under("skip", "gae", ro, values=VALUES)
    with pytest.raises(ValueError, match="^estimator"):
        ts.run_under("reset", "red", ro)
    with pytest.raises(TypeError, match="^estimator"):
        ts.run_under("carry", lambda r: None, ro)
    with pytest.raises(ValueError, match="^gamma"):
        ts.reset_rewards(ro, gamma=1.5)
    # through needs valid per-position data on the span
    bad = batch(logprobs=torch.tensor([[-0.1, -0.1, 0.5, 0.5, -0.1, -0.1, 0.0]]))
    with pytest.raises(ValueError, match="^rollouts"):
        ts.through_spans(bad)


def test_verl_carries_across_tool_output_as_labkit_does():
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    from types import SimpleNamespace

    m = MASK.float()
    r, v = REWARDS.float(), VALUES.float()
    on = MASK
    carry = returns_under("carry", batch(), G).float()
    _, ret = core_algos.compute_reinforce_plus_plus_outcome_advantage(r, m, config=SimpleNamespace(gamma=G))
    assert torch.allclose(ret[on], carry[on])
    _, ret = core_algos.compute_gae_advantage_return(r, v, m, gamma=G, lam=0.5)
    gae = ts.run_under("carry", "gae", batch(), values=VALUES, gamma=G, lam=0.5).token.float()
    assert torch.allclose((ret - v)[on], gae[on], atol=1e-6)
    adv, _ = core_algos.compute_remax_outcome_advantage(r, torch.tensor([0.2]), m)
    assert torch.allclose(adv[on], returns_under("carry", batch(), 1.0).float()[on] - 0.2)
    two = batch(MASK.repeat(2, 1), torch.cat([REWARDS, 0.5 * REWARDS]), group_ids=torch.tensor([0, 0]),
                logprobs=torch.full((2, 7), -0.5))
    s2 = torch.full((2, 7), 0.4, dtype=torch.float64)
    adv, _ = core_algos.compute_multi_turn_optimal_token_baseline_advantage(
        two.rewards.float(), two.mask.float(), np.array([0, 0]), two.logprobs, s2.float())
    ours = ts.run_under("carry", "tir_optimal_token_baseline", two, sum_pi_squared=s2).token
    assert torch.allclose(adv[two.mask], ours[two.mask].float(), atol=1e-6)
