"""Notebook 02's runners (labkit.course.nb02_critics_gae): GAE on the chain with learned and exact
critics, and the tiny LM's value estimates judged against its truth (the truth itself:
envs/test_arithmetic_truth.py; the hit rate: scoring/test_steps.py; the LM critic's fit:
learn/test_lm_runs.py).
"""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from labkit.course import nb02_critics_gae as lesson
from labkit.envs.arithmetic.truth import load_reference

from panel_checks import assert_same_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def test_gae_chain_setup_is_the_sweeps_setting():
    env, policy, truth, critic = lesson.gae_chain_setup(16)
    err = float((critic.table - truth.V).abs()[critic.counts > 0].mean())
    df = lesson.gae_lambda_sweep([1.0], critic_episodes=16, n_batches=2, batch_size=4, progress=False)
    assert df.attrs["critic_value_error"] == pytest.approx(err)
    other = lesson.gae_lambda_sweep([1.0], critic_episodes=16, n_batches=2, batch_size=4, critic_seed=7,
                                    progress=False)
    _, _, _, critic7 = lesson.gae_chain_setup(16, critic_seed=7)
    assert other.attrs["critic_value_error"] == pytest.approx(
        float((critic7.table - truth.V).abs()[critic7.counts > 0].mean()))
    assert other.attrs["critic_value_error"] != pytest.approx(err)
    assert float(critic.counts.sum()) == 16 * env.horizon


def test_gae_panels():
    env, policy, truth, critic = lesson.gae_chain_setup(32, horizon=8)
    ro = env.sample(policy, 6, seed=0)
    panels = lesson.gae_panels(ro, truth, {"learned": critic, "exact": truth.value}, [0.0, 1.0])
    assert list(panels) == ["exact advantage", "GAE λ=0, learned critic", "GAE λ=1, learned critic",
                            "GAE λ=0, exact critic", "GAE λ=1, exact critic"]
    # lambda = 1 is the return minus the critic's value
    want = torch.where(ro.mask, ro.returns() - critic.value(ro), 0.0)
    assert torch.allclose(panels["GAE λ=1, learned critic"], want)
    with pytest.raises(ValueError, match="lams"):
        lesson.gae_panels(ro, truth, {"exact": truth.value}, [1.5])


def test_gae_critic_sweep_matches_the_lambda_sweep():
    kw = dict(horizon=10, n_batches=8, batch_size=8, progress=False)
    df = lesson.gae_critic_sweep([16, 64], lams=(0.0, 1.0), n_critics=2, **kw)
    assert len(df) == 2 * 2 * 2 + 2 * 2  # learned (sizes x fits x lams) + exact (sizes x lams)
    exact = df[df.critic == "exact"]
    assert exact.groupby("lam").cosine.nunique().eq(1).all()  # the same reference at every size
    # fit 0 is gae_lambda_sweep's critic, scored on the same batches (precomputed credit == per batch)
    sweep = lesson.gae_lambda_sweep([0.0, 1.0], critic_episodes=64, **kw).set_index(["critic", "lam"])
    mine = df[(df.critic_episodes == 64) & (df.fit == 0)].set_index(["critic", "lam"])
    for key in [("learned", 0.0), ("learned", 1.0), ("exact", 0.0), ("exact", 1.0)]:
        assert mine.loc[key, "cosine"] == pytest.approx(sweep.loc[key, "cosine"], abs=1e-9)
        assert mine.loc[key, "relative_variance"] == pytest.approx(sweep.loc[key, "relative_variance"], rel=1e-9)
    assert mine.loc[("learned", 0.0), "critic_value_error"] == pytest.approx(sweep.attrs["critic_value_error"])
    # one later draw on its own is the same critic as in a run of several
    later = lesson.gae_critic_sweep([16], lams=(0.0,), n_critics=1, first_fit=1, **kw)
    assert later[later.critic == "learned"].fit.tolist() == [1]
    assert later.set_index(["critic", "fit"]).loc[("learned", 1), "cosine"] == pytest.approx(
        df[(df.critic_episodes == 16) & (df.fit == 1) & (df.lam == 0.0)].cosine.item())
    for bad, match in [(dict(critic_episodes=[]), "critic_episodes"), (dict(critic_episodes=[0]), "critic_episodes"),
                       (dict(critic_episodes=[8], lams=()), "lams"), (dict(critic_episodes=[8], n_critics=0), "n_critics"),
                       (dict(critic_episodes=[8], first_fit=-1), "first_fit")]:
        with pytest.raises(ValueError, match=match):
            lesson.gae_critic_sweep(**bad, progress=False)


