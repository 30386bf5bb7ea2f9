"""labkit.bench: records validate against the shipped schema, the CLI writes JSON + CSV and
resumes, bad arguments are named, and the exact advantage scores as a perfect estimator."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from labkit.bench import (estimator_names, load_schema, make_record, read_records, run_cell, run_suite, score,
                          suite_tasks, validate_record)
from labkit.bench.run import main
from labkit.core.credit import Credit

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("task_index", [0, 1])
def test_the_exact_advantage_scores_rank_correlation_one(task_index):
    tasks, seeds = suite_tasks("tiny")
    task = tasks[task_index]
    inst = task.build(seeds[0])
    exact = Credit.from_tokens(inst.rollouts, inst.truth, "exact")
    m = score(inst, exact)
    assert m["rank_correlation"] == pytest.approx(1.0)
    assert m["sign_agreement"] == pytest.approx(1.0)
    # and through the suite's own cell runner, as a callable "estimator"
    def exact_fn(rollouts):
        return Credit.from_tokens(rollouts, inst.truth, "exact")
    rec = run_cell("tiny", task, exact_fn, seeds[0], inst)
    assert rec["status"] == "ok" and rec["estimator"] == "exact_fn"
    assert rec["metrics"]["rank_correlation"] == pytest.approx(1.0)


def test_exact_shapley_is_perfect_on_the_team_task():
    tasks, seeds = suite_tasks("tiny")
    task = next(t for t in tasks if t.family == "multi-agent")
    rec = run_cell("tiny", task, "shapley", seeds[0])
    assert rec["status"] == "ok" and rec["metrics"]["rank_correlation"] == pytest.approx(1.0)


def test_an_inapplicable_estimator_is_skipped_with_its_reason():
    tasks, seeds = suite_tasks("tiny")
    team = next(t for t in tasks if t.family == "multi-agent")  # no critic for a team's agents
    rec = run_cell("tiny", team, "gae", seeds[0])
    assert rec["status"] == "skipped" and "values" in rec["reason"]
    validate_record(rec)


def test_a_missing_optional_input_is_a_skip_and_a_crash_is_an_error():
    tasks, seeds = suite_tasks("tiny")
    rec = run_cell("tiny", tasks[0], "capo", seeds[0])  # verdicts=None by default, but needed
    assert rec["status"] == "skipped" and rec["reason"].startswith("needs verdicts")
    validate_record(rec)

    def broken(rollouts):
        raise TypeError("an estimator with a bug")
    rec = run_cell("tiny", tasks[0], broken, seeds[0])
    assert rec["status"] == "error" and rec["reason"] == "TypeError: an estimator with a bug"
    assert rec["metrics"]["rank_correlation"] is None
    validate_record(rec)


def test_cli_writes_json_and_csv_and_resumes(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["--suite", "tiny", "--estimators", "grpo,vineppo,shapley,gae", "--out", str(out), "--no-progress"]) == 0
    recs = read_records(out)
    tasks, seeds = suite_tasks("tiny")
    assert len(recs) == len(tasks) * len(seeds) * 4
    for r in recs:
        validate_record(r)
    assert {r["family"] for r in recs} == {"reasoning", "agentic", "multi-agent"}
    rows = list(csv.DictReader(open(out / "records.csv")))
    assert [r["key"] for r in rows] == [r["key"] for r in recs]
    # a second run finds every cell done and recomputes nothing
    before = (out / "records.jsonl").read_text()
    res = run_suite("tiny", "grpo,vineppo,shapley,gae", out, progress=False)
    assert res["computed"] == 0 and (out / "records.jsonl").read_text() == before
    # a new estimator adds only its own cells
    res = run_suite("tiny", "grpo,rloo", out, progress=False)
    assert res["computed"] == len(tasks) * len(seeds)


def test_estimator_names():
    assert "grpo" in estimator_names("all")
    assert estimator_names(" grpo , rloo") == ["grpo", "rloo"]


@pytest.mark.parametrize("args,arg", [
    (["--suite", "huge"], "--suite"),
    (["--estimators", "grpo,nosuch"], "--estimators"),
    (["--estimators", ","], "--estimators"),
])
def test_cli_names_the_bad_argument(tmp_path, capsys, args, arg):
    with pytest.raises(SystemExit) as e:
        main(args + (["--out", str(tmp_path)] if "--out" not in args else []))
    assert e.value.code == 2
    assert arg in capsys.readouterr().err


def test_cli_names_an_unwritable_out(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit):
        main(["--suite", "tiny", "--estimators", "grpo", "--out", str(blocker / "sub")])
    assert "--out" in capsys.readouterr().err


def test_python_dash_m_runs(tmp_path):
    r = subprocess.run([sys.executable, "-m", "labkit.bench", "--suite", "tiny", "--estimators", "grpo",
                        "--out", str(tmp_path), "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])["estimator"] == "grpo"


def test_cli_writes_the_checklist_cards_it_is_asked_for(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["--suite", "tiny", "--estimators", "grpo,vineppo", "--out", str(out), "--no-progress",
                 "--card", "vineppo"]) == 0
    card = (out / "card_vineppo.md").read_text(encoding="utf-8")
    assert card.startswith("## Reporting checklist: vineppo") and "card_vineppo.md" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--suite", "tiny", "--estimators", "grpo", "--out", str(out), "--no-progress", "--card", "nope"])
    assert "--card: no estimator 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # shapley is registered, but this run has no record of it
        main(["--suite", "tiny", "--estimators", "grpo", "--out", str(tmp_path / "b"), "--no-progress",
              "--card", "shapley"])
    assert "--card: estimator:" in capsys.readouterr().err
