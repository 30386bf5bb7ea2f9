"""The runners behind notebooks 05 and 06: they measure what they say, against the DP truth."""
import math

import pandas as pd
import pytest
import torch

from labkit import agent_experiments as ax
from labkit.envs import ToolWorld
from labkit.envs.toolworld import SEARCH, THINK, THOUGHT
from labkit.core.stats import group_spread


def test_noisy_world_sets_one_noise_level_on_every_tool():
    env = ax.noisy_world(0.3, 12, n_files=4)
    assert (env.mislead, env.noise, env.flaky, env.max_turns, env.n_files) == (0.3, 0.3, 0.3, 12, 4)
    with pytest.raises(ValueError, match="noise"):
        ax.noisy_world(1.5)


def test_exact_credit_is_the_dp_advantage_and_its_gradient_estimate_is_unbiased():
    env = ax.noisy_world(0.2, 6, n_files=2)
    policy = env.make_policy(init_std=0.5, seed=1)
    est = ax.exact_credit(env, policy)
    ro = env.sample(policy, 2000, group_size=4, seed=0)
    truth = env.truth(policy)
    assert torch.allclose(est(ro).token, truth.advantage(ro).to(ro.rewards.dtype))
    # mean over trajectories of sum_t A_t grad log pi = the exact policy gradient (up to MC error)
    g = policy.gradient_estimate(ro, est(ro).token).detach().double()
    cos = float((g * truth.grad).sum() / (g.norm() * truth.grad.norm()))
    assert cos > 0.95, cos


def test_credit_vs_truth_reports_grpo_against_the_exact_skill_and_luck():
    env = ax.noisy_world(0.2, 20)
    res = ax.credit_vs_truth(env, env.scripted_policy(3.0), n_tasks=4, group_size=8, seed=1)
    ro, skill, luck = res["rollouts"], res["skill"], res["luck"]
    v0 = res["truth"].value(ro)[:, 0]
    assert torch.allclose(v0 + skill.sum(1) + luck.sum(1), ro.scores.double(), atol=1e-9)
    grpo = res["credit"]["grpo"]
    # GRPO: one number per episode
    assert torch.equal(torch.where(ro.mask, grpo - grpo[:, :1], 0), torch.zeros_like(grpo))
    row = res["stats"].iloc[0]
    m = ro.mask
    expected = torch.corrcoef(torch.stack([grpo[m].double(), skill[m]]))[0, 1]
    assert row.corr_exact == pytest.approx(float(expected))
    assert 0 <= row.sign_agree <= 1


def test_without_tool_noise_nothing_is_luck():
    env = ax.noisy_world(0.0, 15)
    res = ax.credit_vs_truth(env, env.scripted_policy(3.0), n_tasks=4, group_size=4, seed=0)
    s = ax.luck_summary(res["rollouts"], res["skill"], res["luck"])
    assert s["mean_abs_luck"] < 1e-12 and s["luck_share"] == 0
    noisy = ax.credit_vs_truth(ax.noisy_world(0.4, 15), ax.noisy_world(0.4, 15).scripted_policy(3.0),
                               n_tasks=4, group_size=4, seed=0)
    assert ax.luck_summary(noisy["rollouts"], noisy["skill"], noisy["luck"])["luck_share"] > 0.02


def test_noise_horizon_sweep_has_one_row_per_setting():
    sweep = ax.noise_horizon_sweep(noises=(0.0, 0.3), horizons=(5, 10), n_tasks=2, group_size=4, progress=False)
    assert len(sweep) == 4 and set(sweep.max_turns) == {5, 10}
    assert (sweep.loc[sweep.noise == 0, "luck_share"] == 0).all()
    with pytest.raises(ValueError, match="horizons"):
        ax.noise_horizon_sweep(noises=(0.1,), horizons=(0,), progress=False)


