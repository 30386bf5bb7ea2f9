"""Tests for labkit.policies.shared: a softmax policy whose weights every state shares.

The defining property is checked against the tabular policy: one gradient step on a routine
token's log-probability moves the decisive positions' logits of the shared policy and leaves the
table's untouched. The rest: it is a proper policy (probabilities, seeded init), it offers the
tabular interface the chain and the exact solver read, its weight-space gradients are right
(finite differences, autograd), and bad input is refused naming the argument.
"""
from __future__ import annotations

import inspect

import pytest
import torch

from labkit.envs.chain import BifurcationChain, ChainLearner, shared_policy
from labkit.envs.tabular import exact_truth
from labkit.learn.loop import train
from labkit.policies import SharedFeaturePolicy, TabularSoftmaxPolicy


def _chain(horizon: int = 10) -> BifurcationChain:
    return BifurcationChain(horizon=horizon, n_bifurcations=2, seed=0)


def _step_on_one_token(policy, state: int, action: int, lr: float = 1.0) -> None:
    """One plain gradient-ascent step on log pi(action | state)."""
    loss = -policy.log_prob(torch.tensor([state]), torch.tensor([action])).sum()
    policy.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in policy.parameters():
            p -= lr * p.grad


@pytest.mark.parametrize("horizon", [10, 100])
def test_a_routine_tokens_gradient_moves_the_decisive_logits_only_when_parameters_are_shared(horizon):
    env = _chain(horizon)
    decisive = [env.state_index(t, 1) for t in env.bifurcations]
    routine = env.state_index(0, 1)
    assert 0 not in env.bifurcations
    moved = {}
    for name, policy in (("table", TabularSoftmaxPolicy(env.n_states, env.n_actions)), ("shared", shared_policy(env))):
        before = policy.logits.detach().clone()
        _step_on_one_token(policy, routine, action=0)
        change = (policy.logits.detach() - before)
        assert float(change[routine].abs().max()) > 0.4  # the routine token itself moved in both
        moved[name] = float(change[decisive].abs().max())
    assert moved["table"] == 0.0
    assert moved["shared"] > 0.5  # a logit step of the size the routine token's own got (lr 1, uniform start)


def test_a_routine_step_can_undo_a_decisive_choice_of_the_shared_policy():
    # from the uniform policy, pushing token A at position 0 pushes A at both bifurcations too;
    # the second one needs B, so its probability of the correct token falls
    env = _chain(10)
    policy = shared_policy(env)
    second = env.bifurcations[1]
    assert int(env.correct[second]) == 1
    _step_on_one_token(policy, env.state_index(0, 1), action=0)
    assert float(policy.probs().detach()[env.state_index(second, 1), 1]) < 0.2


def test_probabilities_are_distributions_and_init_is_seeded():
    env = _chain(10)
    uniform = shared_policy(env)
    assert torch.allclose(uniform.probs(), torch.full((env.n_states, env.n_actions), 0.5, dtype=torch.float64))
    a, b, c = (shared_policy(env, init_std=1.0, seed=s) for s in (3, 3, 4))
    assert torch.equal(a.weight, b.weight) and not torch.equal(a.weight, c.weight)
    p = a.probs()
    assert p.shape == (env.n_states, env.n_actions) and p.dtype == torch.float64
    assert torch.allclose(p.sum(-1), torch.ones(env.n_states, dtype=torch.float64))
    assert torch.allclose(a.log_probs().exp(), p)
    assert torch.allclose(a.entropy(), -(p * p.log()).sum(-1))
    assert len(list(a.parameters())) == 1 and a.weight.numel() == env.n_actions * a.n_features < env.n_states


def test_it_offers_the_tabular_policys_interface_except_setting_one_state():
    # set_probs cannot exist: one state's probabilities cannot move without moving the others'
    public = {n for n in vars(TabularSoftmaxPolicy) if not n.startswith("_")} - {"set_probs"}
    assert public <= {n for n in dir(SharedFeaturePolicy) if not n.startswith("_")}
    for name in ("sample", "log_prob", "trajectory_gradients", "gradient_estimate"):
        assert (list(inspect.signature(getattr(SharedFeaturePolicy, name)).parameters)
                == list(inspect.signature(getattr(TabularSoftmaxPolicy, name)).parameters))


