"""The methods published after the survey, read off the cached full benchmark run in the notebook
where their family is taught: one table per notebook, the same columns everywhere.

``later_table(records, estimators, family=...)``: each method's mean rank correlation with the
exact truth beside GRPO's on the same batches (a paired difference with a 95% bootstrap interval
over the batches, ``labkit.bench.leaderboard.against_baseline``), its sign agreement, luck weight
and the extra work it did per batch, with its status and where its inputs came from.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from labkit.bench.leaderboard import against_baseline, leaderboard
from labkit.credit import spec

__all__ = ["later_table"]

# the extra work a method does beyond the sampled batch, summed per batch
_WORK = ("env_steps", "policy_forwards", "aux_calls")


def later_table(records: Iterable[dict], estimators: Sequence[str], *, family: str,
                baseline: str = "grpo") -> pd.DataFrame:
    """One row per estimator of ``estimators`` that scored in ``family`` (in the order given),
    from a benchmark run's ``records``: ``method`` (its inventory name, else its registered
    name), ``status``, ``fed`` ("oracle" / "stand-in" / "": where its inputs came from),
    ``cells`` (batches scored), ``rank_corr`` (mean rank correlation with the exact truth),
    ``vs_<baseline>`` (mean paired difference from ``baseline`` on the same batches) with
    ``low`` / ``high`` (its 95% bootstrap interval over the batches), ``sign`` (mean sign
    agreement), ``luck_weight`` (mean; None where the family has no skill/luck split) and
    ``work`` (mean env steps + policy forwards + auxiliary calls per batch beyond the sample)."""
    from labkit.survey import after_survey_estimators

    rows = list(records)
    names = after_survey_estimators()
    paired = {r["estimator"]: r for r in against_baseline(rows, estimators, baseline=baseline, family=family)}
    fed = {r["estimator"]: r["fed"] for r in leaderboard(rows).get(family, [])}
    out = []
    for name in estimators:
        if name not in paired:
            continue
        mine = [r for r in rows if r["estimator"] == name and r["family"] == family and r["status"] == "ok"]

        def mean(metric):
            vals = [r["metrics"][metric] for r in mine if r["metrics"].get(metric) is not None]
            return sum(vals) / len(vals) if vals else None

        p = paired[name]
        out.append({"method": names.get(name, name), "status": spec(name).status, "fed": fed.get(name, ""),
                    "cells": p["cells"], "rank_corr": p["mean"], f"vs_{baseline}": p["diff"], "low": p["low"],
                    "high": p["high"], "sign": mean("sign_agreement"), "luck_weight": mean("luck_weight"),
                    "work": sum(sum(r["cost"][k] for k in _WORK) for r in mine) / len(mine)})
    return pd.DataFrame(out)
