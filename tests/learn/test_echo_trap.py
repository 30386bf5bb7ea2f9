"""The echo trap's runs (labkit.learn.echo_trap): the oracle estimator, where a batch's push goes, the
training runs at equal sampling, and the exact ascent and loss directions, all on small echo-trap
worlds (``labkit.course.presets.echo_world``)."""
import pytest
import torch

from labkit.course.presets import echo_world, noisy_world
from labkit.envs import ToolWorld
from labkit.envs.toolworld import SEARCH, THINK, THOUGHT
from labkit.learn.echo_trap import (ECHO_LOSSES, echo_trap_runs, echo_trap_sweep, exact_ascent, exact_credit,
                                    exact_outcomes, loss_direction, outcome_weights, repeat_share, trap_table)


def test_exact_credit_is_the_dp_advantage_and_its_gradient_estimate_is_unbiased():
    env = noisy_world(0.2, 6, n_files=2)
    policy = env.make_policy(init_std=0.5, seed=1)
    est = exact_credit(env, policy)
    ro = env.sample(policy, 2000, group_size=4, seed=0)
    truth = env.truth(policy)
    assert torch.allclose(est(ro).token, truth.advantage(ro).to(ro.rewards.dtype))
    # mean over trajectories of sum_t A_t grad log pi = the exact policy gradient (up to MC error)
    g = policy.gradient_estimate(ro, est(ro).token).detach().double()
    cos = float((g * truth.grad).sum() / (g.norm() * truth.grad.norm()))
    assert cos > 0.95, cos


def test_repeat_share_counts_repeated_observation_action_pairs():
    env = ToolWorld(3, max_turns=10)
    looping = env.scripted_policy(0.0, think=50.0)  # think after "thought": the echo loop
    with torch.no_grad():
        looping.logits[0, THINK] = 50.0  # and think at the start
    ro = env.sample(looping, 1, group_size=2, seed=0)
    # (start, think) once, then (thought, think) nine times: 8 of 10 turns repeat a pair
    assert repeat_share(ro) == pytest.approx(0.8)
    with torch.no_grad():
        looping.logits[THOUGHT, THINK] = -50.0
        looping.logits[THOUGHT, SEARCH] = 50.0
    assert repeat_share(env.sample(looping, 1, group_size=2, seed=0)) < 0.8


def test_outcome_weights_splits_the_loss_weight_by_how_episodes_ended():
    env = echo_world(n_files=3, max_turns=6)
    ro = env.sample(env.make_policy(), 4, group_size=8, seed=0)
    timeout, success = ro.truth["timeout"], ro.truth["success"]
    assert bool(timeout.any()) and bool((~timeout).any())
    ones = ro.mask.double()
    lengths = ro.mask.sum(1).double()
    # credit 1 on every turn: the per-episode mean gives every episode weight 1, the token mean
    # gives it its length, so timeouts (the longest episodes) weigh more under the token mean
    per_episode = outcome_weights(ro, ones, "grpo")
    token_mean = outcome_weights(ro, ones, "ppo_clip")
    assert per_episode["timeout_weight"] == pytest.approx(float(timeout.double().mean()))
    assert token_mean["timeout_weight"] == pytest.approx(float(lengths[timeout].sum() / lengths.sum()))
    assert token_mean["timeout_weight"] > per_episode["timeout_weight"]
    assert per_episode["success_share"] == pytest.approx(float(success.double().mean()))
    shares = sum(per_episode[f"{k}_share"] for k in ("success", "wrong_submit", "timeout"))
    assert shares == pytest.approx(1.0)
    # signed push: credit -1 on timeouts, +1 elsewhere
    signed = torch.where(timeout[:, None], -ones, ones)
    w = outcome_weights(ro, signed, "grpo")
    assert w["timeout_push"] == pytest.approx(-w["timeout_weight"]) and w["timeout_push"] < 0
    with pytest.raises(ValueError, match="^kind"):
        outcome_weights(ro, ones, "token")
    with pytest.raises(ValueError, match="^credit"):
        outcome_weights(ro, ones[:, :2], "grpo")


