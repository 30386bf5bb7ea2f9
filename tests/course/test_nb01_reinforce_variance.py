"""Notebook 01's runners (labkit.course.nb01_reinforce_variance): credit panels and the gradient
sweep (the chain set-up is labkit.course.presets', tested in course/test_presets.py).
"""
from __future__ import annotations

import pytest
import torch

from labkit.course import nb01_reinforce_variance as lesson
from labkit.course import presets
from labkit.course.presets import chain_setup

from panel_checks import assert_same_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_gradient_sweep_shape_and_validation():
    df = lesson.gradient_sweep("noise_std", [0.0, 1.0], ["reinforce", "grpo"], horizon=8,
                               n_batches=10, batch_size=16, progress=False)
    assert list(df.columns[:3]) == ["noise_std", "estimator", "J"]
    assert len(df) == 4 and df["cosine"].between(-1, 1).all()
    # pure distractor noise makes one batch's gradient worse
    by = df.set_index(["estimator", "noise_std"])
    assert by.loc[("reinforce", 1.0), "cosine"] < by.loc[("reinforce", 0.0), "cosine"]
    with pytest.raises(ValueError, match="vary"):
        lesson.gradient_sweep("gamma", [1.0], progress=False)
    with pytest.raises(ValueError, match="group_size"):
        lesson.gradient_sweep("horizon", [5], batch_size=10, group_size=4, progress=False)
    with pytest.raises(ValueError, match="values"):
        lesson.gradient_sweep("horizon", [], progress=False)


def test_horizon_sweep_survives_slider_extremes():
    """The notebook's sliders go down to T=2 and up to T=200 with slip 0.9 and noise 2."""
    for T, slip, noise in [(2, 0.0, 0.0), (200, 0.9, 2.0), (1, 0.5, 0.0)]:
        df = lesson.gradient_sweep("horizon", [T], slip=slip, noise_std=noise, n_batches=5,
                                   batch_size=8, progress=False)
        assert df[["cosine", "variance"]].notna().all().all()


def test_credit_panels_and_scores():
    env, policy, truth = chain_setup(10, init_std=0.5, policy_seed=1)
    ro = env.sample(policy, 64, group_size=8, seed=0)
    panels = lesson.episode_credit_panels(ro, truth, ["grpo"])
    assert set(panels) == {"exact advantage", "grpo"}
    assert torch.equal(panels["exact advantage"], truth.advantage(ro))
    scores = lesson.credit_scores(ro, truth, lesson.EPISODE_ESTIMATORS)
    assert len(scores) == 6 and scores["recall_at_k"].lt(0.5).all()


def test_notebook_style_dashboard_recomputes_on_slider_move():
    """The pattern notebook 01 uses: sliders -> gradient_sweep -> bar chart + summary."""
    from labkit import viz

    def quality(horizon, noise_std):
        df = lesson.gradient_sweep("horizon", [horizon], noise_std=noise_std, n_batches=5, batch_size=8,
                                   progress=False)
        return viz.bar_chart(df, "estimator", "cosine"), f"J={df.J.iloc[0]:.3f}"

    dash = viz.interact(quality, controls={"horizon": viz.slider("horizon", 2, 200, 1, 10),
                                           "noise_std": viz.slider("noise", 0.0, 2.0, 0.1, 0.0)})
    before, n = dash.chart.to_dict(), dash.n_updates
    dash.controls["horizon"].value = 200  # the slider's far end
    assert dash.n_updates == n + 1 and dash.error is None
    assert dash.chart.to_dict() != before
    dash.controls["noise_std"].value = 2.0
    assert dash.error is None and dash.summary.startswith("J=")


def test_nb01_episode_credit_panels_unchanged():
    from labkit.course import nb01_reinforce_variance as lesson
    from labkit.credit import get_estimator

    env, policy, truth = presets.chain_setup(10, init_std=0.5, policy_seed=1)
    ro = env.sample(policy, 16, group_size=4, seed=0)
    estimators = ["reinforce", "grpo"]
    old = {"exact advantage": truth.advantage(ro)}
    for name in estimators:
        old[name] = get_estimator(name)(ro).token
    assert_same_panels(lesson.episode_credit_panels(ro, truth, estimators), old)


def test_decisive_noise_stays_flat_on_the_table_and_grows_through_shared_weights():
    df = lesson.decisive_noise([10, 100], n_batches=20, progress=False)
    assert list(df.columns) == ["policy", "horizon", "estimator", "J", "cosine", "relative_variance",
                                "whole_cosine", "whole_relative_variance"]
    assert len(df) == 8 and (df["J"] == 0.25).all()  # both uniform: two fair forks
    by = df.set_index(["policy", "estimator", "horizon"]).sort_index()
    for est in ("reinforce", "grpo"):
        table = by.loc[("tabular", est)]
        shared = by.loc[("shared", est)]
        # the table's whole gradient gets noisier with the horizon, its decisive rows do not
        assert table.loc[100, "whole_relative_variance"] > 4 * table.loc[10, "whole_relative_variance"]
        assert 0.4 < table.loc[100, "relative_variance"] / table.loc[10, "relative_variance"] < 2.5
        # through shared weights the routine noise reaches the decisive logits
        assert shared.loc[100, "relative_variance"] > 5 * shared.loc[10, "relative_variance"]
        assert shared.loc[100, "relative_variance"] > 10 * table.loc[100, "relative_variance"]
        assert shared.loc[100, "cosine"] < table.loc[100, "cosine"] - 0.3
    assert df[["cosine", "whole_cosine"]].stack().between(-1, 1).all()


