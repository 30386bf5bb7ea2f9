"""Implicit and redistributed turn rewards on agent rollouts: ITPO, iStar, SPA-RL, and the
tabular models they read (``labkit.learn.turn_models``).

Rollouts are built by hand (one position per turn) so every expected number is computed on
paper; one test runs all three on a small ToolWorld batch.
"""
import copy
import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.credit.episode import grpo
from labkit.credit.implicit import istar, itpo
from labkit.credit.redistribution import spa_rl
from labkit.learn.turn_models import (ImplicitStepRewardModel, ProgressEstimator, policy_logprobs,
                                      preference_pairs)

S2 = math.sqrt(0.5)  # unbiased std of the outcomes {1, 0}


def make(n_turns, outcomes, *, groups=None, states=None, actions=None):
    """Trajectory b has n_turns[b] one-position turns; its outcome sits on its last turn."""
    B, T = len(n_turns), max(max(n_turns), 1)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    for b, n in enumerate(n_turns):
        mask[b, :n] = True
        if n:
            rew[b, n - 1] = outcomes[b]
    tid = torch.where(mask, torch.arange(T).expand(B, T), -1)
    tok = torch.zeros(B, T, dtype=torch.long) if actions is None else torch.tensor(actions)
    st = None if states is None else torch.tensor(states)
    return Rollouts(tokens=tok, mask=mask, rewards=rew, step_ids=tid.clone(), turn_ids=tid,
                    group_ids=None if groups is None else torch.tensor(groups), states=st)


def test_registered():
    for name in ("itpo", "istar", "spa_rl"):
        assert name in ESTIMATORS


# --------------------------------------------------------------------------- ITPO
def test_itpo_softmax_hand_computed():
    ro = make([2, 2], [1.0, 0.0])
    lp = torch.log(torch.full((2, 2), 0.5, dtype=torch.float64))
    ref = lp.clone()
    ref[0, 0] = math.log(0.25)  # turn 0 of trajectory 0: log-ratio ln 2, so r = [ln 2, 0]
    c = itpo(ro, logprobs=lp, ref_logprobs=ref)
    # softmax weights [2/3, 1/3] -> rho [2/3, 1/3], G = [1, 1/3]; trajectory 1: R = 0, G = 0
    assert torch.allclose(c.info["redistributed"][0], torch.tensor([2 / 3, 1 / 3], dtype=torch.float64))
    expected = torch.tensor([[0.5 / S2, (1 / 3 - 0.5) / S2], [-0.5 / S2, -0.5 / S2]], dtype=torch.float64)
    assert torch.allclose(c.token, expected, atol=1e-5)
    assert c.level == "turn"


def test_itpo_none_adds_outcome_on_last_turn():
    ro = make([2, 2], [1.0, 0.0])
    lp = torch.log(torch.full((2, 2), 0.5, dtype=torch.float64))
    ref = lp.clone()
    ref[0, 0] = math.log(0.25)
    c = itpo(ro, logprobs=lp, ref_logprobs=ref, normalize="none", beta=1.0)
    g0 = 1 + math.log(2)  # G = [ln2 + 1, 1] and [0, 0]
    mean, std = g0 / 2, g0 * S2
    expected = torch.tensor([[(g0 - mean) / std, (1 - mean) / std], [-mean / std, -mean / std]], dtype=torch.float64)
    assert torch.allclose(c.token, expected, atol=1e-5)


def test_itpo_degenerate():
    # policy == reference: the outcome is split equally; a group of one keeps raw returns
    ro = make([3], [1.0])
    lp = torch.full((1, 3), -0.3, dtype=torch.float64)
    c = itpo(ro, logprobs=lp, ref_logprobs=lp)
    assert torch.allclose(c.token[0], torch.tensor([1.0, 2 / 3, 1 / 3], dtype=torch.float64), atol=1e-5)
    # a one-turn trajectory gets its whole outcome on that turn
    one = make([1], [1.0])
    assert torch.allclose(itpo(one, logprobs=lp[:, :1], ref_logprobs=lp[:, :1]).token,
                          torch.tensor([[1.0]], dtype=torch.float64), atol=1e-5)
    # a row with no played turn gets zero credit (a batch with none is refused by Rollouts)
    with pytest.raises(ValueError, match="^mask"):
        make([0], [0.0])
    gap = make([2, 0], [1.0, 0.0], groups=[0, 1])
    z = torch.full((2, 2), -0.3, dtype=torch.float64)
    assert float(itpo(gap, logprobs=z, ref_logprobs=z).token[1].abs().sum()) == 0.0
    # an all-equal group with no within-episode spread: zero
    eq = make([2, 2], [1.0, 1.0])
    lp2 = torch.full((2, 2), -0.5, dtype=torch.float64)
    assert float(itpo(eq, logprobs=lp2, ref_logprobs=lp2, normalize="none").token.abs().max()) < 1e-9
    # softmax in an all-success group: G = [1, 1/2], baseline 1, not rescaled by 1 / eps
    assert torch.allclose(itpo(eq, logprobs=lp2, ref_logprobs=lp2).token,
                          torch.tensor([[0.0, -0.5], [0.0, -0.5]], dtype=torch.float64))


