"""Cooperative games (labkit.core.games): exact and sampled Shapley values, leave-one-out values.

Games are built by hand (closed-form 3-player games) or drawn at random with a seed.
"""

import itertools
import math

import pytest
import torch
from hypothesis import strategies as st
from hypothesis import given, settings

from labkit.core.games import (coalition_masks, exact_shapley, least_core, leave_one_out_values, nucleolus, popcount,
                               sampled_shapley)

from team_games import COMPLEMENTARY, GLOVE, REDUNDANT, game_from


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


# --------------------------------------------------------------------------- least core / nucleolus
def _excesses(v, x, n):
    """Excess v(S) - v(empty) - x(S) of every proper non-empty coalition, (..., 2**n - 2)."""
    S = torch.arange(1, 2 ** n - 1)
    member = coalition_masks(n)[S].to(torch.float64)
    return (v[..., S] - v[..., :1]) - x @ member.T


def test_least_core_of_the_glove_game_by_hand():
    # v({0,1}) = v({0,2}) = v(N) = 1, else 0. Constraints with e = 0: x0 + x1 >= 1 and x0 + x2 >= 1
    # with x0 + x1 + x2 = 1 force x2 <= 0 and x1 <= 0, and x1, x2 >= 0 (singletons), so the core is
    # the single point (1, 0, 0); e < 0 is infeasible (x0+x1 >= 1-e, x2 >= -e sum to 1 - 2e > 1).
    x, e = least_core(GLOVE)
    assert torch.allclose(x, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), atol=1e-12)
    assert abs(float(e)) < 1e-12
    assert torch.equal(nucleolus(GLOVE), x)
    # Shapley splits the same game (2/3, 1/6, 1/6): the core gives the veto player everything
    assert torch.allclose(exact_shapley(GLOVE), torch.tensor([2 / 3, 1 / 6, 1 / 6], dtype=torch.float64))


def test_least_core_of_symmetric_games_by_hand():
    third = torch.full((3,), 1 / 3, dtype=torch.float64)
    # redundant: every singleton is worth 1, x_i >= 1 - e with sum 1 -> e* = 2/3 at the equal split
    x, e = least_core(REDUNDANT)
    assert torch.allclose(x, third, atol=1e-12) and abs(float(e) - 2 / 3) < 1e-12
    # complementary: only N is worth 1; the equal split leaves each singleton's excess at -1/3,
    # and no split does better (the three singleton excesses sum to -1)
    x, e = least_core(COMPLEMENTARY)
    assert torch.allclose(x, third, atol=1e-12) and abs(float(e) + 1 / 3) < 1e-12


def test_least_core_two_players_splits_the_surplus_equally():
    # x_i = v(i) + (v(12) - v(1) - v(2)) / 2, e* = (v(1) + v(2) - v(12)) / 2
    v = torch.tensor([0.0, 1.0, 3.0, 10.0], dtype=torch.float64)
    x, e = least_core(v)
    assert torch.allclose(x, torch.tensor([4.0, 6.0], dtype=torch.float64), atol=1e-12)
    assert abs(float(e) + 3.0) < 1e-12


def test_least_core_additive_game_is_the_weights_and_shift_invariant():
    n = 4
    w = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64)
    add = (coalition_masks(n).to(torch.float64) * w).sum(1)
    x, e = least_core(add)
    assert torch.allclose(x, w, atol=1e-12) and abs(float(e)) < 1e-12
    # v(empty) is subtracted first: adding a constant to every coalition changes nothing
    x2, e2 = least_core(add + 3.0)
    assert torch.allclose(x2, x, atol=1e-12) and abs(float(e2 - e)) < 1e-12


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 5), seed=st.integers(0, 10_000))
def test_least_core_is_efficient_optimal_and_lexicographically_minimal(n, seed):
    v = random_game(n, seed)
    x, e = least_core(v)
    assert torch.isclose(x.sum(), v[-1] - v[0], atol=1e-9)
    exc = _excesses(v, x, n)
    assert torch.isclose(exc.max(), e, atol=1e-9)
    # no efficient split does lexicographically better on the sorted excesses (random directions)
    g = torch.Generator().manual_seed(seed)
    base = exc.sort(descending=True).values
    for _ in range(50):
        d = torch.randn(n, generator=g, dtype=torch.float64)
        d = 1e-3 * (d - d.mean())
        other = _excesses(v, x + d, n).sort(descending=True).values
        diff = other - base
        first = diff[diff.abs() > 1e-9]
        assert first.numel() == 0 or first[0] > 0
    # symmetrise players 0 and 1: they get equal shares
    masks = torch.arange(2 ** n)
    swap = (masks & ~3) | ((masks & 1) << 1) | ((masks >> 1) & 1)
    xs, _ = least_core(v + v[swap])
    assert abs(float(xs[0] - xs[1])) < 1e-9


