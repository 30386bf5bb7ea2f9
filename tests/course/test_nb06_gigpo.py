"""Notebook 06's runners (labkit.course.nb06_gigpo): anchor groups, GiGPO's terms and GRPO-vs-GiGPO
runs, against the DP truth."""
import math

import pandas as pd
import pytest
import torch

from labkit.course import gigpo_runs
from labkit.course import nb06_gigpo as lesson
from labkit.course.presets import noisy_world


def test_anchor_statistics_histogram_covers_every_turn():
    env = noisy_world(0.2, 20)
    a = lesson.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert int(a["sizes"].turns.sum()) == int(a["rollouts"].mask.sum())
    assert a["singleton_share"] == pytest.approx(float((a["groups"]["size"] == 1).mean()))
    # one episode per task: only repeats inside an episode can share an anchor
    alone = lesson.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=1, seed=0)
    assert alone["singleton_share"] > a["singleton_share"]
    # every size from 1 to the largest has a row, so a chart of it never skips one
    assert list(a["sizes"]["size"]) == list(range(1, int(a["groups"]["size"].max()) + 1))


def test_size_histogram_fills_absent_sizes_with_zero_rows():
    hist = lesson.size_histogram(pd.Series([1, 1, 3, 6, 1]))
    assert hist.to_dict("list") == {"size": [1, 2, 3, 4, 5, 6], "groups": [3, 0, 1, 0, 0, 1],
                                    "turns": [3, 0, 3, 0, 0, 6]}
    assert lesson.size_histogram(pd.Series([], dtype=int)).empty
    with pytest.raises(ValueError, match="^sizes: .*\\[0\\]"):
        lesson.size_histogram(pd.Series([2, 0]))


