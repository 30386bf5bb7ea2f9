import pytest
import torch

from labkit.course import nb01_reinforce_variance as nb01
from labkit.credit import estimate
from labkit.credit.mc import math_shepherd, vineppo
from labkit.credit.td import gae, td0
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts


def test_gae_hand_computed_with_a_masked_tool_position():
    # positions: gen, tool(masked), gen, gen ; reward 1 at the end
    ro = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long),
                  mask=torch.tensor([[True, False, True, True]]),
                  rewards=torch.tensor([[0.0, 0.0, 0.0, 1.0]]))
    V = torch.tensor([[0.5, 99.0, 0.6, 0.8]])
    g, lam = 0.9, 0.5
    d3 = 1.0 - 0.8                     # no bootstrap past the end
    d2 = 0.0 + g * 0.8 - 0.6
    d0 = 0.0 + g * 0.6 - 0.5           # the tool position is skipped: next value is position 2's
    a3 = d3
    a2 = d2 + g * lam * a3
    a0 = d0 + g * lam * a2
    c = gae(ro, values=V, gamma=g, lam=lam)
    assert c.token[0].tolist() == pytest.approx([a0, 0.0, a2, a3])
    assert c.info["returns"][0, 3].item() == pytest.approx(a3 + 0.8)


def test_gae_with_gamma_lambda_one_is_return_minus_value():
    env, pol, tr = nb01.chain_setup(9, noise_std=0.5, slip=0.2, init_std=0.5)
    ro = env.sample(pol, 32, seed=0)
    V = tr.value(ro)
    assert torch.allclose(gae(ro, values=V).token, ro.returns() - V, atol=1e-12)
    # a critic given as a callable is evaluated once per sequence and counted
    c = gae(ro, values=lambda r: tr.value(r))
    assert c.cost.aux_calls == 32


def test_td0_with_exact_values_is_unbiased_for_the_advantage():
    env, pol, tr = nb01.chain_setup(6, noise_std=0.5, slip=0.3, init_std=0.8, policy_seed=3)
    ro = env.sample(pol, 40000, seed=1)
    credit = td0(ro, values=tr.value(ro)).token
    true = tr.advantage(ro)
    t = env.bifurcations[0]
    for a in range(env.n_actions):
        rows = (ro.tokens[:, t] == a) & (ro.states[:, t] == env.state_index(t, 1))
        est = credit[rows, t]
        se = float(est.std()) / len(est) ** 0.5
        assert abs(float(est.mean()) - float(true[rows, t][0])) < 4 * se + 1e-9


def test_vineppo_with_exact_values_equals_the_exact_advantage_without_noise():
    env, pol, tr = nb01.chain_setup(10, n_bifurcations=3, init_std=0.7, policy_seed=2)
    ro = env.sample(pol, 64, seed=0)
    c = vineppo(ro, value_fn=tr.step_value_fn())
    assert torch.allclose(c.token, tr.advantage(ro), atol=1e-12)
    assert c.level == "step" and c.cost == Cost()


def test_vineppo_values_converge_to_truth_as_k_grows():
    env, pol, tr = nb01.chain_setup(12, init_std=0.5, policy_seed=1, slip=0.1)
    ro = env.sample(pol, 32, seed=0)
    exact = ro.view(tr.value(ro), "step", "first")[0]
    errors = {}
    for k in (4, 64, 1024):
        c = vineppo(ro, value_fn=env.vine_value_fn(pol, seed=k), k=k)
        errors[k] = float((c.info["step_values"] - exact).abs().mean())
        assert c.cost.policy_forwards == 32 * 12 * k and c.cost.env_resets == 32 * 12 * k
    assert errors[1024] < errors[64] < errors[4]
    assert errors[1024] < 0.02


