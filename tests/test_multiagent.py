"""Multi-agent credit: Shapley machinery, leave-one-out, and the registered team estimators.

Games are built by hand (closed-form 3-player games) or drawn at random with a seed; rollouts
are tiny synthetic teams so every expected number can be checked on paper.
"""
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.credit import ESTIMATORS, estimate
from labkit.learn.judges import noisy_oracle
from labkit.core.games import (coalition_masks, exact_shapley, leave_one_out_values, popcount,
                               sampled_shapley)
from labkit.core.rollouts import Rollouts


# --------------------------------------------------------------------------- helpers
def random_game(n, seed, batch=()):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, 2 ** n, generator=g, dtype=torch.float64)


def brute_force_shapley(v, n):
    """Average marginal contribution over all n! orderings (the definition)."""
    phi = torch.zeros(v.shape[:-1] + (n,), dtype=torch.float64)
    for perm in itertools.permutations(range(n)):
        S = 0
        for i in perm:
            phi[..., i] += v[..., S | (1 << i)] - v[..., S]
            S |= 1 << i
    return phi / math.factorial(n)


def game_from(fn, n):
    """Table of the game v(S) = fn(set of players in S)."""
    return torch.tensor([float(fn({i for i in range(n) if S >> i & 1})) for S in range(2 ** n)],
                        dtype=torch.float64)


def team(rows, rewards, groups=None, n_agents=None):
    """Rollouts with one position per action. ``rows[b]`` lists the acting agent of every
    position; ``rewards[b][i]`` is agent i's reward, put on agent i's last position."""
    B = len(rows)
    T = max(len(r) for r in rows)
    mask = torch.zeros(B, T, dtype=torch.bool)
    agent = torch.full((B, T), -1, dtype=torch.long)
    rew = torch.zeros(B, T, dtype=torch.float64)
    for b, row in enumerate(rows):
        for t, a in enumerate(row):
            mask[b, t] = True
            agent[b, t] = a
        for a in set(row):
            last = max(t for t, x in enumerate(row) if x == a)
            rew[b, last] = rewards[b][a]
    info = {} if n_agents is None else {"n_agents": n_agents}
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=None if groups is None else torch.tensor(groups),
                    turn_ids=torch.where(mask, torch.arange(T).expand(B, T), -1),
                    agent_ids=agent, info=info)


def agent_values(credit, ro):
    """Credit per agent read back from the token credit (it must be constant per agent)."""
    lo, present = credit.at(ro, "agent", "min")
    hi, _ = credit.at(ro, "agent", "max")
    assert torch.allclose(lo, hi), "credit must be constant over an agent's positions"
    return torch.where(present, lo, 0)


# --------------------------------------------------------------------------- games
def test_coalition_masks_and_popcount():
    m = coalition_masks(3)
    assert m.shape == (8, 3) and m.dtype == torch.bool
    assert m[0].tolist() == [False] * 3 and m[7].tolist() == [True] * 3
    assert m[0b101].tolist() == [True, False, True]
    assert popcount(3).tolist() == [0, 1, 1, 2, 1, 2, 2, 3]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_exact_shapley_equals_enumeration_over_all_orderings(n):
    v = random_game(n, seed=n, batch=(3,))
    assert torch.allclose(exact_shapley(v), brute_force_shapley(v, n), atol=1e-12)


def test_exact_shapley_large_n_uses_player_loop_and_stays_exact():
    # n = 17 takes the per-player path; compare one player with a direct sum
    n = 17
    v = random_game(n, seed=3)
    phi = exact_shapley(v)
    assert torch.isclose(phi.sum(), v[-1] - v[0], atol=1e-9)
    # additive game: v(S) = sum of weights in S  ->  phi = weights exactly
    w = torch.linspace(-1, 1, n, dtype=torch.float64)
    add = (coalition_masks(n).to(torch.float64) * w).sum(1)
    assert torch.allclose(exact_shapley(add), w, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 10_000))
