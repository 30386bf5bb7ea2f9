"""BifurcationChain (labkit.envs.chain): its settings, sampling, and the vines and cut values it gives."""

import pytest
import torch

from labkit.course.presets import chain_setup
from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy

from env_cases import chain_case


def test_routine_positions_have_zero_advantage_without_slip():
    env, pol, tr = chain_case(T=8, k=2)
    ro = env.sample(pol, 64, seed=3)
    adv = tr.advantage(ro)
    routine = [t for t in range(env.horizon) if t not in env.bifurcations]
    assert float(adv[:, routine].abs().max()) < 1e-12
    assert bool((adv[:, list(env.bifurcations)].abs() > 0).any())


def test_sampling_is_seeded():
    env, pol, _ = chain_case(T=7, slip=0.3, noise=1.0)
    a, b = env.sample(pol, 16, seed=5), env.sample(pol, 16, seed=5)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.rewards, b.rewards)
    assert not torch.equal(a.tokens, env.sample(pol, 16, seed=6).tokens)


def test_long_chain_is_supported():
    env, pol, tr = chain_case(T=200, k=3, init_std=0.0)
    ro = env.sample(pol, 8, seed=0)
    assert ro.horizon == 200 and 0 < tr.J < 1
    assert tr.J == pytest.approx(0.5 ** 3)


@pytest.mark.parametrize("kwargs,name", [
    (dict(horizon=0), "horizon"),
    (dict(horizon=5, bifurcations=[5]), "bifurcations"),
    (dict(horizon=5, bifurcations=[1, 1]), "bifurcations"),
    (dict(slip=1.5), "slip"),
    (dict(noise_std=-1.0), "noise_std"),
    (dict(n_actions=1), "n_actions"),
    (dict(horizon=3, n_bifurcations=4), "n_bifurcations"),
])
def test_env_rejects_bad_settings(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BifurcationChain(**kwargs)


# --------------------------------------------------------------------------- bad input names the argument
@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(bifurcations="x"), TypeError, r"^bifurcations: expected a list of positions"),
    (dict(bifurcations=[1.5]), TypeError, r"^bifurcations\[0\]: expected an integer"),
    (dict(seed="x"), TypeError, r"^seed: expected an integer"),
    (dict(seed=1.5), TypeError, r"^seed: expected an integer"),
])
def test_chain_constructor(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        BifurcationChain(horizon=5, **kwargs)


def test_chain_bifurcations_as_tensor_or_integral_floats_still_work():
    assert BifurcationChain(horizon=5, bifurcations=torch.tensor([3, 1])).bifurcations == (1, 3)
    assert BifurcationChain(horizon=5, bifurcations=[2.0]).bifurcations == (2,)


def test_chain_sample_policy_and_seed():
    ch = BifurcationChain(horizon=4)
    pol = TabularSoftmaxPolicy(ch.n_states, ch.n_actions)
    for bad in (None, "x"):
        with pytest.raises(TypeError, match=r"^policy: expected a TabularSoftmaxPolicy"):
            ch.sample(bad, 2)
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        ch.sample(pol, 2, seed="x")
    assert ch.sample(pol, 2, seed=3).tokens.shape == (2, 4)


def test_chain_cut_values_are_the_vines_at_the_cuts():
    # on the chain a step is one token: cutting at every position gives the step vines exactly
    env, pol, tr = chain_setup(12, init_std=0.5, policy_seed=1, slip=0.1)
    ro = env.sample(pol, 16, seed=0)
    step_v, step_cost = env.vine_value_fn(pol, seed=3)(ro, 8)
    cut_v, cut_cost = env.cut_value_fn(pol, seed=3)(ro, ro.mask.clone(), 8)
    assert torch.equal(cut_v, step_v) and cut_cost == step_cost
    none_v, none_cost = env.cut_value_fn(pol, seed=3)(ro, torch.zeros_like(ro.mask), 8)
    assert not none_v.any() and none_cost.env_resets == 0
    with pytest.raises(ValueError, match="^cuts: "):
        env.cut_value_fn(pol)(ro, ro.mask[:, :3], 8)


# --------------------------------------------------------------------------- steps of m tokens
def _steps_chain(T, m, **kwargs):
    env = BifurcationChain(horizon=T, n_bifurcations=2, step_len=m, seed=0, **kwargs)
    return env, TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.5, seed=1)


