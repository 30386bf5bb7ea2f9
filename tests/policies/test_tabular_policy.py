"""The tabular softmax policy's greedy copy and its concentration at recorded states."""
import pytest
import torch

from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy


def test_greedy_copy_always_takes_the_most_likely_action():
    env = BifurcationChain(horizon=8, n_bifurcations=2, seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=1.0, seed=3)
    greedy = policy.greedy()
    ro = env.sample(greedy, 16, seed=0)
    best = policy.logits.argmax(-1)
    assert torch.equal(ro.tokens, best[ro.states]) and torch.isfinite(ro.logprobs).all()
    assert torch.equal(greedy.probs().sum(-1), torch.ones(env.n_states, dtype=torch.float64))
    # a tie goes to the first action
    assert (TabularSoftmaxPolicy(3, 2).greedy().logits.argmax(-1) == 0).all()


def test_sum_pi_squared_reads_the_policy_at_each_recorded_state():
    env = BifurcationChain(horizon=6, n_bifurcations=1, seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.7, seed=1)
    ro = env.sample(policy, 4, seed=2)
    s2 = policy.sum_pi_squared(ro)
    want = policy.probs().detach().pow(2).sum(-1)[ro.states]
    assert torch.allclose(s2, want) and (s2 >= 1.0 / env.n_actions - 1e-12).all()
    uniform = TabularSoftmaxPolicy(env.n_states, env.n_actions).sum_pi_squared(ro)
    assert torch.allclose(uniform, torch.full_like(uniform, 1.0 / env.n_actions))
    with pytest.raises(ValueError, match="^rollouts.states:"):
        policy.sum_pi_squared(ro.with_(states=None))
