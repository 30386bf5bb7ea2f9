"""Implicit rewards (labkit.credit.implicit): From r to Q* (dpo_implicit_q), T-REG, ITPO, iStar and
StepAgent; hand-computed cases, degenerate input, bad arguments, and the tuned tiny LMs.
"""

import copy
import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.credit.episode import grpo
from labkit.credit.implicit import dpo_implicit_q, istar, itpo, t_reg
from labkit.credit.redistribution import spa_rl
from labkit.learn.turn_models import ImplicitStepRewardModel, ProgressEstimator, policy_logprobs

from credit_cases import empty, two_steps
from turn_batches import S2, outcome_turns, turn_rollouts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- From r to Q*
def test_dpo_implicit_q_hand_computed_token_and_step():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    ref = torch.tensor([[-0.3, -0.5, -0.4, -0.2]])
    tok = dpo_implicit_q(ro, logprobs=lp, ref_logprobs=ref, beta=0.5, level="token")
    assert tok.token[0].tolist() == pytest.approx([0.1, 0.0, -0.3, 0.0])
    step = dpo_implicit_q(ro, logprobs=lp, ref_logprobs=ref, beta=0.5)
    assert step.level == "step" and step.values[0].tolist() == pytest.approx([0.1, -0.3])
    assert step.token[0].tolist() == pytest.approx([0.1, 0.1, -0.3, -0.3])
    assert float(step.info["sequence_reward"][0]) == pytest.approx(-0.2)
    # logprobs default to the rollouts' own (the sampling policy's)
    own = dpo_implicit_q(ro.with_(logprobs=lp), ref_logprobs=ref, beta=0.5, level="token")
    assert torch.allclose(own.token, tok.token)


def test_dpo_implicit_q_degenerate_input():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    assert dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp * 2, beta=0.0).token.abs().sum() == 0
    assert dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp).token.abs().sum() == 0
    e = empty()
    c = dpo_implicit_q(e, logprobs=torch.zeros(2, 3), ref_logprobs=torch.zeros(2, 3))
    assert c.token.abs().sum() == 0
    one = Rollouts(tokens=torch.zeros(1, 2, dtype=torch.long), mask=torch.ones(1, 2, dtype=torch.bool),
                   rewards=torch.tensor([[0.0, 1.0]]), step_ids=torch.tensor([[0, 0]]))
    c = dpo_implicit_q(one, logprobs=torch.tensor([[-0.1, -0.2]]), ref_logprobs=torch.tensor([[-0.3, -0.3]]), beta=1.0)
    assert c.values[0].tolist() == pytest.approx([0.3])  # the sequence-level implicit reward


def test_dpo_implicit_q_bad_arguments():
    ro = two_steps()
    lp = torch.full((1, 4), -0.5)
    with pytest.raises(ValueError, match="^logprobs"):
        dpo_implicit_q(ro, ref_logprobs=lp)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=None)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=torch.full((1, 3), -0.5))
    with pytest.raises(ValueError, match="^logprobs"):
        dpo_implicit_q(ro, logprobs=-lp, ref_logprobs=lp)
    with pytest.raises(ValueError, match="^beta"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp, beta=-1.0)
    with pytest.raises(ValueError, match="^level"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp, level="turn")


# --------------------------------------------------------------------------- T-REG
def test_t_reg_hand_computed_and_degenerate():
    ro = two_steps()
    good = torch.tensor([[-0.1, -0.2, -2.0, -0.1]])
    bad = torch.tensor([[-0.2, -0.2, -0.5, -0.1]])
    c = t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=2.0)
    assert c.level == "token" and c.token[0].tolist() == pytest.approx([0.2, 0.0, -3.0, 0.0])
    s = t_reg(ro, better_logprobs=good, worse_logprobs=bad, level="step")
    assert s.values[0].tolist() == pytest.approx([0.1, -1.5])
    assert t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=0.0).token.abs().sum() == 0
    assert t_reg(empty(), better_logprobs=torch.zeros(2, 3), worse_logprobs=torch.zeros(2, 3)).token.abs().sum() == 0
    with pytest.raises(ValueError, match="^worse_logprobs"):
        t_reg(ro, better_logprobs=good, worse_logprobs=torch.full((1, 4), float("nan")))
    with pytest.raises(ValueError, match="^scale"):
        t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=-1)


def test_tuned_models_give_finite_implicit_credit(lm_ref):
    env, ref = lm_ref
    sub = ref.select(range(8))
    dpo = env.tuned("dpo")
    c = dpo_implicit_q(sub, logprobs=dpo.rollout_logprobs(sub), ref_logprobs=env.rollout_logprobs(sub))
    assert torch.isfinite(c.token).all() and c.token.abs().sum() > 0
    treg = env.tuned("treg")
    t = t_reg(sub, better_logprobs=treg.rollout_logprobs(sub, condition="better"),
              worse_logprobs=treg.rollout_logprobs(sub, condition="worse"))
    assert t.token.abs().sum() > 0
    with pytest.raises(ValueError, match="^name"):
        env.tuned("ppo")
    with pytest.raises(ValueError, match="^condition"):
        treg.rollout_logprobs(sub, condition="best")


def test_registered():
    for name in ("itpo", "istar", "spa_rl"):
        assert name in ESTIMATORS


