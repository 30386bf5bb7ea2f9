"""labkit.diagnose.training_steps: the run per training step, and drift named where it happens."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labkit.diagnose.training_steps import DRIFT_RULES, run_steps


def rows(steps: int = 8, per: int = 8, zero=None, length=None, score=None) -> pd.DataFrame:
    """A synthetic row table: ``per`` trajectories a step in groups of 4."""
    s = np.repeat(np.arange(1, steps + 1), per)
    zero = np.zeros(steps) if zero is None else np.asarray(zero, dtype=float)
    length = np.full(steps, 100) if length is None else np.asarray(length)
    score = np.full(steps, 0.5) if score is None else np.asarray(score, dtype=float)
    z = np.concatenate([np.arange(per) < round(zero[i] * per) for i in range(steps)])
    return pd.DataFrame({"group": np.arange(steps * per) // 4, "score": np.repeat(score, per) + 0 * z,
                         "generated": np.repeat(length, per), "episode": np.repeat(length, per),
                         "nonzero": np.ones(steps * per, bool), "step": s, "zero_variance": z})


def test_no_step_or_one_step_is_no_run():
    r = rows()
    assert run_steps(r.drop(columns="step")) is None
    assert run_steps(r[r["step"] == 1]) is None


def test_a_climbing_zero_variance_share_is_named_with_its_step():
    r = run_steps(rows(zero=[0, 0, 0.25, 0.5, 0.75, 1, 1, 1]))
    assert list(r.table["zero_variance_share"]) == [0, 0, 0.25, 0.5, 0.75, 1, 1, 1]
    (d,) = [d for d in r.drifts if d.quantity == "zero_variance_share"]
    # windows of 2 steps: 0 -> 1; past halfway (0.5) first at step 4
    assert (d.start, d.end, d.step) == (0.0, 1.0, 4) and "rises from 0%" in d.text and "step 4" in d.text
    assert r.windows == ((1, 2), (7, 8))


def test_flat_quantities_do_not_drift_and_small_moves_stay_under_the_threshold():
    assert run_steps(rows()).drifts == ()
    under = DRIFT_RULES["length_median"][1] * 100 * 0.9
    assert run_steps(rows(length=[100] * 4 + [100 + under] * 4)).drifts == ()
    over = run_steps(rows(length=[100] * 4 + [200] * 4, score=[0] * 4 + [1] * 4))
    assert {d.quantity for d in over.drifts} == {"length_median", "reward_mean"}
    assert "median generated length rises from 100.0 tokens" in over.drifts[0].text


def test_truncation_needs_the_cap_and_counts_against_it():
    r = rows(length=[50, 60, 70, 80, 90, 100, 100, 100])
    assert "truncated_share" not in run_steps(r).table
    t = run_steps(r, max_length=100, unit="character")
    assert list(t.table["truncated_share"]) == [0, 0, 0, 0, 0, 1, 1, 1]
    assert any(d.quantity == "truncated_share" for d in t.drifts)
    with pytest.raises(ValueError, match="^max_length:"):
        run_steps(r, max_length=0)
