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