def test_itpo_bad_arguments():
    ro = make([2], [1.0])
    lp = torch.full((1, 2), -0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="ref_logprobs"):
        itpo(ro, logprobs=lp, ref_logprobs=None)
    with pytest.raises(ValueError, match="ref_logprobs"):
        itpo(ro, logprobs=lp, ref_logprobs=-lp)
    with pytest.raises(ValueError, match="ref_logprobs"):
        itpo(ro, logprobs=lp, ref_logprobs=torch.zeros(1, 3))
    with pytest.raises(ValueError, match="normalize"):
        itpo(ro, logprobs=lp, ref_logprobs=lp, normalize="max")
    with pytest.raises(ValueError, match="beta"):
        itpo(ro, logprobs=lp, ref_logprobs=lp, beta=-1.0)
    with pytest.raises(ValueError, match="logprobs"):
        itpo(ro, ref_logprobs=lp)  # the rollouts carry no log-probabilities


# --------------------------------------------------------------------------- iStar
def test_istar_hand_computed():
    ro = make([2, 1], [1.0, 0.0])
    r = torch.tensor([[1.0, 3.0], [2.0, 0.0]], dtype=torch.float64)
    c = istar(ro, step_rewards=r, alpha=0.5)
    # A^E = [+S2..., -...] = +-0.7071; the group's turn rewards {1, 3, 2}: mean 2, std 1 -> [-1, 1], [0]
    ae = 0.5 / S2
    expected = torch.tensor([[ae - 0.5, ae + 0.5], [-ae, 0.0]], dtype=torch.float64)
    assert torch.allclose(c.token, expected, atol=1e-5)
    assert torch.allclose(c.info["step_advantage"], torch.tensor([[-1.0, 1.0], [0.0, 0.0]], dtype=torch.float64),
                          atol=1e-5)
    assert c.cost.aux_calls == 0
    # a callable is charged one PRM pass per trajectory
    assert istar(ro, step_rewards=lambda _: r, alpha=0.5).cost.aux_calls == 2


def test_istar_degenerate_is_grpo():
    ro = make([2, 1], [1.0, 0.0])
    g = grpo(ro).token
    flat = torch.full((2, 2), 0.7, dtype=torch.float64)  # all step rewards equal: A^S = 0
    assert torch.allclose(istar(ro, step_rewards=flat).token, g)
    assert torch.allclose(istar(ro, step_rewards=torch.randn(2, 2, dtype=torch.float64), alpha=0.0).token, g)
    gap = make([2, 0], [1.0, 0.0], groups=[0, 1])
    assert float(istar(gap, step_rewards=torch.zeros(2, 2)).token[1].abs().sum()) == 0.0


def test_istar_bad_arguments():
    ro = make([2], [1.0])
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=None)
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=torch.zeros(1, 5))
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="alpha"):
        istar(ro, step_rewards=torch.zeros(1, 2), alpha=float("inf"))


def test_implicit_step_reward_model_prefers_the_winning_action():
    # one task, two trajectories: (obs 0, action 1) then success; (obs 0, action 0) then failure
    ro = make([1, 1], [1.0, 0.0], states=[[0], [0]], actions=[[1], [0]])
    w, l = preference_pairs(ro)
    assert w.tolist() == [0] and l.tolist() == [1]
    prm = ImplicitStepRewardModel(torch.zeros(2, 3), beta=0.5)
    assert float(prm(ro).abs().sum()) == 0.0  # starts at the reference: every reward 0
    prm.fit(ro, steps=50)
    r = prm(ro)
    assert r[0, 0] > 0 > r[1, 0]
    assert prm.fit_info["pairs"] == 1 and prm.fit_info["loss"] < math.log(2)
    with pytest.raises(ValueError, match="ref_logits"):
        ImplicitStepRewardModel(torch.zeros(3))
    with pytest.raises(ValueError, match="rollouts.states"):
        prm(make([1], [1.0], states=[[7]]))