def test_the_chain_samples_it_and_its_logprobs_match():
    env = _chain(12)
    policy = shared_policy(env, init_std=0.5, seed=1)
    ro = env.sample(policy, 16, group_size=4, seed=2)
    assert ro.tokens.shape == (16, 12)
    assert torch.allclose(ro.logprobs, policy.log_prob(ro.states, ro.tokens).detach())


def test_exact_truth_solves_it_and_agrees_with_sampling():
    env = _chain(10)
    policy = shared_policy(env, init_std=0.3, seed=0)
    truth = exact_truth(env.mdp(), policy)
    success = env.sample(policy, 4000, seed=5).truth["success"].double().mean()
    assert 0.05 < truth.J < 0.95
    assert abs(float(success) - truth.J) < 4 * (truth.J * (1 - truth.J) / 4000) ** 0.5


def test_parameter_gradient_is_the_exact_gradient_of_J_with_respect_to_the_weights():
    env = _chain(8)
    policy = shared_policy(env, n_frequencies=2, init_std=1.0, seed=0)
    grad = policy.parameter_gradient(exact_truth(env.mdp(), policy).grad)
    assert grad.shape == policy.weight.shape
    eps = 1e-6
    numeric = torch.zeros_like(grad)
    for i in range(grad.shape[0]):
        for j in range(grad.shape[1]):
            with torch.no_grad():
                policy.weight[i, j] += eps
            up = exact_truth(env.mdp(), policy).J
            with torch.no_grad():
                policy.weight[i, j] -= 2 * eps
            down = exact_truth(env.mdp(), policy).J
            with torch.no_grad():
                policy.weight[i, j] += eps
            numeric[i, j] = (up - down) / (2 * eps)
    assert float(grad.abs().max()) > 1e-3
    assert torch.allclose(grad, numeric, atol=1e-7)


def test_trajectory_gradients_are_the_weights_gradient_of_each_trajectorys_credit_weighted_logprob():
    env = _chain(10)
    policy = shared_policy(env, init_std=0.5, seed=3)
    ro = env.sample(policy, 6, seed=1)
    credit = torch.randn(6, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    per_traj = policy.trajectory_gradients(ro, credit)
    assert per_traj.shape == (6, env.n_actions, policy.n_features)
    for b in range(6):
        policy.zero_grad()
        (credit[b] * policy.log_prob(ro.states[b], ro.tokens[b])).sum().backward()
        assert torch.allclose(per_traj[b], policy.weight.grad)
    assert torch.allclose(policy.gradient_estimate(ro, credit), per_traj.mean(0))


def test_chain_learner_trains_it_with_grpo():
    env = _chain(10)
    learner = ChainLearner(env, shared_policy(env), batch_size=32, group_size=8)
    start = learner.evaluate()
    curve = train(learner, "grpo", iterations=10, lr=0.1, seed=0, progress=False, eval_every=10)
    assert start == pytest.approx(0.25)
    assert float(curve["success"].dropna().iloc[-1]) > 0.9


@pytest.mark.parametrize("make, arg, error", [
    (lambda: SharedFeaturePolicy(torch.ones(4), 2), "features", ValueError),
    (lambda: SharedFeaturePolicy(torch.ones(0, 3), 2), "features", ValueError),
    (lambda: SharedFeaturePolicy(torch.tensor([[1.0, float("nan")]]), 2), "features", ValueError),
    (lambda: SharedFeaturePolicy("phi", 2), "features", TypeError),
    (lambda: SharedFeaturePolicy(torch.ones(4, 2), 0), "n_actions", ValueError),
    (lambda: SharedFeaturePolicy(torch.ones(4, 2), 2, init_std=-1.0), "init_std", ValueError),
    (lambda: SharedFeaturePolicy(torch.ones(4, 2), 2, seed=0.5), "seed", TypeError),
])
def test_bad_construction_is_refused_naming_the_argument(make, arg, error):
    with pytest.raises(error, match=rf"^{arg}:"):
        make()


def test_bad_calls_are_refused_naming_the_argument():
    policy = SharedFeaturePolicy(torch.eye(4)[:, :3], 2)
    with pytest.raises(ValueError, match=r"^states:"):
        policy.log_prob(torch.tensor([4]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"^actions:"):
        policy.log_prob(torch.tensor([0]), torch.tensor([2]))
    with pytest.raises(ValueError, match=r"^actions:"):
        policy.log_prob(torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"^states:"):
        policy.sample(torch.tensor([-1]), torch.Generator())
    with pytest.raises(ValueError, match=r"^logit_gradient:"):
        policy.parameter_gradient(torch.zeros(3, 2))
