import pytest
import torch

from labkit import experiments as ex


def test_p_correct_fixes_the_success_rate():
    env, policy, truth = ex.chain_setup(12, n_bifurcations=3, p_correct=0.8)
    assert truth.J == pytest.approx(0.8 ** 3)
    ro = env.sample(policy, 20000, seed=0)
    assert float(ro.scores.mean()) == pytest.approx(0.8 ** 3, abs=0.02)
    with pytest.raises(ValueError, match="p_correct"):
        ex.chain_setup(12, p_correct=1.0)


def test_gradient_sweep_shape_and_validation():
    df = ex.gradient_sweep("noise_std", [0.0, 1.0], ["reinforce", "grpo"], horizon=8,
                           n_batches=10, batch_size=16, progress=False)
    assert list(df.columns[:3]) == ["noise_std", "estimator", "J"]
    assert len(df) == 4 and df["cosine"].between(-1, 1).all()
    # pure distractor noise makes one batch's gradient worse
    by = df.set_index(["estimator", "noise_std"])
    assert by.loc[("reinforce", 1.0), "cosine"] < by.loc[("reinforce", 0.0), "cosine"]
    with pytest.raises(ValueError, match="vary"):
        ex.gradient_sweep("gamma", [1.0], progress=False)
    with pytest.raises(ValueError, match="group_size"):
        ex.gradient_sweep("horizon", [5], batch_size=10, group_size=4, progress=False)
    with pytest.raises(ValueError, match="values"):
        ex.gradient_sweep("horizon", [], progress=False)


def test_horizon_sweep_survives_slider_extremes():
    """The notebook's sliders go down to T=2 and up to T=200 with slip 0.9 and noise 2."""
    for T, slip, noise in [(2, 0.0, 0.0), (200, 0.9, 2.0), (1, 0.5, 0.0)]:
        df = ex.gradient_sweep("horizon", [T], slip=slip, noise_std=noise, n_batches=5,
                               batch_size=8, progress=False)
        assert df[["cosine", "variance"]].notna().all().all()


def test_credit_panels_and_scores():
    env, policy, truth = ex.chain_setup(10, init_std=0.5, policy_seed=1)
    ro = env.sample(policy, 64, group_size=8, seed=0)
    panels = ex.credit_panels(ro, truth, ["grpo"])
    assert set(panels) == {"exact advantage", "grpo"}
    assert torch.equal(panels["exact advantage"], truth.advantage(ro))
    scores = ex.credit_scores(ro, truth, ex.EPISODE_ESTIMATORS)
    assert len(scores) == 6 and scores["recall_at_k"].lt(0.5).all()


