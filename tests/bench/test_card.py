"""The reporting checklist filled from bench records (labkit.bench.card), on real tiny-suite runs."""
from __future__ import annotations

import copy
import statistics

import pytest

from labkit.bench.card import ITEM_COLUMNS, STATUSES, checklist_card, load_definitions, write_card
from labkit.bench.records import COST_FIELDS, METRIC_FIELDS
from labkit.bench.run import run_suite
from labkit.bench.suite import run_cell, suite_tasks
from labkit.survey.checklist import load_checklist

ESTIMATORS = ("grpo", "vineppo", "shapley")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    res = run_suite("tiny", ",".join(ESTIMATORS), out, progress=False)
    return out, res["records"]


@pytest.fixture(scope="module")
def three_seeds():
    """grpo and vineppo on the tiny suite's chain task for seeds 0, 1, 2 (the suite has one)."""
    tasks, _ = suite_tasks("tiny")
    chain = tasks[0]
    recs = []
    for seed in (0, 1, 2):
        inst = chain.build(seed)
        recs += [run_cell("tiny", chain, name, seed, inst) for name in ("grpo", "vineppo")]
    return recs


def _item(items, key):
    row = items[items["key"] == key]
    assert len(row) == 1
    return row.iloc[0]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_every_checklist_key_appears_once_with_a_status(run, estimator):
    _, records = run
    markdown, items = checklist_card(records, estimator)
    keys = [it.key for it in load_checklist()]
    assert list(items.columns) == list(ITEM_COLUMNS)
    assert sorted(items["key"]) == sorted(keys) and items["key"].is_unique
    assert set(items["status"]) <= set(STATUSES)
    # a reason exactly where the item is not filled
    for row in items.itertuples():
        assert isinstance(row.reason, str) and (row.reason.strip() == "") == (row.status == "filled"), row
    # the card has one table row per item, under the estimator's name
    assert f"Reporting checklist: {estimator}" in markdown
    assert sum(line.startswith("| ") for line in markdown.splitlines()) == len(keys) + 1  # + header


def test_items_the_records_cannot_fill_are_missing_with_a_reason(run):
    _, records = run
    _, items = checklist_card(records, "vineppo")
    assert _item(items, "ablation").status == "missing"
    # exact Shapley is registered but has no row in the inventory: no family to report
    _, items = checklist_card(records, "shapley")
    assert _item(items, "family").status == "missing" and "methods.csv" in _item(items, "family").reason
    # an estimator that only ever was skipped: nothing about its credit can be reported
    skipped = [r for r in records if r["estimator"] == "grpo" or
               (r["estimator"] == "vineppo" and r["status"] == "skipped")]
    _, items = checklist_card(skipped, "vineppo")
    for key in ("granularity", "episode_baseline", "benchmarks", "variance", "ca_overhead", "mean_length"):
        row = _item(items, key)
        assert row.status == "missing" and "value_fn" in row.reason, key


def test_filled_items_come_from_the_records(run):
    _, records = run
    _, items = checklist_card(records, "vineppo")
    vine = [r for r in records if r["estimator"] == "vineppo" and r["status"] == "ok"]
    assert _item(items, "family").value.startswith("mc ")
    assert _item(items, "granularity").value.startswith(vine[0]["granularity"])
    assert _item(items, "episode_baseline").status == "filled"
    # vineppo's vines cost env steps grpo does not spend: an account of the difference, not a match
    eq = _item(items, "equal_compute")
    assert eq.status == "partial"
    grpo = {(r["task"], r["seed"]): r for r in records if r["estimator"] == "grpo"}
    mine = sum(r["cost"]["sampled_env_steps"] + r["cost"]["env_steps"] for r in vine)
    base = sum(grpo[(r["task"], r["seed"])]["cost"]["sampled_env_steps"] for r in vine)
    assert f"env steps: {mine:,} vs {base:,}" in eq.value
    defs = load_definitions()
    assert all(defs[m]["definition"] in _item(items, "metric").value for m in METRIC_FIELDS
               if any(r["metrics"][m] is not None for r in vine))
    # the baseline is itself the episode-level baseline; a baseline the run lacks is missing
    _, items = checklist_card(records, "grpo")
    assert _item(items, "episode_baseline").status == "filled"
    _, items = checklist_card(records, "vineppo", baseline="rloo")
    assert _item(items, "episode_baseline").status == "missing" and "rloo" in _item(items, "episode_baseline").reason


def test_variance_reports_the_number_of_seeds(run, three_seeds):
    _, records = run
    _, items = checklist_card(records, "vineppo")
    var = _item(items, "variance")
    assert var.status == "missing" and "1 seed," in var.value  # the tiny suite runs seed 0 only
    _, items = checklist_card(three_seeds, "vineppo")
    var = _item(items, "variance")
    assert var.status == "filled" and "3 seeds" in var.value
    xs = [r["metrics"]["rank_correlation"] for r in three_seeds if r["estimator"] == "vineppo"]
    assert f"rank_correlation {statistics.fmean(xs):.3f} ± {statistics.stdev(xs):.3g}" in var.value
    # two of three seeds: spread reported, but fewer than the survey's three
    _, items = checklist_card([r for r in three_seeds if r["seed"] < 2], "vineppo")
    assert _item(items, "variance").status == "partial" and "2 seeds" in _item(items, "variance").value


def test_length_distribution_is_read_from_the_records(three_seeds):
    recs = copy.deepcopy(three_seeds)
    for r in recs:
        r["trajectory_lengths"] = {"min": 6, "median": 6.0, "max": 6, "mean": 6.0}
    _, items = checklist_card(recs, "vineppo")
    row = _item(items, "length_distribution")
    assert row.status == "filled" and "min 6, median 6, max 6" in row.value
    recs[0]["trajectory_lengths"] = {"min": 1}
    with pytest.raises(ValueError, match="^records: item 0 .*trajectory_lengths"):
        checklist_card(recs, "vineppo")


def test_bad_input_names_the_argument(run, tmp_path):
    out, records = run
    with pytest.raises(ValueError, match="^estimator: no record for 'nope'"):
        checklist_card(records, "nope")
    with pytest.raises(ValueError, match="^records:"):
        checklist_card([], "grpo")
    broken = copy.deepcopy(records[0])
    broken["status"] = "done"
    with pytest.raises(ValueError, match="^records: item 0"):
        checklist_card([broken], "grpo")
    with pytest.raises(TypeError, match="^estimator:"):
        checklist_card(records, None)
    with pytest.raises(ValueError, match="^records_dir:"):
        write_card(tmp_path, "grpo", tmp_path / "card.md")  # an empty folder: no records


def test_write_card_writes_the_markdown(run, tmp_path):
    out, records = run
    path = write_card(out, "vineppo", tmp_path / "cards" / "vineppo.md")
    assert path.read_text(encoding="utf-8") == checklist_card(records, "vineppo")[0]


def test_every_metric_and_cost_field_has_a_definition():
    defs = load_definitions()
    for name in METRIC_FIELDS:
        assert defs[name]["kind"] == "metric" and defs[name]["definition"], name
    for name in COST_FIELDS:
        assert defs[name]["kind"] == "cost" and defs[name]["definition"], name
