"""Inverse RL (labkit.learn.irl, StepAgent): the step-reward fit by hand, the exact expert, and
StepAgent's credit in the loop and against the truth.
"""

import pytest
import torch

from labkit.credit import ESTIMATORS, get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.learner import ToolLearner
from labkit.learn.irl import (StepRewardIRL, expert_policy, full_information_value, policy_from_actions,
                              reward_vs_advantage, step_agent_trainer)
from labkit.learn.loop import train

from learn_worlds import small_world
from turn_batches import turn_rollouts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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


def test_step_agent_trainer_refuses_a_missing_policy_by_name():
    with pytest.raises(TypeError, match=r"^policy: expected a policy with probs\(\) \(e.g. TabularSoftmaxPolicy\), got None"):
        step_agent_trainer(None, None)
