"""Notebook 05's runners (labkit.course.nb05_why_agents_harder): they measure what they say, against
the DP truth."""
import math

import pandas as pd
import pytest
import torch

from labkit.core.stats import group_spread
from labkit.course import nb05_why_agents_harder as lesson
from labkit.envs import ToolWorld
from labkit.envs.toolworld import SEARCH
from labkit.envs.toolworld import THINK
from labkit.envs.toolworld import THOUGHT


def test_noisy_world_sets_one_noise_level_on_every_tool():
    env = lesson.noisy_world(0.3, 12, n_files=4)
    assert (env.mislead, env.noise, env.flaky, env.max_turns, env.n_files) == (0.3, 0.3, 0.3, 12, 4)
    with pytest.raises(ValueError, match="noise"):
        lesson.noisy_world(1.5)


def test_exact_credit_is_the_dp_advantage_and_its_gradient_estimate_is_unbiased():
    env = lesson.noisy_world(0.2, 6, n_files=2)
    policy = env.make_policy(init_std=0.5, seed=1)
    est = lesson.exact_credit(env, policy)
    ro = env.sample(policy, 2000, group_size=4, seed=0)
    truth = env.truth(policy)
    assert torch.allclose(est(ro).token, truth.advantage(ro).to(ro.rewards.dtype))
    # mean over trajectories of sum_t A_t grad log pi = the exact policy gradient (up to MC error)
    g = policy.gradient_estimate(ro, est(ro).token).detach().double()
    cos = float((g * truth.grad).sum() / (g.norm() * truth.grad.norm()))
    assert cos > 0.95, cos


def test_credit_vs_truth_reports_grpo_against_the_exact_skill_and_luck():
    env = lesson.noisy_world(0.2, 20)
    res = lesson.credit_vs_truth(env, env.scripted_policy(3.0), n_tasks=4, group_size=8, seed=1)
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
    # the course's one definition of sign agreement: turns with |A| > 0.05 only, zero credit disagrees
    clear = m & (skill.abs() > 0.05)
    assert 0 < int(clear.sum()) < int(m.sum())
    agree = (torch.sign(grpo[clear].double()) == torch.sign(skill[clear])).double().mean()
    assert row.sign_agree == pytest.approx(float(agree))


def test_without_tool_noise_nothing_is_luck():
    env = lesson.noisy_world(0.0, 15)
    res = lesson.credit_vs_truth(env, env.scripted_policy(3.0), n_tasks=4, group_size=4, seed=0)
    s = lesson.luck_summary(res["rollouts"], res["skill"], res["luck"])
    assert s["mean_abs_luck"] < 1e-12 and s["luck_share"] == 0
    noisy = lesson.credit_vs_truth(lesson.noisy_world(0.4, 15), lesson.noisy_world(0.4, 15).scripted_policy(3.0),
                                   n_tasks=4, group_size=4, seed=0)
    assert lesson.luck_summary(noisy["rollouts"], noisy["skill"], noisy["luck"])["luck_share"] > 0.02


def test_noise_horizon_sweep_has_one_row_per_setting():
    sweep = lesson.noise_horizon_sweep(noises=(0.0, 0.3), horizons=(5, 10), n_tasks=2, group_size=4, progress=False)
    assert len(sweep) == 4 and set(sweep.max_turns) == {5, 10}
    assert (sweep.loc[sweep.noise == 0, "luck_share"] == 0).all()
    with pytest.raises(ValueError, match="horizons"):
        lesson.noise_horizon_sweep(noises=(0.1,), horizons=(0,), progress=False)


def test_repeat_share_counts_repeated_observation_action_pairs():
    env = ToolWorld(3, max_turns=10)
    looping = env.scripted_policy(0.0, think=50.0)  # think after "thought": the echo loop
    with torch.no_grad():
        looping.logits[0, THINK] = 50.0  # and think at the start
    ro = env.sample(looping, 1, group_size=2, seed=0)
    # (start, think) once, then (thought, think) nine times: 8 of 10 turns repeat a pair
    assert lesson.repeat_share(ro) == pytest.approx(0.8)
    with torch.no_grad():
        looping.logits[THOUGHT, THINK] = -50.0
        looping.logits[THOUGHT, SEARCH] = 50.0
    assert lesson.repeat_share(env.sample(looping, 1, group_size=2, seed=0)) < 0.8


def test_group_spread_is_the_mean_within_group_std_and_the_flat_share():
    env = ToolWorld(3, max_turns=4)
    ro = env.sample(env.make_policy(), 2, group_size=2, seed=0)
    ro = ro.with_(rewards=torch.zeros_like(ro.rewards))
    r = ro.rewards.clone()
    r[0, 0], r[1, 0] = 1.0, 0.0  # group 0: scores 1, 0; group 1: 0, 0
    spread, flat = group_spread(ro.with_(rewards=r))
    assert spread == pytest.approx(math.sqrt(0.5) / 2) and flat == 0.5


