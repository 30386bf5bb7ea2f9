"""A small BifurcationChain with its policy and exact truth, shared by the chain and tabular tests."""

from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.policies import TabularSoftmaxPolicy


def chain_case(T=6, k=2, A=2, slip=0.0, noise=0.0, init_std=0.7, seed=0):
    env = BifurcationChain(horizon=T, n_bifurcations=k, n_actions=A, slip=slip, noise_std=noise, seed=seed)
    pol = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=init_std, seed=seed + 1)
    return env, pol, exact_truth(env.mdp(), pol)