def test_shapley_axioms_on_random_games(n, seed):
    v = random_game(n, seed)
    phi = exact_shapley(v)
    # efficiency
    assert torch.isclose(phi.sum(), v[-1] - v[0], atol=1e-10)
    # additivity (and linearity)
    w = random_game(n, seed + 1)
    assert torch.allclose(exact_shapley(v + 2.5 * w), phi + 2.5 * exact_shapley(w), atol=1e-10)
    # null player: make player k irrelevant, v'(S) = v(S without k)
    k = seed % n
    masks = torch.arange(2 ** n)
    null_game = v[masks & ~(1 << k)]
    phi_null = exact_shapley(null_game)
    assert abs(float(phi_null[k])) < 1e-12
    if n >= 2:
        # symmetry: symmetrise players 0 and 1, v'(S) = v(S) + v(swap(S))
        b0, b1 = (masks & 1), (masks >> 1) & 1
        swapped = (masks & ~3) | (b0 << 1) | b1
        sym = v + v[swapped]
        phi_sym = exact_shapley(sym)
        assert torch.isclose(phi_sym[0], phi_sym[1], atol=1e-12)


# closed-form 3-player games (values for players 0, 1, 2)
REDUNDANT = game_from(lambda S: 1 if S else 0, 3)                 # any player suffices
COMPLEMENTARY = game_from(lambda S: 1 if len(S) == 3 else 0, 3)   # all three needed
GLOVE = game_from(lambda S: 1 if 0 in S and (1 in S or 2 in S) else 0, 3)  # 1 left, 2 right


