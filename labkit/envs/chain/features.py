"""Features of a BifurcationChain's states that every position shares, for a policy whose
parameters are shared across positions (``labkit.policies.SharedFeaturePolicy``).

State (t, ok), index 2 t + ok, gets

    phi = [1, ok, cos(pi k x), sin(pi k x) for k = 1..K],    x = (t + 1/2) / T,

a bias, the on-track flag, and K low frequencies of the relative position: 2 + 2K features for
all 2T states. What the features deliberately leave out: nothing names a position one-hot and
nothing says "this is a bifurcation", so a decisive position's logits are the same smooth function
of x as its routine neighbours', and a gradient step on any token moves them all. They can still
express a good policy: the bifurcations sit at fixed relative positions ((i + 1/2) / n at every
horizon for n evenly spread ones), and a smooth function of x with the right sign at each of them,
scaled up, picks the correct token at every one (with K >= the number of bifurcations any sign
pattern is reachable). Relative rather than absolute position keeps that task the same at every
horizon, so what changes with T is only how many routine tokens share the weights.
"""
from __future__ import annotations

import math

import torch

from labkit.core.checks import check_int, check_number
from labkit.policies.shared import SharedFeaturePolicy

DEFAULT_FREQUENCIES = 3


def _check_chain(env) -> None:
    if not all(hasattr(env, name) for name in ("horizon", "n_states", "n_actions", "state_index")):
        raise TypeError(f"env: expected a BifurcationChain, got {type(env).__name__}")


def chain_features(env, n_frequencies: int = DEFAULT_FREQUENCIES) -> torch.Tensor:
    """The (n_states, 2 + 2 n_frequencies) float64 feature matrix of ``env``'s states (module
    docstring), rows in state-index order. Refuses as many features as states: the policy could
    then give every state its own logits, a table in disguise."""
    _check_chain(env)
    n_frequencies = check_int("n_frequencies", n_frequencies, low=1)
    n_features = 2 + 2 * n_frequencies
    if n_features >= env.n_states:
        raise ValueError(f"n_frequencies: {n_frequencies} gives {n_features} features for the chain's "
                         f"{env.n_states} states; fewer features than states is what makes them shared")
    T = env.horizon
    t = torch.arange(T).repeat_interleave(2)
    ok = torch.arange(2).repeat(T)
    x = (t.double() + 0.5) / T
    k = torch.arange(1, n_frequencies + 1, dtype=torch.float64)
    angle = math.pi * x[:, None] * k[None, :]
    rows = torch.cat([torch.ones(2 * T, 1, dtype=torch.float64), ok.double()[:, None], angle.cos(), angle.sin()], dim=1)
    phi = torch.zeros(env.n_states, n_features, dtype=torch.float64)
    phi[env.state_index(t, ok)] = rows  # placed by the chain's own state layout
    return phi


def shared_policy(env, *, n_frequencies: int = DEFAULT_FREQUENCIES, init_std: float = 0.0,
                  seed: int = 0) -> SharedFeaturePolicy:
    """A ``SharedFeaturePolicy`` over ``env``'s ``chain_features`` (uniform by default; weights
    ~ N(0, init_std^2) from ``seed`` otherwise). It samples, trains (``ChainLearner``) and is
    solved exactly (``exact_truth(env.mdp(), policy)``) like the tabular policy."""
    _check_chain(env)
    init_std = check_number("init_std", init_std, low=0.0)
    return SharedFeaturePolicy(chain_features(env, n_frequencies), env.n_actions, init_std=init_std,
                               seed=check_int("seed", seed))
