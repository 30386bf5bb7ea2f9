"""Notebook 11's runner module: the shipped samples read, diagnosed and compared; every format
round-trips; bad arguments name themselves."""
from __future__ import annotations

import json

import pytest
import torch

from labkit.core.stats import constant_groups
from labkit.course import nb11_your_rollouts as lesson
from labkit.io import read_rollouts


def test_first_record_is_the_file_line_with_lists_cut():
    shown = json.loads(lesson.first_record("toolworld", keep=3))
    with open(lesson.sample_path("toolworld"), encoding="utf-8") as fh:
        full = json.loads(fh.readline())
    assert shown.keys() == full.keys()
    assert shown["tokens"] == full["tokens"][:3] + ["..."] and shown["reward"] == full["reward"]


def test_a_bad_record_is_refused_with_its_line_and_field():
    msg = lesson.bad_record_message()
    assert msg.startswith("source: line 2, field 'rewards'") and "<tmp>/run.jsonl" in msg


def test_measured_table_counts_what_the_rollouts_hold():
    dx = lesson.diagnosis("arithmetic_lm")
    ro = read_rollouts(lesson.sample_path("arithmetic_lm"))
    table = dict(lesson.measured_table(dx).values.tolist())
    assert table["trajectories"] == f"{ro.batch_size:,}"
    lengths = ro.lengths
    assert table["generated tokens: min / median / max"].startswith(f"{int(lengths.min())} / ")
    zero = constant_groups(ro.scores, ro.group_ids)
    assert f"{zero.double().mean().item():.1%} of trajectories get no GRPO gradient" in table["zero-variance groups"]


def test_the_tree_path_says_where_each_answer_came_from():
    path = lesson.tree_path(lesson.diagnosis("toolworld"))
    assert list(path.columns) == ["question", "answer", "evidence", "source"]
    assert set(path.source) <= {"measured", "given", "assumed"} and (path.source == "measured").any()


def test_pair_disagreement_orders_trajectories_and_checks_names():
    dx = lesson.diagnosis("toolworld")
    order = lesson.pair_disagreement(dx, "grpo", "gigpo")
    assert order.disagreement.is_monotonic_decreasing and len(order) == len(dx.comparison.sample_rollouts)
    # identical estimators never disagree
    assert float(lesson.pair_disagreement(dx, "grpo", "grpo").disagreement.max()) == 0.0
    with pytest.raises(ValueError, match="^b"):
        lesson.pair_disagreement(lesson.diagnosis("arithmetic_lm"), "grpo", "gigpo")  # no anchor keys there


def test_disputed_heatmaps_summarise_the_pair():
    chart, summary = lesson.disputed_heatmaps(lesson.diagnosis("arithmetic_lm"), "grpo", "carl", rows=3)
    assert "rank correlation of grpo and carl" in summary and chart is not None
    with pytest.raises(ValueError, match="^rows"):
        lesson.disputed_heatmaps(lesson.diagnosis("arithmetic_lm"), "grpo", "carl", rows=0)


def test_every_format_round_trips_the_samples():
    for name in lesson.SAMPLES:
        table = lesson.format_round_trip(read_rollouts(lesson.sample_path(name)))
        assert list(table.format) == ["jsonl", "parquet", "verl", "trl"] and table["same batch"].all()


def test_an_unknown_sample_names_the_argument():
    with pytest.raises(ValueError, match="^name"):
        lesson.sample_path("my_run")


def test_constant_groups_rule():
    s = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.3, 0.1 + 0.2, 2.0, 0.5, 0.5 + 1e-6], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1, 2, 2, 3, 4, 4])
    # round-off is no spread (GRPO's advantages ~1e-10 there); 1e-6 is (about 0.4 after GRPO's std division)
    assert constant_groups(s, g).tolist() == [True, True, False, False, True, True, False, False, False]
    assert constant_groups(s, g, tol=0.0).tolist()[4:6] == [False, False]
    with pytest.raises(ValueError, match="^tol"):
        constant_groups(s, g, tol=-1.0)
    with pytest.raises(ValueError, match="^group_ids"):
        constant_groups(s, g[:3])


