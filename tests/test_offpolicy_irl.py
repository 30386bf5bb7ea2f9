"""Off-policy turns (SORL: the loop's off-policy mode) and inverse RL (StepAgent: step_agent,
labkit.learn.irl). Hand-built rollouts so the expected numbers can be checked on paper, and a
small ToolWorld for the expert and the loop."""
import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.learner import ToolLearner
from labkit.learn.irl import (StepRewardIRL, expert_policy, full_information_value, policy_from_actions,
                              reward_vs_advantage, step_agent_trainer)
from labkit.learn.loop import offpolicy_comparison, policy_loss, summarise, train, turn_log_ratio

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: one thread, restored afterwards


def small_world(**kw):
    return ToolWorld(3, max_turns=kw.pop("max_turns", 8), mislead=0.3, noise=0.3, flaky=0.3, **kw)


def turn_rollouts(obs, act, rewards=None):
    """One position per turn (a tabular agent): trajectory b plays len(obs[b]) turns."""
    B, T = len(obs), max(len(o) for o in obs)
    mask = torch.zeros(B, T, dtype=torch.bool)
    states = torch.zeros(B, T, dtype=torch.long)
    tokens = torch.zeros(B, T, dtype=torch.long)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    for b, (o, a) in enumerate(zip(obs, act)):
        n = len(o)
        mask[b, :n] = True
        states[b, :n] = torch.tensor(o, dtype=torch.long)
        tokens[b, :n] = torch.tensor(a, dtype=torch.long)
        tid[b, :n] = torch.arange(n)
        if rewards is not None and n:
            rew[b, n - 1] = rewards[b]
    return Rollouts(tokens=tokens, mask=mask, rewards=rew, states=states, step_ids=tid.clone(), turn_ids=tid)


# --------------------------------------------------------------------------- SORL: the loss
def test_turn_ratio_is_the_geometric_mean_of_the_turns_tokens():
    log_ratio = torch.tensor([[math.log(2.0), math.log(0.5), math.log(4.0), 0.3]])
    mask = torch.tensor([[True, True, True, False]])
    tid = torch.tensor([[0, 0, 1, -1]])
    out = turn_log_ratio(log_ratio, mask, tid)
    # turn 0: sqrt(2 * 0.5) = 1 -> log 0; turn 1: one token keeps its ratio; off-mask unchanged
    assert torch.allclose(out, torch.tensor([[0.0, 0.0, math.log(4.0), 0.3]]))


