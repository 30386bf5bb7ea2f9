"""Estimators compared on data without ground truth: which ones the data supports, how far their
credit agrees, and on which trajectories the choice of estimator matters most.

What each registered estimator needs is part of its spec (``labkit.credit.spec(name)``):
``needs``, the features the rollouts must show (:data:`FEATURES` holds the test that reads each
off a batch), and ``inputs``, the options that no rollout file can hold (a value function, a
critic, an environment, a judge). An estimator runs when it needs no input and the data shows
every feature it needs; it runs with its defaults.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.credit import ESTIMATORS, estimate, spec
from labkit.credit.registry import FEATURES as FEATURE_DESCRIPTIONS
from labkit.credit.registry import INPUT_KINDS, EstimatorSpec
from labkit.diagnose.measure import measure_rewards
from labkit.diagnose.results import INTERMEDIATE_MIN_SHARE
from labkit.diagnose.tally import Tally

__all__ = ["FEATURES", "data_features", "tally_features", "supported_estimators", "not_supported_reason",
           "sample_groups", "sample_rows", "compare_sample", "EstimatorComparison", "compare_estimators",
           "agreement_matrix", "disagreement", "average_ranks"]

# how a batch shows each feature of the registry's vocabulary
_FEATURE_TESTS: dict[str, Callable[[Rollouts], bool]] = {
    "groups": lambda r: bool((torch.unique(r.group_ids, return_counts=True)[1] >= 2).any()),
    "anchor_keys": lambda r: r.anchor_keys is not None,
    "entropies": lambda r: r.entropies is not None,
    "logprobs": lambda r: r.logprobs is not None,
    "states": lambda r: r.states is not None,
    "turns": lambda r: int(r.n_turns.max()) > 1,
    "agents": lambda r: int(r.agent_ids.max()) >= 1,
    "intermediate_rewards": lambda r: measure_rewards(r).intermediate,
}
# where a diagnosis draws the line for a feature the registry describes without one
_THRESHOLDS = {"intermediate_rewards": f" in >= {INTERMEDIATE_MIN_SHARE:.0%} of trajectories"}

#: What a batch can show (the registry's features), each with its description and the test that
#: reads it off a ``Rollouts``.
FEATURES: dict[str, tuple[str, Callable[[Rollouts], bool]]] = {
    name: (desc + _THRESHOLDS.get(name, ""), _FEATURE_TESTS[name]) for name, desc in FEATURE_DESCRIPTIONS.items()}


def data_features(rollouts: Rollouts) -> dict[str, bool]:
    """Which of :data:`FEATURES` the batch shows."""
    check_rollouts(rollouts)
    return {name: bool(test(rollouts)) for name, (_, test) in FEATURES.items()}


def tally_features(tally: Tally) -> dict[str, bool]:
    """:func:`data_features` of everything a :class:`~labkit.diagnose.measure.Tally` measured
    (e.g. every chunk of a file): the same answers as on the batch those chunks make up."""
    if not isinstance(tally, Tally):
        raise TypeError(f"tally: expected a Tally, got {type(tally).__name__}")
    found = {
        "groups": bool((tally.group_sizes() >= 2).any()),
        "anchor_keys": "anchor_keys" in tally.fields,
        "entropies": "entropies" in tally.fields,
        "logprobs": "logprobs" in tally.fields,
        "states": "states" in tally.fields,
        "turns": tally.max_turns > 1,
        "agents": tally.max_agent >= 1,
        "intermediate_rewards": tally.rewards().intermediate,
    }
    return {name: found[name] for name in FEATURES}


def supported_estimators(rollouts: Rollouts | None, estimators: Sequence[str] | None = None,
                         specs: Mapping[str, EstimatorSpec] | None = None, *,
                         features: dict[str, bool] | None = None) -> tuple[list[str], dict[str, str]]:
    """Split estimators into those the data supports and the others with the reason.

    ``estimators``: registered names to consider (default: every registered estimator, in
    registry order). ``specs``: {name: spec} to decide by instead of the registry's (a
    what-if: an estimator that claimed to need less). ``features``: the data's features
    measured elsewhere (:func:`tally_features` of a whole file, when ``rollouts`` is None or
    only a sample of it). Returns ``(runnable, {name: reason})``.
    """
    if features is None:
        feats = data_features(check_rollouts(rollouts))
    else:
        if not isinstance(features, dict) or set(features) != set(FEATURES):
            raise ValueError(f"features: expected a dict with the keys {sorted(FEATURES)}, got {features!r}")
        feats = features
    names = list(ESTIMATORS) if estimators is None else _check_names(estimators)
    if specs is not None and not isinstance(specs, Mapping):
        raise TypeError(f"specs: expected a dict {{name: EstimatorSpec}}, got {type(specs).__name__}")
    run, not_run = [], {}
    for name in names:
        reason = not_supported_reason(specs[name] if specs and name in specs else spec(name), feats)
        if reason is None:
            run.append(name)
        else:
            not_run[name] = reason
    return run, not_run


def not_supported_reason(estimator: EstimatorSpec, features: dict[str, bool]) -> str | None:
    """Why data with ``features`` ({feature: shown}) cannot run ``estimator`` with its defaults,
    or None when it can: the inputs no rollout file holds first, else the features the data
    lacks."""
    if not isinstance(estimator, EstimatorSpec):
        raise TypeError(f"estimator: expected an EstimatorSpec (labkit.credit.spec(name)), "
                        f"got {type(estimator).__name__}")
    if estimator.inputs:
        kinds = dict.fromkeys(estimator.inputs.values())
        return f"needs {', '.join(estimator.inputs)}: " + "; ".join(INPUT_KINDS[k].description for k in kinds)
    lacking = [f for f in estimator.needs if not features[f]]
    if lacking:
        return "the data lacks " + "; ".join(FEATURES[f][0] for f in lacking)
    return None


def _check_names(estimators) -> list[str]:
    if isinstance(estimators, str) or not all(isinstance(n, str) for n in estimators):
        raise TypeError(f"estimators: expected a list of registered names, got {estimators!r}")
    unknown = [n for n in estimators if n not in ESTIMATORS]
    if unknown:
        raise ValueError(f"estimators: no estimator {unknown[0]!r}; known: {sorted(ESTIMATORS)}")
    if not estimators:
        raise ValueError("estimators: give at least one name (or None for all)")
    return list(estimators)


def sample_groups(rollouts: Rollouts, size: int | None, seed: int = 0) -> torch.Tensor:
    """Row indices of whole task groups drawn at random (seeded) until about ``size`` rows,
    in the batch's order; every row when ``size`` is None or at least the batch size. Whole
    groups, because group-relative estimators compare a trajectory with its group."""
    check_rollouts(rollouts)
    return sample_rows(rollouts.group_ids, size, seed)


def sample_rows(group_ids: torch.Tensor, size: int | None, seed: int = 0) -> torch.Tensor:
    """:func:`sample_groups` from the group id of every trajectory alone (a (B,) integer
    tensor), so a file can be sampled from what a streaming pass kept (``Tally.group_ids``).

    The draw depends only on the multiset of groups and their sizes and on ``seed``: the
    distinct ids in sorted order are shuffled by a seeded permutation and taken until their
    sizes add up to ``size`` or more; which chunk a trajectory came in does not matter."""
    if not isinstance(group_ids, torch.Tensor) or group_ids.dim() != 1:
        raise TypeError(f"group_ids: expected a 1-D integer tensor, got {type(group_ids).__name__}")
    B = group_ids.numel()
    if size is None or size >= B:
        return torch.arange(B)
    size = check_int("sample", size, low=1)
    groups, inv = torch.unique(group_ids, return_inverse=True)
    g = torch.Generator().manual_seed(int(seed))
    order = torch.randperm(groups.numel(), generator=g)
    sizes = torch.bincount(inv, minlength=groups.numel())[order]
    keep_n = int(torch.searchsorted(sizes.cumsum(0), torch.tensor(size))) + 1
    keep = torch.zeros(groups.numel(), dtype=torch.bool)
    keep[order[:keep_n]] = True
    return keep[inv].nonzero().squeeze(1)


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks 0..n-1 of a 1-D tensor, ties sharing the mean of their ranks (Spearman's ranks)."""
    order = torch.argsort(x, stable=True)
    _, inverse, counts = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    first = (torch.cumsum(counts, 0) - counts).to(torch.float64)
    ranks = torch.empty(x.numel(), dtype=torch.float64)
    ranks[order] = (first + (counts.to(torch.float64) - 1) / 2)[inverse]
    return ranks