def test_repeat_share_counts_repeated_observation_action_pairs():
    env = ToolWorld(3, max_turns=10)
    looping = env.scripted_policy(0.0, think=50.0)  # think after "thought": the echo loop
    with torch.no_grad():
        looping.logits[0, THINK] = 50.0  # and think at the start
    ro = env.sample(looping, 1, group_size=2, seed=0)
    # (start, think) once, then (thought, think) nine times: 8 of 10 turns repeat a pair
    assert ax.repeat_share(ro) == pytest.approx(0.8)
    with torch.no_grad():
        looping.logits[THOUGHT, THINK] = -50.0
        looping.logits[THOUGHT, SEARCH] = 50.0
    assert ax.repeat_share(env.sample(looping, 1, group_size=2, seed=0)) < 0.8


def test_group_spread_is_the_mean_within_group_std_and_the_flat_share():
    env = ToolWorld(3, max_turns=4)
    ro = env.sample(env.make_policy(), 2, group_size=2, seed=0)
    ro = ro.with_(rewards=torch.zeros_like(ro.rewards))
    r = ro.rewards.clone()
    r[0, 0], r[1, 0] = 1.0, 0.0  # group 0: scores 1, 0; group 1: 0, 0
    spread, flat = group_spread(ro.with_(rewards=r))
    assert spread == pytest.approx(math.sqrt(0.5) / 2) and flat == 0.5


def test_echo_trap_runs_trains_three_methods_at_equal_sampling():
    curves, final = ax.echo_trap_runs(seeds=(0,), iterations=3, eval_every=3, progress=False,
                                      world={"n_files": 3, "max_turns": 8})
    assert final.label.nunique() == 3 and len(final) == 3
    last = curves[curves.iteration == 3].set_index("label").env_steps
    grpo, starpo = last.filter(like="GRPO").iloc[0], last.filter(like="StarPO").iloc[0]
    assert grpo > 0 and starpo > 0
    assert {"reward_spread", "zero_spread_share", "entropy"} <= set(curves.columns)
    assert final[["timeout_share", "success_rate", "repeat_share"]].apply(lambda c: c.between(0, 1).all()).all()


def test_anchor_statistics_histogram_covers_every_turn():
    env = ax.noisy_world(0.2, 20)
    a = ax.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert int(a["sizes"].turns.sum()) == int(a["rollouts"].mask.sum())
    assert a["singleton_share"] == pytest.approx(float((a["groups"]["size"] == 1).mean()))
    # one episode per task: only repeats inside an episode can share an anchor
    alone = ax.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=1, seed=0)
    assert alone["singleton_share"] > a["singleton_share"]


def test_gigpo_terms_vs_truth_gives_one_row_per_credit():
    env = ax.noisy_world(0.2, 20)
    t = ax.gigpo_terms_vs_truth(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert list(t["table"].credit) == ["GiGPO step term", "GiGPO episode term", "GiGPO (episode + omega x step)", "GRPO"]
    assert 0 < t["shared_turn_share"] <= 1
    assert t["table"].corr_all_turns.between(-1, 1).all()


def test_success_at_budget_interpolates_and_refuses_to_extrapolate():
    curves = pd.DataFrame({"label": "a", "seed": 0, "env_steps": [0, 100, 200], "success": [0.0, 0.5, 1.0]})
    at = ax.success_at_budget(curves, 150)
    assert at.success.iloc[0] == pytest.approx(0.75)
    assert math.isnan(ax.success_at_budget(curves, 250).success.iloc[0])
    with pytest.raises(ValueError, match="budget"):
        ax.success_at_budget(curves, -1)


def test_grpo_vs_gigpo_runs_and_band():
    env = ax.noisy_world(0.2, 10, n_files=3)
    curves = ax.grpo_vs_gigpo_runs(env, seeds=(0, 1), iterations=4, eval_every=2, progress=False)
    assert set(curves.label) == {"GRPO", "GiGPO"} and set(curves.seed) == {0, 1}
    band = ax.env_step_band(curves, points=5)
    assert ((band["min"] <= band["mean"] + 1e-12) & (band["mean"] <= band["max"] + 1e-12)).all()
