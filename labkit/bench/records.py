"""The benchmark's record: one per (task, estimator, seed), validated against the shipped schema.

A record holds the cell's identity (``key``), the task's family and parameters, the estimator's
name and the granularity it worked at, the metrics against exact truth, the cost (what the suite
sampled plus what the estimator reports spending beyond that, and wall seconds) and the versions
that produced it. The JSON Schema is ``data/bench/record.schema.json``; every record is checked
against it before it is written, so a results folder only ever holds valid records.
"""
from __future__ import annotations

import csv
import json
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import torch

import labkit
from labkit.core.paths import data_path, require_data

__all__ = ["SCHEMA_FILE", "JSONL", "CSV", "COST_FIELDS", "METRIC_FIELDS", "LENGTH_FIELDS", "cell_key", "make_record",
           "load_schema", "validate_record", "read_records", "append_record", "write_csv"]

SCHEMA_FILE = ("bench", "record.schema.json")
JSONL = "records.jsonl"
CSV = "records.csv"
METRIC_FIELDS = ("rank_correlation", "sign_agreement", "recall_at_k", "gradient_cosine", "gradient_variance",
                 "luck_weight")
LENGTH_FIELDS = ("min", "median", "max", "mean")
COST_FIELDS = ("sampled_trajectories", "sampled_env_steps", "policy_forwards", "policy_tokens", "env_steps",
               "env_resets", "aux_calls", "wall_seconds")


def cell_key(suite: str, task: str, estimator: str, seed: int) -> str:
    """The identity of one cell: a record with this key in a results folder is not recomputed."""
    return f"{suite}/{task}/{estimator}/{int(seed)}"


def make_record(*, suite: str, task: str, family: str, task_params: dict, estimator: str, seed: int,
                granularity: str | None = None, metrics: dict | None = None, cost: dict | None = None,
                reason: str | None = None, error: bool = False, trajectory_lengths: dict | None = None,
                unit: str = "tokens", inputs: dict | None = None) -> dict:
    """A record as a plain dict; ``reason`` set means the cell did not run (metrics are then null):
    status 'skipped' when the task lacks an input the estimator needs, 'error' (``error=True``)
    when the estimator raised on the task's rollouts. ``trajectory_lengths`` ({min, median, max,
    mean} of the batch's generated lengths, in ``unit``: tokens, turns or agents) defaults to
    zeros; ``inputs`` maps each option the estimator was given to where it came from."""
    metrics = {m: None for m in METRIC_FIELDS} | dict(metrics or {})
    full_cost = {c: 0 for c in COST_FIELDS} | dict(cost or {})
    full_cost["wall_seconds"] = float(full_cost["wall_seconds"])
    return {"key": cell_key(suite, task, estimator, seed), "suite": suite, "task": task, "family": family,
            "task_params": dict(task_params), "estimator": estimator, "seed": int(seed),
            "status": "ok" if reason is None else ("error" if error else "skipped"), "reason": reason,
            "granularity": granularity, "metrics": metrics, "cost": full_cost,
            "trajectory_lengths": {k: float((trajectory_lengths or {}).get(k, 0.0)) for k in LENGTH_FIELDS},
            "unit": unit, "inputs": {str(k): str(v) for k, v in (inputs or {}).items()},
            "labkit_version": labkit.__version__, "torch_version": torch.__version__}


@lru_cache(maxsize=1)
def load_schema() -> dict:
    """The record's JSON Schema (draft 2020-12), read from ``data/bench/record.schema.json``."""
    path = require_data(data_path(*SCHEMA_FILE), "the bench record schema")
    return json.loads(path.read_text())


def validate_record(record: dict) -> dict:
    """Check ``record`` against the schema; a ValueError names the offending field (e.g.
    ``record.metrics.rank_correlation``) and says what is wrong. Returns the record."""
    import jsonschema  # only needed where records are checked

    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(record), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        err = errors[0]
        field = ".".join(["record", *map(str, err.absolute_path)])
        raise ValueError(f"{field}: {err.message}")
    return record


def read_records(out_dir: Path) -> list[dict]:
    """The records already in ``out_dir``'s records.jsonl (an empty list if there is none)."""
    path = Path(out_dir) / JSONL
    if not path.exists():
        return []
    records = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"out: {path} line {i} is not JSON ({e.msg}); move the file away to start over") from None
    return records


def append_record(out_dir: Path, record: dict) -> None:
    """Validate ``record`` and append it to records.jsonl (one line, so an interrupted run keeps
    every finished cell)."""
    validate_record(record)
    with open(Path(out_dir) / JSONL, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def _flat(record: dict) -> dict:
    row = {k: v for k, v in record.items() if k not in ("metrics", "cost", "task_params", "inputs")}
    row["task_params"] = json.dumps(record["task_params"], sort_keys=True)
    row["inputs"] = json.dumps(record["inputs"], sort_keys=True)
    row.pop("trajectory_lengths")
    row.update({f"length_{k}": v for k, v in record["trajectory_lengths"].items()})
    row.update(record["metrics"])
    row.update({f"cost_{k}": v for k, v in record["cost"].items()})
    return row


def write_csv(out_dir: Path, records: Iterable[dict]) -> Path:
    """Write records.csv: one row per record, metrics and cost flattened into columns."""
    rows = [_flat(r) for r in records]
    path = Path(out_dir) / CSV
    columns = list(_flat(make_record(suite="x", task="x", family="reasoning", task_params={}, estimator="x",
                                     seed=0)).keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path
