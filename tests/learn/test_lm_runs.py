"""RL on the tiny LM (labkit.learn.lm_runs): PPO's critic fitted as PPO sees data, and the three runs
notebook 03 compares, each trained one iteration on a small learner."""
import pytest

from labkit.course.presets import lm_rl_setup
from labkit.learn.lm_runs import fit_lm_critic, lm_rl_runs
from labkit.learn.loop import compare

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_fit_lm_critic_reports_its_data(lm_env):
    critic, history = fit_lm_critic(lm_env, n_rollouts=16, steps=2, seed=0, progress=False)
    assert len(history) == 2 and history.attrs["rollouts"] == 16 and 0 <= history.attrs["rollout_success"] <= 1
    assert critic.train_steps == 2
    with pytest.raises(ValueError, match="n_rollouts"):
        fit_lm_critic(lm_env, n_rollouts=0, progress=False)


def test_rl_runs_train_each_method_and_count_vine_cost():
    make = lm_rl_setup(train_pool=16, eval_problems=8, prompts_per_batch=2, n_per_prompt=4)
    curves = compare(make, lm_rl_runs(k=2), seeds=(0,), iterations=1, lr=1e-5, progress=False)
    last = curves[curves.iteration == 1].set_index("label")
    assert set(last.index) == {"GRPO", "PPO", "VinePPO"}
    assert last.loss.notna().all()
    assert (last.env_steps > 0).all()
    assert last.loc["VinePPO", "policy_tokens"] > 2 * last.loc["GRPO", "policy_tokens"]
    with pytest.raises(ValueError, match="methods"):
        lm_rl_runs(methods=("DPO",))