@pytest.mark.parametrize("game,shap,loo", [
    (REDUNDANT, [1 / 3] * 3, [0, 0, 0]),
    (COMPLEMENTARY, [1 / 3] * 3, [1, 1, 1]),
    (GLOVE, [2 / 3, 1 / 6, 1 / 6], [1, 0, 0]),
])
def test_closed_form_three_player_games(game, shap, loo):
    assert torch.allclose(exact_shapley(game), torch.tensor(shap, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(leave_one_out_values(game), torch.tensor(loo, dtype=torch.float64), atol=1e-12)


def test_free_rider_gets_zero_under_both():
    # players 0 and 1 must both work; player 2 never changes anything
    game = game_from(lambda S: 1 if {0, 1} <= S else 0, 3)
    phi, loo = exact_shapley(game), leave_one_out_values(game)
    assert torch.allclose(phi, torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64))
    assert torch.allclose(loo, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def test_exact_shapley_batched_and_at_12_players():
    v = random_game(10, seed=1, batch=(64,))
    phi = exact_shapley(v)
    assert phi.shape == (64, 10)
    assert torch.allclose(phi[5], exact_shapley(v[5]))
    v12 = random_game(12, seed=2)   # speed: benchmarks/shapley_speed.py
    phi12 = exact_shapley(v12)
    full, empty = v12[..., -1], v12[..., 0]
    assert torch.allclose(phi12.sum(-1), full - empty)


# --------------------------------------------------------------------------- sampled Shapley
def test_sampled_shapley_is_efficient_per_sample_and_converges():
    n = 8
    v = random_game(n, seed=7)
    exact = exact_shapley(v)
    errors = []
    for P in (10, 100, 2000):
        phi, evals = sampled_shapley(v, n_permutations=P, seed=0)
        assert torch.isclose(phi.sum(), v[-1] - v[0], atol=1e-10)  # telescoping
        assert 1 < evals <= 2 ** n
        errors.append(float((phi - exact).abs().max()))
    assert errors[0] > errors[2]
    assert errors[2] < 0.1 * float(exact.abs().max()) + 0.05


def test_sampled_shapley_unbiased_over_seeds():
    n = 5
    v = random_game(n, seed=11)
    runs = torch.stack([sampled_shapley(v, n_permutations=3, seed=s)[0] for s in range(1500)])
    se = runs.std(0) / math.sqrt(runs.shape[0])
    assert bool(((runs.mean(0) - exact_shapley(v)).abs() < 4 * se + 1e-9).all())


def test_sampled_shapley_callable_counts_distinct_evaluations():
    n = 4
    v = random_game(n, seed=5)
    calls = []

    def fn(masks):
        calls.append(masks.clone())
        return v[masks]

    phi_fn, evals = sampled_shapley(fn, n, n_permutations=50, seed=3)
    phi_tab, evals_tab = sampled_shapley(v, n_permutations=50, seed=3)
    assert torch.allclose(phi_fn, phi_tab)
    assert len(calls) == 1 and evals == calls[0].numel() == evals_tab
    assert len(set(calls[0].tolist())) == evals and evals <= 2 ** n
    # with enough orderings every coalition of 4 players is visited: exact
    phi_all, evals_all = sampled_shapley(fn, n, n_permutations=2000, seed=0)
    assert evals_all == 2 ** n


def test_sampled_shapley_antithetic_pairs_and_batches():
    v = random_game(6, seed=2, batch=(3,))
    phi, _ = sampled_shapley(v, n_permutations=7, seed=1, antithetic=True)
    assert phi.shape == (3, 6)
    assert torch.allclose(phi.sum(-1), v[:, -1] - v[:, 0])
    # two players, one antithetic pair covers both orderings: exact
    v2 = random_game(2, seed=9)
    assert torch.allclose(sampled_shapley(v2, n_permutations=2, antithetic=True)[0], exact_shapley(v2))


@pytest.mark.parametrize("bad,word", [
    (torch.zeros(6), "values"),
    (torch.tensor([0.0, float("nan")]), "values"),
])
def test_bad_tables_raise(bad, word):
    with pytest.raises(ValueError, match=word):
        exact_shapley(bad)
    with pytest.raises(ValueError, match=word):
        leave_one_out_values(bad)


def test_sampled_shapley_bad_arguments():
    v = random_game(3, seed=0)
    with pytest.raises(ValueError, match="n_permutations"):
        sampled_shapley(v, n_permutations=-1)
    with pytest.raises(ValueError, match="n_permutations"):
        sampled_shapley(v, n_permutations=0)
    with pytest.raises(ValueError, match="^n:"):
        sampled_shapley(lambda m: m.double(), n_permutations=3)
    with pytest.raises(ValueError, match="^n:"):
        sampled_shapley(v, 4, n_permutations=3)
    with pytest.raises(ValueError, match="values_or_fn"):
        sampled_shapley(lambda m: torch.zeros(2), 3, n_permutations=5)


# --------------------------------------------------------------------------- agent estimators
def glove_rollouts():
    """Two tasks x two trajectories, 3 agents; agent 0 acts twice, interleaved with the others."""
    rows = [[0, 1, 0, 2], [0, 1, 2, 0], [1, 0, 2], [0, 1, 2]]
    rewards = [[1, 0, 0], [0.5, 0.2, 0], [0, 1, 1], [1, 1, 0]]
    return team(rows, rewards, groups=[0, 0, 1, 1])


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


# --------------------------------------------------------------------------- judge stand-ins
def test_noisy_oracle():
    ref = torch.tensor([[0.0, 2.5, 9.7], [4.0, 11.0, -1.0]])
    assert torch.equal(noisy_oracle(ref, noise=0.0, seed=1), ref.double())
    a = noisy_oracle(ref, noise=1.0, seed=3)
    assert torch.equal(a, noisy_oracle(ref, noise=1.0, seed=3))
    assert not torch.equal(a, noisy_oracle(ref, noise=1.0, seed=4))
    graded = noisy_oracle(ref, noise=0.0, low=0, high=10, levels=11)
    assert graded.tolist() == [[0, 2, 10], [4, 10, 0]] or graded.tolist() == [[0, 3, 10], [4, 10, 0]]
    big = noisy_oracle(torch.zeros(20000), noise=2.0, seed=0)
    assert abs(float(big.std()) - 2.0) < 0.05 and abs(float(big.mean())) < 0.05
    with pytest.raises(ValueError, match="noise"):
        noisy_oracle(ref, noise=-1.0)
    with pytest.raises(ValueError, match="low"):
        noisy_oracle(ref, noise=0.1, low=0)
    with pytest.raises(ValueError, match="reference"):
        noisy_oracle(torch.tensor([float("nan")]), noise=0.1)


def test_mappa_with_exact_judge_reproduces_reference_and_whitens():
    ro = glove_rollouts()
    quality = torch.arange(ro.batch_size * ro.horizon, dtype=torch.float64).reshape(ro.batch_size, -1)
    judge = noisy_oracle(quality, noise=0.0)
    raw = estimate("mappa", ro, judge_scores=judge, normalize="none")
    assert raw.level == "token"
    assert torch.equal(raw.token, torch.where(ro.mask, quality, 0.0))
    c = estimate("mappa", ro, judge_scores=lambda r: judge)
    vals = c.token[ro.mask]
    # REINFORCE++'s whitening: population (biased) variance, as reinforce_pp
    assert abs(float(vals.mean())) < 1e-12 and abs(float(vals.std(unbiased=False)) - 1) < 1e-5
    assert c.cost.aux_calls == int(ro.mask.sum())
    mixed = estimate("mappa", ro, judge_scores=judge, normalize="none", outcome_weight=2.0)
    assert torch.allclose(mixed.token, torch.where(ro.mask, quality + 2 * ro.scores[:, None], 0.0))
    with pytest.raises(ValueError, match="judge_scores"):
        estimate("mappa", ro, judge_scores=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="judge_scores"):
        estimate("mappa", ro)


def test_llm_mca_reports_the_judge_and_can_rescale_to_the_team_reward():
    ro = glove_rollouts()
    phi = exact_shapley(torch.stack([GLOVE, REDUNDANT, COMPLEMENTARY, GLOVE]))
    c = estimate("llm_mca", ro, judge_credit=noisy_oracle(phi, noise=0.0))
    assert c.level == "agent" and torch.allclose(agent_values(c, ro), phi)
    team_r = torch.tensor([2.0, 3.0, 0.0, 1.0], dtype=torch.float64)
    r = estimate("llm_mca", ro, judge_credit=phi, rescale="team", team_reward=team_r)
    assert torch.allclose(r.values.sum(1), team_r)
    zero = estimate("llm_mca", ro, judge_credit=torch.zeros(4, 3), rescale="team")
    assert zero.info["unscaled_rows"] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="judge_credit"):
        estimate("llm_mca", ro, judge_credit=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="judge_credit"):
        estimate("llm_mca", ro, judge_credit=torch.full((4, 3), float("nan")))


def test_every_multiagent_estimator_is_registered_with_a_docstring():
    for name in ("shapley", "leave_one_out", "sharp", "dr_mas", "m_grpo", "scar", "mappa", "llm_mca"):
        fn = ESTIMATORS[name]
        assert "arXiv" in fn.__doc__ or "Wolpert" in fn.__doc__
        assert "egenerate" in fn.__doc__
    for name in ("mappa", "llm_mca"):
        assert "STAND-IN" in ESTIMATORS[name].__doc__
    assert "STAND-IN" in noisy_oracle.__doc__


# --------------------------------------------------------------------------- a written credit function (QLLM)
def test_credit_function_applies_the_written_rule_per_trajectory():
    ro = team([[0, 1, 2], [0, 1, 2]], [[1, 1, 1], [0, 0, 0]], n_agents=3)
    glove = game_from(lambda S: float(0 in S and bool(S & {1, 2})), 3)   # 1 left glove, 2 right gloves
    table = torch.stack([glove, 2 * glove])

    def loo(v, agents):
        full = frozenset(agents)
        return {a: v[full] - v[full - {a}] for a in agents}

    c = estimate("credit_function", ro, fn=loo, coalition_values=table)
    assert torch.allclose(c.values, torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]], dtype=torch.float64))
    assert c.cost.env_steps == 2 * 8
    assert agent_values(c, ro)[1, 0] == 2.0
    # the exact Shapley rule written as a function reproduces the shapley estimator
    def shap(v, agents):
        out = dict.fromkeys(agents, 0.0)
        for order in itertools.permutations(agents):
            S = frozenset()
            for a in order:
                out[a] += (v[S | {a}] - v[S]) / math.factorial(len(agents))
                S = S | {a}
        return out
    assert torch.allclose(estimate("credit_function", ro, fn=shap, coalition_values=table).values,
                          estimate("shapley", ro, coalition_values=table).values)