# --------------------------------------------------------------------------- ITPO
def test_itpo_softmax_hand_computed():
    ro = outcome_turns([2, 2], [1.0, 0.0])
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
    ro = outcome_turns([2, 2], [1.0, 0.0])
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
    ro = outcome_turns([3], [1.0])
    lp = torch.full((1, 3), -0.3, dtype=torch.float64)
    c = itpo(ro, logprobs=lp, ref_logprobs=lp)
    assert torch.allclose(c.token[0], torch.tensor([1.0, 2 / 3, 1 / 3], dtype=torch.float64), atol=1e-5)
    # a one-turn trajectory gets its whole outcome on that turn
    one = outcome_turns([1], [1.0])
    assert torch.allclose(itpo(one, logprobs=lp[:, :1], ref_logprobs=lp[:, :1]).token,
                          torch.tensor([[1.0]], dtype=torch.float64), atol=1e-5)
    # a row with no played turn gets zero credit (a batch with none is refused by Rollouts)
    with pytest.raises(ValueError, match="^mask"):
        outcome_turns([0], [0.0])
    gap = outcome_turns([2, 0], [1.0, 0.0], groups=[0, 1])
    z = torch.full((2, 2), -0.3, dtype=torch.float64)
    assert float(itpo(gap, logprobs=z, ref_logprobs=z).token[1].abs().sum()) == 0.0
    # an all-equal group with no within-episode spread: zero
    eq = outcome_turns([2, 2], [1.0, 1.0])
    lp2 = torch.full((2, 2), -0.5, dtype=torch.float64)
    assert float(itpo(eq, logprobs=lp2, ref_logprobs=lp2, normalize="none").token.abs().max()) < 1e-9
    # softmax in an all-success group: G = [1, 1/2], baseline 1, not rescaled by 1 / eps
    assert torch.allclose(itpo(eq, logprobs=lp2, ref_logprobs=lp2).token,
                          torch.tensor([[0.0, -0.5], [0.0, -0.5]], dtype=torch.float64))


def test_itpo_bad_arguments():
    ro = outcome_turns([2], [1.0])
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
    ro = outcome_turns([2, 1], [1.0, 0.0])
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
    ro = outcome_turns([2, 1], [1.0, 0.0])
    g = grpo(ro).token
    flat = torch.full((2, 2), 0.7, dtype=torch.float64)  # all step rewards equal: A^S = 0
    assert torch.allclose(istar(ro, step_rewards=flat).token, g)
    assert torch.allclose(istar(ro, step_rewards=torch.randn(2, 2, dtype=torch.float64), alpha=0.0).token, g)
    gap = outcome_turns([2, 0], [1.0, 0.0], groups=[0, 1])
    assert float(istar(gap, step_rewards=torch.zeros(2, 2)).token[1].abs().sum()) == 0.0


def test_istar_bad_arguments():
    ro = outcome_turns([2], [1.0])
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=None)
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=torch.zeros(1, 5))
    with pytest.raises(ValueError, match="step_rewards"):
        istar(ro, step_rewards=torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="alpha"):
        istar(ro, step_rewards=torch.zeros(1, 2), alpha=float("inf"))


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


# --------------------------------------------------------------------------- StepAgent: the estimator
def test_step_agent_by_hand():
    est = ESTIMATORS["step_agent"]
    ro = turn_rollouts([[0, 1, 1], [1]], [[0, 1, 0], [1]])
    table = torch.tensor([[1.0, -1.0], [0.5, 2.0]], dtype=torch.float64)
    c = est(ro, reward=table)
    assert torch.allclose(c.token, torch.tensor([[1.0, 2.0, 0.5], [2.0, 0.0, 0.0]], dtype=torch.float64))
    assert c.cost.aux_calls == 4 and c.level == "turn"
    # gamma = 1: reward-to-go along each trajectory
    c1 = est(ro, reward=table, gamma=1.0)
    assert torch.allclose(c1.token[0], torch.tensor([3.5, 2.5, 0.5], dtype=torch.float64))
    # centred on pi: obs 0 mean = 0.5 * 1 + 0.5 * -1 = 0; obs 1 mean = 0.25 * 0.5 + 0.75 * 2 = 1.625
    pi = torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=torch.float64)
    cc = est(ro, reward=table, pi=pi)
    assert torch.allclose(cc.token[0], torch.tensor([1.0, 0.375, -1.125], dtype=torch.float64))
    # a callable reward model gives the same credit
    call = est(ro, reward=lambda o, a: table[o, a])
    assert torch.allclose(call.token, c.token)


def test_step_agent_degenerate_input():
    est = ESTIMATORS["step_agent"]
    table = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    one = est(turn_rollouts([[0]], [[1]]), reward=table, gamma=1.0)       # a one-turn trajectory
    assert one.token.tolist() == [[-1.0]]
    empty = turn_rollouts([[0], []], [[0], []])                          # a trajectory with no turn
    c = est(empty, reward=table)
    assert c.token[1].abs().sum() == 0 and c.cost.aux_calls == 1
    zero = est(turn_rollouts([[0, 0]], [[0, 1]]), reward=torch.zeros(1, 2))
    assert zero.token.abs().sum() == 0


def test_step_agent_rejects_bad_arguments():
    est = ESTIMATORS["step_agent"]
    ro = turn_rollouts([[0, 1]], [[0, 1]])
    with pytest.raises(ValueError, match="^reward"):
        est(ro, reward=None)
    with pytest.raises(ValueError, match="^reward"):
        est(ro, reward=torch.zeros(1, 2))                                 # obs 1 not covered
    with pytest.raises(ValueError, match="^gamma"):
        est(ro, reward=torch.zeros(2, 2), gamma=1.5)
    with pytest.raises(ValueError, match="^pi"):
        est(ro, reward=torch.zeros(2, 2), pi=torch.ones(3, 2) / 2)
