"""The framework's own credit, checked: labkit's recomputation set beside the advantages a
framework logged, and, when they differ, the setting that made them.

A batch read from TRL or verl (``labkit.io``) keeps the advantages the trainer trained on in
``info['advantages']``: TRL's ``advantage`` column, (B,); verl's ``advantages`` tensor, (B, T),
one value per response for an outcome-level estimator. :func:`check_framework_advantages`
recomputes them from the batch's own rewards and groups under the framework's default and under
one hypothesis per common misconfiguration, and names the hypothesis that reproduces them:

========================  ==================================================================
cause                     advantages recomputed as
========================  ==================================================================
``default``               (r - mean_g) / (std_g + eps), the framework's eps (TRL 1e-4, verl 1e-6)
``epsilon``               the same with the other framework's eps
``std_off``               r - mean_g (Dr. GRPO: TRL ``scale_rewards="none"``, verl
                          ``norm_adv_by_std_in_grpo=False``)
``batch_std``             (r - mean_g) / (std of the step's whole batch + eps) (TRL ``"batch"``)
``population_std``        (r - mean_g) / (biased std_g + eps)
``rloo``                  r - mean of the group's other members (TRL ``RLOOTrainer``, verl ``rloo``)
``rloo_normalized``       the same, whitened over the step's batch (``normalize_advantages=True``)
``normalize_then_sum``    each reward function normalised in its group, summed, whitened over
                          the batch (TRL ``multi_objective_aggregation="normalize_then_sum"``)
``group_size``            default GRPO (or std off) over blocks of k consecutive rows, k not the
                          file's group size (the trainer's groups are not the file's)
``pooled_steps``          default GRPO (or std off) over a prompt's rows from every step
``per_step``              default GRPO (or std off) over the file's groups split by step
``reward_weights``        any of group std / no std / batch std on a reweighted sum of the reward
                          functions (TRL ``reward_weights``): each weight in {0, 0.25, 0.5, 1, 2,
                          4} for up to three functions, and the weights fitted to the advantages
========================  ==================================================================

Every hypothesis reuses labkit's group statistics (``labkit.core.stats.group_stats`` and
``group_normalize``: unbiased std, eps outside the root, the group-of-one rule), with the
framework's conventions where they differ from labkit's ``grpo`` (eps 1e-6, a group of one gets
its raw score): TRL (1.16, ``nanstd``: unbiased, Bessel's correction) divides by std + 1e-4 and
gives a completion whose every reward function returned None advantage 0, leaving it out of its
group's mean; verl's ``compute_grpo_outcome_advantage`` uses ``torch.std`` (unbiased), eps 1e-6 and
gives a group of one mean 0 and std 1, exactly labkit's ``grpo``. (``normalize_then_sum`` is
TRL's row-level form; verl's ``gdpo`` whitens over tokens instead, and a reward function's None
counts as 0 here where TRL leaves it out of that function's group mean.)

Tolerance. Both frameworks compute in float32 and log float32 values. A recomputation in float64
from the same rewards differs from theirs by round-off: a few units of float32's unit round-off
u = 2^-24 relative to the magnitudes that enter each row's formula, i.e. for (r - m) / s that is
(|r| + |m|) / s + |A|; a group whose rewards are all one float32 number with exact multiples (0,
0.5, 1, ...) sums exactly in any order, so its r - m is exactly 0 there too and gets no
allowance. Row i matches when |A_i - recomputed_i| <= ULPS * u * bound_i with ULPS =
64: a mean and a std over tens of entries stay inside it even in the worst case (and over
thousands in practice: round-off grows like their square root), while the smallest setting the
check separates, TRL's eps 1e-4 against 1e-6, moves an advantage by about 1e-4 / std relative,
over 25 times more whenever the group's std is below 1. Advantages that are not float32 values
(a float64 computation) are checked against u = 2^-53; ``precision=`` overrides the detection
(e.g. ``"bfloat16"`` for advantages stored in bf16). Measured on the committed TRL run: TRL's
default reproduced to 9.4e-9 (|A| up to 1.5, under one unit of round-off).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.stats import group_normalize, group_stats
from labkit.credit.episode import grpo

__all__ = ["AdvantageCheck", "Convention", "CONVENTIONS", "CAUSES", "ULPS", "PRECISIONS", "WEIGHT_GRID",
           "check_framework_advantages", "logged_advantages", "recompute_advantages"]

#: Units of round-off a recomputation may differ by per row (see the module docstring).
ULPS = 64
#: The unit round-off of each precision advantages may be stored in.
PRECISIONS = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
#: The weights tried for each reward function (up to three functions; more: one alone or one left out).
WEIGHT_GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
#: Every cause the check can name, simplest first: when several reproduce the advantages, the first wins.
CAUSES = ("default", "epsilon", "std_off", "batch_std", "population_std", "rloo", "rloo_normalized",
          "normalize_then_sum", "group_size", "pooled_steps", "per_step", "reward_weights")
_SCALINGS = ("group", "none", "batch", "population")


@dataclass(frozen=True)
class Convention:
    """How a framework computes GRPO's advantages by default, and the setting behind each cause."""
    name: str
    eps: float
    singleton: str                 # group_normalize's rule for a group of one ("raw" or "zero")
    settings: tuple[tuple[str, str], ...]

    def setting(self, cause: str) -> str | None:
        return dict(self.settings).get(cause)