def test_gae_sweeps_survive_the_notebook_slider_ends():
    """Notebook 02's dashboard: critic episodes 8..1024, noise 0..2, lambda 0..1, critic draws 0..9."""
    for episodes, noise, draw in [(8, 0.0, 0), (8, 2.0, 9), (1024, 0.0, 9), (1024, 2.0, 0)]:
        df = lesson.gae_critic_sweep([episodes], lams=[0.0, 0.05, 1.0], n_critics=1, first_fit=draw, noise_std=noise,
                                     n_batches=4, batch_size=8, progress=False)
        assert df.cosine.between(-1, 1).all() and len(df) == 6
        env, policy, truth, critic = lesson.gae_chain_setup(episodes, noise_std=noise, critic_seed=2 + draw)
        assert lesson.fork_values(env, truth, critic).notna().all().all()
        sweep = lesson.gae_lambda_sweep([0.0, 1.0], critic_episodes=episodes, noise_std=noise, critic_seed=2 + draw,
                                        n_batches=4, batch_size=8, progress=False)
        assert sweep[["cosine", "adv_mse", "rank_corr"]].notna().all().all()


def test_gae_critic_curves():
    df = lesson.gae_critic_sweep([8, 32], lams=(0.0, 1.0), n_critics=3, horizon=8, n_batches=4, batch_size=8,
                                 progress=False)
    curves = lesson.gae_critic_curves(df)
    assert list(curves.columns) == ["lam", "critic_episodes", "curve", "cosine"]
    assert len(curves) == 2 * 2 * 4
    c = curves.set_index(["lam", "critic_episodes", "curve"]).cosine
    runs = df[(df.critic == "learned") & (df.lam == 0.0) & (df.critic_episodes == 8)].cosine
    assert c[(0.0, 8, "learned: worst")] == pytest.approx(runs.min())
    assert c[(0.0, 8, "learned: best")] == pytest.approx(runs.max())
    assert c[(0.0, 8, "learned: mean")] == pytest.approx(runs.mean())
    with pytest.raises(ValueError, match="critic"):
        lesson.gae_critic_curves(df.drop(columns="critic"))


def test_fork_values():
    env, policy, truth, critic = lesson.gae_chain_setup(4096, horizon=10)
    fv = lesson.fork_values(env, truth, critic)
    assert list(fv.index) == list(env.bifurcations)
    assert (fv["V failed (exact)"] == 0).all()  # off track, nothing but zero-mean noise is left
    # with plenty of data the learned critic is close to the truth at the forks
    assert (fv["V passed (learned)"] - fv["V passed (exact)"]).abs().max() < 0.15
    assert int(fv[["visits passed", "visits failed"]].sum(axis=1).iloc[0]) == 4096
    env4, _, truth4, critic4 = lesson.gae_chain_setup(8, horizon=4, n_bifurcations=4)
    assert list(lesson.fork_values(env4, truth4, critic4).index) == [0, 1, 2]  # the fork at t=3 has no successor