@pytest.mark.parametrize("T,m,expected", [
    (7, 1, [0, 1, 2, 3, 4, 5, 6]),
    (7, 3, [0, 0, 0, 1, 1, 1, 2]),      # the last step is shorter
    (7, 7, [0, 0, 0, 0, 0, 0, 0]),      # one step: the whole chain
])
def test_step_len_cuts_the_trajectory_into_steps_of_m_tokens(T, m, expected):
    env, pol = _steps_chain(T, m)
    ro = env.sample(pol, 5, seed=2)
    assert ro.step_ids.tolist() == [expected] * 5


def test_step_len_one_is_the_default_chain_bit_for_bit():
    env, pol = _steps_chain(9, 1)
    default = BifurcationChain(horizon=9, n_bifurcations=2, seed=0)
    a, b = env.sample(pol, 6, seed=4), default.sample(pol, 6, seed=4)
    for name in ("tokens", "rewards", "logprobs", "states", "step_ids", "turn_ids"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert a.info == b.info and repr(env) == repr(default) and "step_len" not in repr(default)
    assert "step_len=3" in repr(BifurcationChain(horizon=9, step_len=3))


def test_vines_fork_only_at_step_starts_and_cost_only_those_vines():
    T, m, k, n = 12, 5, 3, 4
    env, pol = _steps_chain(T, m, slip=0.1)
    ro = env.sample(pol, n, seed=0)
    seen = []
    real = env.continuation_returns

    def recording(policy, states, k, *, seed=0):
        seen.append(states.clone())
        return real(policy, states, k, seed=seed)
    env.continuation_returns = recording
    values, cost = env.vine_value_fn(pol, seed=3)(ro, k)
    starts = [0, 5, 10]
    # one fork per step of every trajectory, from the state recorded at the step's first token
    assert torch.equal(seen[0], ro.states[:, starts].reshape(-1))
    assert values.shape == (n, 3)
    # every vine runs from its fork to the end of the chain: (12 + 7 + 2) tokens per trajectory, k each
    tokens = n * k * sum(T - t for t in starts)
    assert cost.env_steps == cost.policy_tokens == tokens
    assert cost.env_resets == cost.policy_forwards == n * 3 * k


@pytest.mark.parametrize("m", [1, 4, 16])
def test_vine_cost_grows_like_t_squared_over_m(m):
    def vine_tokens(T):
        env, pol = _steps_chain(T, m)
        return env.vine_value_fn(pol, seed=0)(env.sample(pol, 2, seed=0), 2)[1].env_steps
    # 2 trajectories x 2 vines, forked at 0, m, 2m, ... (m divides T): sum of T - t = T^2 / (2m) + T / 2,
    # so doubling the chain about quadruples the vines' tokens and m times longer steps cost m times fewer
    for T in (64, 128):
        assert vine_tokens(T) == 2 * 2 * (T * T // (2 * m) + T // 2)
    assert vine_tokens(128) / vine_tokens(64) == pytest.approx(4, rel=0.1)


@pytest.mark.parametrize("bad, exc, match", [
    (0, ValueError, r"^step_len: "), (8, ValueError, r"^step_len: "), (2.5, TypeError, r"^step_len: "),
    ("3", TypeError, r"^step_len: "),
])
def test_bad_step_len_is_named(bad, exc, match):
    with pytest.raises(exc, match=match):
        BifurcationChain(horizon=7, step_len=bad)


def test_a_missing_policy_is_refused_by_name_at_every_entry():
    from labkit.envs.chain import ChainLearner
    chain = BifurcationChain(horizon=5)
    pol = TabularSoftmaxPolicy(chain.n_states, chain.n_actions)
    msg = r"^policy: expected a (policy with probs\(\)|TabularSoftmaxPolicy).*got None"
    for call in (lambda: chain.sample(None, 4), lambda: chain.continuation_returns(None, [0], 2),
                 lambda: chain.vine_value_fn(None), lambda: chain.cut_value_fn(None),
                 lambda: ChainLearner(chain, None)):
        with pytest.raises(TypeError, match=msg):
            call()
    with pytest.raises(TypeError, match="^env: expected a BifurcationChain, got None"):
        ChainLearner(None, pol)