def test_least_core_batch_and_constraint_sampling():
    table = torch.stack([GLOVE, REDUNDANT, GLOVE])
    x, e, n_lps = least_core(table, return_lps=True)
    assert x.shape == (3, 3) and e.shape == (3,)
    assert torch.equal(x[0], x[2]) and n_lps > 0
    x1, _ = least_core(GLOVE)
    assert torch.equal(x[0], x1)
    # every coalition given as a constraint = the exact least core
    xa, ea = least_core(GLOVE, coalitions=torch.arange(1, 7))
    assert torch.allclose(xa, x1) and torch.isclose(ea, torch.tensor(0.0, dtype=torch.float64))
    # singletons only (n_sampled=0): all v(i) = 0, so the relaxed LP splits 1 equally, e = -1/3
    xs, es = least_core(GLOVE, n_sampled=0)
    assert torch.allclose(xs, torch.full((3,), 1 / 3, dtype=torch.float64)) and abs(float(es) + 1 / 3) < 1e-12
    # adding the pair {0, 1}: x0 + x1 >= 1 - e binds; the nucleolus of the relaxed LP is (1/2, 1/2, 0) at e = 0
    xp, ep = least_core(GLOVE, coalitions=torch.tensor([0b011]))
    assert torch.allclose(xp, torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64), atol=1e-12)
    assert abs(float(ep)) < 1e-12


def test_least_core_degenerate_and_bad_input():
    x, e = least_core(torch.tensor([1.0, 3.0], dtype=torch.float64))
    assert x.tolist() == [2.0] and float(e) == float("-inf")
    x0, e0 = least_core(torch.tensor([0.5]))
    assert x0.shape == (0,)
    with pytest.raises(ValueError, match="^values"):
        least_core(torch.zeros(6))
    with pytest.raises(ValueError, match="^values"):
        least_core(torch.tensor([0.0, float("nan"), 0.0, 1.0]))
    with pytest.raises(ValueError, match="^coalitions"):
        least_core(GLOVE, coalitions=torch.tensor([7]))
    with pytest.raises(ValueError, match="^coalitions"):
        least_core(GLOVE, coalitions=torch.tensor([0.5]))
    with pytest.raises(ValueError, match="^n_sampled"):
        least_core(GLOVE, n_sampled=4)
    with pytest.raises(ValueError, match="^n_sampled"):
        least_core(GLOVE, n_sampled=1, coalitions=torch.tensor([3]))


def test_sizes_that_would_exhaust_memory_are_refused_up_front():
    """40 players would need a 2**40 table (terabytes): refused by name before any allocation,
    as are counts that are not non-negative integers."""
    from labkit.core.games import LEAST_CORE_MAX_CONSTRAINTS, LEAST_CORE_MAX_PLAYERS, MAX_PLAYERS, check_players
    for fn in (popcount, coalition_masks):
        with pytest.raises(ValueError, match=rf"^n: 40 agents need 2\*\*40 = 1,099,511,627,776 coalitions; at most {MAX_PLAYERS} here"):
            fn(40)
        with pytest.raises(ValueError, match=r"^n: must be >= 0"):
            fn(-1)
        for bad in (2.5, "x", None, True):
            with pytest.raises(TypeError, match=r"^n: expected an integer"):
                fn(bad)
    assert check_players("n", MAX_PLAYERS) == MAX_PLAYERS
    huge = torch.zeros(1, dtype=torch.float64).expand(2 ** (MAX_PLAYERS + 1))  # a view: no memory
    for fn in (exact_shapley, leave_one_out_values, least_core):
        with pytest.raises(ValueError, match=rf"^values: {MAX_PLAYERS + 1} agents need 2\*\*{MAX_PLAYERS + 1}"):
            fn(huge)
    with pytest.raises(ValueError, match=rf"^values_or_fn: {MAX_PLAYERS + 1} agents"):
        sampled_shapley(huge, n_permutations=2)
    # the exact least core's LP grows as the square of its 2**n constraints
    over = torch.zeros(2 ** (LEAST_CORE_MAX_PLAYERS + 1), dtype=torch.float64)
    for fn in (least_core, nucleolus):
        with pytest.raises(ValueError, match=rf"^values: {LEAST_CORE_MAX_PLAYERS + 1} agents need .* at most "
                                             rf"{LEAST_CORE_MAX_PLAYERS} here"):
            fn(over)
    with pytest.raises(ValueError, match="^n_sampled: must be <="):
        least_core(over, n_sampled=LEAST_CORE_MAX_CONSTRAINTS)
    with pytest.raises(ValueError, match=r"^coalitions: 1024 constraints \(singletons included\); at most 1022 here"):
        least_core(over, coalitions=torch.arange(1, LEAST_CORE_MAX_CONSTRAINTS + 2))
    x, _ = least_core(over, n_sampled=5)  # a sampled least core of the same game is fine
    assert x.shape == (LEAST_CORE_MAX_PLAYERS + 1,)


@pytest.mark.parametrize("n", [0, 1, 5, 13])
def test_popcount_and_coalition_masks_match_the_bit_table(n):
    """Built by doubling (no (2**n, n) long intermediate), they equal the direct bit table."""
    bits = (torch.arange(2 ** n)[:, None] >> torch.arange(n)) & 1
    assert torch.equal(popcount(n), bits.sum(1)) and popcount(n).dtype == torch.long
    assert torch.equal(coalition_masks(n), bits.bool())