def test_sorl_renormalisation_by_hand():
    # two positions, ratios 1.0 and 1.5 (outside [0.8, 1.2]), advantages 1 and 3
    # log-probabilities (<= 0): both shifted by -1, so the ratios stay 1.0 and 1.5
    old = torch.full((1, 2), -1.0, dtype=torch.float64)
    logp = torch.tensor([[-1.0, math.log(1.5) - 1.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    plain, st0 = policy_loss(logp, old, adv, mask, "ppo_clip")
    assert set(st0) == {"clip_frac", "approx_kl"}  # defaults: the old loss and stats, unchanged
    # plain: -(1 * 1 + min(1.5 * 3, 1.2 * 3)) / 2 = -(1 + 3.6) / 2
    assert float(plain.detach()) == pytest.approx(-2.3)
    sorl, st = policy_loss(logp, old, adv, mask, "ppo_clip", renorm="sorl")
    # kappa = |A| outside / |A| total = 3 / 4, weight 1/4 on every position
    assert float(sorl.detach()) == pytest.approx(-2.3 * 0.25)
    assert st["out_frac"] == pytest.approx(0.5) and st["scale"] == pytest.approx(0.25)
    # per trajectory: a second row without drift keeps weight 1
    old2 = torch.full((2, 2), -1.0, dtype=torch.float64)
    logp2 = torch.tensor([[0.0, math.log(1.5)], [0.0, 0.0]], dtype=torch.float64) - 1.0
    adv2 = torch.tensor([[1.0, 3.0], [2.0, 2.0]], dtype=torch.float64)
    row, _ = policy_loss(logp2, old2, adv2, torch.ones(2, 2, dtype=torch.bool), "grpo", renorm="sorl_row")
    # row 0: 0.25 * -(1 + 3.6) / 2; row 1: -(2 + 2) / 2; grpo: mean of the two rows
    assert float(row) == pytest.approx((0.25 * -2.3 + -2.0) / 2)


def test_policy_loss_rejects_bad_sorl_arguments():
    x = torch.zeros(1, 2)
    m = torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="^renorm"):
        policy_loss(x, x, x, m, renorm="sometimes")
    with pytest.raises(ValueError, match="^ratio_level"):
        policy_loss(x, x, x, m, ratio_level="sentence")
    with pytest.raises(ValueError, match="^turn_ids"):
        policy_loss(x, x, x, m, ratio_level="turn")


# --------------------------------------------------------------------------- SORL: the loop
def _learner(seed=0):
    env = small_world()
    return ToolLearner(env, env.make_policy(), n_tasks=4, group_size=4)


def test_staleness_zero_is_the_on_policy_loop_and_staleness_k_lags():
    base = train(_learner(), "grpo", kind="grpo", iterations=4, eval_every=2, progress=False)
    assert "staleness" not in base.columns
    stale = train(_learner(), "grpo", kind="grpo", iterations=5, eval_every=5, progress=False, staleness=2,
                  epochs=2, renorm="sorl_row")
    assert stale.staleness.iloc[1:].tolist() == [0, 1, 2, 2, 2]
    # every iteration samples (and pays for) one fresh batch, whatever batch it trains on
    assert (stale.env_steps.diff().iloc[1:] > 0).all()
    assert stale.scale.iloc[1:].between(0, 1).all()
    # the first iteration trains on its own fresh batch: identical to the on-policy run
    assert stale.loss.iloc[1] == pytest.approx(train(_learner(), "grpo", kind="grpo", iterations=1, epochs=2,
                                                     progress=False).loss.iloc[1])


def test_train_rejects_bad_off_policy_arguments():
    with pytest.raises(ValueError, match="^staleness"):
        train(_learner(), "grpo", iterations=1, staleness=-1, progress=False)
    with pytest.raises(ValueError, match="^renorm"):
        train(_learner(), "grpo", iterations=1, renorm="yes", progress=False)
    with pytest.raises(ValueError, match="^arms"):
        offpolicy_comparison(_learner, arms=["nope"])


def test_offpolicy_comparison_runs_every_arm():
    curves = offpolicy_comparison(_learner, staleness=2, seeds=(0,), kind="grpo", iterations=3, eval_every=3)
    table = summarise(curves)
    assert len(table) == 4 and (table.seeds == 1).all()


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


# --------------------------------------------------------------------------- StepAgent: the IRL model
def test_step_reward_irl_closed_form_by_hand():
    # expert demos: obs 0 -> action 1 twice, obs 1 -> action 0 once; the agent always plays action 0
    demos = turn_rollouts([[0, 1], [0]], [[1, 0], [1]])
    pi = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    irl = StepRewardIRL(2, 2, prior=0.5).fit(demos, pi)
    # counts: pos (0,1)=2, (1,0)=1; neg (0,0)=2, (1,0)=1
    expected = torch.log(torch.tensor([[0.5 / 2.5, 2.5 / 0.5], [1.5 / 1.5, 0.5 / 0.5]], dtype=torch.float64))
    assert torch.allclose(irl.reward, expected)
    assert irl.expert_turns == 3 and irl.policy_samples == 3
    with pytest.raises(ValueError, match="^pi"):
        irl.fit(demos, torch.ones(2, 2))
    with pytest.raises(TypeError, match="^demos"):
        irl.fit("demos", pi)


def test_expert_is_exact_and_bounded():
    env = small_world(max_turns=6)
    expert, info = expert_policy(env, max_rounds=3)
    assert info["J"] == pytest.approx(env.truth(expert).J)
    assert info["J_start"] - 1e-12 <= info["J"] <= info["J_full_information"] + 1e-9
    assert env.truth(policy_from_actions(env, info["actions"])).J == pytest.approx(info["J"])
    with pytest.raises(ValueError, match="^actions"):
        policy_from_actions(env, info["actions"][:-1])
    # with reliable tools and time to edit and submit, seeing the bug wins surely
    assert full_information_value(ToolWorld(3, max_turns=2, mislead=0, noise=0, flaky=0)) == pytest.approx(1.0)
    assert full_information_value(ToolWorld(3, max_turns=1)) == pytest.approx(0.0)


def test_step_agent_in_the_loop_and_against_the_truth():
    env = small_world(max_turns=6)
    expert, _ = expert_policy(env, max_rounds=2)
    demos = env.sample(expert, 32, group_size=1, seed=5)
    policy = env.make_policy()
    irl = StepRewardIRL.for_env(env).fit(demos, policy.probs().detach())
    stats = reward_vs_advantage(irl, env.truth(policy))
    assert bool(stats["seen"].any()) and 0 <= float(stats["top1"]) <= 1
    assert stats["A_bar"].shape == stats["reward"].shape == (env.n_obs, env.n_actions)
    credit = step_agent_trainer(demos, policy, seed=1)
    curve = train(ToolLearner(env, policy, n_tasks=4, group_size=4), credit, kind="grpo", iterations=3,
                  eval_every=3, progress=False)
    assert len(credit.history) == 3 and curve.success.notna().sum() == 2
    assert get_estimator("step_agent") is ESTIMATORS["step_agent"]
