"""The few statistics every estimator family shares, written once.

* ``group_stats`` / ``group_normalize``: statistics inside groups (GRPO's prompt groups, GiGPO's
  anchor groups, Dr. MAS's agent pools, ...) and the group-of-one rule;
* ``whiten``: REINFORCE++-style whitening over every masked entry of a batch;
* ``discounted_returns``: the backward recursion G_t = r_t + gamma G_{t'} over masked columns;
* ``step_advantage``: A_i = r_i + gamma V_{i+1} - V_i from values at the start of every position
  (V past the last present position = 0), the rule VinePPO and every Monte Carlo truth use;
* ``top_fraction``: keep the ceil(fraction * n) present entries with the largest score.

Float arithmetic here follows the order of operations the stored notebook numbers were made with
(a reordered sum changes the last bits), so keep it when editing.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from labkit.core.checks import as_tensor, check_bool, check_choice, check_number, check_shape

SINGLETON_RULES = ("raw", "zero")


def group_stats(values: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-entry (mean, unbiased std, size) of 1-D ``values`` over its group, each shaped like ``values``.

    Sums are taken in float64 and the mean / std cast back to ``values.dtype``; ``size`` stays
    float64. The std of a group of one is reported as 0 (no NaN); callers decide what a
    singleton means (see ``group_normalize``).
    """
    if values.shape != group_ids.shape:
        raise ValueError(f"group_ids: expected the shape of values {tuple(values.shape)}, got {tuple(group_ids.shape)}")
    if values.numel() == 0:
        empty = torch.zeros(0, dtype=values.dtype)
        return empty, empty.clone(), torch.zeros(0, dtype=torch.float64)
    # unique's counts are the group sizes (exact in float64), and each entry's group mean is
    # gathered once: every call in an RL step pays per operation here, not per entry.
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n_groups = counts.numel()
    v = values.to(torch.float64)
    size = counts.to(torch.float64)
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, v)
    mean = (total / size).index_select(0, inverse)
    sq = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, (v - mean) ** 2)
    std = torch.where(size > 1, (sq / (size - 1).clamp(min=1)).sqrt(), 0.0)
    return mean.to(values.dtype), std.index_select(0, inverse).to(values.dtype), size.index_select(0, inverse)


CONSTANT_TOL = 1e-9   # scores this close are equal for GRPO: its advantages there stay below ~5e-4


def constant_groups(values: torch.Tensor, group_ids: torch.Tensor, *, tol: float = CONSTANT_TOL) -> torch.Tensor:
    """Per entry of 1-D ``values``: does its group have two or more members whose values are all
    equal to within ``tol`` (max - min <= tol)? Group-relative estimators (GRPO, RLOO, Dr. GRPO)
    give every member of such a group (almost) zero credit, so it adds no gradient: with GRPO's
    eps = 1e-6 a spread of 1e-9 gives advantages of at most about 5e-4, and round-off such as
    0.1 + 0.2 against 0.3 (a spread of 5.6e-17) about 1e-10. A spread of 1e-6 already gives
    advantages near 0.4: a real gradient. A group of one is not constant here: GRPO's
    group-of-one rule (``group_normalize``) gives it its raw score. ``tol`` = 0 asks for exact
    equality."""
    if values.dim() != 1 or values.shape != group_ids.shape:
        raise ValueError(f"group_ids: expected the shape of values {tuple(values.shape)} (1-D), "
                         f"got {tuple(group_ids.shape)}")
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol >= 0:
        raise ValueError(f"tol: expected a number >= 0, got {tol!r}")
    if values.numel() == 0:
        return torch.zeros(0, dtype=torch.bool)
    _, inverse, sizes = torch.unique(group_ids, return_inverse=True, return_counts=True)
    v = values.to(torch.float64)
    n = sizes.numel()
    hi = torch.full((n,), -torch.inf, dtype=torch.float64).scatter_reduce(0, inverse, v, "amax")
    lo = torch.full((n,), torch.inf, dtype=torch.float64).scatter_reduce(0, inverse, v, "amin")
    return ((sizes >= 2) & (hi - lo <= tol))[inverse]


class GroupNorm(NamedTuple):
    """What ``group_normalize`` returns, every field shaped like its ``values``."""

    normalized: torch.Tensor  # (v - mean) / (std + eps), or v - mean without the std
    mean: torch.Tensor        # the baseline actually subtracted (after the singleton rule)
    std: torch.Tensor         # the scale actually divided by (after the singleton rule)
    size: torch.Tensor        # group size, float64