def agreement_matrix(credits: dict[str, torch.Tensor], mask: torch.Tensor) -> pd.DataFrame:
    """Spearman rank correlation between every pair of estimators' credit over the generated
    positions (``mask``): the same number as ``labkit.scoring.rank_correlation(a, b, mask)``,
    with each estimator's ranks computed and standardised once and every pair in one matrix
    product. A constant credit ranks nothing: its correlations are 0 (as in
    ``rank_correlation``), and 1 with itself."""
    names = list(credits)
    rows = []
    for n in names:
        r = average_ranks(credits[n][mask].to(torch.float64))
        r -= r.mean()
        norm = float(r.norm())
        rows.append(r / norm if norm > 1e-9 else torch.zeros_like(r))
    z = torch.stack(rows)
    out = (z @ z.T).clamp(-1.0, 1.0).numpy()
    np.fill_diagonal(out, 1.0)
    return pd.DataFrame(out, index=names, columns=names)


def rms_scaled(credit: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``credit`` (float64, 0 off ``mask``) divided by its root mean square over the generated
    positions: estimators differ in scale (GRPO divides by a std, REINFORCE does not), so the
    comparisons look at where credit lands, not how large it is. An all-zero credit (or a batch
    with nothing generated) stays as it is."""
    c = torch.where(mask, credit.to(torch.float64), 0.0)
    n_pos = float(mask.sum())
    rms = math.sqrt(float((c ** 2).sum()) / n_pos) if n_pos else 0.0
    return c / rms if rms > 0 else c


def disagreement(credits: dict[str, torch.Tensor], mask: torch.Tensor) -> pd.DataFrame:
    """Per-trajectory disagreement between estimators.

    Each estimator's credit is first divided by its root mean square over all generated
    positions of the batch (so an estimator that scales everything by 10 does not count as
    disagreeing; an all-zero credit stays 0). At each generated position, take the standard
    deviation (population) of the scaled credits across estimators; a trajectory's
    ``disagreement`` is the mean of that over its generated positions: 0 when every estimator
    pushes each position by the same relative amount. ``sign_conflict`` is the share of its
    generated positions where one estimator pushes up and another down (credit above +0.05 and
    below -0.05 after scaling). Returns one row per trajectory (``row`` = position in the
    batch), sorted by disagreement, largest first; rows with nothing generated are left out.
    """
    m = mask.to(torch.float64)
    s = torch.stack([rms_scaled(c, mask) for c in credits.values()])  # (E, B, T)
    spread = s.std(0, unbiased=False) * m
    conflict = ((s > 0.05).any(0) & (s < -0.05).any(0) & mask).to(torch.float64)
    length = m.sum(1)
    has = length > 0
    rows = has.nonzero().squeeze(1)
    df = pd.DataFrame({"row": rows.numpy(),
                       "disagreement": (spread.sum(1)[has] / length[has]).numpy(),
                       "sign_conflict": (conflict.sum(1)[has] / length[has]).numpy(),
                       "generated": length[has].to(torch.long).numpy()})
    return df.sort_values(["disagreement", "row"], ascending=[False, True], kind="stable").reset_index(drop=True)


@dataclass
class EstimatorComparison:
    """What :func:`compare_estimators` returns.

    ``ran``: names that produced credit; ``skipped``: {name: error message} for those the
    specs allowed but that raised on the data; ``not_supported``: {name: reason} from the
    specs. ``rows``: indices (into the diagnosed batch) of the compared sample; ``credit``:
    {name: (n, T) token credit} on it; ``agreement``: the rank-correlation matrix;
    ``disagreement``: :func:`disagreement`'s table with ``row`` mapped to the diagnosed batch
    and ``sample_row`` the row in ``sample_rollouts`` (the compared sample).
    """
    ran: list[str]
    skipped: dict[str, str]
    not_supported: dict[str, str]
    rows: torch.Tensor
    credit: dict[str, torch.Tensor] = field(repr=False)
    agreement: pd.DataFrame | None
    disagreement: pd.DataFrame | None
    sample_rollouts: Rollouts | None = field(default=None, repr=False)


def compare_estimators(rollouts: Rollouts, estimators: Sequence[str] | None = None, *,
                       sample: int | None = 2048, seed: int = 0, progress=None,
                       specs: Mapping[str, EstimatorSpec] | None = None) -> EstimatorComparison:
    """Run every estimator the data supports on a sample of whole groups and compare them.

    ``estimators``: names to consider (default all registered); ``sample``: about this many
    trajectories, whole groups drawn at random with ``seed`` (None: all). ``progress``: a
    tqdm-like wrapper for the loop over estimators, or None. An estimator the specs allow but
    that raises (a ValueError or TypeError on this data) is reported in ``skipped`` with its
    message; it never stops the comparison. ``specs``: {name: spec} to decide by instead of
    the registry's (as in :func:`supported_estimators`).
    """
    check_rollouts(rollouts)
    run, not_run = supported_estimators(rollouts, estimators, specs)
    rows = sample_groups(rollouts, sample, seed)
    sub = rollouts if rows.numel() == rollouts.batch_size else rollouts.select(rows)
    return compare_sample(sub, rows, run, not_run, progress=progress)


def compare_sample(sub: Rollouts, rows: torch.Tensor, run: Sequence[str], not_run: dict[str, str], *,
                   progress=None) -> EstimatorComparison:
    """Run the estimators ``run`` on the sample ``sub`` (rows ``rows`` of the diagnosed batch or
    file) and compare them; ``not_run`` is passed through (:func:`supported_estimators`'s
    reasons). What :func:`compare_estimators` does once the sample is drawn; a file's diagnosis
    calls it on the sample read with ``read_rollouts(rows=...)``."""
    check_rollouts(sub, "the compared sample")
    if not isinstance(rows, torch.Tensor) or rows.numel() != sub.batch_size:
        raise ValueError(f"rows: expected a tensor of {sub.batch_size} row numbers (one per sampled trajectory)")
    credit, skipped = {}, {}
    todo = progress(run) if progress is not None else run
    for name in todo:
        try:
            credit[name] = estimate(name, sub).token.detach()
        except (ValueError, TypeError, RuntimeError) as err:
            skipped[name] = f"{type(err).__name__}: {err}"
    agree = dis = None
    if credit:
        agree = agreement_matrix(credit, sub.mask)
        dis = disagreement(credit, sub.mask) if len(credit) >= 2 else None
        if dis is not None:
            dis.insert(1, "sample_row", dis["row"])
            dis["row"] = rows[torch.tensor(dis["sample_row"].to_numpy())].numpy()
    return EstimatorComparison(list(credit), skipped, dict(not_run), rows, credit, agree, dis, sub)