CONVENTIONS = {
    "trl": Convention("TRL", 1e-4, "zero", (
        ("default", "GRPOTrainer's default scale_rewards='group'"),
        ("std_off", "TRL scale_rewards='none' (Dr. GRPO)"),
        ("batch_std", "TRL scale_rewards='batch'"),
        ("rloo", "trl.RLOOTrainer (normalize_advantages=False)"),
        ("rloo_normalized", "trl.RLOOTrainer with normalize_advantages=True"),
        ("normalize_then_sum", "TRL multi_objective_aggregation='normalize_then_sum' (GDPO)"),
        ("reward_weights", "TRL reward_weights"))),
    "verl": Convention("verl", 1e-6, "raw", (
        ("default", "verl's grpo (algorithm.adv_estimator=grpo)"),
        ("std_off", "verl algorithm.norm_adv_by_std_in_grpo=False (Dr. GRPO)"),
        ("rloo", "verl algorithm.adv_estimator=rloo"),
        ("reward_weights", "the reward function's own weighting"))),
    "other": Convention("labkit", 1e-6, "raw", ()),
}
_OTHER_EPS = {1e-4: 1e-6, 1e-6: 1e-4}


class _Fit(NamedTuple):
    adv: torch.Tensor      # recomputed advantages of the rows used for statistics
    bound: torch.Tensor    # the magnitude round-off is relative to, per row


