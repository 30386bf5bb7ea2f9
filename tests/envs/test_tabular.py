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


def test_truth_refuses_rollouts_of_another_world():
    """A truth scores only rollouts its MDP can produce: ids out of its tables, and sequences of
    another chain (horizon) are refused naming ``rollouts``, never clamped."""
    def world(h):
        env = BifurcationChain(horizon=h)
        pol = TabularSoftmaxPolicy(env.n_states, env.n_actions)
        return env, exact_truth(env.mdp(), pol), env.sample(pol, 4, seed=0)

    env5, t5, r5 = world(5)
    _, t8, r8 = world(8)
    _, t3, r3 = world(3)
    assert torch.equal(t5.advantage(r5), t5.A[r5.states, r5.tokens])   # the valid call is unchanged
    for method in ("advantage", "value", "q_value"):
        f = getattr(t5, method)
        with pytest.raises(ValueError, match=r"^rollouts: state ids out of range for this truth: n_states"):
            f(r8)
        with pytest.raises(ValueError, match=r"^rollouts: .*cannot"):
            f(r3)                                        # states in range, but the episode cannot end there
        with pytest.raises(ValueError, match=r"^rollouts: action ids"):
            f(r5.with_(tokens=torch.full_like(r5.tokens, env5.n_actions)))
        with pytest.raises(TypeError, match=r"^rollouts"):
            f(None)
    with pytest.raises(ValueError, match=r"^rollouts: .*cannot"):
        t8.value(r5)
    with pytest.raises(ValueError, match="^rollouts"):
        t5.step_value_fn()(r8, 1)
    with pytest.raises(ValueError, match=r"^rollouts: row 0 starts in state"):
        t5.value(r5.with_(states=torch.where(r5.mask, r5.states.clamp(min=2), r5.states)))
