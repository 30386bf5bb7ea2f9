"""Multi-agent credit (labkit.credit.multiagent): Shapley, leave-one-out, Dr. MAS, SHARP, M-GRPO and
SCAR on tiny synthetic teams whose every expected number can be checked on paper.
"""

import math

import pytest
import torch

from labkit.core.games import exact_shapley, leave_one_out_values
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, estimate
from labkit.learn.judges import noisy_oracle

from team_games import COMPLEMENTARY, GLOVE, REDUNDANT, agent_values, glove_rollouts, team


def test_shapley_and_loo_estimators_broadcast_per_agent():
    ro = glove_rollouts()
    table = torch.stack([GLOVE, REDUNDANT, COMPLEMENTARY, GLOVE])
    c = estimate("shapley", ro, coalition_values=table)
    assert c.level == "agent" and c.values.shape == (4, 3)
    assert torch.allclose(c.values, exact_shapley(table))
    assert torch.allclose(agent_values(c, ro), exact_shapley(table))
    assert c.cost.env_steps == 4 * 8
    loo = estimate("leave_one_out", ro, coalition_values=lambda r: table)
    assert torch.allclose(agent_values(loo, ro), leave_one_out_values(table))
    assert loo.cost.env_steps == 4 * 4
    s = estimate("shapley", ro, coalition_values=table, method="sampled", n_permutations=4000, seed=0)
    assert torch.allclose(s.values, c.values, atol=0.05)


def test_estimators_validate_coalition_values():
    ro = glove_rollouts()
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("shapley", ro, coalition_values=torch.zeros(4, 16))  # 4 players, team has 3
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("leave_one_out", ro, coalition_values=torch.zeros(3, 8))  # wrong batch
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("sharp", ro)
    bad = torch.zeros(4, 8)
    bad[1, 3] = float("nan")
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("shapley", ro, coalition_values=bad)
    with pytest.raises(ValueError, match="method"):
        estimate("shapley", ro, coalition_values=torch.zeros(4, 8), method="owen")


def test_n_agents_from_info_and_fallback():
    ro = team([[0, 1], [1, 0]], [[1, 0], [0, 1]], n_agents=3)
    c = estimate("shapley", ro, coalition_values=torch.zeros(2, 8))
    assert c.values.shape == (2, 3)
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("shapley", ro, coalition_values=torch.zeros(2, 4))  # fallback would say 2


def test_dr_mas_normalises_each_agent_within_its_group():
    # agent 0's rewards are large, agent 1's small: one baseline mis-centres both
    rows = [[0, 1]] * 4 + [[0, 1]] * 2
    rewards = [[10, 0], [12, 1], [11, 0], [13, 1], [5, 5], [5, 5]]
    ro = team(rows, rewards, groups=[0, 0, 0, 0, 1, 1])
    A = agent_values(estimate("dr_mas", ro), ro)
    for i in range(2):
        assert abs(float(A[:4, i].mean())) < 1e-12
        assert abs(float(A[:4, i].std()) - 1) < 1e-5
    assert torch.allclose(A[4:], torch.zeros(2, 2, dtype=torch.float64))         # all-equal pools give 0
    G = agent_values(estimate("dr_mas", ro, normalize="global"), ro)
    assert bool((G[:4, 0] > 0).all()) and bool((G[:4, 1] < 0).all())  # the global baseline's bias
    assert abs(float(G[:4].mean())) < 1e-12
    # by hand, agent 0 of row 0: (10 - 11.5) / std([10, 12, 11, 13])
    sd = torch.tensor([10.0, 12, 11, 13]).std()
    assert math.isclose(float(A[0, 0]), -1.5 / (float(sd) + 1e-6), rel_tol=1e-6)


def test_dr_mas_step_pooling_weights_by_actions():
    # agent 0 acts 3 times in row 0 and once in row 1
    ro = team([[0, 0, 0, 1], [0, 1]], [[1, 0], [0, 0]])
    step = agent_values(estimate("dr_mas", ro, unit="step"), ro)
    traj = agent_values(estimate("dr_mas", ro, unit="trajectory"), ro)
    # per-step pool of agent 0: [1, 1, 1, 0] -> mean 0.75
    sd = torch.tensor([1.0, 1, 1, 0]).std()
    assert math.isclose(float(step[0, 0]), 0.25 / (float(sd) + 1e-6), rel_tol=1e-6)
    assert math.isclose(float(traj[0, 0]), 0.5 / (float(torch.tensor([1.0, 0]).std()) + 1e-6), rel_tol=1e-6)