def test_outcome_weights_splits_the_loss_weight_by_how_episodes_ended():
    env = lesson.echo_world(n_files=3, max_turns=6)
    ro = env.sample(env.make_policy(), 4, group_size=8, seed=0)
    timeout, success = ro.truth["timeout"], ro.truth["success"]
    assert bool(timeout.any()) and bool((~timeout).any())
    ones = ro.mask.double()
    lengths = ro.mask.sum(1).double()
    # credit 1 on every turn: the per-episode mean gives every episode weight 1, the token mean
    # gives it its length, so timeouts (the longest episodes) weigh more under the token mean
    per_episode = lesson.outcome_weights(ro, ones, "grpo")
    token_mean = lesson.outcome_weights(ro, ones, "ppo_clip")
    assert per_episode["timeout_weight"] == pytest.approx(float(timeout.double().mean()))
    assert token_mean["timeout_weight"] == pytest.approx(float(lengths[timeout].sum() / lengths.sum()))
    assert token_mean["timeout_weight"] > per_episode["timeout_weight"]
    assert per_episode["success_share"] == pytest.approx(float(success.double().mean()))
    shares = sum(per_episode[f"{k}_share"] for k in ("success", "wrong_submit", "timeout"))
    assert shares == pytest.approx(1.0)
    # signed push: credit -1 on timeouts, +1 elsewhere
    signed = torch.where(timeout[:, None], -ones, ones)
    w = lesson.outcome_weights(ro, signed, "grpo")
    assert w["timeout_push"] == pytest.approx(-w["timeout_weight"]) and w["timeout_push"] < 0
    with pytest.raises(ValueError, match="^kind"):
        lesson.outcome_weights(ro, ones, "token")
    with pytest.raises(ValueError, match="^credit"):
        lesson.outcome_weights(ro, ones[:, :2], "grpo")


def test_echo_trap_runs_trains_three_methods_at_equal_sampling():
    curves, final = lesson.echo_trap_runs(seeds=(0,), iterations=3, eval_every=3, progress=False,
                                          world={"n_files": 3, "max_turns": 8})
    assert final.label.nunique() == 3 and len(final) == 3
    last = curves[curves.iteration == 3].set_index("label").env_steps
    grpo, starpo = last.filter(like="GRPO").iloc[0], last.filter(like="StarPO").iloc[0]
    assert grpo > 0 and starpo > 0
    assert {"reward_spread", "zero_spread_share", "entropy"} <= set(curves.columns)
    assert final[["timeout_share", "success_rate", "repeat_share"]].apply(lambda c: c.between(0, 1).all()).all()
    # every batch trained on has its outcome split; the untrained row 0 has none
    trained = curves[curves.iteration > 0]
    assert trained[["timeout_share", "timeout_weight"]].notna().all().all()
    assert curves[curves.iteration == 0].timeout_share.isna().all()


def test_echo_trap_sweep_crosses_losses_and_learning_rates_and_trap_table_counts_seeds():
    curves, final = lesson.echo_trap_sweep(kinds=("grpo", "ppo_clip"), lrs=(0.1, 0.3), seeds=(0, 1), iterations=2,
                                           eval_every=2, methods=("GRPO",), progress=False,
                                           world={"n_files": 3, "max_turns": 6})
    assert len(final) == 8 and set(zip(final.kind, final.lr)) == {(k, lr) for k in ("grpo", "ppo_clip")
                                                                  for lr in (0.1, 0.3)}
    assert set(curves.kind) == {"grpo", "ppo_clip"}
    # the two losses train differently from the same seed
    a = final[(final.kind == "grpo") & (final.lr == 0.3) & (final.seed == 0)].J.iloc[0]
    b = final[(final.kind == "ppo_clip") & (final.lr == 0.3) & (final.seed == 0)].J.iloc[0]
    assert a != b
    fake = final.assign(timeout_share=[0.9, 0.1] * 4)
    table = lesson.trap_table(fake)
    assert len(table) == 4 and (table.seeds == 2).all() and (table.trapped == 1).all()
    assert table.timeout_share.tolist() == pytest.approx([0.5] * 4)
    with pytest.raises(ValueError, match="^kind"):
        lesson.echo_trap_runs(kind="token", iterations=1, progress=False)
    with pytest.raises(ValueError, match="^methods"):
        lesson.echo_trap_runs(methods=("PPO",), iterations=1, progress=False)
    with pytest.raises(ValueError, match="^final"):
        lesson.trap_table(final.drop(columns="lr"))


