"""The leaderboard: every estimator's mean metric per family, from a run's records."""
from __future__ import annotations

import math
from typing import Iterable

from labkit.bench.records import METRIC_FIELDS

__all__ = ["GROUPINGS", "leaderboard"]


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