def group_normalize(values: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-6,
                    normalize_std: bool = True, singleton: str = "raw",
                    weight: torch.Tensor | None = None) -> GroupNorm:
    """GRPO-normalise 1-D ``values`` inside the groups named by ``group_ids``.

        normalized = (v - mean_group) / (std_group + eps)     (std unbiased; normalize_std=True)
                   =  v - mean_group                          (normalize_std=False)

    The group-of-one rule (verl's GRPO convention, the one place it is written):
    ``singleton="raw"`` gives a group of one mean 0 and std 1, i.e. its raw value / (1 + eps);
    ``singleton="zero"`` keeps its own mean (so it gets 0: nothing to compare with) and std 1
    (so 0 / eps never happens). A group whose values are all equal gets 0 either way (0 / eps).

    Degenerate input: ``eps`` = 0 is allowed; a group whose values are all equal (std 0) then
    gets 0, as with any eps > 0, instead of 0 / 0.
    ``weight`` (long, shaped like ``values``; entries < 1 count once) repeats an entry in the
    statistics (e.g. an agent once per action it took); each entry still gets one output.
    """
    check_choice("singleton", singleton, SINGLETON_RULES)
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    if weight is None:
        mean, std, size = group_stats(values, group_ids)
    else:
        reps = as_tensor("weight", weight).long()
        check_shape("weight", reps, tuple(values.shape))
        reps = reps.clamp(min=1)
        mean, std, size = group_stats(values.repeat_interleave(reps), group_ids.repeat_interleave(reps))
        first = torch.cumsum(reps, 0) - reps  # one representative per entry
        mean, std, size = mean[first], std[first], size[first]
    single = size == 1
    if singleton == "raw":
        mean = torch.where(single, 0.0, mean).to(values.dtype)
    std = torch.where(single, 1.0, std).to(values.dtype)
    out = values - mean
    if normalize_std:
        if eps == 0:
            # A group of equal values has std 0: 0 / 0 would be NaN, and its advantage is 0
            # (no member differs from the others), as it is for any eps > 0.
            scale = std + eps
            out = torch.where(scale > 0, out / scale, torch.zeros((), dtype=out.dtype))
        else:
            out = out / (std + eps)
    return GroupNorm(out, mean, std, size)


