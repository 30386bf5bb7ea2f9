"""Notebook 05's runners (labkit.course.nb05_why_agents_harder): they measure what they say, against
the DP truth. The echo trap's runs are tested in learn/test_echo_trap.py, the worlds in
course/test_presets.py.
"""

import math

import pandas as pd
import pytest
import torch

from labkit.core.stats import group_spread
from labkit.course import nb05_why_agents_harder as lesson
from labkit.course.presets import echo_world, noisy_world
from labkit.envs.toolworld import ToolWorld
from labkit.learn.echo_trap import ECHO_LOSSES, echo_trap_runs


def test_credit_vs_truth_reports_grpo_against_the_exact_skill_and_luck():
    env = noisy_world(0.2, 20)
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
    env = noisy_world(0.0, 15)
    res = lesson.credit_vs_truth(env, env.scripted_policy(3.0), n_tasks=4, group_size=4, seed=0)
    s = lesson.luck_summary(res["rollouts"], res["skill"], res["luck"])
    assert s["mean_abs_luck"] < 1e-12 and s["luck_share"] == 0
    noisy = lesson.credit_vs_truth(noisy_world(0.4, 15), noisy_world(0.4, 15).scripted_policy(3.0),
                                   n_tasks=4, group_size=4, seed=0)
    assert lesson.luck_summary(noisy["rollouts"], noisy["skill"], noisy["luck"])["luck_share"] > 0.02


def test_noise_horizon_sweep_has_one_row_per_setting():
    sweep = lesson.noise_horizon_sweep(noises=(0.0, 0.3), horizons=(5, 10), n_tasks=2, group_size=4, progress=False)
    assert len(sweep) == 4 and set(sweep.max_turns) == {5, 10}
    assert (sweep.loc[sweep.noise == 0, "luck_share"] == 0).all()
    with pytest.raises(ValueError, match="horizons"):
        lesson.noise_horizon_sweep(noises=(0.1,), horizons=(0,), progress=False)


def test_group_spread_is_the_mean_within_group_std_and_the_flat_share():
    env = ToolWorld(3, max_turns=4)
    ro = env.sample(env.make_policy(), 2, group_size=2, seed=0)
    ro = ro.with_(rewards=torch.zeros_like(ro.rewards))
    r = ro.rewards.clone()
    r[0, 0], r[1, 0] = 1.0, 0.0  # group 0: scores 1, 0; group 1: 0, 0
    spread, flat = group_spread(ro.with_(rewards=r))
    assert spread == pytest.approx(math.sqrt(0.5) / 2) and flat == 0.5


def test_token_credit_dial_returns_what_token_credit_returns():
    env = noisy_world(0.2, 8, n_files=3)
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


def test_cached_echo_trap_sweep_is_reproduced_by_a_live_run(torch_is_locked):
    cache = lesson.load_echo_trap()
    final = cache["final"]
    assert set(final.kind) == set(ECHO_LOSSES) and final.groupby(["kind", "lr", "label"]).size().eq(5).all()
    if not torch_is_locked:
        pytest.skip("the cache was sampled under the lock's torch; another torch draws other episodes")
    _, live = echo_trap_runs(echo_world(), seeds=(1,), methods=("GRPO",), kind="grpo", lr=0.3, progress=False)
    row = final[(final.kind == "grpo") & (final.lr == 0.3) & (final.label == "GRPO") & (final.seed == 1)].iloc[0]
    assert live.J.iloc[0] == pytest.approx(row.J, abs=1e-4)
    assert live.timeout_share.iloc[0] == pytest.approx(row.timeout_share, abs=1e-4)


def test_token_credit_lesson():
    env = noisy_world(noise=0.2, max_turns=12)
    res = lesson.token_credit(env, env.scripted_policy(3.0), gamma=0.9, format_tokens=4, n_tasks=4, group_size=4)
    st = res["stats"].set_index("method")
    assert list(st.index) == ["exact", "POAD", "token-level GAE", "turn-level GAE", "POAD, exact V",
                              "token-level GAE, exact V"]
    # the backups alone: POAD is exact on verbs and formatting tokens, unbiased per call;
    # discounting inside the call makes token-level GAE pay every call less than it is worth
    assert st.loc["POAD, exact V", "corr_verbs"] == pytest.approx(1.0)
    assert st.loc["POAD, exact V", "format_credit"] == pytest.approx(0.0, abs=1e-12)
    # a call's summed POAD credit is its exact advantage plus the tool's luck (mean ~0), while
    # token-level GAE loses (1 - gamma) V on each of the call's 5 inner tokens
    assert abs(st.loc["POAD, exact V", "call_bias"]) < 0.02
    assert st.loc["token-level GAE, exact V", "call_bias"] < st.loc["POAD, exact V", "call_bias"] - 0.05
    assert st.loc["token-level GAE, exact V", "format_credit"] < 0
    assert res["n_calls"] > 0 and len(lesson.token_labels(res["tokens"])) == 16
    with pytest.raises(ValueError, match="format_tokens"):
        lesson.call_length_sweep(env, env.scripted_policy(3.0), format_tokens=())


