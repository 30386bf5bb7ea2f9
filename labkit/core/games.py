"""Cooperative games as tables: Shapley values (exact and sampled) and leave-one-out values.

A game on n players is a table of coalition values ``v`` with shape (..., 2**n): column ``S`` (an
integer bitmask, bit i set = player i is in the coalition) holds v(S), column 0 the empty
coalition and column 2**n - 1 the grand coalition. Leading dimensions are a batch of games (one
per trajectory, usually). Nothing here knows about rollouts: the players may be agents
(``labkit.credit.multiagent``), reasoning steps (SCAR) or anything a caller can value.

* ``exact_shapley``        Shapley values from all 2**n coalitions, one matrix product.
* ``sampled_shapley``      permutation-sampling estimate with a budget (Castro et al. 2009).
* ``leave_one_out_values`` v(N) - v(N \\ {i}), the difference reward / C3's leave-one-out.
"""
from __future__ import annotations

import math
from functools import lru_cache

import torch

from labkit.core.checks import as_tensor, check_bool, check_finite, check_int

__all__ = ["MAX_PLAYERS", "game_table", "popcount", "coalition_masks", "exact_shapley", "sampled_shapley",
           "leave_one_out_values"]

MAX_PLAYERS = 24  # 2**24 columns of float64 is 128 MB per game; beyond that use sampled_shapley


def _n_from_width(name: str, width: int) -> int:
    if width < 1 or width & (width - 1):
        raise ValueError(f"{name}: the last dimension must be 2**n (one column per coalition), got {width}")
    n = width.bit_length() - 1
    if n > MAX_PLAYERS:
        raise ValueError(f"{name}: {n} players is too many for a full table (max {MAX_PLAYERS}); "
                         "use sampled_shapley with a callable")
    return n


def game_table(name: str, values) -> tuple[torch.Tensor, int]:
    """A validated coalition table (errors name ``name``): the table as float64 and the number
    of players."""
    v = as_tensor(name, values)
    if v.dim() == 0:
        raise ValueError(f"{name}: expected shape (..., 2**n), got a scalar")
    n = _n_from_width(name, v.shape[-1])
    v = v.to(torch.float64)
    check_finite(name, v)
    return v, n


def popcount(n: int) -> torch.Tensor:
    """Coalition sizes |S| for S = 0 .. 2**n - 1, (2**n,) long."""
    masks = torch.arange(2 ** n)
    bits = (masks[:, None] >> torch.arange(n)) & 1
    return bits.sum(1)


def coalition_masks(n: int) -> torch.Tensor:
    """Membership table: ``out[S, i]`` is True when player i is in coalition S, (2**n, n) bool."""
    n = check_int("n", n, low=0, high=MAX_PLAYERS)
    return ((torch.arange(2 ** n)[:, None] >> torch.arange(n)) & 1).bool()


@lru_cache(maxsize=8)
def _shapley_matrix(n: int) -> torch.Tensor:
    """M (2**n, n) with phi = v @ M.

    Expanding phi_i = sum_{S not containing i} w(|S|) (v(S + i) - v(S)), w(k) = k!(n-k-1)!/n!,
    every coalition S appears once per player: with sign + and weight w(|S| - 1) when i is in S
    (as the "after" coalition), with sign - and weight w(|S|) when i is not (as the "before").
    """
    inside = coalition_masks(n)
    size = inside.sum(1)
    # w(k) = 1 / (n * C(n-1, k)), exact in float64 for the sizes we allow
    w = torch.tensor([1.0 / (n * math.comb(n - 1, k)) for k in range(n)] + [0.0], dtype=torch.float64)
    plus = w[(size - 1).clamp(min=0)][:, None]
    minus = w[size.clamp(max=n - 1)][:, None]
    return torch.where(inside, plus, -minus)


def exact_shapley(values) -> torch.Tensor:
    """Exact Shapley values of the game(s) ``values`` (..., 2**n) -> (..., n), float64.

        phi_i = sum_{S subset N \\ {i}} |S|! (n - |S| - 1)! / n! * (v(S + i) - v(S))

    Computed without a loop over coalitions: each coalition's value enters phi_i with a weight
    that depends only on |S| and on whether i is in S, so phi = v @ M for a fixed (2**n, n)
    matrix M (cached per n). For n > 16 (M over 8 MB) a loop over the n players is used
    instead. A game on 0 players returns shape (..., 0).
    """
    v, n = game_table("values", values)
    if n == 0:
        return v.new_zeros(v.shape[:-1] + (0,))
    if n <= 16:
        return v @ _shapley_matrix(n)
    size = popcount(n)
    w = torch.tensor([1.0 / (n * math.comb(n - 1, k)) for k in range(n)], dtype=torch.float64)
    masks = torch.arange(2 ** n)
    out = []
    for i in range(n):
        before = masks[(masks >> i) & 1 == 0]
        diff = v[..., before | (1 << i)] - v[..., before]
        out.append(diff @ w[size[before]])
    return torch.stack(out, -1)


