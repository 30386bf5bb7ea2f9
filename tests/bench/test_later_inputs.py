"""The inputs the benchmark's chain task hands the methods published after the survey
(labkit.bench.later_inputs): every option those estimators read is there, shaped to the batch,
with where it came from, and each estimator runs on them."""
from __future__ import annotations

import torch

from labkit.bench import later_inputs
from labkit.credit import get_estimator
from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy


def test_chain_inputs_feed_every_later_estimator_with_a_provenance():
    env = BifurcationChain(horizon=6, n_bifurcations=2, seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0)
    ro = env.sample(policy, 16, group_size=8, seed=0)
    inputs, overrides, provenance, costs = later_inputs.chain_inputs(env, policy, ro, seed=0)
    assert set(inputs) == {"fork_value_fn", "token_gradients"} and costs == {}
    assert set(overrides) == {"rudder", "progress_advantage", "sc_grpo"}
    for name, options in overrides.items():
        for option, value in options.items():
            assert f"{name}.{option}" in provenance
            if isinstance(value, torch.Tensor) and value.dim() == 2:
                assert tuple(value.shape) == tuple(ro.mask.shape)
    assert all(key in provenance for key in inputs)
    for name in ("omegaprm", "treerl", "appo"):
        credit = get_estimator(name)(ro, fork_value_fn=inputs["fork_value_fn"])
        assert credit.cost.policy_forwards > 0 and torch.isfinite(credit.token).all()
    for name, options in overrides.items():
        assert torch.isfinite(get_estimator(name)(ro, **options).token).all()
    # the same seed gives the same inputs: the benchmark's records are reproducible
    again = later_inputs.chain_inputs(env, policy, ro, seed=0)[1]
    assert torch.equal(again["progress_advantage"]["logprobs"], overrides["progress_advantage"]["logprobs"])
