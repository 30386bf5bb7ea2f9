"""Temporal-difference credit (labkit.credit.td): GAE, TD(0), turn-level GAE, ArCHer, POAD.

Hand-computed cases on small batches, and the exact values of the chain and of ToolWorld.
"""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.course.presets import chain_setup
from labkit.credit import ESTIMATORS, get_estimator
from labkit.credit.mc import vineppo
from labkit.credit.td import archer, gae, td0, turn_gae
from labkit.envs.toolworld import ToolWorld
from labkit.learn.critics import TurnQCritic

from turn_batches import three_tokens, turn_batch, turn_credit


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
    env, pol, tr = chain_setup(9, noise_std=0.5, slip=0.2, init_std=0.5)
    ro = env.sample(pol, 32, seed=0)
    V = tr.value(ro)
    assert torch.allclose(gae(ro, values=V).token, ro.returns() - V, atol=1e-12)
    # a critic given as a callable is evaluated once per sequence and counted
    c = gae(ro, values=lambda r: tr.value(r))
    assert c.cost.aux_calls == 32


def test_td0_with_exact_values_is_unbiased_for_the_advantage():
    env, pol, tr = chain_setup(6, noise_std=0.5, slip=0.3, init_std=0.8, policy_seed=3)
    ro = env.sample(pol, 40000, seed=1)
    credit = td0(ro, values=tr.value(ro)).token
    true = tr.advantage(ro)
    t = env.bifurcations[0]
    for a in range(env.n_actions):
        rows = (ro.tokens[:, t] == a) & (ro.states[:, t] == env.state_index(t, 1))
        est = credit[rows, t]
        se = float(est.std()) / len(est) ** 0.5
        assert abs(float(est.mean()) - float(true[rows, t][0])) < 4 * se + 1e-9


def test_bad_inputs_are_named():
    env, pol, tr = chain_setup(5)
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


def test_turn_gae_equals_token_gae_when_every_turn_is_one_token():
    ro = turn_batch([[0, 0.5, 1], [0, -1], [1, 0, 0, 2]])
    g = torch.Generator().manual_seed(1)
    V = torch.rand(3, 4, generator=g, dtype=torch.float64)
    c = turn_gae(ro, values=V, gamma=0.9, lam=0.7)
    ref = gae(ro, values=torch.where(ro.mask, V, 0), gamma=0.9, lam=0.7)
    assert torch.allclose(c.token, ref.token)
    assert torch.allclose(ro.broadcast(c.info["returns"], "turn"), ref.info["returns"])
    assert c.level == "turn" and "turn_gae" in ESTIMATORS


