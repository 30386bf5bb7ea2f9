"""Exact truth of a tabular MDP (labkit.envs.tabular), on BifurcationChain: Bellman, brute-force
enumeration, the policy-gradient theorem and Monte Carlo agree with the DP.
"""

import itertools

import pytest
import torch
from hypothesis import strategies as st
from hypothesis import given, settings

from labkit.envs import BifurcationChain
from labkit.envs.tabular import TabularMDP, exact_truth, policy_gradient_theorem
from labkit.policies import TabularSoftmaxPolicy

from env_cases import chain_case


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 12), A=st.integers(2, 4), slip=st.floats(0, 1), seed=st.integers(0, 50))
def test_values_satisfy_bellman(T, A, slip, seed):
    env, pol, tr = chain_case(T=T, k=min(2, T), A=A, slip=slip, seed=seed)
    mdp = env.mdp()
    pi = pol.probs().detach()
    backup = (pi * (mdp.rewards + torch.einsum("sat,t->sa", mdp.transitions, tr.V))).sum(-1)
    assert torch.allclose(tr.V, backup, atol=1e-10)
    assert torch.allclose((pi * tr.A).sum(-1), torch.zeros(env.n_states, dtype=torch.float64), atol=1e-10)


def brute_force_J(env, pol):
    """Enumerate every sequence of chosen and executed tokens."""
    pi = pol.probs().detach()
    A, T = env.n_actions, env.horizon
    total = 0.0
    for chosen in itertools.product(range(A), repeat=T):
        for executed in itertools.product(range(A), repeat=T):
            p, ok = 1.0, 1
            for t in range(T):
                p *= float(pi[env.state_index(t, ok), chosen[t]])
                p *= (1 - env.slip) * (executed[t] == chosen[t]) + env.slip / A
                if env.correct[t] >= 0 and executed[t] != env.correct[t]:
                    ok = 0
            total += p * ok * env.success_reward
    return total


@pytest.mark.parametrize("slip", [0.0, 0.3])
def test_dp_matches_brute_force_enumeration(slip):
    env, pol, tr = chain_case(T=4, k=2, A=2, slip=slip)
    assert tr.J == pytest.approx(brute_force_J(env, pol), abs=1e-12)


def test_exact_gradient_matches_theorem_and_finite_differences():
    env, pol, tr = chain_case(T=5, k=2, A=3, slip=0.1)
    assert torch.allclose(tr.grad, policy_gradient_theorem(tr), atol=1e-12)
    mdp = env.mdp()
    h = 1e-6
    for s, a in [(0, 0), (env.state_index(2, 1), 1), (env.state_index(4, 1), 2)]:
        plus = TabularSoftmaxPolicy(env.n_states, env.n_actions)
        minus = TabularSoftmaxPolicy(env.n_states, env.n_actions)
        with torch.no_grad():
            plus.logits.copy_(pol.logits); plus.logits[s, a] += h
            minus.logits.copy_(pol.logits); minus.logits[s, a] -= h
        fd = (exact_truth(mdp, plus).J - exact_truth(mdp, minus).J) / (2 * h)
        assert fd == pytest.approx(float(tr.grad[s, a]), abs=1e-7)


def test_monte_carlo_converges_to_dp_values():
    env, pol, tr = chain_case(T=10, k=3, slip=0.2, noise=0.5)
    ro = env.sample(pol, 40000, seed=11)
    scores = ro.scores
    se = float(scores.std()) / len(scores) ** 0.5
    assert abs(float(scores.mean()) - tr.J) < 4 * se
    # V at an intermediate on-track state: mean return-to-go of the visits to it
    t = 5
    s = env.state_index(t, 1)
    visits = ro.states[:, t] == s
    g = ro.returns(1.0)[visits, t]
    se = float(g.std()) / len(g) ** 0.5
    assert abs(float(g.mean()) - float(tr.V[s])) < 4 * se


def test_truth_rejects_mismatched_policy_and_bad_mdp():
    env = BifurcationChain(horizon=4)
    with pytest.raises(ValueError, match="policy"):
        exact_truth(env.mdp(), TabularSoftmaxPolicy(3, 2))
    with pytest.raises(ValueError, match="policy"):
        env.sample(TabularSoftmaxPolicy(3, 2), 4)
    with pytest.raises(ValueError, match="transitions"):
        TabularMDP(torch.full((2, 1, 2), 0.9), torch.zeros(2, 1), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="group_size"):
        env.sample(TabularSoftmaxPolicy(env.n_states, 2), 10, group_size=3)
