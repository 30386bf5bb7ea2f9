"""How a gradient step moves the logit table (``logit_change``), for the tabular and the
shared-weight policy: one definition, the table's own rows for the first, features @ g.T for the
second. The defining difference: credit given to routine tokens only moves the decisive tokens'
logits when the parameters are shared.
"""
from __future__ import annotations

import pytest
import torch

from labkit.envs.chain import BifurcationChain, shared_policy
from labkit.envs.tabular import exact_truth
from labkit.policies import TabularSoftmaxPolicy


def _chain(horizon: int = 12) -> BifurcationChain:
    return BifurcationChain(horizon=horizon, n_bifurcations=2, seed=0)


def _policies(env):
    return {"tabular": TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.5, seed=1),
            "shared": shared_policy(env, init_std=0.5, seed=1)}


def _param(policy) -> torch.Tensor:
    return next(iter(policy.parameters()))


@pytest.mark.parametrize("kind", ["tabular", "shared"])
def test_a_step_along_g_moves_the_logits_by_logit_change_of_g(kind):
    # logits are linear in the parameters for both policies, so first order is exact
    env = _chain()
    policy = _policies(env)[kind]
    g = torch.randn(_param(policy).shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    before = policy.logits.detach().clone()
    with torch.no_grad():
        _param(policy).add_(0.1 * g)
    moved = policy.logits.detach() - before
    assert torch.allclose(moved, 0.1 * policy.logit_change(g), atol=1e-12)
    assert policy.logit_change(g).shape == (env.n_states, env.n_actions)


def test_the_tables_change_is_the_gradient_itself_and_shareds_is_features_times_g():
    env = _chain()
    pols = _policies(env)
    gen = torch.Generator().manual_seed(1)
    g_table = torch.randn(env.n_states, env.n_actions, generator=gen, dtype=torch.float64)
    assert torch.equal(pols["tabular"].logit_change(g_table), g_table)
    shared = pols["shared"]
    g_weight = torch.randn(env.n_actions, shared.n_features, generator=gen, dtype=torch.float64)
    assert torch.allclose(shared.logit_change(g_weight), shared.features @ g_weight.T)


@pytest.mark.parametrize("kind", ["tabular", "shared"])
def test_a_leading_batch_dimension_is_carried_through(kind):
    env = _chain()
    policy = _policies(env)[kind]
    gs = torch.randn(3, 2, *_param(policy).shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out = policy.logit_change(gs)
    assert out.shape == (3, 2, env.n_states, env.n_actions)
    assert torch.allclose(out[2, 1], policy.logit_change(gs[2, 1]))


def test_the_exact_gradients_logit_change_is_the_tables_gradient_pushed_through_the_features():
    env = _chain()
    shared = _policies(env)["shared"]
    grad = exact_truth(env.mdp(), shared).grad
    moved = shared.logit_change(shared.parameter_gradient(grad))
    assert torch.allclose(moved, shared.features @ shared.features.T @ grad)


@pytest.mark.parametrize("horizon", [10, 100])
def test_routine_credit_moves_the_decisive_logits_only_through_shared_weights(horizon):
    env = _chain(horizon)
    decisive = [env.state_index(t, 1) for t in env.bifurcations]
    pols = {"tabular": TabularSoftmaxPolicy(env.n_states, env.n_actions), "shared": shared_policy(env)}
    ro = env.sample(pols["tabular"], 16, seed=3)
    credit = torch.ones(16, horizon, dtype=torch.float64)
    credit[:, list(env.bifurcations)] = 0.0  # every routine token credited, no decisive one
    moved = {}
    for kind, policy in pols.items():
        step = policy.gradient_estimate(ro, credit)
        change = policy.logit_change(step)
        assert float(change.abs().max()) > 0.01  # the step moves something
        moved[kind] = float(change[decisive].abs().max())
    assert moved["tabular"] == 0.0          # exactly: no routine term reaches a decisive row
    assert moved["shared"] > 0.01           # measured 0.09 to 1.4 (the batch decides how much)


@pytest.mark.parametrize("kind", ["tabular", "shared"])
def test_a_gradient_of_the_wrong_shape_is_refused_naming_it(kind):
    policy = _policies(_chain())[kind]
    shape = tuple(_param(policy).shape)
    for bad in (torch.zeros(shape[0] + 1, shape[1]), torch.zeros(shape[1]), torch.zeros(2, shape[0], shape[1] + 1)):
        with pytest.raises(ValueError, match=r"^parameter_gradient:"):
            policy.logit_change(bad)
    with pytest.raises(TypeError, match=r"^parameter_gradient:"):
        policy.logit_change("g")
