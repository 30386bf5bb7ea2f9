"""Running a suite into a results folder, resumably, and the command line around it."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from labkit.bench.records import JSONL, append_record, cell_key, read_records, write_csv
from labkit.bench.suite import SUITES, estimator_names, iter_cells, run_cell, suite_tasks
from labkit.core.cache import read_cache
from labkit.core.paths import data_path
from labkit.core.progress import progress_bar
from labkit.credit import ESTIMATORS

__all__ = ["run_suite", "main", "load_full_run"]


def _out_dir(out) -> Path:
    """``out`` created if needed and checked writable; a ValueError naming ``out`` otherwise."""
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"out: {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"out: cannot create {path} ({e.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"out: {path} is not writable")
    return path


def run_suite(suite: str = "quick", estimators: str | Sequence[str] = "all", out=".", *,
              progress: bool = True) -> dict:
    """Run every cell of ``suite`` not already recorded in ``out``; returns ``{"records": all
    records now in out, "computed": how many this call added, "out": the folder}``.

    Each finished cell is appended to records.jsonl at once (an interrupted run loses at most
    the cell in flight); records.csv is rewritten from all records at the end."""
    suite_tasks(suite)  # a bad suite is reported before anything is written
    names = estimator_names(estimators)
    path = _out_dir(out)
    done = {r.get("key") for r in read_records(path)}
    todo = [c for c in iter_cells(suite, names) if cell_key(suite, c[0].name, c[1], c[2]) not in done]
    instances = {}
    for task, name, seed in progress_bar(todo, desc=f"bench {suite}", enabled=progress):
        if (task.name, seed) not in instances:
            # one sampled batch per (task, seed), shared by every estimator; drop the previous
            # task's batches since cells come task-major
            instances = {k: v for k, v in instances.items() if k[0] == task.name}
            instances[(task.name, seed)] = task.build(seed)
        append_record(path, run_cell(suite, task, name, seed, instances[(task.name, seed)]))
    records = read_records(path)
    write_csv(path, records)
    return {"records": records, "computed": len(todo), "out": path}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m labkit.bench --suite quick|full|tiny --estimators all|NAME,... --out DIR
    [--card NAME,...]``: run (or resume) the suite, then write each named estimator's reporting
    checklist card to ``DIR/card_<NAME>.md`` (``labkit.bench.card``)."""
    parser = argparse.ArgumentParser(prog="python -m labkit.bench",
                                     description="Score every applicable credit estimator against exact truth.")
    parser.add_argument("--suite", default="quick", help=f"one of {sorted(SUITES)} (default quick)")
    parser.add_argument("--estimators", default="all", help="'all' or comma-separated registered names")
    parser.add_argument("--out", default="bench_results", help="results folder (records.jsonl, records.csv)")
    parser.add_argument("--card", default="", help="comma-separated estimators whose reporting checklist "
                                                   "card to write as DIR/card_<NAME>.md after the run")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    args = parser.parse_args(argv)
    cards = [c.strip() for c in args.card.split(",") if c.strip()]
    unknown = [c for c in cards if c not in ESTIMATORS]
    if unknown:
        parser.error(f"--card: no estimator {unknown[0]!r}; known: {sorted(ESTIMATORS)}")
    try:
        res = run_suite(args.suite, args.estimators, args.out, progress=not args.no_progress)
    except ValueError as e:
        arg = str(e).split(":", 1)[0]
        parser.error(f"--{arg}: {str(e).split(':', 1)[1].strip()}" if arg in ("suite", "estimators", "out") else str(e))
    recs = res["records"]
    counts = {s: sum(r["status"] == s for r in recs) for s in ("ok", "skipped", "error")}
    print(f"{res['computed']} cells computed, {len(recs)} records in {res['out'] / JSONL} "
          f"({counts['ok']} ok, {counts['skipped']} skipped, {counts['error']} error)", file=sys.stderr)
    from labkit.bench.card import write_card  # the card reads the inventory: only when asked for
    for name in cards:
        try:
            path = write_card(res["out"], name, res["out"] / f"card_{name}.md")
        except ValueError as e:  # e.g. the run has no record of that estimator
            parser.error(f"--card: {e}")
        print(f"checklist card for {name}: {path}", file=sys.stderr)
    return 0


def load_full_run(path: Path | None = None) -> tuple[list[dict], dict]:
    """The cached full run (``scripts/build_bench_full.py`` writes it to ``path``, default
    ``data/bench/full``, the run notebooks 07-10 read): its records and its meta.json (suite, counts, ``wall_seconds`` of the
    build). Raises if the run is missing, foreign or stale (its LM task read the tiny model, its
    reward models and tuned copies: ``labkit.core.cache``)."""
    meta, files = read_cache(path if path is not None else data_path("bench", "full"), script="build_bench_full.py",
                             files=[JSONL], what="cached full bench run")
    return read_records(files[JSONL].parent), meta