def test_gigpo_terms_vs_truth_gives_one_row_per_credit():
    env = noisy_world(0.2, 20)
    t = lesson.gigpo_terms_vs_truth(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert list(t["table"].credit) == ["GiGPO step term", "GiGPO episode term", "GiGPO (episode + omega x step)", "GRPO"]
    assert 0 < t["shared_turn_share"] <= 1
    assert t["table"].corr_all_turns.between(-1, 1).all()


def test_success_at_budget_interpolates_and_refuses_to_extrapolate():
    curves = pd.DataFrame({"label": "a", "seed": 0, "env_steps": [0, 100, 200], "success": [0.0, 0.5, 1.0]})
    at = lesson.success_at_budget(curves, 150)
    assert at.success.iloc[0] == pytest.approx(0.75)
    assert math.isnan(lesson.success_at_budget(curves, 250).success.iloc[0])
    with pytest.raises(ValueError, match="budget"):
        lesson.success_at_budget(curves, -1)


def test_grpo_vs_gigpo_runs_and_band():
    env = noisy_world(0.2, 10, n_files=3)
    curves = lesson.grpo_vs_gigpo_runs(env, seeds=(0, 1), iterations=4, eval_every=2, progress=False)
    assert set(curves.label) == {"GRPO", "GiGPO"} and set(curves.seed) == {0, 1}
    band = lesson.env_step_band(curves, points=5)
    assert ((band["min"] <= band["mean"] + 1e-12) & (band["mean"] <= band["max"] + 1e-12)).all()


def test_anchor_answers_are_the_dashboards_numbers_and_reuse_a_known_batch():
    env = noisy_world(noise=0.2, max_turns=10, n_files=4)
    known = lesson.anchor_statistics(env, env.make_policy(), n_tasks=2, group_size=4, seed=0)
    table = lesson.anchor_answers(env, [(4, 0.0), (2, 3.0)], n_tasks=2, known={(4, 0.0): known})
    assert table[["group_size", "strength"]].values.tolist() == [[4, 0.0], [2, 3.0]]
    assert table.singleton_share[0] == known["singleton_share"]
    sharp = lesson.anchor_statistics(env, env.scripted_policy(3.0), n_tasks=2, group_size=2, seed=0)
    assert table.singleton_turn_share[1] == sharp["singleton_turn_share"]
    assert table.turns_per_episode[1] == float(sharp["rollouts"].mask.sum(1).double().mean())
    with pytest.raises(ValueError, match="^settings: "):
        lesson.anchor_answers(env, [])
    with pytest.raises(ValueError, match="^settings: "):
        lesson.anchor_answers(env, [(0, 0.0)])


# --------------------------------------------------------------------------- the capstone's run (exercise 06c)
def _template_loss(logp, old_logp, advantages, mask, aggregation):
    ...


def test_train_with_your_loss_refuses_in_one_line_until_the_check_passes(capsys, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained a loss that does not pass")
    monkeypatch.setattr(lesson, "your_loss_runs", no_training)
    env = noisy_world(0.2, 10, n_files=3)
    for loss in (_template_loss, lambda logp, old_logp, advantages, mask, aggregation: -(logp * advantages).sum(), "x"):
        assert lesson.train_with_your_loss(loss, env, {}) is None
        out = capsys.readouterr().out
        assert out.startswith("Not training yet: ") and out.count("\n") == 1 and 'check(' in out and "06c" in out
    lesson.train_with_your_loss(_template_loss, env, {})
    assert "_template_loss does not pass check(_template_loss, \"06c\")" in capsys.readouterr().out


def test_your_loss_runs_are_the_labs_runs_when_the_loss_is_the_labs():
    from labkit.course.solutions import policy_loss
    env = noisy_world(0.2, 10, n_files=3)
    yours = lesson.your_loss_runs(env, policy_loss, seeds=(0,), iterations=3)
    assert set(yours.aggregation) == set(lesson.AGGREGATIONS) and (yours.kind == "loss_fn").all()
    cols = ["label", "iteration", "success", "train_reward", "clip_frac", "env_steps"]
    for aggregation, kind in lesson.AGGREGATIONS.items():
        lab = lesson.grpo_vs_gigpo_runs(env, seeds=(0,), iterations=3, kind=kind, progress=False)
        mine = yours[yours.aggregation == aggregation].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine[cols], lab[cols], check_exact=False, rtol=1e-9)
    with pytest.raises(ValueError, match="^iterations: "):
        lesson.your_loss_runs(env, policy_loss, iterations={"token-mean": 2})
    with pytest.raises(TypeError, match="^policy_loss: "):
        lesson.your_loss_runs(env, "policy_loss")


def test_gap_table_sets_the_live_seeds_beside_the_labs_spread(capsys):
    from labkit.course.solutions import policy_loss
    env = noisy_world(0.2, 10, n_files=3)
    lab = {a: lesson.grpo_vs_gigpo_runs(env, seeds=(0, 1), iterations=4, eval_every=2, kind=k, progress=False)
           for a, k in lesson.AGGREGATIONS.items()}
    table = lesson.train_with_your_loss(policy_loss, env, lab, budgets=(100, 200), seeds=(0,), iterations=2)
    out = capsys.readouterr().out
    assert out.startswith("GiGPO - GRPO in J") and "your loss, 1 seed, up to 2 iterations" in out
    assert "4 iterations" in out and max(len(line) for line in out.splitlines()) <= 88
    assert list(table.columns) == ["aggregation", "env steps", "yours s0", "lab mean", "lab min", "lab max", "lab n"]
    assert len(table) == 4 and (table["lab n"] == 2).all()
    assert ((table["lab min"] <= table["lab mean"] + 1e-12) & (table["lab mean"] <= table["lab max"] + 1e-12)).all()
    gaps = lesson.budget_gaps(lab["token-mean"], (100,))
    assert list(gaps.seed) == [0, 1] and list(gaps.columns) == ["env_steps", "seed", "gap"]


def test_gap_by_setting_counts_seeds_and_needs_two_runs():
    rows = []
    for setting, lift in (("a", 0.1), ("b", -0.05)):
        for label, extra in (("GRPO", 0.0), ("GiGPO", lift)):
            for seed in range(3):
                for steps, base in ((0, 0.4), (100, 0.5)):
                    rows.append({"setting": setting, "label": label, "seed": seed, "env_steps": steps,
                                 "success": base + (extra + 0.01 * seed if steps else 0.0), "clip_frac": 0.2})
    table = gigpo_runs.gap_by_setting(pd.DataFrame(rows), 100)
    assert list(table.setting) == ["a", "b"]
    assert table.gap.tolist() == pytest.approx([0.1, -0.05])
    assert table["seeds GiGPO ahead"].tolist() == ["3/3", "0/3"]
    assert (table["gap low"] <= table.gap).all() and (table.gap <= table["gap high"]).all()
    with pytest.raises(ValueError, match="^budget"):
        gigpo_runs.gap_by_setting(pd.DataFrame(rows), 200)
    with pytest.raises(ValueError, match="^curves"):
        gigpo_runs.gap_by_setting(pd.DataFrame(rows).drop(columns="setting"), 100)
    # with a family column, a setting's name may recur across families
    families = pd.concat([pd.DataFrame(rows).assign(family="x"), pd.DataFrame(rows).assign(family="y")])
    both = gigpo_runs.gap_by_setting(families, 100)
    assert list(zip(both.family, both.setting)) == [("x", "a"), ("x", "b"), ("y", "a"), ("y", "b")]


def test_loss_rules_at_ratio_one_push_as_the_advantage_and_later_they_act():
    env = noisy_world(noise=0.2, max_turns=20, n_files=4)
    policy = env.make_policy()
    before = policy.logits.detach().clone()
    assert torch.equal(lesson.trained_copy(env, policy, 0).logits, before)
    lesson.trained_copy(env, policy, 2)
    assert torch.equal(policy.logits, before)  # the copy trains, not the policy
    ro = env.sample(policy, 4, group_size=4, seed=0)
    from labkit.credit import get_estimator
    adv = get_estimator("grpo")(ro).token.double()
    same = lesson.loss_rule_credit(ro, adv, ro.logprobs.double())
    n = float(ro.mask.sum())
    for rule, c in same["credit"].items():
        if rule not in ("Clip-Cov", "KL-Cov", "PPO-clip, top 20% entropy"):
            assert torch.allclose(c, adv * ro.mask, atol=1e-12), rule
    assert n > 0 and (same["table"].silenced[:5] == 0).all()
    view = lesson.loss_rule_view(env, warmup=2, updates=4, n_tasks=4, group_size=4)
    t = view["table"].set_index("loss")
    assert t.loc["CISPO", "silenced"] == 0 and t.loc["SAPO", "pushed more"] == 0  # they never silence / never push more
    assert t.loc["PPO-clip", "silenced"] > 0  # after 4 updates some ratios left [0.8, 1.2]


def test_aggregation_credit_shows_long_failures_are_cheap_under_grpos_own_loss():
    from labkit.course.presets import noisy_world
    env = noisy_world(noise=0.2, max_turns=50, n_files=8)
    out = lesson.aggregation_credit(env, env.make_policy(), n_tasks=4, group_size=8, seed=0)
    ro = out["rollouts"]
    # scaled by the batch's turn count, token-mean's push is GRPO's advantage itself
    assert torch.allclose(out["effective"]["token-mean"], out["advantage"] * ro.mask)
    failed = out["table"].set_index(["outcome", "length"]).loc["failed"]
    col = "push per turn, seq-mean-token-mean"
    assert failed.loc["long", col] > failed.loc["short", col] * 0.5   # both negative: long is cheaper per turn
    # each episode's total push under seq-mean-token-mean does not depend on its length
    per_episode = (out["effective"]["seq-mean-token-mean"] * ro.mask).sum(1)
    adv = out["advantage"][:, 0]
    assert torch.allclose(per_episode, adv * ro.mask.sum() / ro.batch_size)


# --------------------------------------------------------------------------- the per-turn question
from labkit.course import per_turn  # noqa: E402  (the measurement the lesson and its script share)
def test_per_turn_credits_without_per_turn_rewards_is_grpo_on_the_outcome():
    from labkit.credit.episode import grpo

    env = per_turn.per_turn_world()
    policy = per_turn.stopping_policy(env, 1.0)
    ro = env.sample(policy, 3, group_size=4, seed=0)
    credits = per_turn.per_turn_credits(env, ro, env.truth(policy))
    assert list(credits) == list(per_turn.PER_TURN_ESTIMATORS)
    want = grpo(ro, normalize_std=False).token.double()
    assert torch.allclose(credits["MT-GRPO (turn index)"], want)
    assert torch.equal(credits["exact advantage"], env.truth(policy).advantage(ro))


def test_gradient_bias_unbiased_estimators_agree_and_the_turn_index_one_ignores_a_cost():
    env = per_turn.per_turn_world(step_cost=0.05)
    df = per_turn.gradient_bias(env, per_turn.stopping_policy(env, 1.0), n_batches=150, seed=1).set_index("estimator")
    assert list(df.index) == list(per_turn.PER_TURN_ESTIMATORS)
    for name in ("return-to-go baseline", "turn GAE (exact V)", "exact advantage"):
        assert df.along_lo[name] < 1 < df.along_hi[name]
        assert df.stop_lo[name] < 0 < df.stop_hi[name]
    # a cost on every turn cancels out of the turn-index term: the gradient pushes less towards
    # submitting than the exact one, by far more than its interval
    assert df.stop_hi["MT-GRPO (turn index)"] < -0.5
    # the push a rescaling of the exact gradient cannot give is orthogonal to it
    truth = env.truth(per_turn.stopping_policy(env, 1.0))
    u = per_turn.stop_direction(env, truth)
    assert float(u.norm()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^n_batches"):
        per_turn.gradient_bias(env, per_turn.stopping_policy(env, 1.0), n_batches=1)


def test_per_turn_world_and_agents_name_bad_arguments():
    with pytest.raises(ValueError, match="^step_cost"):
        per_turn.per_turn_world(step_cost=-0.1)
    with pytest.raises(TypeError, match="^submit_bias"):
        per_turn.stopping_policy(per_turn.per_turn_world(), "early")
    late, early = (per_turn.stopping_policy(per_turn.per_turn_world(), b) for b in (-1.0, 1.0))
    assert float(late.probs().detach()[0, 3]) < float(early.probs().detach()[0, 3])


def test_per_turn_grid_and_the_shipped_cache():
    small = per_turn.per_turn_grid(((0.0, 0.0),), agents={"a": 0.0}, n_batches=4)
    assert len(small) == len(per_turn.PER_TURN_ESTIMATORS) and set(small.agent) == {"a"}
    grid, meta = lesson.load_per_turn_bias()
    assert len(grid) == len(per_turn.PER_TURN_SETTINGS) * len(per_turn.STOPPING_AGENTS) * len(per_turn.PER_TURN_ESTIMATORS)
    assert meta["estimators"] == list(per_turn.PER_TURN_ESTIMATORS) and meta["world"] == per_turn.PER_TURN_WORLD
    chart = lesson.per_turn_chart_data(grid)
    assert set(chart.line) == {f"{e}, {a}" for e in ("MT-GRPO (turn index)", "return-to-go baseline")
                               for a in per_turn.STOPPING_AGENTS}
    with pytest.raises(ValueError, match="^grid"):
        lesson.per_turn_chart_data(grid.drop(columns="stop_bias"))
    with pytest.raises(FileNotFoundError, match="^path"):
        lesson.load_per_turn_bias("/nonexistent")
