"""The leaderboard: every estimator's mean metric per family, from a run's records."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from labkit.bench.records import METRIC_FIELDS
from labkit.core.checks import check_int, check_number

__all__ = ["GROUPINGS", "leaderboard", "against_baseline"]


GROUPINGS = ("family", "world")


def leaderboard(records: Iterable[dict], *, metric: str = "rank_correlation", by: str = "family") -> dict[str, list[dict]]:
    """Per family (``by="family"``) or per world (``by="world"``: the task's ``env``, e.g.
    ArithmeticLM and BifurcationChain apart inside the reasoning family, whose scores are not on
    one scale: the LM's are one fixed batch of 32 reference rollouts), one row per estimator over its 'ok' records (every task and seed), best first:
    ``estimator``, ``mean`` and ``std`` (population) of ``metric``, ``n`` records, ``tasks``
    scored, and ``fed`` ("oracle" when any input came from the exact truth, "stand-in" when any
    came from a stand-in judge, "" otherwise: such rows say what the method does with perfect or
    simulated inputs, not what it does alone). Records whose metric is null are left out. A
    ValueError naming ``metric`` for one the records do not have."""
    if metric not in METRIC_FIELDS:
        raise ValueError(f"metric: expected one of {METRIC_FIELDS}, got {metric!r}")
    if by not in GROUPINGS:
        raise ValueError(f"by: expected one of {GROUPINGS}, got {by!r}")
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r.get("status") == "ok" and r["metrics"].get(metric) is not None:
            group = r["family"] if by == "family" else str(r["task_params"].get("env", r["task"]))
            groups.setdefault((group, r["estimator"]), []).append(r)
    board: dict[str, list[dict]] = {}
    for (family, name), rows in groups.items():
        vals = [float(r["metrics"][metric]) for r in rows]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        sources = " ".join(v for r in rows for v in r.get("inputs", {}).values())
        fed = "oracle" if "ORACLE" in sources else ("stand-in" if "STAND-IN" in sources else "")
        board.setdefault(family, []).append({"estimator": name, "mean": mean, "std": std, "n": len(vals),
                                             "tasks": len({r["task"] for r in rows}), "fed": fed})
    for rows in board.values():
        rows.sort(key=lambda row: (-row["mean"], row["estimator"]))
    return dict(sorted(board.items()))


def against_baseline(records: Iterable[dict], estimators: Sequence[str], *, baseline: str = "grpo",
                     family: str | None = None, metric: str = "rank_correlation", level: float = 0.95,
                     n_boot: int = 4000, seed: int = 0) -> list[dict]:
    """Each of ``estimators`` beside ``baseline`` on the cells (task, seed) where both scored
    (``family``: only that family's records; None: every family). Per estimator: ``cells``, its
    mean ``metric`` there, the baseline's, and ``diff`` = the mean of the per-cell differences
    with a ``level`` percentile bootstrap interval over the cells (``low``, ``high``; ``n_boot``
    resamples seeded ``seed``), and ``ahead``, the cells where it scored higher. Pairing by cell compares the two on the same sampled batches, so
    the batch-to-batch spread they share cancels. The cells are not independent draws of one
    setting (they mix tasks), so read the interval as how much the sample of batches moves the
    mean, not as a population claim. An estimator with no shared cell is left out."""
    if metric not in METRIC_FIELDS:
        raise ValueError(f"metric: expected one of {METRIC_FIELDS}, got {metric!r}")
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    cells: dict[str, dict[tuple[str, int], float]] = {}
    for r in records:
        if r.get("status") != "ok" or r["metrics"].get(metric) is None:
            continue
        if family is not None and r["family"] != family:
            continue
        cells.setdefault(r["estimator"], {})[(r["task"], int(r["seed"]))] = float(r["metrics"][metric])
    base = cells.get(baseline, {})
    rows = []
    for name in estimators:
        mine = cells.get(name, {})
        shared = sorted(set(mine) & set(base))
        if not shared:
            continue
        x = np.array([mine[c] for c in shared])
        y = np.array([base[c] for c in shared])
        d = x - y
        boot = d[np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))].mean(1)
        lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
        rows.append({"estimator": name, "cells": len(shared), "mean": float(x.mean()), baseline: float(y.mean()),
                     "diff": float(d.mean()), "low": float(lo), "high": float(hi), "ahead": int((d > 0).sum())})
    return rows