def test_chain_cut_values_are_the_vines_at_the_cuts():
    # on the chain a step is one token: cutting at every position gives the step vines exactly
    env, pol, tr = nb01.chain_setup(12, init_std=0.5, policy_seed=1, slip=0.1)
    ro = env.sample(pol, 16, seed=0)
    step_v, step_cost = env.vine_value_fn(pol, seed=3)(ro, 8)
    cut_v, cut_cost = env.cut_value_fn(pol, seed=3)(ro, ro.mask.clone(), 8)
    assert torch.equal(cut_v, step_v) and cut_cost == step_cost
    none_v, none_cost = env.cut_value_fn(pol, seed=3)(ro, torch.zeros_like(ro.mask), 8)
    assert not none_v.any() and none_cost.env_resets == 0
    with pytest.raises(ValueError, match="^cuts: "):
        env.cut_value_fn(pol)(ro, ro.mask[:, :3], 8)


def test_math_shepherd_labels():
    env, pol, tr = nb01.chain_setup(8, n_bifurcations=2, init_std=0.5, policy_seed=4)
    ro = env.sample(pol, 64, seed=0)
    soft = math_shepherd(ro, value_fn=tr.step_value_fn(), mode="soft")
    # with exact values the soft label of step t is Q(s_t, a_t) (no noise, no slip here)
    assert torch.allclose(soft.token, tr.q_value(ro), atol=1e-12)
    hard = math_shepherd(ro, value_fn=env.vine_value_fn(pol), k=8, mode="hard")
    assert set(hard.token.unique().tolist()) <= {0.0, 1.0}
    # the last step's label is the trajectory's own outcome
    assert torch.equal(hard.token[:, -1], ro.scores.to(hard.token.dtype))
    with pytest.raises(ValueError, match="mode"):
        math_shepherd(ro, value_fn=tr.step_value_fn(), mode="medium")


def test_math_shepherd_hard_mode_rejects_non_binary_rewards():
    env, pol, tr = nb01.chain_setup(6, init_std=0.5, policy_seed=2)
    ro = env.sample(pol, 8, seed=0)
    scaled = ro.with_(rewards=ro.rewards * 2.5)
    with pytest.raises(ValueError, match=r"^rollouts\.rewards: .*\{0, 1\}"):
        math_shepherd(scaled, value_fn=tr.step_value_fn(), mode="hard")
    soft = math_shepherd(scaled, value_fn=tr.step_value_fn(), mode="soft")  # soft mode takes any reward
    assert soft.level == "step"
    # a one-step trajectory is labelled with its own outcome
    one = nb01.chain_setup(1, n_bifurcations=1, init_std=0.5, policy_seed=2)
    ro1 = one[0].sample(one[1], 8, seed=0)
    lab = math_shepherd(ro1, value_fn=one[2].step_value_fn(), mode="hard")
    assert torch.equal(lab.values[:, 0], ro1.scores.to(lab.values.dtype))


def test_bad_inputs_are_named():
    env, pol, tr = nb01.chain_setup(5)
    ro = env.sample(pol, 4, seed=0)
    with pytest.raises(ValueError, match="values"):
        gae(ro, values=torch.zeros(4, 3))
    with pytest.raises(ValueError, match="values"):
        gae(ro, values=torch.full((4, 5), float("nan")))
    with pytest.raises(ValueError, match="lam"):
        gae(ro, values=torch.zeros(4, 5), lam=2.0)
    with pytest.raises(ValueError, match="k"):
        vineppo(ro, value_fn=tr.step_value_fn(), k=0)
    with pytest.raises(ValueError, match="value_fn result"):
        vineppo(ro, value_fn=lambda r, k: (torch.zeros(4, 2), Cost()))
    with pytest.raises(TypeError, match="value_fn"):
        vineppo(ro, value_fn=None)
    with pytest.raises(ValueError, match="states"):
        env.continuation_returns(pol, torch.tensor([env.n_states]), 2)


def test_registered_by_name():
    env, pol, tr = nb01.chain_setup(5)
    ro = env.sample(pol, 4, seed=0)
    assert estimate("vineppo", ro, value_fn=tr.step_value_fn()).method == "vineppo"
    assert estimate("td0", ro, values=tr.value(ro)).method == "td0"
