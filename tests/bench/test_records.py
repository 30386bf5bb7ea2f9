"""Benchmark records (labkit.bench.records): they validate against the shipped schema, bad ones are refused
naming the field.
"""

import pytest

from labkit.bench import load_schema, make_record, run_cell, suite_tasks, validate_record


def _record(**kw):
    base = dict(suite="s", task="t", family="reasoning", task_params={"horizon": 5}, estimator="grpo", seed=0,
                granularity="episode", metrics={"rank_correlation": 0.5, "sign_agreement": 0.9, "recall_at_k": None},
                cost={"sampled_trajectories": 8, "wall_seconds": 0.1})
    return make_record(**(base | kw))


def test_schema_is_draft_2020_12():
    assert load_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_a_good_record_validates_and_a_skipped_one_too():
    validate_record(_record())
    validate_record(_record(granularity=None, metrics=None, reason="needs values"))


@pytest.mark.parametrize("change,field", [
    (lambda r: r["metrics"].__setitem__("rank_correlation", 1.5), "record.metrics.rank_correlation"),
    (lambda r: r.__setitem__("family", "robotics"), "record.family"),
    (lambda r: r["cost"].pop("env_steps"), "record.cost"),
    (lambda r: r["cost"].__setitem__("aux_calls", -1), "record.cost.aux_calls"),
    (lambda r: r.__setitem__("surprise", 1), "record"),
])
def test_a_bad_record_is_refused_naming_the_field(change, field):
    rec = _record()
    change(rec)
    with pytest.raises(ValueError, match=rf"^{field.replace('.', '[.]')}: "):
        validate_record(rec)


def test_a_skipped_record_needs_its_reason():
    rec = _record(reason="x")
    rec["reason"] = None
    with pytest.raises(ValueError, match="record.reason"):
        validate_record(rec)


SEED = suite_tasks("tiny")[1][0]


def test_a_record_without_the_median_length_is_refused(tiny):
    (task, inst), seed = tiny["reasoning"], SEED
    rec = run_cell("tiny", task, "grpo", seed, inst)
    rec["trajectory_lengths"].pop("median")
    with pytest.raises(ValueError, match="^record.trajectory_lengths: "):
        validate_record(rec)
