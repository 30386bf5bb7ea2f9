"""The later methods' table (labkit.course.later_methods): paired with GRPO by batch, one family."""
import pytest

from labkit.bench import make_record
from labkit.course.later_methods import later_table


def _rec(estimator, task, seed, rc, *, family="agentic", env_steps=0, inputs=None):
    r = make_record(suite="full", task=task, family=family, task_params={}, estimator=estimator, seed=seed,
                    granularity="turn", metrics={"rank_correlation": rc, "sign_agreement": 0.5, "luck_weight": 0.25},
                    cost={"env_steps": env_steps, "aux_calls": 1}, inputs=inputs)
    return r


def test_later_table_pairs_with_grpo_and_keeps_the_family_and_order():
    recs = [_rec("grpo", "t", 0, 0.1), _rec("grpo", "t", 1, 0.3),
            _rec("gigpo", "t", 0, 0.3, env_steps=10), _rec("gigpo", "t", 1, 0.3, env_steps=30),
            _rec("c3", "t", 0, 0.9, inputs={"env": "ORACLE, from the exact DP truth"}),
            _rec("gigpo", "u", 0, -1.0, family="reasoning"), _rec("grpo", "u", 0, 0.0, family="reasoning")]
    table = later_table(recs, ["c3", "gigpo", "never_ran"], family="agentic")
    assert list(table.method) == ["c3", "gigpo"]
    g = table.set_index("method").loc["gigpo"]
    assert g.cells == 2 and g.rank_corr == pytest.approx(0.3) and g.vs_grpo == pytest.approx(0.1)
    assert g.low <= g.vs_grpo <= g.high and g.sign == pytest.approx(0.5) and g.luck_weight == pytest.approx(0.25)
    assert g.work == pytest.approx(21.0)   # (10 + 1 + 30 + 1) / 2 batches
    assert table.set_index("method").loc["c3", "fed"] == "oracle"