@pytest.mark.usefixtures("one_torch_thread")
def test_lm_value_scores_rank_an_oracle_perfectly_and_a_constant_at_chance(lm_env, reference):
    from types import SimpleNamespace

    from labkit.envs.arithmetic.truth import load_step_alternatives

    alt = load_step_alternatives(lm_env)
    keep = (alt["groups"] < 12).nonzero().flatten().tolist()
    small = {k: (v[keep] if isinstance(v, torch.Tensor) and k.startswith(("groups", "mc_", "ends", "counts"))
                 else [v[i] for i in keep] if k in ("prefixes", "problems", "texts") else v) for k, v in alt.items()}
    prefixes, _, present = lm_env.step_prefixes(reference)
    # an oracle critic: asked first about the reference step starts, then about the candidates
    answers = iter([(prefixes, reference.truth["step_values"][present]), (small["prefixes"], small["mc_values"])])

    def prefix_values(rows):
        expected, values = next(answers)
        assert rows == expected
        return values

    oracle = SimpleNamespace(prefix_values=prefix_values)
    df = lesson.lm_value_scores(lm_env, oracle, reference, small, ks=(1, 4), progress=False).set_index("estimate")
    assert list(df.index) == ["constant", "LM critic", "Monte Carlo, k=1", "Monte Carlo, k=4"]
    assert df.loc["LM critic", "value_mae"] == 0 and df.loc["LM critic", "value_corr"] == pytest.approx(1.0)
    assert df.loc["LM critic", "pairwise"] == 1.0 and df.loc["LM critic", "top1"] == 1.0
    assert df.loc["constant", "pairwise"] == 0.5 and df.loc["constant", "top1"] == pytest.approx(df.loc["constant", "top1_chance"])
    assert df.loc["constant", "value_mae"] > 0.05  # the reference values vary: a constant is off
    assert df.loc["LM critic", "tokens"] == sum(len(p) for p in small["prefixes"])
    assert 0 < df.loc["Monte Carlo, k=1", "tokens"] < df.loc["Monte Carlo, k=4", "tokens"]
    assert df.loc["Monte Carlo, k=4", "pairwise"] > 0.7  # a few vines already order clearly different steps


def test_gae_critic_sweep_keeps_the_exact_critics_scores_by_value(monkeypatch):
    monkeypatch.setattr(lesson, "_EXACT_STUDIES", {})
    kw = dict(horizon=8, n_batches=4, batch_size=8, progress=False)
    first = lesson.gae_critic_sweep([16], lams=(0.0, 0.5), n_critics=1, **kw)
    assert len(lesson._EXACT_STUDIES) == 2
    # another critic size and one new lambda: only the new lambda's exact scores are computed
    later = lesson.gae_critic_sweep([64], lams=(0.0, 0.5, 1.0), n_critics=1, **kw)
    assert len(lesson._EXACT_STUDIES) == 3
    monkeypatch.setattr(lesson, "_EXACT_STUDIES", {})
    fresh = lesson.gae_critic_sweep([64], lams=(0.0, 0.5, 1.0), n_critics=1, **kw)
    pd.testing.assert_frame_equal(later, fresh, check_exact=True)  # kept scores = recomputed scores
    ex = first[first.critic == "exact"].set_index("lam").cosine
    assert ex.to_dict() == fresh[fresh.critic == "exact"].set_index("lam").cosine.loc[[0.0, 0.5]].to_dict()
    lesson.gae_critic_sweep([16], lams=(0.0,), n_critics=1, noise_std=1.0, **kw)  # another setting: a new key
    assert len(lesson._EXACT_STUDIES) == 4


def test_lambda_sweep_shows_the_dial():
    df = lesson.gae_lambda_sweep([0.0, 1.0], critic_episodes=256, n_batches=40, progress=False)
    by = df.set_index(["critic", "lam"])
    # with the exact critic, lambda = 0 has far less variance than lambda = 1 (pure MC)
    assert by.loc[("exact", 0.0), "relative_variance"] < by.loc[("exact", 1.0), "relative_variance"] / 3
    # lambda = 1 does not use the critic's values in expectation: both critics agree closely
    assert by.loc[("learned", 1.0), "cosine"] == pytest.approx(by.loc[("exact", 1.0), "cosine"], abs=0.05)
    assert df.attrs["critic_value_error"] > 0
    with pytest.raises(ValueError, match="lams"):
        lesson.gae_lambda_sweep([1.5], progress=False)