def test_dr_mas_singleton_pool_follows_grpo():
    ro = team([[0, 1]], [[3, -2]])
    c = estimate("dr_mas", ro)
    assert torch.allclose(agent_values(c, ro), torch.tensor([[3, -2]], dtype=torch.float64) / (1 + 1e-6))
    with pytest.raises(ValueError, match="normalize"):
        estimate("dr_mas", ro, normalize="team")


def test_sharp_reduces_to_dr_mas_and_to_shapley():
    ro = glove_rollouts()
    table = torch.stack([GLOVE, 2 * GLOVE, REDUNDANT, COMPLEMENTARY])
    # only the team term: Dr. MAS on the team reward broadcast to every agent
    only_team = estimate("sharp", ro, coalition_values=table, w_shapley=0.0)
    team_reward = table[:, -1]
    rows = [[0, 1, 0, 2], [0, 1, 2, 0], [1, 0, 2], [0, 1, 2]]
    ro_team = team(rows, [[float(team_reward[b])] * 3 for b in range(4)], groups=[0, 0, 1, 1])
    ref = estimate("dr_mas", ro_team, unit="trajectory")
    assert torch.allclose(agent_values(only_team, ro), agent_values(ref, ro_team))
    # only the Shapley term, no normalisation: plain Shapley credit
    only_phi = estimate("sharp", ro, coalition_values=table, w_global=0.0, normalize=False)
    assert torch.allclose(agent_values(only_phi, ro), exact_shapley(table))
    # the process term adds linearly before normalisation
    proc = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    c = estimate("sharp", ro, coalition_values=table, process_rewards=proc, w_process=0.5,
                 normalize=False)
    assert torch.allclose(c.info["reward"], team_reward[:, None] + exact_shapley(table) + 0.5 * proc)
    # team_reward overrides the grand-coalition column
    c2 = estimate("sharp", ro, coalition_values=table, team_reward=torch.zeros(4), w_shapley=0.0,
                  normalize=False)
    assert torch.allclose(c2.values, torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="process_rewards"):
        estimate("sharp", ro, coalition_values=table, process_rewards=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="team_reward"):
        estimate("sharp", ro, coalition_values=table, team_reward=torch.zeros(3))


def test_m_grpo_main_agent_and_sub_agent_groups():
    rows = [[0, 1, 2], [0, 1], [0, 2, 1], [0, 1, 2]]
    rewards = [[1, 4, 0], [0, 2, 0], [1, 0, 7], [0, 0, 0]]
    ro = team(rows, rewards, groups=[0, 0, 0, 1])
    A = agent_values(estimate("m_grpo", ro), ro)
    eps = 1e-6
    # main agent 0 in task 0: rewards [1, 0, 1]
    sd0 = float(torch.tensor([1.0, 0, 1]).std())
    assert math.isclose(float(A[1, 0]), (0 - 2 / 3) / (sd0 + eps), rel_tol=1e-6)
    # sub-agent 2 acted in rows 0 and 2 of task 0 only: pool [0, 7]
    sd2 = float(torch.tensor([0.0, 7]).std())
    assert math.isclose(float(A[2, 2]), 3.5 / (sd2 + eps), rel_tol=1e-6)
    assert float(A[1, 2]) == 0.0                       # absent sub-agent gets nothing
    assert torch.allclose(A[3], torch.zeros(3, dtype=torch.float64) / (1 + eps))  # singleton rows
    # one pool per (task, agent): the same numbers as Dr. MAS with one sample per trajectory
    assert torch.allclose(A, agent_values(estimate("dr_mas", ro, unit="trajectory"), ro))
    # pooled sub-agents: which agent is the main one now changes the pools
    P0 = agent_values(estimate("m_grpo", ro, sub_groups="pooled"), ro)
    P1 = agent_values(estimate("m_grpo", ro, sub_groups="pooled", main_agent=1), ro)
    assert torch.allclose(P0[:, 0], A[:, 0]) and not torch.allclose(P0, P1)
    with pytest.raises(ValueError, match="main_agent"):
        estimate("m_grpo", ro, main_agent=3)


