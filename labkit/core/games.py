"""Cooperative games as tables: Shapley values (exact and sampled) and leave-one-out values.

A game on n players is a table of coalition values ``v`` with shape (..., 2**n): column ``S`` (an
integer bitmask, bit i set = player i is in the coalition) holds v(S), column 0 the empty
coalition and column 2**n - 1 the grand coalition. Leading dimensions are a batch of games (one
per trajectory, usually). Nothing here knows about rollouts: the players may be agents
(``labkit.credit.multiagent``), reasoning steps (SCAR) or anything a caller can value.

* ``exact_shapley``        Shapley values from all 2**n coalitions, one matrix product.
* ``sampled_shapley``      permutation-sampling estimate with a budget (Castro et al. 2009).
* ``leave_one_out_values`` v(N) - v(N \\ {i}), the difference reward / C3's leave-one-out.
* ``least_core``           the least core's value e* and its nucleolus point (a sequence of small
                           exact LPs), with optional constraint sampling; ``nucleolus`` its point.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from labkit.core.checks import as_tensor, check_bool, check_finite, check_int

__all__ = ["MAX_PLAYERS", "LEAST_CORE_MAX_PLAYERS", "LEAST_CORE_MAX_CONSTRAINTS", "check_players", "game_table", "popcount", "coalition_masks", "exact_shapley", "sampled_shapley",
           "leave_one_out_values", "least_core", "nucleolus"]

#: The most players a full coalition table may have here: 2**24 columns of float64 is 128 MB per
#: game, and the tables built from n (``popcount``, ``coalition_masks``, the exact Shapley loop)
#: stay within a few times that. 40 players would need 8 TB; beyond 24 use ``sampled_shapley``
#: with a callable.
MAX_PLAYERS = 24
#: The most players of an exact least core: its LP has 2**n - 2 coalition constraints and the
#: dense simplex tableau grows as their square (about 17 MB and a minute at n = 10, 68 GB at
#: n = 16). Larger games use constraint sampling (``n_sampled`` or ``coalitions``).
LEAST_CORE_MAX_PLAYERS = 10
#: The most coalition constraints a least-core LP takes (the exact count at
#: ``LEAST_CORE_MAX_PLAYERS`` players), for sampled or given constraints too.
LEAST_CORE_MAX_CONSTRAINTS = 2 ** LEAST_CORE_MAX_PLAYERS - 2


def _too_many(name: str, n: int, high: int, what: str) -> ValueError:
    return ValueError(f"{name}: {n} agents need 2**{n} = {2 ** n:,} coalitions; at most {high} here ({what})")


def check_players(name: str, n, *, high: int = MAX_PLAYERS) -> int:
    """A number of players (agents) whose coalition table is built here: an integer in
    [0, ``high``] (default ``MAX_PLAYERS``), refused by name before 2**n of anything is allocated.
    Returns it as int."""
    n = check_int(name, n, low=0)
    if n > high:
        raise _too_many(name, n, high, "MAX_PLAYERS; use sampled_shapley with a callable")
    return n


def _n_from_width(name: str, width: int) -> int:
    if width < 1 or width & (width - 1):
        raise ValueError(f"{name}: the last dimension must be 2**n (one column per coalition), got {width}")
    n = width.bit_length() - 1
    if n > MAX_PLAYERS:
        raise _too_many(name, n, MAX_PLAYERS, "MAX_PLAYERS; use sampled_shapley with a callable")
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
    """Coalition sizes |S| for S = 0 .. 2**n - 1, (2**n,) long. ``n``: an integer in
    [0, ``MAX_PLAYERS``]."""
    n = check_players("n", n)
    size = torch.zeros(2 ** n, dtype=torch.long)
    for k in range(n):  # coalitions 2**k .. 2**(k+1) - 1 are those below with player k added
        torch.add(size[:2 ** k], 1, out=size[2 ** k:2 ** (k + 1)])
    return size


def coalition_masks(n: int) -> torch.Tensor:
    """Membership table: ``out[S, i]`` is True when player i is in coalition S, (2**n, n) bool.
    ``n``: an integer in [0, ``MAX_PLAYERS``]."""
    n = check_players("n", n)
    out = torch.zeros(2 ** n, n, dtype=torch.bool)
    # doubling, as in popcount: no (2**n, n) long intermediate (3 GB at n = 24)
    for k in range(n):
        out[2 ** k:2 ** (k + 1), :k] = out[:2 ** k, :k]
        out[2 ** k:2 ** (k + 1), k] = True
    return out


@lru_cache(maxsize=8)
def _shapley_matrix(n: int) -> torch.Tensor:
    """M (2**n, n) with phi = v @ M.

    Expanding phi_i = sum_{S not containing i} w(|S|) (v(S + i) - v(S)), w(k) = k!(n-k-1)!/n!,
    every coalition S appears once per player: with sign + and weight w(|S| - 1) when i is in S
    (as the "after" coalition), with sign - and weight w(|S|) when i is not (as the "before").
    """
    # only exact_shapley's n <= 16 reach here; M is n times the table, so the cap is the same
    inside = coalition_masks(check_players("n", n, high=16))
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


# --------------------------------------------------------------------------- least core and nucleolus
# A small exact LP solver: the games here have at most a few dozen coalitions and a handful of
# players, so a dense two-phase simplex in float64 with Bland's rule (no cycling on the heavily
# degenerate coalition LPs) is exact to rounding and needs no solver dependency.
_LP_TOL = 1e-9


def _pivot(T: np.ndarray, r: int, j: int) -> None:
    T[r] /= T[r, j]
    col = T[:, j].copy()
    col[r] = 0.0
    T -= col[:, None] * T[r][None, :]


def _simplex_loop(T: np.ndarray, basis: list[int], n_cols: int, tol: float) -> bool:
    """Bland's-rule pivots on tableau T (objective in the last row, rhs in the last column) over
    the first ``n_cols`` columns; False when the LP is unbounded."""
    m = T.shape[0] - 1
    for _ in range(50_000):
        enter = np.nonzero(T[m, :n_cols] < -tol)[0]
        if enter.size == 0:
            return True
        j = int(enter[0])
        col = T[:m, j]
        rows = np.nonzero(col > tol)[0]
        if rows.size == 0:
            return False
        ratios = T[rows, -1] / col[rows]
        best = ratios.min()
        ties = rows[ratios <= best + tol]
        r = int(min(ties, key=lambda i: basis[i]))
        _pivot(T, r, j)
        basis[r] = j
    raise RuntimeError("simplex: no convergence (cycling)")


def _lp_min(c, A_ub, b_ub, A_eq, b_eq, tol: float = _LP_TOL):
    """min c.z subject to A_ub z <= b_ub, A_eq z = b_eq, z free (dense two-phase simplex).
    Returns (z, c.z), or None when infeasible; raises ValueError when unbounded."""
    k = len(c)
    m_ub, m_eq = A_ub.shape[0], A_eq.shape[0]
    m = m_ub + m_eq
    # standard form: z = p - q, slacks on the inequality rows; columns [p | q | slack]
    A = np.zeros((m, 2 * k + m_ub))
    A[:m_ub, :k], A[:m_ub, k:2 * k] = A_ub, -A_ub
    A[:m_ub, 2 * k:] = np.eye(m_ub)
    A[m_ub:, :k], A[m_ub:, k:2 * k] = A_eq, -A_eq
    b = np.concatenate([b_ub, b_eq]).astype(np.float64)
    flip = b < 0
    A[flip] *= -1.0
    b[flip] *= -1.0
    n_real = A.shape[1]
    T = np.zeros((m + 1, n_real + m + 1))
    T[:m, :n_real] = A
    T[:m, n_real:n_real + m] = np.eye(m)
    T[:m, -1] = b
    T[m, :n_real] = -A.sum(0)
    T[m, -1] = -b.sum()
    basis = list(range(n_real, n_real + m))
    _simplex_loop(T, basis, n_real + m, tol)
    if T[m, -1] < -tol * max(1.0, float(b.sum())):
        return None
    for r in range(m):  # drive the artificials that stayed basic (at zero) out where possible
        if basis[r] >= n_real:
            cols = np.nonzero(np.abs(T[r, :n_real]) > tol)[0]
            if cols.size:
                _pivot(T, r, int(cols[0]))
                basis[r] = int(cols[0])
    T = np.delete(T, np.s_[n_real:n_real + m], axis=1)
    cost = np.concatenate([c, -c, np.zeros(m_ub)])
    T[m, :] = 0.0
    T[m, :n_real] = cost
    for r in range(m):
        if basis[r] < n_real:
            T[m] -= cost[basis[r]] * T[r]
    # a redundant row keeps its artificial basic at 0; its real columns are all 0, so it never pivots
    basis = [j if j < n_real else n_real + 10 ** 6 for j in basis]
    if not _simplex_loop(T, basis, n_real, tol):
        raise ValueError("simplex: the LP is unbounded")
    y = np.zeros(n_real)
    for r, j in enumerate(basis):
        if j < n_real:
            y[j] = T[r, -1]
    z = y[:k] - y[k:2 * k]
    return z, float(c @ z)


def _nucleolus_one(w: np.ndarray, n: int, coalitions: np.ndarray) -> tuple[np.ndarray, float, int]:
    """Nucleolus of one zero-normalised game w (2**n,) over the constraint coalitions given
    (bitmasks, proper and non-empty; the singletons must be among them). Returns (x, least-core
    e, number of LPs solved)."""
    scale = max(1.0, float(np.abs(w).max()))
    tol = 1e-9 * scale
    member = ((coalitions[:, None] >> np.arange(n)) & 1).astype(np.float64)   # (C, n)
    wS, wN = w[coalitions], float(w[-1])
    free = np.ones(len(coalitions), dtype=bool)
    fixed_excess = np.zeros(len(coalitions))
    grand = np.ones((1, n))
    n_lps, e_least, x = 0, None, None

    def eq_rows(extra_t: bool):
        # the grand coalition, and x(S) = w(S) - eps_S for every fixed coalition
        rows = np.vstack([grand, member[~free]])
        rhs = np.concatenate([[wN], wS[~free] - fixed_excess[~free]])
        if extra_t:
            rows = np.hstack([rows, np.zeros((rows.shape[0], 1))])
        return rows, rhs

    while free.any():
        # stage LP over (x, t): min t  s.t.  w(S) - x(S) <= t for the free coalitions
        A_ub = np.hstack([-member[free], -np.ones((int(free.sum()), 1))])
        A_eq, b_eq = eq_rows(True)
        c = np.zeros(n + 1)
        c[-1] = 1.0
        sol = _lp_min(c, A_ub, -wS[free], A_eq, b_eq, tol * 1e-3)
        n_lps += 1
        if sol is None:
            raise RuntimeError("nucleolus: a stage LP became infeasible (numerical trouble)")
        z, t = sol
        x = z[:n]
        if e_least is None:
            e_least = t
        # which free coalitions stay at excess t in EVERY solution with max free excess t?
        idx = np.nonzero(free)[0]
        A_ub2, b_ub2 = -member[free], t - wS[free]           # w(S) - x(S) <= t
        A_eq2, b_eq2 = eq_rows(False)
        excess = wS[idx] - member[idx] @ x
        cand = idx[excess >= t - tol]
        # one LP maximising the candidates' total slack clears most of them at once (a point where
        # a coalition is slack is not always the maximiser, so the rest are tested one by one)
        if cand.size > 1:
            sol = _lp_min(-member[cand].sum(0), A_ub2, b_ub2, A_eq2, b_eq2, tol * 1e-3)
            n_lps += 1
            if sol is not None:
                cand = cand[(wS[cand] - member[cand] @ sol[0]) >= t - tol]
        newly = []
        for s in cand:
            sol = _lp_min(-member[s], A_ub2, b_ub2, A_eq2, b_eq2, tol * 1e-3)
            n_lps += 1
            if sol is None or wS[s] - member[s] @ sol[0] >= t - tol:
                newly.append(s)
        if not newly:  # rounding: fix the tightest candidate so the sequence always progresses
            newly = [int(idx[np.argmax(excess)])]
        free[newly] = False
        fixed_excess[newly] = t
        # coalitions whose membership is spanned by the fixed ones (and N) have determined excess
        basis_rows = np.vstack([grand, member[~free]])
        rank = np.linalg.matrix_rank(basis_rows)
        if rank >= n:
            break
        for s in np.nonzero(free)[0]:
            if np.linalg.matrix_rank(np.vstack([basis_rows, member[s]])) == rank:
                free[s] = False
                fixed_excess[s] = wS[s] - member[s] @ x
    if np.linalg.matrix_rank(np.vstack([grand, member[~free]])) >= n and (~free).any():
        # solve the fixed system exactly for x (least squares on a consistent full-rank system)
        A_eq, b_eq = eq_rows(False)
        x = np.linalg.lstsq(A_eq, b_eq, rcond=None)[0]
    return x, float(e_least), n_lps


def least_core(values, *, coalitions=None, seed: int = 0, n_sampled: int | None = None,
               return_lps: bool = False):
    """Least core of the game(s) ``values`` (..., 2**n): its nucleolus point and its value.

        e* = min e   s.t.   sum_i x_i = v(N) - v(empty),
                            sum_{i in S} x_i >= v(S) - v(empty) - e   for every proper non-empty S

    The least core is the set of splits x reaching e*: no coalition is short of what it could
    earn alone by more than e*. It is a set, so one point is returned: the NUCLEOLUS (Schmeidler
    1969), the unique split that lexicographically minimises the sorted excesses
    v(S) - x(S), computed by the usual sequence of LPs (minimise the largest free excess, fix the
    coalitions that are at that level in every optimum, repeat until x is determined). It lies
    in the least core by construction, treats interchangeable players alike, lies in the core
    whenever the core is non-empty, and needs no tie-breaking rule of our own.

    The game is zero-normalised first (v(S) - v(empty)), so the split is of v(N) - v(empty), the
    same total that ``exact_shapley`` divides.

    ``coalitions``: None (every proper non-empty coalition; exact), or a 1-D tensor of bitmasks
    to use as the constraints (constraint sampling). ``n_sampled``: instead of ``coalitions``,
    draw that many of the proper coalitions with 2..n-2 members at random (``seed``). The n
    singletons are always added, which keeps the LP bounded and the point unique.

    Size: the exact least core takes at most ``LEAST_CORE_MAX_PLAYERS`` (10) players and a
    sampled or given one at most ``LEAST_CORE_MAX_CONSTRAINTS`` (1022) constraints, singletons
    included (the dense LP grows as their square); larger ones are refused by name up front.

    Returns ``(x, e)``: x (..., n) float64, e (...) float64 (e* = -inf for a one-player game,
    which has no proper coalition); with ``return_lps=True`` also the number of LPs solved.
    Identical games in a batch are solved once. Shares are rounded to 1e-12 of the game's
    largest |value| so that shares equal up to rounding compare equal.
    """
    v, n = game_table("values", values)
    lead = v.shape[:-1]
    if n == 0:
        out = (v.new_zeros(lead + (0,)), torch.full(lead, float("-inf"), dtype=torch.float64))
        return out + (0,) if return_lps else out
    full = 2 ** n - 1
    singles = [1 << i for i in range(n)]
    if coalitions is not None and n_sampled is not None:
        raise ValueError("n_sampled: give either coalitions or n_sampled, not both")
    if coalitions is None and n_sampled is None:
        if n > LEAST_CORE_MAX_PLAYERS:
            raise _too_many("values", n, LEAST_CORE_MAX_PLAYERS,
                            "LEAST_CORE_MAX_PLAYERS for the exact least core; pass n_sampled or coalitions")
        cs = list(range(1, full))
    elif coalitions is not None:
        c = as_tensor("coalitions", coalitions)
        if c.dim() != 1 or c.dtype.is_floating_point or c.dtype == torch.bool:
            raise ValueError(f"coalitions: expected a 1-D integer tensor of bitmasks, got {c.dtype} {tuple(c.shape)}")
        if c.numel() and (int(c.min()) < 1 or int(c.max()) >= full):
            raise ValueError(f"coalitions: bitmasks must be proper non-empty coalitions, 1 .. {full - 1}")
        cs = sorted(set(c.tolist()) | set(singles))
        if len(cs) > LEAST_CORE_MAX_CONSTRAINTS:
            raise ValueError(f"coalitions: {len(cs)} constraints (singletons included); at most "
                             f"{LEAST_CORE_MAX_CONSTRAINTS} here (LEAST_CORE_MAX_CONSTRAINTS: the LP tableau "
                             "grows as their square)")
    else:
        # checked before the list of candidates is built: at n = 24 it alone holds 16 million
        n_sampled = check_int("n_sampled", n_sampled, low=0, high=max(0, min(2 ** n - 2 - n, LEAST_CORE_MAX_CONSTRAINTS - n)))
        others = [s for s in range(1, full) if s not in singles]
        g = torch.Generator().manual_seed(check_int("seed", seed))
        pick = torch.randperm(len(others), generator=g)[:n_sampled].tolist()
        cs = sorted(set(singles) | {others[i] for i in pick})
    cs = np.asarray(cs, dtype=np.int64)
    flat = (v - v[..., :1]).reshape(-1, 2 ** n).numpy()
    x_out = np.zeros((flat.shape[0], n))
    e_out = np.full(flat.shape[0], float("-inf"))
    n_lps = 0
    if n == 1:
        x_out[:, 0] = flat[:, -1]
    else:
        uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
        for u in range(uniq.shape[0]):
            x, e, k = _nucleolus_one(uniq[u], n, cs)
            # rounded to 1e-12 of the game's scale: shares equal up to rounding (symmetric players)
            # then compare equal, and zero shares are exactly zero
            scale = max(1.0, float(np.abs(uniq[u]).max()))
            x = np.round(x / scale, 12) * scale + 0.0
            rows = inverse.reshape(-1) == u
            x_out[rows], e_out[rows] = x, e
            n_lps += k
    x_t = torch.from_numpy(x_out).reshape(lead + (n,))
    e_t = torch.from_numpy(e_out).reshape(lead)
    return (x_t, e_t, n_lps) if return_lps else (x_t, e_t)


def nucleolus(values) -> torch.Tensor:
    """The nucleolus of the game(s) ``values`` (..., 2**n) -> (..., n) float64: the point
    ``least_core`` returns (see there)."""
    return least_core(values)[0]