@dataclass(frozen=True)
class AdvantageCheck:
    """What :func:`check_framework_advantages` found.

    ``matches``: the framework's default GRPO reproduces the logged advantages within the
    tolerance. ``cause``: the key of the simplest hypothesis that reproduces them (one of
    :data:`CAUSES`; ``"unexplained"`` when none does, ``"token_level"`` when verl's advantages vary
    inside a response, ``"nothing_to_compare"`` when no row has a logged value), ``explanation``
    a sentence naming the setting and the fix. ``max_diff``: max |logged - recomputed| under the
    cause's hypothesis (the closest one when unexplained, also in ``residual``);
    ``labkit_max_diff``: the same for labkit's ``grpo`` with its defaults, run on the batch as
    read; ``default_max_diff``: for the framework's default. ``tolerance``: under the cause's
    hypothesis, the tolerance of the row with the largest |difference| (each row has its own:
    ``precision``'s round-off relative to that row's magnitudes, module docstring).
    ``hypotheses``: (key, max |difference|) of every hypothesis tried, at its best setting.
    ``also_consistent``: the other causes that reproduce the advantages too (the data cannot
    tell them apart). ``group_size`` / ``weights`` (over ``weight_names``) / ``scaling``: the
    setting found for ``group_size`` and ``reward_weights``. ``within_response_spread``: for (B, T)
    advantages, the largest max - min of one response's advantages on its generated positions.
    ``rows``: rows in the batch; ``rows_compared``: rows with a logged value and a reward.
    ``notes``: where labkit's conventions differ from the framework's."""
    framework: str
    rows: int
    rows_compared: int
    matches: bool
    cause: str
    explanation: str
    max_diff: float
    labkit_max_diff: float
    default_max_diff: float
    tolerance: float
    precision: str
    hypotheses: tuple[tuple[str, float], ...]
    also_consistent: tuple[str, ...] = ()
    group_size: int | None = None
    weights: tuple[float, ...] | None = None
    weight_names: tuple[str, ...] = ()
    scaling: str | None = None
    within_response_spread: float | None = None
    residual: float | None = None
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The check as short lines of text (for a report or a notebook print)."""
        out = [f"{self.framework}'s advantages, {self.rows_compared} of {self.rows} rows compared: "
               f"{'match' if self.matches else 'differ from'} its default GRPO "
               f"(max |difference| {self.default_max_diff:.3g}; labkit's grpo {self.labkit_max_diff:.3g})",
               self.explanation]
        if self.also_consistent:
            out.append("also consistent with (this data cannot tell them apart): " + ", ".join(self.also_consistent))
        if self.hypotheses:
            out.append("max |difference| per hypothesis: " + ", ".join(f"{k} {v:.3g}" for k, v in self.hypotheses))
        out.extend(self.notes)
        return out


# --------------------------------------------------------------------------- pure maths
def _batch_stats(values: torch.Tensor, batch_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std, _ = group_stats(values, batch_ids)
    return mean, std


def _exact_constant(values: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Per row: are its group's values all equal to one float32 number x = m 2^e (m odd) with
    m n < 2^24, n the group's size (0, 0.5, 1, ...: most rewards)? Then every multiple k x, k <= n,
    is a float32 number, so any float32 sum of the group is exact, its mean is x, and r - mean is
    exactly 0 in the framework too: no round-off to allow for (three 0.1s do not sum exactly, so
    a group of 0.1s is not exact)."""
    if values.numel() == 0:
        return torch.zeros(0, dtype=torch.bool)
    _, inverse, sizes = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n = sizes.numel()
    hi = torch.full((n,), -math.inf, dtype=torch.float64).scatter_reduce(0, inverse, values, "amax")
    lo = torch.full((n,), math.inf, dtype=torch.float64).scatter_reduce(0, inverse, values, "amin")
    x = torch.where(torch.isfinite(hi), hi, 0.0)
    single = x.to(torch.float32).to(torch.float64) == x
    significand = (torch.frexp(x).mantissa.abs() * 2.0 ** 24).round().long()  # an integer below 2^24
    odd = torch.where(significand > 0, significand // (significand & -significand).clamp(min=1), 0)
    exact = (hi == lo) & single & (odd * sizes < 2 ** 24)
    return exact[inverse]


def _recompute(scores: torch.Tensor, group_ids: torch.Tensor, *, scaling: str, baseline: str, eps: float,
               singleton: str, batch_ids: torch.Tensor, whiten_eps: float | None = None) -> _Fit:
    if baseline == "loo":
        mean, _, size = group_stats(scores, group_ids)
        factor = torch.where(size > 1, size / (size - 1).clamp(min=1), 0.0)
        adv = factor * (scores - mean)
        bound = factor * (scores.abs() + mean.abs())
        if singleton == "raw":  # verl's rloo: a group of one keeps its score
            adv = torch.where(size > 1, adv, scores)
            bound = torch.where(size > 1, bound, scores.abs())
    else:
        norm = group_normalize(scores, group_ids, eps=eps, normalize_std=False, singleton=singleton)
        adv, mean = norm.normalized, norm.mean
        bound = scores.abs() + mean.abs()
        if scaling != "none":
            if scaling == "group":
                scale = norm.std + eps
            elif scaling == "population":
                scale = torch.where(norm.size > 1, norm.std * ((norm.size - 1) / norm.size).sqrt(), norm.std) + eps
            else:  # batch
                scale = _batch_stats(scores, batch_ids)[1] + eps
            adv, bound = adv / scale, bound / scale
    bound = torch.where(_exact_constant(scores, group_ids), 0.0, bound)
    if whiten_eps is not None:  # the batch's advantages whitened: (a - mean_b) / (std_b + eps)
        mb, sb = _batch_stats(adv, batch_ids)
        adv, bound = (adv - mb) / (sb + whiten_eps), (bound + mb.abs()) / (sb + whiten_eps)
    return _Fit(adv, bound + adv.abs())


def recompute_advantages(scores: torch.Tensor, group_ids: torch.Tensor, *, scaling: str = "group",
                         baseline: str = "mean", eps: float = 1e-6, singleton: str = "raw",
                         batch_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Outcome advantages of 1-D ``scores`` in the groups ``group_ids``, (B,) float64.

    ``baseline="mean"``: r - mean_g, divided by ``scaling``: ``"group"`` std_g + eps (unbiased,
    GRPO), ``"population"`` the biased std_g + eps, ``"batch"`` the unbiased std of the scores
    sharing ``batch_ids`` (default: the whole batch) + eps, ``"none"`` nothing (Dr. GRPO).
    ``baseline="loo"``: r - mean of the group's other members (RLOO; ``scaling`` ignored).
    ``singleton``: a group of one gets its raw score ("raw": verl, labkit) or 0 ("zero": TRL)."""
    scores = _float_vector("scores", scores)
    if not isinstance(group_ids, torch.Tensor) or group_ids.shape != scores.shape:
        raise ValueError(f"group_ids: expected a tensor shaped like scores {tuple(scores.shape)}")
    check_choice("scaling", scaling, _SCALINGS)
    check_choice("baseline", baseline, ("mean", "loo"))
    check_choice("singleton", singleton, ("raw", "zero"))
    eps = check_number("eps", eps, low=0.0)
    if batch_ids is None:
        batch_ids = torch.zeros_like(group_ids)
    elif not isinstance(batch_ids, torch.Tensor) or batch_ids.shape != scores.shape:
        raise ValueError(f"batch_ids: expected a tensor shaped like scores {tuple(scores.shape)}")
    return _recompute(scores, group_ids, scaling=scaling, baseline=baseline, eps=eps, singleton=singleton,
                      batch_ids=batch_ids).adv


def _float_vector(name: str, x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or not x.is_floating_point():
        raise TypeError(f"{name}: expected a 1-D float tensor, got {type(x).__name__}"
                        + (f" {x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else ""))
    return x.to(torch.float64)


def logged_advantages(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The framework's advantages, one per row: ``(values, present, spread)``, each (B,), or None
    when ``info`` has no ``advantages``.

    (B,) advantages (TRL) are the values themselves (``present`` all True, ``spread`` 0). (B, T)
    advantages (verl) are read on each row's generated positions: ``values`` the first one,
    ``spread`` max - min over them (0 for an outcome-level estimator, which paints one value on
    the whole response), ``present`` False for a row with nothing generated."""
    check_rollouts(rollouts, "rollouts")
    adv = rollouts.info.get("advantages")
    if adv is None:
        return None
    B, T = rollouts.batch_size, rollouts.horizon
    if not isinstance(adv, torch.Tensor) or not adv.is_floating_point() or tuple(adv.shape) not in ((B,), (B, T)):
        got = f"{adv.dtype} {tuple(adv.shape)}" if isinstance(adv, torch.Tensor) else type(adv).__name__
        raise ValueError(f"rollouts: info['advantages'] must be a float tensor of shape ({B},) or ({B}, {T}), got {got}")
    adv = adv.to(torch.float64)
    if not bool(torch.isfinite(adv).all()):
        raise ValueError("rollouts: info['advantages'] must be finite")
    if adv.dim() == 1:
        return adv, torch.ones(B, dtype=torch.bool), torch.zeros(B, dtype=torch.float64)
    mask = rollouts.mask
    present = mask.any(1)
    first = mask.to(torch.int64).argmax(1)
    values = torch.where(present, adv.gather(1, first[:, None])[:, 0], 0.0)
    hi = torch.where(mask, adv, -math.inf).amax(1)
    lo = torch.where(mask, adv, math.inf).amin(1)
    return values, present, torch.where(present, hi - lo, 0.0)


# --------------------------------------------------------------------------- groupings
def _same_partition(a: torch.Tensor, b: torch.Tensor) -> bool:
    _, a = torch.unique(a, return_inverse=True)
    _, b = torch.unique(b, return_inverse=True)
    n_a, n_b = int(a.max()) + 1 if a.numel() else 0, int(b.max()) + 1 if b.numel() else 0
    return n_a == n_b == torch.unique(a * n_b + b).numel()


def _ids(keys: list) -> torch.Tensor:
    table: dict = {}
    return torch.tensor([table.setdefault(k, len(table)) for k in keys], dtype=torch.int64)


def _block_groupings(batch_ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """Consecutive blocks of k rows restarting at every change of batch, for every k >= 2 that
    divides every batch's run of rows."""
    n = batch_ids.numel()
    starts = torch.ones(n, dtype=torch.bool)
    starts[1:] = batch_ids[1:] != batch_ids[:-1]
    run = torch.cumsum(starts.long(), 0) - 1
    first = torch.nonzero(starts).flatten()
    lengths = torch.diff(torch.cat([first, torch.tensor([n])])).tolist()
    pos = torch.arange(n) - first[run]
    g = math.gcd(*lengths)
    out = {}
    for k in range(2, g + 1):
        if g % k == 0:
            out[k] = run * (max(lengths) // k + 1) + pos // k
    return out


# --------------------------------------------------------------------------- the check
def _precision(values: torch.Tensor) -> str:
    return "float32" if bool((values.to(torch.float32).to(torch.float64) == values).all()) else "float64"


def _weight_candidates(k: int, default: tuple[float, ...]) -> list[tuple[float, ...]]:
    if k <= 3:
        grid = [w for w in itertools.product(WEIGHT_GRID, repeat=k) if any(w)]
    else:
        grid = [tuple(1.0 if j == i else 0.0 for j in range(k)) for i in range(k)]
        grid += [tuple(0.0 if j == i else 1.0 for j in range(k)) for i in range(k)]

    def simplicity(w):
        return (sum(x != 0 for x in w), sum(abs(math.log2(x)) for x in w if x))
    return [w for w in sorted(grid, key=simplicity) if w != default]


def _snap(w: torch.Tensor) -> tuple[float, ...]:
    """``w`` to two significant digits (entries under 1e-3 of the largest: 0)."""
    top = float(w.abs().max()) if w.numel() else 0.0
    out = []
    for x in w.tolist():
        if not math.isfinite(x) or abs(x) <= 1e-3 * top:
            out.append(0.0)
        else:
            out.append(round(x, 1 - math.floor(math.log10(abs(x)))))
    return tuple(out)


def _fitted_weights(centered: torch.Tensor, logged: torch.Tensor, units: torch.Tensor | None) -> list[tuple[float, ...]]:
    """Weights fitted to the advantages, to two significant digits (reward weights are set by
    hand: a fit that needs more digits is taken as chance, since K free weights can follow the
    scale of any K groups whose rewards vary in one function each). Without scaling (``units``
    None): least squares. With one unknown scale per unit (group or batch): the direction w
    minimising sum_u min_t |C_u w - t A_u|^2 (the smallest right singular vector once each unit's
    A is projected out), its largest or its smallest |weight| set to 1, times 1, 1/2, 2, 1/4 or 4
    (std scaling cancels a common factor up to eps, so the factor is searched)."""
    c, a = centered, logged
    if c.shape[0] < c.shape[1] or not bool(torch.isfinite(c).all()):
        return []
    if units is None:
        cands = [torch.linalg.lstsq(c, a[:, None]).solution[:, 0]]
    else:
        _, inv = torch.unique(units, return_inverse=True)
        G = int(inv.max()) + 1
        ac = torch.zeros(G, c.shape[1], dtype=c.dtype).index_add_(0, inv, a[:, None] * c)
        aa = torch.zeros(G, dtype=c.dtype).index_add_(0, inv, a * a)
        coef = torch.where(aa[:, None] > 0, ac / aa.clamp(min=1e-300)[:, None], 0.0)
        d = torch.linalg.svd(c - a[:, None] * coef[inv], full_matrices=False).Vh[-1]
        if float((a * (c @ d)).sum()) < 0:
            d = -d
        big = d.abs() > 1e-3 * d.abs().max()
        cands = [d / d.abs().max() * f for f in (1.0, 0.5, 2.0, 0.25, 4.0)]
        if bool(big.any()):
            cands += [d / d.abs()[big].min() * f for f in (1.0, 0.5, 2.0, 0.25, 4.0)]
    out = []
    for w in cands:
        v = _snap(w)
        if any(v) and v not in out:
            out.append(v)
    return out


def _sentence(cause: str, conv: Convention, check: dict) -> str:
    """The explanation of ``cause``: what reproduces the advantages, the setting, the fix."""
    fw, eps = conv.name, conv.eps
    setting = conv.setting(cause)
    how = f" ({setting})" if setting else ""
    k, scaling = check.get("group_size"), _SCALING_WORDS.get(check.get("scaling", "group"), "")
    if cause == "default":
        differ = (f" (its eps is 1e-6, {fw}'s {eps:g}: they differ by at most {check['labkit_max_diff']:.2g} here)"
                  if eps != 1e-6 else "")
        return (f"advantages match {fw}'s default GRPO{how}: (r - mean) / (std + {eps:g}) over the file's groups, "
                f"std unbiased; labkit's grpo is the matching estimator{differ}")
    if cause == "epsilon":
        other = _OTHER_EPS.get(eps, 1e-4)
        return (f"advantages match GRPO with eps = {other:g}, not {fw}'s {eps:g}: another trainer (or another "
                f"version) than {fw}'s default computed them; labkit's grpo(eps={other:g}) is the matching estimator")
    if cause == "std_off":
        return (f"advantages match std scaling off{how or ' (Dr. GRPO)'}: r - mean of the group; labkit's dr_grpo is "
                f"the matching estimator")
    if cause == "batch_std":
        return (f"advantages match the group mean divided by the whole batch's std{how or ' (a custom estimator)'}: "
                f"every group of a step is scaled alike; no labkit estimator divides by the batch's std (grpo divides "
                f"by each group's): compare with dr_grpo, which differs from it by one factor per step")
    if cause == "population_std":
        return ("advantages match GRPO with the biased (population) std: a trainer computing std with ddof=0 "
                "(numpy's default); TRL, verl and labkit's grpo use the unbiased one, larger by sqrt(n / (n - 1))")
    if cause == "rloo":
        return (f"advantages match a leave-one-out baseline{how or ' (RLOO)'}: r - mean of the group's other "
                f"members; labkit's rloo is the matching estimator")
    if cause == "rloo_normalized":
        return (f"advantages match a leave-one-out baseline whitened over the step's batch{how}: labkit's rloo, "
                f"then (a - mean) / (std + 1e-4) over the batch")
    if cause == "normalize_then_sum":
        return (f"advantages match each reward function normalised in its group, summed, then whitened over the "
                f"batch{how}: labkit has no such estimator; compare estimators on one reward function at a time")
    if cause == "group_size":
        return (f"advantages match groups of {k} consecutive rows ({scaling}), not the file's groups (sizes "
                f"{check['file_sizes']}): the trainer grouped rows differently from what the file records (e.g. one "
                f"prompt twice in one step's batch, or rows whose training step was lost); give every row its "
                f"trainer group as group_id (here: {k} consecutive rows) before comparing estimators")
    if cause == "pooled_steps":
        return (f"advantages match groups pooled across training steps (every row of a prompt, {scaling}): the "
                f"trainer kept one group per prompt over the steps; group the rows by prompt alone (group_id) to "
                f"compare estimators on its groups")
    if cause == "per_step":
        return (f"advantages match the file's groups split by training step ({scaling}): the trainer grouped a "
                f"prompt's completions per step; give every row its (step, prompt) as group_id")
    if cause == "reward_weights":
        names, w = check["weight_names"], check["weights"]
        ws = ", ".join(f"{x:.4g}" for x in w)
        alone = [n for n, x in zip(names, w) if x]
        what = f"only {alone[0]} (weights ({ws}))" if len(alone) == 1 else f"weights ({ws}) on ({', '.join(names)})"
        where = f"TRL reward_weights=[{ws}]" if fw == "TRL" else (setting or "a weighting of the reward")
        common = "; std scaling cancels a common factor of the weights, up to eps" if check["scaling"] != "none" else ""
        return (f"advantages match rewards summed with {what}, {scaling}: {where}{common}; labkit read the sum of "
                f"{', '.join(check['reward_columns'])}: rebuild the reward with these weights (the frameworks' "
                f"weights are not in their files) before comparing estimators")
    raise AssertionError(cause)


_SCALING_WORDS = {"group": "std scaling per group", "none": "std scaling off", "batch": "batch std scaling"}


@dataclass
class _Batch:
    """The rows a check compares, and what every hypothesis is computed from."""
    scores: torch.Tensor           # (n,) the reward labkit read, rows entering the statistics
    groups: torch.Tensor           # (n,) the file's groups
    batches: torch.Tensor          # (n,) training step (one batch when the file has none)
    parts: torch.Tensor | None     # (n, K) reward functions, a missing value as 0
    compared: torch.Tensor         # (n,) bool: rows with a logged value
    target: torch.Tensor           # the logged values of the compared rows
    unit: float                    # ulps * the precision's unit round-off
    conv: Convention

    def fit(self, scores: torch.Tensor | None = None, groups: torch.Tensor | None = None, **kw) -> _Fit:
        kw.setdefault("eps", self.conv.eps)
        kw.setdefault("singleton", self.conv.singleton)
        kw.setdefault("baseline", "mean")
        return _recompute(self.scores if scores is None else scores, self.groups if groups is None else groups,
                          batch_ids=self.batches, **kw)

    def score(self, fit: _Fit) -> tuple[float, float, float]:
        """(max |diff|, max of |diff| / tolerance, the tolerance of the row with the largest |diff|)
        over the compared rows."""
        d = (fit.adv[self.compared] - self.target).abs()
        tol = self.unit * fit.bound[self.compared]
        ratio = torch.where(d == 0, 0.0, d / tol.clamp(min=1e-300))
        worst = int(d.argmax())
        return float(d[worst]), float(ratio.max()), float(tol[worst])


def _alternative_groupings(rollouts: Rollouts, stat: torch.Tensor, batches: torch.Tensor, has_steps: bool,
                           groups: torch.Tensor) -> list[tuple[str, torch.Tensor, dict]]:
    """(cause, group ids of the statistics rows, detail) of every grouping other than the file's:
    blocks of k consecutive rows, a prompt's rows pooled over steps, the file's groups split by step."""
    out = []
    for k, blocks in _block_groupings(batches).items():
        if not _same_partition(blocks[stat], groups):
            out.append(("group_size", blocks[stat], {"group_size": k}))
    if has_steps and rollouts.prompts is not None:
        by_prompt = _ids(list(rollouts.prompts))[stat]
        if not _same_partition(by_prompt, groups):
            out.append(("pooled_steps", by_prompt, {}))
    if has_steps:
        split = _ids(list(zip(batches.tolist(), rollouts.group_ids.tolist())))[stat]
        if not _same_partition(split, groups):
            out.append(("per_step", split, {}))
    return out


def _weights_hypothesis(b: _Batch, columns: tuple[str, ...], names: tuple[str, ...]):
    """The best reweighting of the reward functions under group std, no std or batch std scaling:
    the grid first (simplest first), then the fitted weights; stops at the first that matches."""
    p = b.parts
    default_w = tuple(1.0 if n in columns else 0.0 for n in names)
    centered = p - torch.stack([group_stats(p[:, j], b.groups)[0] for j in range(p.shape[1])], 1)
    best = None
    for scaling, units in (("group", b.groups), ("none", None), ("batch", b.batches)):
        cands = _weight_candidates(p.shape[1], default_w)
        fitted = _fitted_weights(centered[b.compared], b.target, None if units is None else units[b.compared])
        cands += [w for w in fitted if w != default_w and w not in cands]
        for w in cands:
            r = b.score(b.fit(p @ torch.tensor(w, dtype=torch.float64), scaling=scaling))
            if best is None or r[1] < best[0][1]:
                best = (r, {"weights": w, "scaling": scaling, "weight_names": names, "reward_columns": columns})
            if r[1] <= 1:
                return best
    return best


def check_framework_advantages(rollouts: Rollouts, *, framework: str | None = None,
                               precision: str | None = None, ulps: float = ULPS) -> AdvantageCheck | None:
    """labkit's recomputation of the framework's logged advantages, and the cause when they differ.

    ``rollouts``: a batch read from a framework (``labkit.io.read_rollouts``) whose ``info`` holds
    ``advantages`` (None is returned when it does not); read from it: ``scores`` (the reward
    labkit read), ``group_ids``, and where present ``info['reward_parts']`` /
    ``reward_part_names`` / ``reward_columns`` (the reward functions), ``info['training_steps']``
    (a step's rows are one batch; without steps the whole file is) and ``prompts``.
    ``framework``: whose conventions to assume, "trl", "verl" or "other" (labkit's); default:
    ``info['format']``. ``precision``: the advantages' storage precision (default: float32 when
    every value is a float32 number, else float64). ``ulps``: units of round-off a row may differ
    by (module docstring).

    Every hypothesis of :data:`CAUSES` that the batch can express is tried (the module docstring's
    table); the simplest that reproduces every compared row within its tolerance is the cause.
    Cost: about a hundred recomputations of group statistics over the batch (the weights grid
    for two or three reward functions is most of them): a few seconds at 20,000 rows.
    Returns an :class:`AdvantageCheck`."""
    check_rollouts(rollouts, "rollouts")
    if framework is not None:
        check_choice("framework", framework, tuple(CONVENTIONS))
    if precision is not None:
        check_choice("precision", precision, tuple(PRECISIONS))
    ulps = check_number("ulps", ulps, low=0.0, low_open=True)
    logged = logged_advantages(rollouts)
    if logged is None:
        return None
    values, present, spread = logged
    fmt = framework or str(rollouts.info.get("format", "other"))
    conv = CONVENTIONS.get(fmt, CONVENTIONS["other"])
    name = conv.name if fmt in ("trl", "verl") else ("the framework" if fmt == "other" else fmt)
    adv_all = rollouts.info["advantages"].to(torch.float64)
    precision = precision or _precision(adv_all)
    unit = ulps * PRECISIONS[precision]
    B = rollouts.batch_size

    # labkit's grpo as is, on every generated position (per row for (B,) advantages)
    credit = grpo(rollouts)
    if adv_all.dim() == 1:
        labkit_diff = (credit.values[:, 0].to(torch.float64) - values).abs()[present]
    else:
        labkit_diff = (credit.token.to(torch.float64) - adv_all).abs()[rollouts.mask]
    labkit_max = float(labkit_diff.max()) if labkit_diff.numel() else 0.0
    notes = _notes(fmt, labkit_max)

    parts = rollouts.info.get("reward_parts")
    names = tuple(rollouts.info.get("reward_part_names", ()))
    stat = torch.ones(B, dtype=torch.bool)  # rows that enter the statistics
    if isinstance(parts, torch.Tensor) and parts.dim() == 2 and tuple(parts.shape) == (B, len(names)) and names:
        parts = parts.to(torch.float64)
        stat = ~torch.isnan(parts).all(1)  # TRL: advantage 0, left out of its group's statistics
        parts = torch.nan_to_num(parts, nan=0.0)
    else:
        parts, names = None, ()
    steps = rollouts.info.get("training_steps")
    has_steps = isinstance(steps, torch.Tensor) and tuple(steps.shape) == (B,)
    batches = steps.long() if has_steps else torch.zeros(B, dtype=torch.int64)
    compared = present[stat]
    base = dict(framework=name, rows=B, rows_compared=int(compared.sum()), precision=precision)
    within = None
    if adv_all.dim() == 2:
        within = float(spread[present].max()) if bool(present.any()) else 0.0
        row_tol = unit * values.abs()
        if bool((spread > row_tol)[present].any()):
            return AdvantageCheck(**base, matches=False, cause="token_level",
                                  explanation=(f"the advantages vary inside a response (by up to {within:.3g} on its "
                                               f"generated positions): not an outcome-level estimator (GAE, "
                                               f"REINFORCE++ returns, a token-level method); compare them with "
                                               f"labkit's token-level estimators, not with grpo"),
                                  max_diff=labkit_max, labkit_max_diff=labkit_max, default_max_diff=labkit_max,
                                  tolerance=float(row_tol[present].max()), hypotheses=(),
                                  within_response_spread=within, notes=notes)
    if base["rows_compared"] == 0:
        return AdvantageCheck(**base, matches=False, cause="nothing_to_compare",
                              explanation="no row has both a logged advantage and a reward: nothing to compare",
                              max_diff=0.0, labkit_max_diff=labkit_max, default_max_diff=0.0, tolerance=0.0,
                              hypotheses=(), within_response_spread=within, notes=notes)

    b = _Batch(rollouts.scores.to(torch.float64)[stat], rollouts.group_ids[stat], batches[stat],
               None if parts is None else parts[stat], compared, values[stat][compared], unit, conv)
    results: dict[str, tuple[tuple[float, float, float], dict]] = {}

    def consider(cause: str, f: _Fit, **detail) -> None:
        r = b.score(f)
        if cause not in results or r[1] < results[cause][0][1]:
            results[cause] = (r, detail)

    consider("default", b.fit(scaling="group"))
    consider("epsilon", b.fit(scaling="group", eps=_OTHER_EPS.get(conv.eps, 1e-4)))
    consider("std_off", b.fit(scaling="none"))
    consider("batch_std", b.fit(scaling="batch"))
    consider("population_std", b.fit(scaling="population"))
    consider("rloo", b.fit(scaling="none", baseline="loo"))
    consider("rloo_normalized", b.fit(scaling="none", baseline="loo", whiten_eps=1e-4))
    if b.parts is not None:
        # each reward function normalised in its group, summed, the sum whitened over its batch
        per_part = [b.fit(b.parts[:, j], scaling="group") for j in range(b.parts.shape[1])]
        whitened = _recompute(sum(f.adv for f in per_part), b.batches, scaling="group", baseline="mean",
                              eps=conv.eps, singleton="zero", batch_ids=b.batches)
        consider("normalize_then_sum", _Fit(whitened.adv, whitened.bound + sum(f.bound for f in per_part)))
    for cause, groups, detail in _alternative_groupings(rollouts, stat, batches, has_steps, b.groups):
        for scaling in ("group", "none"):
            consider(cause, b.fit(groups=groups, scaling=scaling), scaling=scaling, **detail)
    if b.parts is not None:
        columns = tuple(rollouts.info.get("reward_columns", names))
        found = _weights_hypothesis(b, columns, names)
        if found is not None:
            results["reward_weights"] = found

    order = [c for c in CAUSES if c in results]
    hypotheses = tuple((c, results[c][0][0]) for c in order)
    matching = [c for c in order if results[c][0][1] <= 1]
    default_diff = results["default"][0][0]
    if not matching:
        closest = min(order, key=lambda c: results[c][0][0])
        diff, _, tol = results[closest][0]
        explanation = (f"no hypothesis reproduces {name}'s advantages: the closest is {closest} (max |difference| "
                       f"{diff:.3g}, tolerance {tol:.2g}); other causes: a KL penalty or clipping in the reward, rows "
                       f"reordered or filtered after the advantages were computed, a custom estimator, or the reward "
                       f"read here not being the one trained on (reward=)")
        return AdvantageCheck(**base, matches=False, cause="unexplained", explanation=explanation, max_diff=diff,
                              labkit_max_diff=labkit_max, default_max_diff=default_diff, tolerance=tol,
                              hypotheses=hypotheses, within_response_spread=within, residual=diff, notes=notes)
    cause = matching[0]
    (diff, _, tol), detail = results[cause]
    sizes = torch.unique(b.groups, return_counts=True)[1]
    lo, hi = int(sizes.min()), int(sizes.max())
    explanation = _sentence(cause, conv, dict(detail, labkit_max_diff=labkit_max,
                                              file_sizes=f"{lo}" if lo == hi else f"{lo} to {hi}"))
    return AdvantageCheck(**base, matches=cause == "default", cause=cause, explanation=explanation, max_diff=diff,
                          labkit_max_diff=labkit_max, default_max_diff=default_diff, tolerance=tol,
                          hypotheses=hypotheses, also_consistent=tuple(matching[1:]),
                          group_size=detail.get("group_size"), weights=detail.get("weights"),
                          weight_names=tuple(detail.get("weight_names", ())), scaling=detail.get("scaling"),
                          within_response_spread=within, notes=notes)


def _notes(fmt: str, labkit_max: float) -> tuple[str, ...]:
    """Where labkit's grpo differs from the framework's conventions."""
    if fmt == "trl":
        return ("TRL's GRPO divides by std + 1e-4 (nanstd: unbiased, Bessel's correction) and gives a completion "
                "whose every reward function returned None advantage 0, outside its group's mean; labkit's grpo "
                f"divides by std + 1e-6 (unbiased): here they differ by at most {labkit_max:.2g}",)
    if fmt == "verl":
        return ("verl's compute_grpo_outcome_advantage uses torch.std (unbiased), eps 1e-6 and gives a group of one "
                "mean 0 and std 1: labkit's grpo follows it; verl computes in float32, labkit in float64",)
    return ()