def test_nb02_gae_panels_unchanged():
    from labkit.course import nb02_critics_gae as lesson
    from labkit.credit.td import gae

    env, policy, truth, critic = lesson.gae_chain_setup(32, horizon=8)
    ro = env.sample(policy, 6, seed=0)
    critics, lams = {"learned": critic, "exact": truth.value}, [0.0, 0.5, 1.0]
    old = {"exact advantage": truth.advantage(ro)}
    for name, c in critics.items():
        for lam in lams:
            old[f"GAE λ={lam:g}, {name} critic"] = gae(ro, values=c, lam=lam).token
    assert_same_panels(lesson.gae_panels(ro, truth, critics, lams), old)


def test_ranking_intervals_are_wilsons_over_pairs_and_states():
    from labkit.scoring import wilson_interval

    scores = pd.DataFrame([{"estimate": "LM critic", "pairwise": 30 / 69, "pairwise_chance": 0.5, "top1": 16 / 45,
                            "top1_chance": 0.452, "pairs": 69, "groups": 45},
                           {"estimate": "oracle", "pairwise": 1.0, "pairwise_chance": 0.5, "top1": 1.0,
                            "top1_chance": 0.452, "pairs": 69, "groups": 45}])
    out = lesson.ranking_intervals(scores)
    critic = out.loc["LM critic"]
    assert (critic.pairwise_low, critic.pairwise_high) == pytest.approx(wilson_interval(30, 69))
    assert (critic.top1_low, critic.top1_high) == pytest.approx(wilson_interval(16, 45))
    # 69 pairs and 45 states cannot tell this critic from chance: both intervals cover it
    assert critic.pairwise_low < 0.5 < critic.pairwise_high and critic.top1_low < 0.452 < critic.top1_high
    assert out.loc["oracle", "pairwise_high"] == 1.0 and out.loc["oracle", "top1_low"] > 0.9
    with pytest.raises(ValueError, match="^scores:"):
        lesson.ranking_intervals(scores.drop(columns="pairs"))


def test_dial_summary_is_the_dashboards_sweep_and_fork_worth():
    lams = (0.0, 0.5, 1.0)
    got = lesson.dial_summary(16, 3, 0.5, lams=lams, n_batches=4)
    df = lesson.gae_critic_sweep([16], lams=lams, n_critics=1, first_fit=3, noise_std=0.5, n_batches=4,
                                 progress=False)
    want = df.pivot(index="lam", columns="critic", values="cosine")
    assert list(got["cosine"].columns) == ["exact", "learned"] and list(got["cosine"].index) == list(lams)
    for critic in ("exact", "learned"):
        assert got["cosine"][critic].tolist() == want[critic].tolist()
    assert got["best_lam"] == want.learned.idxmax() and got["best_cosine"] == want.learned.max()
    env, _, truth, critic = lesson.gae_chain_setup(16, noise_std=0.5, critic_seed=2 + 3)
    forks = lesson.fork_values(env, truth, critic)
    assert got["fork_worth"].learned.tolist() == (forks["V passed (learned)"] - forks["V failed (learned)"]).tolist()
    assert got["fork_worth"].exact.tolist() == (forks["V passed (exact)"] - forks["V failed (exact)"]).tolist()
    # what the dashboard draws from is that same sweep and that same critic
    assert got["sweep"].equals(df) and got["forks"].equals(forks)
    with pytest.raises(ValueError, match="^critic_draw"):
        lesson.dial_summary(16, -1)
    with pytest.raises(ValueError, match="^critic_episodes"):
        lesson.dial_summary(0)
