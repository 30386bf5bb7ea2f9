"""Gradient cosine and variance (labkit.scoring.gradient): how far batch gradients are from the exact one."""

import pytest
import torch

from labkit.credit.episode import reinforce
from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.policies import TabularSoftmaxPolicy
from labkit.scoring import gradient_study


def test_gradient_study_reports_horizon_growth():
    """Longer chains with the same deciding points give noisier REINFORCE gradients."""
    out = {}
    for T in (10, 100):
        env = BifurcationChain(horizon=T, n_bifurcations=2, seed=0)
        pol = TabularSoftmaxPolicy(env.n_states, env.n_actions)
        tr = exact_truth(env.mdp(), pol)
        ro = env.sample(pol, 60 * 32, group_size=8, seed=1)
        out[T] = gradient_study(pol, ro, reinforce, tr.grad, n_batches=60)
    assert out[100]["relative_variance"] > 4 * out[10]["relative_variance"]
    assert out[100]["cosine"] < out[10]["cosine"]


def test_gradient_study_in_one_call_over_the_whole_batch_gives_the_same_numbers():
    """``whole=`` (notebook 01's slider path) takes the per-trajectory gradients in one call; the
    numbers must equal the per-batch calls exactly."""
    from labkit.credit import get_estimator

    env = BifurcationChain(horizon=25, n_bifurcations=2, noise_std=0.5, slip=0.1, seed=0)
    pol = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.5, seed=0)
    tr = exact_truth(env.mdp(), pol)
    ro = env.sample(pol, 10 * 16, group_size=8, seed=1)
    batches = ro.split(10)
    for name in ("reinforce", "grpo", "reinforce_pp"):
        est = get_estimator(name)
        apart = gradient_study(pol, batches, est, tr.grad)
        assert gradient_study(pol, batches, est, tr.grad, whole=ro) == apart
        assert gradient_study(pol, ro, est, tr.grad, n_batches=10) == apart
    with pytest.raises(ValueError, match="^whole: "):
        gradient_study(pol, batches, reinforce, tr.grad, whole=ro.select(range(16)))


def _uniform_world(horizon, shared=False):
    from labkit.envs.chain import shared_policy

    env = BifurcationChain(horizon=horizon, n_bifurcations=2, seed=0)
    pol = shared_policy(env) if shared else TabularSoftmaxPolicy(env.n_states, env.n_actions)
    tr = exact_truth(env.mdp(), pol)
    exact = pol.parameter_gradient(tr.grad) if shared else tr.grad
    decisive = [env.state_index(t, 1) for t in env.bifurcations]
    return env, pol, exact, decisive


@pytest.mark.parametrize("shared", [False, True])
def test_the_decisive_view_scores_how_each_batch_moves_the_decisive_logits(shared):
    """By hand: each batch's estimate carried to the logit table (the table's rows, or
    features @ g.T), the decisive rows kept, then cosine and relative variance."""
    from labkit.credit import get_estimator
    from labkit.scoring.agreement import cosine
    from labkit.scoring.gradient import logit_view

    env, pol, exact, decisive = _uniform_world(20, shared)
    ro = env.sample(pol, 12 * 16, group_size=8, seed=1)
    batches = ro.split(12)
    est = get_estimator("grpo")
    out = gradient_study(pol, batches, est, exact, view=logit_view(pol, decisive))
    assert gradient_study(pol, batches, est, exact, whole=ro, view=logit_view(pol, decisive)) == out
    moved = torch.stack([pol.logit_change(pol.gradient_estimate(b, est(b).token))[decisive].reshape(-1)
                         for b in batches])
    target = pol.logit_change(exact)[decisive].reshape(-1)
    mean = moved.mean(0)
    assert out["cosine"] == pytest.approx(sum(cosine(m, target) for m in moved) / 12, rel=1e-9)
    assert out["cosine_of_mean"] == pytest.approx(cosine(mean, target), rel=1e-9)
    var = float(((moved - mean) ** 2).sum(1).mean())
    assert out["relative_variance"] == pytest.approx(var / float(mean @ mean), rel=1e-9)
    if not shared:  # the table's decisive view is just its decisive rows
        rows = lambda g: g[..., decisive, :]  # noqa: E731
        assert gradient_study(pol, batches, est, exact, view=rows) == pytest.approx(out, rel=1e-12)


def test_the_view_of_every_state_of_the_table_changes_nothing():
    from labkit.scoring.gradient import logit_view

    env, pol, exact, _ = _uniform_world(15)
    batches = env.sample(pol, 6 * 16, group_size=8, seed=1).split(6)
    assert gradient_study(pol, batches, reinforce, exact, view=logit_view(pol)) == \
        gradient_study(pol, batches, reinforce, exact)


def test_routine_noise_reaches_the_decisive_view_only_through_shared_weights():
    """Same trajectories, same credit: the table's decisive noise does not grow with the horizon,
    the shared policy's does."""
    from labkit.scoring.gradient import logit_view

    rel = {}
    for shared in (False, True):
        for T in (10, 200):
            env, pol, exact, decisive = _uniform_world(T, shared)
            ro = env.sample(pol, 30 * 32, group_size=8, seed=1)
            rel[shared, T] = gradient_study(pol, ro, reinforce, exact, n_batches=30,
                                            view=logit_view(pol, decisive))["relative_variance"]
    # measured with 100 batches: x0.9 for the table, x23 with shared weights; 30 batches leave each
    # estimate ~25 % noise (and another torch samples other batches), so the bounds keep a margin
    assert 0.4 < rel[False, 200] / rel[False, 10] < 2.5
    assert rel[True, 200] > 4 * rel[True, 10]


def test_bad_views_are_refused_naming_them():
    from labkit.scoring.gradient import logit_view

    env, pol, exact, decisive = _uniform_world(10)
    batches = env.sample(pol, 4 * 8, group_size=8, seed=1).split(4)
    with pytest.raises(TypeError, match="^view: "):
        gradient_study(pol, batches, reinforce, exact, view="decisive")
    with pytest.raises(ValueError, match="^view: "):  # drops the batch dimension
        gradient_study(pol, batches, reinforce, exact, view=lambda g: g.sum(0) if g.dim() == 3 else g)
    with pytest.raises(ValueError, match="^states: "):
        logit_view(pol, [decisive[0], env.n_states])
    with pytest.raises(ValueError, match="^states: "):
        logit_view(pol, [])
    with pytest.raises(TypeError, match="^states: "):
        logit_view(pol, [0.5])
    with pytest.raises(TypeError, match="^policy: "):
        logit_view(object(), decisive)