def test_a_sample_is_refused_once_the_model_that_wrote_it_changed(monkeypatch):
    from labkit.core import cache
    assert lesson.sample_path("toolworld").name == "toolworld.jsonl"
    monkeypatch.setattr(cache, "file_sha256", lambda path: "0" * 64)
    with pytest.raises(ValueError, match=r"^name: .*stale.*python scripts/build_sample_rollouts\.py"):
        lesson.sample_path("arithmetic_lm")


def test_disputed_prompt_answers_read_the_diagnosis():
    dx = lesson.diagnosis("arithmetic_lm")
    ans = lesson.disputed_prompt_answers(dx, "grpo", "carl", rows=3)
    comp, ro = dx.comparison, dx.comparison.sample_rollouts
    assert ans["corr"] == float(comp.agreement.loc["grpo", "carl"])
    assert ans["rows"] == lesson.pair_disagreement(dx, "grpo", "carl")["row"].head(3).tolist()
    top = ans["rows"][0]
    assert ans["text"] and "<eos>" not in ans["text"] and "".join(ro.text[top]).startswith(ans["text"])
    assert len(ans["entropy"]) == 3 and all(e >= 0 for e in ans["entropy"])
    assert ans["a_min"] <= ans["a_credit"] and ans["max_abs_b"] >= 0
    assert ans["b_updates"] in ("none", "some", "all") and (ans["b_updates"] == "none") == (ans["max_abs_b"] == 0)
    if ans["lone_failures"]:   # a lone failure: its group's other members all succeeded
        g = ro.group_ids == ro.group_ids[top]
        assert float(ro.scores[top]) == 0 and float(ro.scores[g].sum()) == int(g.sum()) - 1
    assert set(ans["others"]) == {"reinforce", "tempo"}
    assert ans["others"]["tempo"]["corr"] == float(comp.agreement.loc["grpo", "tempo"])
    assert ans["others"]["reinforce"]["credit"] == pytest.approx(float(ro.scores[top]))   # REINFORCE credit = reward
    # an estimator against itself: correlation 1, nothing disputed
    same = lesson.disputed_prompt_answers(dx, "grpo", "grpo", others=())
    assert same["corr"] == pytest.approx(1.0) and same["others"] == {}
    with pytest.raises(ValueError, match="^b"):
        lesson.disputed_prompt_answers(dx, "grpo", "no_such_estimator")
    with pytest.raises(ValueError, match="^rows"):
        lesson.disputed_prompt_answers(dx, rows=0)


def test_the_trl_run_grouped_three_ways():
    dx = lesson.trl_diagnosis()
    table = lesson.grouping_table(dx)
    shares = dict(zip(table["grouped by"], table["zero-variance share"]))
    logged = lesson.trl_logged_zero_share()
    # labkit's reading of the files is TRL's own logged share; merging the steps is not
    assert shares["training step and prompt (labkit)"] == f"{sum(logged.values()) / len(logged):.2%}"
    assert shares["prompt alone (steps merged)"] != shares["training step and prompt (labkit)"]
    assert dx.steps is not None and len(dx.steps.table) == len(logged)
    assert "Most groups give no gradient" in set(lesson.flag_table(dx)["red flag"])


def test_every_misconfigured_run_is_named_for_its_setting():
    table = lesson.credit_check_table().set_index("run")
    assert table.loc["trl_grpo", "matches TRL's default"] and table.loc["trl_grpo", "cause found"] == "default"
    expected = {"trl_scale_none": "std_off", "trl_scale_batch": "batch_std", "trl_rloo": "rloo",
                "trl_reward_weights": "reward_weights", "trl_normalize_then_sum": "normalize_then_sum",
                "trl_duplicate_prompts": "group_size"}
    assert {k: table.loc[k, "cause found"] for k in expected} == expected
