"""The benchmark run (labkit.bench.run): the CLI writes JSON + CSV and resumes, names bad arguments,
writes the checklist cards asked for; the shipped full run is complete and valid.
"""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.bench import read_records, run_suite, suite_tasks, validate_record
from labkit.bench.run import main


ROOT = Path(__file__).resolve().parents[2]


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


def test_the_shipped_full_run_is_complete_and_valid():
    import json

    from labkit.bench import estimator_names, read_records
    from labkit.core.paths import data_path

    folder = data_path("bench", "full")
    recs = read_records(folder)
    meta = json.loads((folder / "meta.json").read_text())
    tasks, seeds = suite_tasks("full")
    # every task x seed x estimator of the run once; a registered estimator the run predates is no
    # error (adding an estimator needs no data rebuild: the wiring tests say which ones it lacks),
    # an estimator no longer registered, or a task or seed of the suite missing, is
    ran = sorted({r["estimator"] for r in recs})
    assert set(ran) <= set(estimator_names("all")), \
        f"the shipped run names estimators that are not registered: {sorted(set(ran) - set(estimator_names('all')))}"
    cells = {(r["task"], r["seed"], r["estimator"]) for r in recs}
    assert len(cells) == len(recs) == meta["records"] == len(tasks) * len(seeds) * len(ran), \
        "the cached full run is stale (a task or seed was added): rerun scripts/build_bench_full.py"
    assert {t for t, _, _ in cells} == {t.name for t in tasks} and {s for _, s, _ in cells} == set(seeds)
    assert {s: sum(r["status"] == s for r in recs) for s in ("ok", "skipped", "error")} == meta["counts"]
    assert meta["wall_seconds"] > 0 and meta["torch_threads"] == 1
    for r in recs[::7]:  # a spread sample: validating all 2793 takes longer than a unit test should
        validate_record(r)
    assert {r["unit"] for r in recs} == {"tokens", "turns", "agents"}