def test_m_grpo_pooled_sub_agents_with_trajectory_alignment():
    # task 0: row 0 calls two sub-agents, row 1 calls one -> D = 2, row 1's call is duplicated
    rows = [[0, 1, 2], [0, 1]]
    rewards = [[1, 2, 4], [0, 6, 0]]
    ro = team(rows, rewards, groups=[0, 0])
    c = estimate("m_grpo", ro, sub_groups="pooled")
    A = agent_values(c, ro)
    pool = torch.tensor([2.0, 4, 6, 6])                # aligned sub-agent pool
    m, sd = float(pool.mean()), float(pool.std())
    assert math.isclose(float(A[0, 1]), (2 - m) / (sd + 1e-6), rel_tol=1e-6)
    assert math.isclose(float(A[1, 1]), (6 - m) / (sd + 1e-6), rel_tol=1e-6)
    assert not bool(c.info["dropped"].any())
    # d_max = 1: row 0 keeps one of its two sub-agent calls; the other is dropped (credit 0)
    c1 = estimate("m_grpo", ro, sub_groups="pooled", d_max=1, seed=0)
    dropped = c1.info["dropped"]
    assert int(dropped[0].sum()) == 1 and not bool(dropped[1].any())
    kept = 1 if bool(dropped[0, 2]) else 2
    A1 = agent_values(c1, ro)
    assert float(A1[0, 3 - kept]) == 0.0
    pool1 = torch.tensor([float(rewards[0][kept]), 6.0])
    assert math.isclose(float(A1[1, 1]), (6 - float(pool1.mean())) / (float(pool1.std()) + 1e-6),
                        rel_tol=1e-6)


def steps_rollouts(n_steps):
    """One trajectory per entry, every position its own step."""
    B, T = len(n_steps), max(n_steps)
    mask = torch.arange(T)[None, :] < torch.tensor(n_steps)[:, None]
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask,
                    rewards=torch.zeros(B, T))


def test_scar_absent_segments_get_zero_and_rows_are_efficient():
    ro = steps_rollouts([3, 2, 1])
    M = 3
    g = torch.Generator().manual_seed(0)
    table = torch.randn(3, 2 ** M, generator=g, dtype=torch.float64)
    c = estimate("scar", ro, coalition_values=table)
    assert c.level == "step" and c.values.shape == (3, M)
    phi = c.values
    assert float(phi[1, 2]) == 0.0 and float(phi[2, 1]) == 0.0 and float(phi[2, 2]) == 0.0
    for b, m in enumerate([3, 2, 1]):
        assert math.isclose(float(phi[b].sum()), float(table[b, 2 ** m - 1] - table[b, 0]), abs_tol=1e-12)
    # row 1 is the 2-player game on its own columns 0..3, whatever the absent bit's columns hold
    assert torch.allclose(phi[1, :2], exact_shapley(table[1, :4]))
    # per-position credit: step k of row b carries phi[b, k]
    assert torch.allclose(c.token[0], phi[0])
    assert c.cost.aux_calls == 8 + 4 + 2
    sampled = estimate("scar", ro, coalition_values=table, method="sampled", n_permutations=3000)
    assert float(sampled.values[1, 2]) == 0.0
    assert torch.allclose(sampled.values, phi, atol=0.1)
    with pytest.raises(ValueError, match="coalition_values"):
        estimate("scar", ro, coalition_values=torch.zeros(3, 4))


def test_every_multiagent_estimator_is_registered_with_a_docstring():
    for name in ("shapley", "leave_one_out", "sharp", "dr_mas", "m_grpo", "scar", "mappa", "llm_mca"):
        fn = ESTIMATORS[name]
        assert "arXiv" in fn.__doc__ or "Wolpert" in fn.__doc__
        assert "egenerate" in fn.__doc__
    for name in ("mappa", "llm_mca"):
        assert "STAND-IN" in ESTIMATORS[name].__doc__
    assert "STAND-IN" in noisy_oracle.__doc__


@pytest.mark.parametrize("unit", ["trajectory", "step"])
def test_dr_mas_with_eps_zero_gives_all_equal_pools_zero(unit):
    rows = [[0, 1]] * 4
    rewards = [[10, 0], [12, 1], [5, 5], [5, 5]]
    ro = team(rows, rewards, groups=[0, 0, 1, 1])
    A = agent_values(estimate("dr_mas", ro, eps=0.0, unit=unit), ro)
    assert torch.equal(A[2:], torch.zeros(2, 2, dtype=A.dtype))   # equal pools: 0, not 0 / 0
    assert bool(torch.isfinite(A).all()) and A[0, 0].item() < 0 < A[1, 0].item()
