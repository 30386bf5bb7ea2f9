"""The leaderboard (labkit.bench.leaderboard): ordered by mean, oracle inputs flagged, worlds kept apart."""

import pytest

from labkit.bench import leaderboard, make_record
from labkit.bench.leaderboard import against_baseline


def _rec(family, estimator, task, rc, inputs=None, status="ok"):
    r = make_record(suite="s", task=task, family=family, task_params={}, estimator=estimator, seed=0,
                    granularity="token", metrics={"rank_correlation": rc, "sign_agreement": 0.5},
                    inputs=inputs, reason=None if status == "ok" else "x")
    return r


def test_leaderboard_orders_by_mean_and_flags_oracle_inputs():
    recs = [_rec("reasoning", "a", "t1", 0.2), _rec("reasoning", "a", "t2", 0.4),
            _rec("reasoning", "b", "t1", 0.9, {"values": "exact V (ORACLE, ...)"}),
            _rec("reasoning", "c", "t1", None, status="skipped"),
            _rec("agentic", "d", "t3", -0.1, {"grades": "STAND-IN judge"})]
    board = leaderboard(recs)
    assert list(board) == ["agentic", "reasoning"]
    assert [r["estimator"] for r in board["reasoning"]] == ["b", "a"]
    a = board["reasoning"][1]
    assert a["mean"] == pytest.approx(0.3) and a["std"] == pytest.approx(0.1) and a["n"] == 2 and a["tasks"] == 2
    assert board["reasoning"][0]["fed"] == "oracle" and board["agentic"][0]["fed"] == "stand-in" and a["fed"] == ""
    with pytest.raises(ValueError, match="^metric: "):
        leaderboard(recs, metric="accuracy")
    with pytest.raises(ValueError, match="^by: "):
        leaderboard(recs, by="task")


def test_leaderboard_by_world_keeps_the_reasoning_worlds_apart():
    recs = [_rec("reasoning", "a", "chain_T10", 0.2), _rec("reasoning", "a", "lm_reference", 0.8),
            _rec("reasoning", "b", "lm_reference", 0.5)]
    recs[0]["task_params"] = {"env": "BifurcationChain"}
    recs[1]["task_params"] = recs[2]["task_params"] = {"env": "ArithmeticLM"}
    board = leaderboard(recs, by="world")
    assert list(board) == ["ArithmeticLM", "BifurcationChain"]
    assert [(r["estimator"], r["mean"]) for r in board["ArithmeticLM"]] == [("a", 0.8), ("b", 0.5)]
    assert [r["mean"] for r in leaderboard(recs)["reasoning"] if r["estimator"] == "a"] == [pytest.approx(0.5)]


def test_against_baseline_pairs_by_cell_and_leaves_out_unshared_cells():
    def rec(est, task, seed, rc, family="agentic"):
        r = _rec(family, est, task, rc)
        r["seed"] = seed
        return r
    recs = [rec("grpo", "t1", 0, 0.1), rec("grpo", "t1", 1, 0.3), rec("grpo", "t2", 0, 0.5),
            rec("a", "t1", 0, 0.4), rec("a", "t1", 1, 0.4), rec("a", "t3", 0, 0.9),   # t3: no grpo cell
            rec("b", "t1", 0, 0.2, family="reasoning"), rec("grpo", "t1", 0, 0.0, family="reasoning")]
    rows = against_baseline(recs, ["a", "b", "missing"], family="agentic")
    assert [r["estimator"] for r in rows] == ["a"]
    a = rows[0]
    # cells (t1, 0) and (t1, 1): differences 0.3 and 0.1
    assert a["cells"] == 2 and a["mean"] == pytest.approx(0.4) and a["grpo"] == pytest.approx(0.2)
    assert a["diff"] == pytest.approx(0.2) and 0.1 - 1e-12 <= a["low"] <= a["diff"] <= a["high"] <= 0.3 + 1e-12
    both = against_baseline(recs, ["b"])
    assert both[0]["diff"] == pytest.approx(0.2) and both[0]["cells"] == 1   # the reasoning cell only
    with pytest.raises(ValueError, match="^metric: "):
        against_baseline(recs, ["a"], metric="accuracy")