def test_token_credit_dial_returns_what_token_credit_returns():
    env = lesson.noisy_world(0.2, 8, n_files=3)
    policy = env.scripted_policy(3.0)
    dial = lesson.TokenCreditDial(env, policy, gammas=[0.8], format_tokens=[2], n_tasks=3, group_size=4, seed=5)
    assert set(dial._truth) == {0.8} and set(dial._tokens) == {2}  # prepared at build time
    for gamma, lam, k in [(0.8, 0.0, 2), (0.8, 0.5, 2), (1.0, 0.3, 0)]:
        got = dial(gamma=gamma, lam=lam, format_tokens=k)
        want = lesson.token_credit(env, policy, gamma=gamma, lam=lam, format_tokens=k, n_tasks=3, group_size=4,
                                   seed=5)
        # luck_per_skill is a least-squares fit: two identical calls may differ in the last bits
        # (the exact row's true value is 0; it comes out near 1e-17 with either sign)
        pd.testing.assert_frame_equal(got["stats"], want["stats"], check_exact=False, rtol=1e-9, atol=1e-12)
        assert got["stats"].drop(columns="luck_per_skill").equals(want["stats"].drop(columns="luck_per_skill"))
        for name, c in want["credit"].items():
            assert torch.equal(got["credit"][name], c), name
    assert set(dial._truth) == {0.8, 1.0} and set(dial._tokens) == {0, 2}  # kept for the next move
    with pytest.raises(ValueError, match="^truth: "):
        lesson.token_credit(env, policy, gamma=0.9, truth=dial.truth(0.8), n_tasks=3, group_size=4)
    with pytest.raises(ValueError, match="^format_tokens"):
        dial.tokens(-1)


def test_exact_outcomes_match_a_large_sampled_batch():
    env = lesson.echo_world(n_files=3, max_turns=8)
    policy = env.make_policy(init_std=0.5, seed=3)
    got = lesson.exact_outcomes(env, policy)
    ro = env.sample(policy, 500, group_size=8, seed=0)
    assert got["J"] == pytest.approx(env.truth(policy).J)
    assert got["succeeds"] == pytest.approx(float(ro.truth["success"].double().mean()), abs=0.02)
    assert got["timeout"] == pytest.approx(float(ro.truth["timeout"].double().mean()), abs=0.02)
    assert got["submits"] + got["timeout"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^env"):
        lesson.exact_outcomes(lesson.noisy_world(0.2, 8), policy)  # no wrong-submit penalty


def test_exact_ascent_climbs_the_exact_objective_from_the_uniform_agent():
    world = {"n_files": 3, "max_turns": 8}
    run = lesson.exact_ascent(lr=0.1, iterations=6, eval_every=3, world=world)
    assert run.iteration.tolist() == [0, 3, 6]
    env = lesson.echo_world(**world)
    assert run.J.iloc[0] == pytest.approx(lesson.exact_outcomes(env, env.make_policy())["J"])
    assert run.J.is_monotonic_increasing and run.J.iloc[-1] > run.J.iloc[0]
    with pytest.raises(ValueError, match="^optimizer"):
        lesson.exact_ascent(optimizer="rmsprop", world=world)


def test_loss_direction_token_mean_with_exact_credit_follows_the_exact_gradient():
    d = lesson.loss_direction(probe_at=(1, 3), n_batches=6, world={"n_files": 3, "max_turns": 8})
    assert len(d) == 4 and set(d.kind) == set(lesson.ECHO_LOSSES)
    # both rows of one probe describe the same policy and the same exact gradient
    for _, probe in d.groupby("iteration"):
        assert probe.J.nunique() == 1 and probe.true_submit_push.nunique() == 1
    # token mean + exact advantages: an unbiased estimate of the exact policy gradient
    token = d[d.kind == "ppo_clip"]
    assert (token.cos_true > 0.8).all(), token.cos_true.tolist()
    with pytest.raises(ValueError, match="^probe_at"):
        lesson.loss_direction(probe_at=(0,))


def test_cached_echo_trap_sweep_is_reproduced_by_a_live_run(torch_is_locked):
    cache = lesson.load_echo_trap()
    final = cache["final"]
    assert set(final.kind) == set(lesson.ECHO_LOSSES) and final.groupby(["kind", "lr", "label"]).size().eq(5).all()
    if not torch_is_locked:
        pytest.skip("the cache was sampled under the lock's torch; another torch draws other episodes")
    _, live = lesson.echo_trap_runs(seeds=(1,), methods=("GRPO",), kind="grpo", lr=0.3, progress=False)
    row = final[(final.kind == "grpo") & (final.lr == 0.3) & (final.label == "GRPO") & (final.seed == 1)].iloc[0]
    assert live.J.iloc[0] == pytest.approx(row.J, abs=1e-4)
    assert live.timeout_share.iloc[0] == pytest.approx(row.timeout_share, abs=1e-4)
