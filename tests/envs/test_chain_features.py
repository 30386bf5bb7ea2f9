"""Tests for labkit.envs.chain.features: the chain's shared features and the policy over them.

What the features must not do (name a bifurcation) and what they must still do (let a policy pick
the correct token at every bifurcation) are both checked.
"""
from __future__ import annotations

import math

import pytest
import torch

from labkit.envs.chain import BifurcationChain, chain_features, shared_policy
from labkit.envs.tabular import exact_truth
from labkit.policies import SharedFeaturePolicy


def test_features_are_a_bias_the_on_track_flag_and_low_frequencies_of_relative_position():
    env = BifurcationChain(horizon=10, n_bifurcations=2)
    phi = chain_features(env, n_frequencies=2)
    assert phi.shape == (20, 6) and phi.dtype == torch.float64
    s = env.state_index(3, 1)
    x = 3.5 / 10
    expected = [1.0, 1.0, math.cos(math.pi * x), math.cos(2 * math.pi * x), math.sin(math.pi * x), math.sin(2 * math.pi * x)]
    assert torch.allclose(phi[s], torch.tensor(expected, dtype=torch.float64))
    assert torch.equal(phi[env.state_index(3, 0), 2:], phi[s, 2:]) and phi[env.state_index(3, 0), 1] == 0


@pytest.mark.parametrize("horizon", [10, 40, 100])
def test_no_feature_singles_out_the_bifurcations(horizon):
    env = BifurcationChain(horizon=horizon, n_bifurcations=2)
    phi = chain_features(env)
    on_track = phi[1::2]
    decisive = torch.zeros(horizon, dtype=torch.bool)
    decisive[list(env.bifurcations)] = True
    # every feature that is nonzero at a bifurcation is nonzero at some routine position too
    assert bool(((on_track[decisive] != 0).any(0) <= (on_track[~decisive] != 0).any(0)).all())
    # and a decisive position's features are close to its routine neighbour's (a smooth map)
    b = env.bifurcations[0]
    assert float((on_track[b] - on_track[b + 1]).abs().max()) < 3 * math.pi / horizon + 1e-12
    assert torch.linalg.matrix_rank(phi) < env.n_states


@pytest.mark.parametrize("horizon", [10, 100])
def test_exact_gradient_ascent_reaches_near_certain_success(horizon):
    # the features can express the correct token at both bifurcations (which differ here)
    env = BifurcationChain(horizon=horizon, n_bifurcations=2, seed=0)
    assert len({int(env.correct[t]) for t in env.bifurcations}) == 2
    policy = shared_policy(env)
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    for _ in range(100):
        grad = exact_truth(env.mdp(), policy).grad
        opt.zero_grad()
        policy.logits.backward(-grad)
        opt.step()
    assert exact_truth(env.mdp(), policy).J > 0.99


def test_shared_policy_is_a_uniform_feature_policy_of_the_chain():
    env = BifurcationChain(horizon=12, n_actions=3)
    policy = shared_policy(env, n_frequencies=2)
    assert isinstance(policy, SharedFeaturePolicy)
    assert (policy.n_states, policy.n_actions, policy.n_features) == (24, 3, 6)
    assert torch.allclose(policy.probs(), torch.full((24, 3), 1 / 3, dtype=torch.float64))


def test_bad_input_is_refused_naming_the_argument():
    env = BifurcationChain(horizon=4, n_bifurcations=1)
    with pytest.raises(ValueError, match=r"^n_frequencies:"):
        chain_features(env, 0)
    with pytest.raises(ValueError, match=r"^n_frequencies: 3 gives 8 features for the chain's 8 states"):
        chain_features(env, 3)  # as many features as states: a table in disguise
    with pytest.raises(TypeError, match=r"^env:"):
        chain_features("chain")
    with pytest.raises(ValueError, match=r"^init_std:"):
        shared_policy(env, init_std=-1.0)