def test_turn_gae_with_gamma_lambda_one_is_return_minus_value_on_multi_token_turns():
    ro = turn_batch([[0, 0.5, 1], [0, -1]], turn_len=3, tool=True)
    V = torch.tensor([[0.2, 0.4, 0.8], [0.1, -0.3, 123.0]], dtype=torch.float64)  # 123: past the end
    c = turn_gae(ro, values=V)
    G = torch.tensor([[1.5, 1.5, 1.0], [-1.0, -1.0, 0.0]], dtype=torch.float64)
    want = torch.tensor([[1.3, 1.1, 0.2], [-1.1, -0.7, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert torch.allclose(c.info["returns"], G)
    # lam = 0: one-step TD errors over turns, hand-computed with gamma = 0.5
    d = turn_gae(ro, values=V, gamma=0.5, lam=0.0)
    td = [[0 + 0.5 * 0.4 - 0.2, 0.5 + 0.5 * 0.8 - 0.4, 1 - 0.8], [0 + 0.5 * -0.3 - 0.1, -1 + 0.3, 0.0]]
    assert turn_credit(d, ro).tolist() == [pytest.approx(row) for row in td]
    e = turn_gae(ro, values=lambda r: V)
    assert torch.allclose(e.token, c.token) and e.cost.aux_calls == 2


def test_turn_gae_rejects_bad_input():
    ro = turn_batch([[0, 1], [1]])
    with pytest.raises(ValueError, match=r"^values: expected shape \(2, 2\)"):
        turn_gae(ro, values=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="^values: contains a non-finite"):
        turn_gae(ro, values=torch.tensor([[0.0, float("nan")], [0.0, 0.0]]))
    turn_gae(ro, values=torch.tensor([[0.0, 0.0], [0.0, float("nan")]]))  # past the end: ignored
    for kw, name in (({"gamma": -0.1}, "gamma"), ({"lam": 1.1}, "lam")):
        with pytest.raises(ValueError, match=f"^{name}"):
            turn_gae(ro, values=torch.zeros(2, 2), **kw)




def _two_turn_mdp():
    # turn 0 in state 0: action a -> state 1 + a; turn 1: action 1 in state 1 pays 1, else 0
    tok = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
    states = torch.tensor([[0, 1], [0, 1], [0, 2], [0, 2]])
    rew = torch.tensor([[0.0, 0], [0, 1], [0, 0], [0, 0]], dtype=torch.float64)
    tid = torch.tensor([[0, 1]] * 4)
    return Rollouts(tokens=tok, mask=torch.ones(4, 2, dtype=torch.bool), rewards=rew, turn_ids=tid,
                    states=states)


def test_turn_q_critic_recovers_exact_q_and_archer_gives_q_minus_v():
    ro = _two_turn_mdp()
    uniform = torch.full((3, 2), 0.5, dtype=torch.float64)
    critic = TurnQCritic(3, 2).fit(ro, pi=uniform, gamma=0.9)
    assert critic.q.tolist() == [pytest.approx([0.45, 0.0]), pytest.approx([0.0, 1.0]), pytest.approx([0.0, 0.0])]
    c = archer(ro, critic=critic)
    want = torch.tensor([[0.45 - 0.225, -0.5], [0.225, 0.5], [-0.225, 0.0], [-0.225, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert c.cost.aux_calls == 4 and c.level == "turn"
    # off-policy: evaluate the greedy policy on the same uniform data
    greedy = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    g = TurnQCritic(3, 2).fit(ro, pi=greedy, gamma=0.9)
    assert g.q[0].tolist() == pytest.approx([0.9, 0.0])
    # SARSA target (pi=None) averages the actions taken, here the same as uniform
    assert torch.allclose(TurnQCritic(3, 2).fit(ro, gamma=0.9).q, critic.q)
    # tensors instead of a critic
    d = archer(ro, q_values=critic.q_values(ro), v_values=critic.v_values(ro))
    assert torch.allclose(d.token, c.token) and "archer" in ESTIMATORS


def test_archer_and_turn_q_critic_reject_bad_input():
    ro = _two_turn_mdp()
    q = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="^q_values"):
        archer(ro, q_values=q)
    with pytest.raises(ValueError, match=r"^v_values: expected shape \(4, 2\)"):
        archer(ro, q_values=q, v_values=torch.zeros(4, 3))
    with pytest.raises(ValueError, match="^critic"):
        archer(ro, critic=TurnQCritic(3, 2), q_values=q, v_values=q)
    with pytest.raises(ValueError, match="^pi"):
        TurnQCritic(3, 2).fit(ro).v_values(ro)
    with pytest.raises(ValueError, match="^pi"):
        TurnQCritic(3, 2).fit(ro, pi=torch.ones(3, 2))
    with pytest.raises(ValueError, match="^rollouts.states"):
        TurnQCritic(2, 2).fit(ro)
    with pytest.raises(ValueError, match="^rollouts.states"):
        TurnQCritic(3, 2).fit(turn_batch([[0, 1]]))


def test_poad_hand_computed():
    ro = three_tokens()
    v = torch.tensor([[0.2, 0.6, 0.8]], dtype=torch.float64)
    g, lam = 0.9, 0.5
    # deltas: t0 inside the action: 0 + 1 * 0.6 - 0.2 = 0.4; t1 ends it: 0.5 + 0.9 * 0.8 - 0.6 = 0.62;
    # t2 last: 1 - 0.8 = 0.2. A2 = 0.2; A1 = 0.62 + 0.9 * 0.5 * 0.2 = 0.71; A0 = 0.4 + 1 * 0.5 * 0.71
    c = get_estimator("poad")(ro, values=v, gamma=g, lam=lam)
    assert torch.allclose(c.token, torch.tensor([[0.755, 0.71, 0.2]], dtype=torch.float64))
    assert torch.allclose(c.info["returns"], c.token + v)
    # token-level GAE discounts inside the action too: A0 = (0.9 * 0.6 - 0.2) + 0.45 * 0.71
    gae = get_estimator("gae")(ro, values=v, gamma=g, lam=lam).token
    assert math.isclose(float(gae[0, 0]), 0.34 + 0.45 * 0.71)
    assert torch.allclose(gae[0, 1:], c.token[0, 1:])


def test_poad_equals_gae_when_every_action_is_one_token():
    env = ToolWorld(3, max_turns=8)
    ro = env.sample(env.scripted_policy(2.0), 4, group_size=4, seed=1)
    v = torch.rand(ro.batch_size, ro.horizon, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for lam in (0.0, 0.7, 1.0):
        a = get_estimator("poad")(ro, values=v, gamma=0.8, lam=lam).token
        b = get_estimator("gae")(ro, values=v, gamma=0.8, lam=lam).token
        assert torch.allclose(a, b)


def test_poad_degenerate_and_bad_input():
    one = Rollouts(tokens=torch.tensor([[1, 0]]), mask=torch.tensor([[True, False]]),
                   rewards=torch.tensor([[1.0, 0.0]]))
    c = get_estimator("poad")(one, values=torch.tensor([[0.25, 0.0]]), gamma=0.5)
    assert c.token.tolist() == [[0.75, 0.0]]
    empty_row = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.tensor([[True, True], [False, False]]),
                         rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    c = get_estimator("poad")(empty_row, values=torch.zeros(2, 2))
    assert c.token[1].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="gamma"):
        get_estimator("poad")(one, values=torch.zeros(1, 2), gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        get_estimator("poad")(one, values=torch.zeros(1, 2), lam=-0.1)
    with pytest.raises(ValueError, match="values"):
        get_estimator("poad")(one, values=torch.zeros(1, 3))
    calls = []
    c = get_estimator("poad")(one, values=lambda r: calls.append(1) or torch.zeros(1, 2))
    assert calls == [1] and c.cost.aux_calls == 1