def test_decisive_noise_gives_both_policies_the_same_trajectories():
    from labkit.envs.chain import BifurcationChain, shared_policy
    from labkit.policies import TabularSoftmaxPolicy

    env = BifurcationChain(horizon=12, n_bifurcations=2, seed=0)
    a = env.sample(TabularSoftmaxPolicy(env.n_states, env.n_actions), 64, group_size=8, seed=1)
    b = env.sample(shared_policy(env), 64, group_size=8, seed=1)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.scores, b.scores)
    one = lesson.decisive_noise([12], ["grpo"], ["tabular"], n_batches=4, batch_size=8, progress=False)
    assert list(one["policy"]) == ["tabular"] and list(one["estimator"]) == ["grpo"]


@pytest.mark.parametrize("kwargs, arg", [
    (dict(horizons=[]), "horizons"),
    (dict(horizons=[4]), "horizons"),  # the shared features need more states than features
    (dict(horizons=[10.5]), "horizons"),
    (dict(horizons=[10], policies=["lstm"]), "policies"),
    (dict(horizons=[10], policies=[]), "policies"),
    (dict(horizons=[10], estimators=[]), "estimators"),
    (dict(horizons=[10], estimators=["nope"]), "estimators"),
    (dict(horizons=[10], n_batches=1), "n_batches"),
    (dict(horizons=[10], batch_size=0), "batch_size"),
    (dict(horizons=[10], batch_size=12, group_size=8), "group_size"),
])
def test_decisive_noise_refuses_bad_arguments_naming_them(kwargs, arg):
    with pytest.raises((ValueError, TypeError), match=rf"^{arg}:"):
        lesson.decisive_noise(progress=False, **kwargs)
    if kwargs.get("horizons") == [4]:  # the table alone runs at T = 4
        assert len(lesson.decisive_noise([4], policies=["tabular"], n_batches=2, progress=False)) == 2


def test_dial_summary_reports_what_the_dashboard_shows_at_each_setting():
    settings = [{"horizon": 6}, {"horizon": 6, "noise_std": 1.0, "batch_size": 16}]
    got = lesson.dial_summary(settings, n_batches=5)
    assert list(got.horizon) == [6, 6] and list(got.batch_size) == [32, 16] and list(got.slip) == [0.0, 0.0]
    for row, setting in zip(got.itertuples(), settings):
        at = {**lesson.DIAL_START, **setting}
        df = lesson.gradient_sweep("horizon", [at["horizon"]], noise_std=at["noise_std"], slip=at["slip"],
                                   batch_size=at["batch_size"], n_batches=5, seed=0, progress=False)
        assert row.best_cosine == df.cosine.max() and row.best_estimator == df.estimator[df.cosine.idxmax()]
        assert row.reinforce_relative_variance == df.set_index("estimator").relative_variance["reinforce"]
        assert row.J == df.J.iloc[0]
    # one dashboard move: the sweep the chart draws, and the summary row above
    df, at = lesson.dial(6, n_batches=5)
    assert df.equals(lesson.gradient_sweep("horizon", [6], batch_size=32, n_batches=5, seed=0, progress=False))
    assert at == got.iloc[0].to_dict()
    with pytest.raises(ValueError, match="^settings:"):
        lesson.dial_summary([])
    with pytest.raises(ValueError, match="^settings: unknown control 'gamma'"):
        lesson.dial_summary([{"gamma": 0.9}])
    with pytest.raises(TypeError, match="^settings:"):
        lesson.dial_summary([30])


def test_the_engines_group_baselines_beside_grpo():
    table = lesson.engine_variants().set_index("estimator")
    # dr_grpo and opo keep GRPO's ranking; pass@k credits only a group's single best answer
    assert table.loc["dr_grpo", "rank correlation with grpo"] == 1.0
    assert float(table.loc["grpo_passk", "answers credited"].rstrip("%")) < 5
    assert table.loc["reinforce_pp_baseline", "answers credited"] == "100.0%"
    # GPG is Dr. GRPO scaled by the inverse share of non-zero rewards
    assert table.loc["gpg", "RMS credit"] > table.loc["dr_grpo", "RMS credit"]


def test_the_model_fed_engine_baselines_beside_grpo():
    # fed from the tiny LM's cached inputs (scripts/build_sample_rollouts.py)
    table = lesson.engine_variants().set_index("estimator")
    share = lambda name: float(table.loc[name, "answers credited"].rstrip("%"))  # noqa: E731
    assert share("gdpo") == 100.0 and 0.85 < table.loc["gdpo", "rank correlation with grpo"] < 0.99
    # ReMax: the greedy answer is right on most prompts, so few answers move
    assert 5 < share("remax") < 30
    assert share("optimal_token_baseline") > share("grpo")
    assert table.loc["optimal_token_baseline", "RMS credit"] < table.loc["grpo", "RMS credit"]
    inputs = lesson.sample_credit_inputs()
    assert inputs["reward_parts"].shape == (512, 3) and inputs["greedy_scores"].shape == (512,)