def test_notebook_style_dashboard_recomputes_on_slider_move():
    """The pattern notebook 01 uses: sliders -> gradient_sweep -> bar chart + summary."""
    from labkit import viz

    def quality(horizon, noise_std):
        df = ex.gradient_sweep("horizon", [horizon], noise_std=noise_std, n_batches=5, batch_size=8,
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


def test_gae_chain_setup_is_the_sweeps_setting():
    env, policy, truth, critic = ex.gae_chain_setup(16)
    err = float((critic.table - truth.V).abs()[critic.counts > 0].mean())
    df = ex.gae_lambda_sweep([1.0], critic_episodes=16, n_batches=2, batch_size=4, progress=False)
    assert df.attrs["critic_value_error"] == pytest.approx(err)
    other = ex.gae_lambda_sweep([1.0], critic_episodes=16, n_batches=2, batch_size=4, critic_seed=7,
                                progress=False)
    _, _, _, critic7 = ex.gae_chain_setup(16, critic_seed=7)
    assert other.attrs["critic_value_error"] == pytest.approx(
        float((critic7.table - truth.V).abs()[critic7.counts > 0].mean()))
    assert other.attrs["critic_value_error"] != pytest.approx(err)
    assert float(critic.counts.sum()) == 16 * env.horizon


def test_gae_panels():
    env, policy, truth, critic = ex.gae_chain_setup(32, horizon=8)
    ro = env.sample(policy, 6, seed=0)
    panels = ex.gae_panels(ro, truth, {"learned": critic, "exact": truth.value}, [0.0, 1.0])
    assert list(panels) == ["exact advantage", "GAE λ=0, learned critic", "GAE λ=1, learned critic",
                            "GAE λ=0, exact critic", "GAE λ=1, exact critic"]
    # lambda = 1 is the return minus the critic's value
    want = torch.where(ro.mask, ro.returns() - critic.value(ro), 0.0)
    assert torch.allclose(panels["GAE λ=1, learned critic"], want)
    with pytest.raises(ValueError, match="lams"):
        ex.gae_panels(ro, truth, {"exact": truth.value}, [1.5])


def test_gae_critic_sweep_matches_the_lambda_sweep():
    kw = dict(horizon=10, n_batches=8, batch_size=8, progress=False)
    df = ex.gae_critic_sweep([16, 64], lams=(0.0, 1.0), n_critics=2, **kw)
    assert len(df) == 2 * 2 * 2 + 2 * 2  # learned (sizes x fits x lams) + exact (sizes x lams)
    exact = df[df.critic == "exact"]
    assert exact.groupby("lam").cosine.nunique().eq(1).all()  # the same reference at every size
    # fit 0 is gae_lambda_sweep's critic, scored on the same batches (precomputed credit == per batch)
    sweep = ex.gae_lambda_sweep([0.0, 1.0], critic_episodes=64, **kw).set_index(["critic", "lam"])
    mine = df[(df.critic_episodes == 64) & (df.fit == 0)].set_index(["critic", "lam"])
    for key in [("learned", 0.0), ("learned", 1.0), ("exact", 0.0), ("exact", 1.0)]:
        assert mine.loc[key, "cosine"] == pytest.approx(sweep.loc[key, "cosine"], abs=1e-9)
        assert mine.loc[key, "relative_variance"] == pytest.approx(sweep.loc[key, "relative_variance"], rel=1e-9)
    assert mine.loc[("learned", 0.0), "critic_value_error"] == pytest.approx(sweep.attrs["critic_value_error"])
    # one later draw on its own is the same critic as in a run of several
    later = ex.gae_critic_sweep([16], lams=(0.0,), n_critics=1, first_fit=1, **kw)
    assert later[later.critic == "learned"].fit.tolist() == [1]
    assert later.set_index(["critic", "fit"]).loc[("learned", 1), "cosine"] == pytest.approx(
        df[(df.critic_episodes == 16) & (df.fit == 1) & (df.lam == 0.0)].cosine.item())
    for bad, match in [(dict(critic_episodes=[]), "critic_episodes"), (dict(critic_episodes=[0]), "critic_episodes"),
                       (dict(critic_episodes=[8], lams=()), "lams"), (dict(critic_episodes=[8], n_critics=0), "n_critics"),
                       (dict(critic_episodes=[8], first_fit=-1), "first_fit")]:
        with pytest.raises(ValueError, match=match):
            ex.gae_critic_sweep(**bad, progress=False)


def test_gae_sweeps_survive_the_notebook_slider_ends():
    """Notebook 02's dashboard: critic episodes 8..1024, noise 0..2, lambda 0..1, critic draws 0..9."""
    for episodes, noise, draw in [(8, 0.0, 0), (8, 2.0, 9), (1024, 0.0, 9), (1024, 2.0, 0)]:
        df = ex.gae_critic_sweep([episodes], lams=[0.0, 0.05, 1.0], n_critics=1, first_fit=draw, noise_std=noise,
                                 n_batches=4, batch_size=8, progress=False)
        assert df.cosine.between(-1, 1).all() and len(df) == 6
        env, policy, truth, critic = ex.gae_chain_setup(episodes, noise_std=noise, critic_seed=2 + draw)
        assert ex.fork_values(env, truth, critic).notna().all().all()
        sweep = ex.gae_lambda_sweep([0.0, 1.0], critic_episodes=episodes, noise_std=noise, critic_seed=2 + draw,
                                    n_batches=4, batch_size=8, progress=False)
        assert sweep[["cosine", "adv_mse", "rank_corr"]].notna().all().all()


def test_gae_critic_curves():
    df = ex.gae_critic_sweep([8, 32], lams=(0.0, 1.0), n_critics=3, horizon=8, n_batches=4, batch_size=8,
                             progress=False)
    curves = ex.gae_critic_curves(df)
    assert list(curves.columns) == ["lam", "critic_episodes", "curve", "cosine"]
    assert len(curves) == 2 * 2 * 4
    c = curves.set_index(["lam", "critic_episodes", "curve"]).cosine
    runs = df[(df.critic == "learned") & (df.lam == 0.0) & (df.critic_episodes == 8)].cosine
    assert c[(0.0, 8, "learned: worst")] == pytest.approx(runs.min())
    assert c[(0.0, 8, "learned: best")] == pytest.approx(runs.max())
    assert c[(0.0, 8, "learned: mean")] == pytest.approx(runs.mean())
    with pytest.raises(ValueError, match="critic"):
        ex.gae_critic_curves(df.drop(columns="critic"))


def test_fork_values():
    env, policy, truth, critic = ex.gae_chain_setup(4096, horizon=10)
    fv = ex.fork_values(env, truth, critic)
    assert list(fv.index) == list(env.bifurcations)
    assert (fv["V failed (exact)"] == 0).all()  # off track, nothing but zero-mean noise is left
    # with plenty of data the learned critic is close to the truth at the forks
    assert (fv["V passed (learned)"] - fv["V passed (exact)"]).abs().max() < 0.15
    assert int(fv[["visits passed", "visits failed"]].sum(axis=1).iloc[0]) == 4096
    env4, _, truth4, critic4 = ex.gae_chain_setup(8, horizon=4, n_bifurcations=4)
    assert list(ex.fork_values(env4, truth4, critic4).index) == [0, 1, 2]  # the fork at t=3 has no successor
