"""Gradient cosine and variance (labkit.scoring.gradient): how far batch gradients are from the exact one."""

import pytest

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