def masked_moments(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased (population) variance of ``x`` over the entries where ``mask`` is True.

    An empty mask gives (0, 0); a single entry has variance 0.
    """
    vals = x[mask]
    if vals.numel() == 0:
        zero = torch.zeros((), dtype=x.dtype)
        return zero, zero.clone()
    return vals.mean(), vals.var(unbiased=False)


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8,
           moments: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over the masked entries; 0 off the mask.

    REINFORCE++'s convention (OpenRLHF): the variance is the biased (population) one and eps
    sits inside the square root. verl's ``masked_whiten`` uses the unbiased variance instead
    (a factor sqrt(n / (n - 1)) on n entries; see ``labkit.credit.episode.reinforce_pp``). Degenerate input: an empty
    mask gives all zeros; one entry, or all-equal entries, give 0 (0 / sqrt(eps)).
    ``moments``: ``masked_moments(x, mask)`` when the caller already has them (not recomputed).
    """
    eps = check_number("eps", eps, low=0.0, low_open=True)
    if not bool(mask.any()):
        return torch.zeros_like(x)
    mu, var = masked_moments(x, mask) if moments is None else moments
    return torch.where(mask, (x - mu) / torch.sqrt(var + eps), torch.zeros((), dtype=x.dtype))


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t'} backwards over the columns of (B, T) tensors, t' the next
    column where ``mask`` is True (columns off the mask carry the running return through
    unchanged: tool output does not discount); G past the last masked column is 0. 0 off-mask.

    ``gamma`` is one number, or a (B, T) tensor of per-position discounts (gamma[b, t] is the
    discount between position t and the next generated one): POAD's backups discount only
    between actions, not between the tokens of one action (``labkit.core.turns.action_discounts``).

    The one backward loop the lab has: token returns, turn returns and GAE (whose "rewards"
    are TD errors and whose discount is gamma * lambda) all run through it.
    """
    check_shape("mask", mask, tuple(rewards.shape))
    if not isinstance(gamma, torch.Tensor) and float(gamma) == 1.0 and rewards.dtype == torch.float64:
        # No discount: G is a reverse running sum of the on-mask rewards. Why a separate path:
        # the loop below costs one Python step per column (most of a REINFORCE++ call at T = 200,
        # notebook 01's slider). A float64 cumsum adds the same numbers in the same order as the
        # loop (tested bit for bit); for other dtypes torch accumulates in double, so they loop.
        on = torch.where(mask, rewards, torch.zeros((), dtype=rewards.dtype))
        running = on.flip(1).cumsum(1).flip(1)
        return torch.where(mask, running, torch.zeros((), dtype=rewards.dtype))
    # The loop walks columns: transposed copies make each column one contiguous row, and a scalar
    # gamma is multiplied as a scalar (a 0-d value of the rewards' dtype: the same products as a
    # tensor full of it, without building one). Positions off the mask are zeroed once at the end.
    r = rewards.t().contiguous()
    m = mask.t().contiguous()
    if isinstance(gamma, torch.Tensor):
        check_shape("gamma", gamma, tuple(rewards.shape))
        discount = gamma.to(rewards.dtype).t().contiguous()
    else:
        discount = None
        g = torch.tensor(float(gamma), dtype=rewards.dtype)
    out = torch.empty_like(r)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype)
    # gamma = 1 multiplies by nothing: 1 * x is x exactly, so the product is skipped (a third of
    # the loop's operations, REINFORCE++'s default on verl's float32 rewards)
    undiscounted = discount is None and float(gamma) == 1.0
    for t in range(r.shape[0] - 1, -1, -1):
        step = running if undiscounted else (discount[t] if discount is not None else g) * running
        running = torch.where(m[t], r[t] + step, running, out=out[t])  # written in place: row t of out
    return torch.where(mask, out.t(), torch.zeros((), dtype=rewards.dtype)).contiguous()


def step_advantage(values: torch.Tensor, rewards: torch.Tensor, present: torch.Tensor, *,
                   gamma: float = 1.0) -> torch.Tensor:
    """A_i = r_i + gamma * V_{i+1} - V_i at every ``present`` position i of (B, S) ``values`` (V
    before position i), ``rewards`` (received inside it) and ``present``; 0 elsewhere.

    V_{i+1} is the value at the next column when that column is present, and 0 past the last
    present position (the episode is over: nothing is left to earn). Positions are steps for
    VinePPO (V from vines before every step) or tokens for a token-level truth; with exact or
    Monte Carlo V, A_i is the (estimated) advantage of position i and a row's A telescope to its
    return minus V_0.
    """
    check_shape("rewards", rewards, tuple(values.shape))
    check_shape("present", present, tuple(values.shape))
    v_next = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)
    v_next = torch.where(torch.cat([present[:, 1:], torch.zeros_like(present[:, :1])], dim=1), v_next, 0)
    return torch.where(present, rewards + gamma * v_next - values, 0)


def next_masked(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """For every column t, the value at the next column t' > t where ``mask`` is True, (B, T);
    0 where there is none (no bootstrap past the last masked column)."""
    check_shape("mask", mask, tuple(values.shape))
    B, T = values.shape
    pos = torch.where(mask, torch.arange(T).expand(B, T), T)
    # nearest masked column at or after t, then shift by one to get "strictly after t"
    at_or_after = pos.flip(1).cummin(1).values.flip(1)
    after = torch.cat([at_or_after[:, 1:], torch.full((B, 1), T, dtype=pos.dtype)], 1)
    padded = torch.cat([values, torch.zeros(B, 1, dtype=values.dtype)], 1)
    return padded.gather(1, after)


def top_fraction(scores: torch.Tensor, present: torch.Tensor, fraction: float) -> torch.Tensor:
    """The ceil(fraction * n) ``present`` entries with the largest score, as a bool mask.

    n is the number of present entries; at least one is kept when n > 0, none when n = 0.
    Ties are broken by position (row-major), so exactly that many are kept.
    """
    fraction = check_number("fraction", fraction, low=0.0, high=1.0, low_open=True)
    check_shape("present", present, tuple(scores.shape))
    n = int(present.sum())
    if n == 0:
        return torch.zeros_like(present, dtype=torch.bool)
    # - 1e-9: 0.3 * 10 is 3.0000000000000004, whose ceil would keep a fourth entry
    n_keep = max(1, min(n, math.ceil(fraction * n - 1e-9)))
    order = torch.sort(-scores[present].to(torch.float64), stable=True).indices  # stable: ties keep row-major order
    keep = torch.zeros(n, dtype=torch.bool)
    keep[order[:n_keep]] = True
    kept = torch.zeros_like(present, dtype=torch.bool)
    kept[present] = keep
    return kept


def group_spread(rollouts) -> tuple[float, float]:
    """(mean over groups of the std of the scores inside a group, share of groups whose scores are
    all equal) of a ``Rollouts`` batch. A group with zero spread gives every group-baseline
    estimator (GRPO, RLOO, ...) zero credit: its rollouts teach nothing. A group of one counts as
    zero spread."""
    _, std, size = group_stats(rollouts.scores.to(torch.float64), rollouts.group_ids)
    _, inverse = torch.unique(rollouts.group_ids, return_inverse=True)
    # every row of a group carries the group's std, so scattering them leaves one value per group
    std = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).scatter_(0, inverse, torch.where(size > 1, std, 0.0))
    return float(std.mean()), float((std < 1e-12).double().mean())