def leave_one_out_values(values) -> torch.Tensor:
    """Leave-one-out (difference reward) values, (..., 2**n) -> (..., n):

        d_i = v(N) - v(N \\ {i})

    What the team loses when player i alone is removed (C3's leave-one-out; the "difference
    rewards" of Wolpert & Tumer). Unlike Shapley it is not efficient: redundant players all get
    0, complementary players each get the whole value.
    """
    v, n = game_table("values", values)
    full = 2 ** n - 1
    drop = torch.tensor([full ^ (1 << i) for i in range(n)], dtype=torch.long)
    return v[..., full:full + 1] - v[..., drop]


def sampled_shapley(values_or_fn, n: int | None = None, *, n_permutations: int, seed: int = 0,
                    antithetic: bool = False) -> tuple[torch.Tensor, int]:
    """Permutation-sampling Shapley estimate (Castro, Gomez & Tejada 2009). Returns (phi, cost).

    Draw P uniformly random orderings of the players; in each, walk the players in order and give
    each its marginal contribution v(predecessors + i) - v(predecessors); average over orderings.
    Unbiased for every player, and efficient in every single ordering (the contributions
    telescope to v(N) - v(empty)), so the estimate always sums exactly to v(N) - v(empty).

    ``values_or_fn``: a table (..., 2**n) (then ``n`` may be omitted), or a callable taking a
    1-D long tensor of M coalition bitmasks and returning their values with last dimension M
    (leading batch dims allowed). ``n_permutations`` >= 1 is the budget; the same orderings are
    used for every game in a batch. ``antithetic=True`` pairs each ordering with its reverse
    (P/2 random orderings, rounded up, so P rounds up to even) — a variance reduction; off by
    default. ``seed`` fixes the orderings.

    Cost: the number of DISTINCT coalitions the orderings visit (the empty and grand coalition
    included), i.e. the v(S) evaluations a caller without a table has to pay for, per game.
    It never exceeds 2**n.
    """
    n_permutations = check_int("n_permutations", n_permutations, low=1)
    seed = check_int("seed", seed)
    fn = None
    if callable(values_or_fn) and not isinstance(values_or_fn, torch.Tensor):
        if n is None:
            raise ValueError("n: the number of players is required when values_or_fn is a callable")
        n = check_int("n", n, low=1, high=62)
        fn = values_or_fn
    else:
        table, n_table = game_table("values_or_fn", values_or_fn)
        if n is not None and check_int("n", n) != n_table:
            raise ValueError(f"n: the table has 2**{n_table} columns but n = {n}")
        n = n_table
        if n == 0:
            return table.new_zeros(table.shape[:-1] + (0,)), 1
    g = torch.Generator().manual_seed(seed)
    if check_bool("antithetic", antithetic):
        half = torch.rand((n_permutations + 1) // 2, n, generator=g).argsort(-1)
        perms = torch.cat([half, half.flip(-1)], 0)
    else:
        perms = torch.rand(n_permutations, n, generator=g).argsort(-1)
    P = perms.shape[0]
    after = torch.cumsum(1 << perms, dim=1)                       # (P, n): coalition once perm[k] joined
    visited = torch.cat([torch.zeros(1, dtype=torch.long), after.flatten()])
    uniq, inverse = torch.unique(visited, return_inverse=True)
    if fn is None:
        vals = table[..., uniq]
    else:
        vals = as_tensor("values_or_fn", fn(uniq.clone()))
        if vals.dim() == 0 or vals.shape[-1] != uniq.numel():
            raise ValueError(f"values_or_fn: the callable must return one value per coalition "
                             f"(last dimension {uniq.numel()}), got shape {tuple(vals.shape)}")
        vals = vals.to(torch.float64)
        check_finite("values_or_fn", vals)
    # every "before" coalition is the previous "after" (or the empty one), so one lookup serves both
    inv_after = inverse[1:].reshape(P, n)
    inv_before = torch.cat([inverse[:1].expand(P, 1), inv_after[:, :-1]], 1)
    v_after = vals[..., inv_after.flatten()].reshape(vals.shape[:-1] + (P, n))
    v_before = vals[..., inv_before.flatten()].reshape(vals.shape[:-1] + (P, n))
    marginal = v_after - v_before                                   # (..., P, n) by position
    phi = torch.zeros(vals.shape[:-1] + (n,), dtype=torch.float64)
    phi = phi.index_add(-1, perms.flatten(), marginal.reshape(vals.shape[:-1] + (P * n,)))
    return phi / P, int(uniq.numel())