def test_echo_trap_runs_trains_three_methods_at_equal_sampling():
    curves, final = echo_trap_runs(echo_world(n_files=3, max_turns=8), seeds=(0,), iterations=3, eval_every=3,
                                   progress=False)
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
    curves, final = echo_trap_sweep(echo_world(n_files=3, max_turns=6), kinds=("grpo", "ppo_clip"), lrs=(0.1, 0.3),
                                    seeds=(0, 1), iterations=2, eval_every=2, methods=("GRPO",), progress=False)
    assert len(final) == 8 and set(zip(final.kind, final.lr)) == {(k, lr) for k in ("grpo", "ppo_clip")
                                                                  for lr in (0.1, 0.3)}
    assert set(curves.kind) == {"grpo", "ppo_clip"}
    # the two losses train differently from the same seed
    a = final[(final.kind == "grpo") & (final.lr == 0.3) & (final.seed == 0)].J.iloc[0]
    b = final[(final.kind == "ppo_clip") & (final.lr == 0.3) & (final.seed == 0)].J.iloc[0]
    assert a != b
    fake = final.assign(timeout_share=[0.9, 0.1] * 4)
    table = trap_table(fake)
    assert len(table) == 4 and (table.seeds == 2).all() and (table.trapped == 1).all()
    assert table.timeout_share.tolist() == pytest.approx([0.5] * 4)
    with pytest.raises(ValueError, match="^kind"):
        echo_trap_runs(echo_world(), kind="token", iterations=1, progress=False)
    with pytest.raises(ValueError, match="^methods"):
        echo_trap_runs(echo_world(), methods=("PPO",), iterations=1, progress=False)
    with pytest.raises(ValueError, match="^final"):
        trap_table(final.drop(columns="lr"))


def test_exact_outcomes_match_a_large_sampled_batch():
    env = echo_world(n_files=3, max_turns=8)
    policy = env.make_policy(init_std=0.5, seed=3)
    got = exact_outcomes(env, policy)
    ro = env.sample(policy, 500, group_size=8, seed=0)
    assert got["J"] == pytest.approx(env.truth(policy).J)
    assert got["succeeds"] == pytest.approx(float(ro.truth["success"].double().mean()), abs=0.02)
    assert got["timeout"] == pytest.approx(float(ro.truth["timeout"].double().mean()), abs=0.02)
    assert got["submits"] + got["timeout"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^env"):
        exact_outcomes(noisy_world(0.2, 8), policy)  # no wrong-submit penalty


def test_exact_ascent_climbs_the_exact_objective_from_the_uniform_agent():
    world = {"n_files": 3, "max_turns": 8}
    run = exact_ascent(echo_world(**world), lr=0.1, iterations=6, eval_every=3)
    assert run.iteration.tolist() == [0, 3, 6]
    env = echo_world(**world)
    assert run.J.iloc[0] == pytest.approx(exact_outcomes(env, env.make_policy())["J"])
    assert run.J.is_monotonic_increasing and run.J.iloc[-1] > run.J.iloc[0]
    with pytest.raises(ValueError, match="^optimizer"):
        exact_ascent(echo_world(**world), optimizer="rmsprop")


def test_loss_direction_token_mean_with_exact_credit_follows_the_exact_gradient():
    d = loss_direction(echo_world(n_files=3, max_turns=8), probe_at=(1, 3), n_batches=6)
    assert len(d) == 4 and set(d.kind) == set(ECHO_LOSSES)
    # both rows of one probe describe the same policy and the same exact gradient
    for _, probe in d.groupby("iteration"):
        assert probe.J.nunique() == 1 and probe.true_submit_push.nunique() == 1
    # token mean + exact advantages: an unbiased estimate of the exact policy gradient
    token = d[d.kind == "ppo_clip"]
    assert (token.cos_true > 0.8).all(), token.cos_true.tolist()
    with pytest.raises(ValueError, match="^probe_at"):
        loss_direction(echo_world(), probe_at=(0,))


def test_a_missing_policy_or_world_is_refused_by_name():
    with pytest.raises(TypeError, match=r"^policy: expected a policy with probs\(\)"):
        exact_credit(echo_world(), None)
    with pytest.raises(TypeError, match=r"^env: expected a ToolWorld, got None"):
        exact_credit(None, echo_world().scripted_policy())
    with pytest.raises(TypeError, match=r"^policy: expected a policy with probs\(\)"):
        exact_outcomes(echo_world(), None)