def test_credit_function_names_the_function_when_it_misbehaves():
    ro = team([[0, 1]], [[1, 1]], n_agents=2)
    table = game_from(lambda S: float(len(S) == 2), 2)[None]
    with pytest.raises(ValueError, match="fn: required"):
        estimate("credit_function", ro, coalition_values=table)
    with pytest.raises(ValueError, match=r"fn: raised ZeroDivisionError.*trajectory 0"):
        estimate("credit_function", ro, fn=lambda v, a: {x: 1 / 0 for x in a}, coalition_values=table)
    with pytest.raises(ValueError, match="one credit per agent"):
        estimate("credit_function", ro, fn=lambda v, a: {"agent 0": 1.0}, coalition_values=table)
    with pytest.raises(ValueError, match="non-finite"):
        estimate("credit_function", ro, fn=lambda v, a: dict.fromkeys(a, float("nan")), coalition_values=table)
    with pytest.raises(TypeError, match="fn"):
        estimate("credit_function", ro, fn="shapley", coalition_values=table)
    # a one-agent team: the function sees the empty and the full coalition
    solo = team([[0]], [[1]], n_agents=1)
    seen = []
    c = estimate("credit_function", solo, fn=lambda v, a: seen.append(sorted(map(len, v))) or {a[0]: v[frozenset(a)]},
                 coalition_values=torch.tensor([[0.0, 0.7]]))
    assert seen == [[0, 1]] and float(c.values[0, 0]) == pytest.approx(0.7)