def test_slider_answers_are_the_dashboards_numbers_and_reuse_a_known_batch():
    world = noisy_world(noise=0.2, max_turns=8)
    res = lesson.credit_vs_truth(world, world.scripted_policy(3.0), n_tasks=2, group_size=4, seed=0)
    table = lesson.slider_answers([(0.2, 8), (0.0, 6)], n_tasks=2, group_size=4, known={(0.2, 8): res})
    assert table[["noise", "max_turns"]].values.tolist() == [[0.2, 8], [0.0, 6]]
    first = table.iloc[0]
    assert first.J == res["truth"].J and first.grpo_corr == res["stats"].corr_exact[0]
    assert first.luck_share == lesson.luck_summary(res["rollouts"], res["skill"], res["luck"])["luck_share"]
    calm = noisy_world(noise=0.0, max_turns=6)
    fresh = lesson.credit_vs_truth(calm, calm.scripted_policy(3.0), n_tasks=2, group_size=4, seed=0)
    assert table.J[1] == fresh["truth"].J and table.grpo_sign_agree[1] == fresh["stats"].sign_agree[0]
    assert table.luck_share[1] == 0.0   # no tool noise: no luck
    with pytest.raises(ValueError, match="^settings: "):
        lesson.slider_answers([])
    with pytest.raises(ValueError, match="^settings: "):
        lesson.slider_answers([(1.5, 10)])


# --------------------------------------------------------------------------- tool output inside a response
@pytest.fixture(scope="module")
def spans_study():
    env = noisy_world(0.2, 15)
    return env, lesson.tool_span_study(env, env.scripted_policy(3.0), gammas=(0.9, 1.0), n_tasks=3, group_size=4)


def test_tool_span_study_runs_every_estimator_under_every_convention(spans_study):
    _, study = spans_study
    stats = study["stats"]
    assert len(stats) == len(lesson.TOOL_SPAN_ESTIMATORS) * 3 * 2
    # GRPO reads only the score: one credit under every convention
    grpo = stats[stats.estimator == "grpo"]
    assert grpo.groupby("gamma")["corr"].nunique().eq(1).all()
    res = study["by_gamma"][0.9]
    m, exact = res["response"].mask, res["exact"]
    # TD(0) through the answer bootstraps on the value before it: the exact advantage itself
    assert torch.allclose(res["credit"]["td0", "through"][m], exact[m], atol=1e-12)
    # reset: GAE (lam 1) with the exact values is r - V, which misses gamma E[V'] = Q - r - V + V
    r = res["response"].rewards.double()
    assert torch.allclose(res["credit"]["gae", "reset"][m], (r - res["values"])[m], atol=1e-12)
    # gamma = 1 and no values: carry and through give ReMax the same credit
    one = study["by_gamma"][1.0]["credit"]
    assert torch.equal(one["remax", "carry"], one["remax", "through"])


def test_tool_span_pivot_and_example(spans_study):
    _, study = spans_study
    table = lesson.tool_span_pivot(study["stats"], "bias")
    assert list(table.index) == list(lesson.TOOL_SPAN_ESTIMATORS)
    assert list(table.columns) == [(g, c) for g in (0.9, 1.0) for c in ("carry", "reset", "through")]
    with pytest.raises(ValueError, match="^value"):
        lesson.tool_span_pivot(study["stats"], "mse")
    res = study["by_gamma"][0.9]
    row = lesson.tool_span_example(res, min_turns=2)
    assert float(res["response"].scores[row]) > 0 and int(res["response"].mask[row].sum()) >= 2
    panels, texts = lesson.tool_span_panels(res, row)
    assert list(panels) == ["exact advantage", "gae, carry", "gae, reset", "gae, through"]
    length = int(res["response"].mask[row].nonzero().max()) + 1
    assert all(p.shape == (1, length) for p in panels.values()) and len(texts) == length


def test_greedy_scores_are_the_greedy_agents_exact_success_per_task(spans_study):
    env, study = spans_study
    turns = study["turns"]
    s = lesson.greedy_scores(env, env.scripted_policy(3.0), turns)
    assert s.shape == (turns.batch_size,) and bool(((s >= 0) & (s <= 1)).all())
    # one task, one greedy score
    assert torch.equal(s, s.view(3, 4)[:, :1].expand(3, 4).reshape(-1))
    with pytest.raises(ValueError, match="^gammas"):
        lesson.tool_span_study(env, env.scripted_policy(3.0), gammas=())
