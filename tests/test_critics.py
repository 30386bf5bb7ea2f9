import pytest
import torch

from labkit.course import nb01_reinforce_variance as nb01
from labkit.course import nb02_critics_gae as nb02
from labkit.learn.critics import TabularCritic


def test_tabular_critic_converges_to_exact_values():
    env, pol, tr = nb01.chain_setup(8, noise_std=0.3, slip=0.2, init_std=0.5)
    critic = TabularCritic(env.n_states).fit(env.sample(pol, 20000, seed=0))
    seen = critic.counts > 500
    assert bool(seen.any())
    assert float((critic.table - tr.V)[seen].abs().max()) < 0.1
    # value() reads the table at every visited state, 0 off-mask
    ro = env.sample(pol, 4, seed=1)
    assert torch.equal(critic.value(ro), critic.table[ro.states])


def test_unvisited_states_fall_back_to_the_prior_and_shrinkage_pulls_towards_it():
    env, pol, _ = nb01.chain_setup(6)
    few = env.sample(pol, 2, seed=0)
    c = TabularCritic(env.n_states, prior=0.5).fit(few)
    assert bool(((c.counts == 0) & (c.table == 0.5)).any())
    shrunk = TabularCritic(env.n_states, prior=0.0, shrinkage=10.0).fit(few)
    plain = TabularCritic(env.n_states).fit(few)
    visited = plain.counts > 0
    assert bool((shrunk.table[visited].abs() <= plain.table[visited].abs() + 1e-12).all())


def test_critic_rejects_bad_input():
    env, pol, _ = nb01.chain_setup(6)
    with pytest.raises(ValueError, match="states"):
        TabularCritic(3).fit(env.sample(pol, 2, seed=0))
    with pytest.raises(ValueError, match="shrinkage"):
        TabularCritic(3, shrinkage=-1)


def test_lambda_sweep_shows_the_dial():
    df = nb02.gae_lambda_sweep([0.0, 1.0], critic_episodes=256, n_batches=40, progress=False)
    by = df.set_index(["critic", "lam"])
    # with the exact critic, lambda = 0 has far less variance than lambda = 1 (pure MC)
    assert by.loc[("exact", 0.0), "relative_variance"] < by.loc[("exact", 1.0), "relative_variance"] / 3
    # lambda = 1 does not use the critic's values in expectation: both critics agree closely
    assert by.loc[("learned", 1.0), "cosine"] == pytest.approx(by.loc[("exact", 1.0), "cosine"], abs=0.05)
    assert df.attrs["critic_value_error"] > 0
    with pytest.raises(ValueError, match="lams"):
        nb02.gae_lambda_sweep([1.5], progress=False)