# --------------------------------------------------------------------------- SPA-RL
def test_spa_rl_hand_computed():
    ro = make([2, 1], [1.0, 0.0])
    x = torch.tensor([[0.2, 0.8], [0.5, 0.0]], dtype=torch.float64)
    c = spa_rl(ro, contributions=x)
    assert torch.allclose(c.token, torch.tensor([[0.2, 0.8], [0.5, 0.0]], dtype=torch.float64))
    assert torch.allclose(c.info["progress"], torch.tensor([[0.2, 1.0], [0.5, 0.0]], dtype=torch.float64))
    ret = spa_rl(ro, contributions=x, credit="return")
    assert torch.allclose(ret.token, torch.tensor([[1.0, 0.8], [0.5, 0.0]], dtype=torch.float64))
    mix = spa_rl(ro, contributions=x, outcome_weight=1.0)
    a = 0.5 / S2
    assert torch.allclose(mix.token, torch.tensor([[0.2 + a, 0.8 + a], [0.5 - a, 0.0]], dtype=torch.float64),
                          atol=1e-5)
    assert spa_rl(ro, contributions=lambda _: x).cost.aux_calls == 2


def test_spa_rl_degenerate_and_bad_arguments():
    one = make([1], [1.0])
    assert torch.allclose(spa_rl(one, contributions=torch.ones(1, 1)).token, torch.ones(1, 1, dtype=torch.float64))
    gap = make([2, 0], [1.0, 0.0], groups=[0, 1])
    assert float(spa_rl(gap, contributions=torch.zeros(2, 2)).token[1].abs().sum()) == 0.0
    ro = make([2], [1.0])
    with pytest.raises(ValueError, match="contributions"):
        spa_rl(ro, contributions=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="contributions"):
        spa_rl(ro, contributions=None)
    with pytest.raises(ValueError, match="credit"):
        spa_rl(ro, contributions=torch.zeros(1, 2), credit="gain")


def test_progress_estimator_sums_to_outcome():
    # (o0, a0) always precedes the outcome-deciding (o1, a1): the table gives (o1, a1) all of it
    ro = make([2, 1, 1], [1.0, 0.0, 1.0], states=[[0, 1], [0, 0], [1, 0]], actions=[[0, 1], [0, 0], [1, 0]])
    pe = ProgressEstimator(2, 2, ridge=1e-9).fit(ro)
    assert abs(float(pe.table[0, 0])) < 1e-6 and abs(float(pe.table[1, 1]) - 1.0) < 1e-6
    assert torch.allclose(pe(ro).sum(1), ro.scores.to(torch.float64), atol=1e-6)
    assert pe.fit_info["mse"] < 1e-10
    mlp = ProgressEstimator(2, 2, kind="mlp", max_turns=2, hidden=8).fit(ro, steps=300, lr=0.05)
    assert mlp.fit_info["mse"] < 0.05
    with pytest.raises(ValueError, match="kind"):
        ProgressEstimator(2, 2, kind="tree")


# --------------------------------------------------------------------------- on a ToolWorld
def test_all_three_on_toolworld():
    from labkit.envs.toolworld import ToolWorld
    torch.manual_seed(0)
    env = ToolWorld(3, max_turns=8)
    ref = env.scripted_policy(1.0)
    policy = copy.deepcopy(ref)
    with torch.no_grad():
        policy.logits += 0.3 * torch.randn(policy.logits.shape, generator=torch.Generator().manual_seed(1))
    ro = env.sample(policy, 4, group_size=4, seed=3)
    lp = policy_logprobs(policy, ro)
    assert torch.allclose(lp, torch.where(ro.mask, ro.logprobs.to(torch.float64), 0.0), atol=1e-6)
    c = itpo(ro, logprobs=lp, ref_logprobs=policy_logprobs(ref, ro))
    # softmax mode: the redistributed turn rewards sum to the outcome
    assert torch.allclose(c.info["redistributed"].sum(1), ro.scores.to(torch.float64), atol=1e-9)
    hist = env.sample(policy, 16, group_size=4, seed=4)
    prm = ImplicitStepRewardModel.for_policy(policy).fit(hist, steps=50)
    s = istar(ro, step_rewards=prm)
    pe = ProgressEstimator.for_env(env).fit(hist)
    p = spa_rl(ro, contributions=pe)
    for credit in (c, s, p):
        assert credit.token.shape == ro.mask.shape
        assert float(credit.token[~ro.mask].abs().sum()) == 0.0
