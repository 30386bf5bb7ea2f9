"""The survey's reporting checklist (Appendix C), filled from a bench run's records.

``checklist_card(records, estimator)`` reads the records of one run and, for every item of
``data/inventory/checklist.csv``, says whether the run can report it (``filled``), can report
part of it (``partial``) or cannot (``missing``, with the reason) - the way the survey's Table 12
audits HICRA, GiGPO and M-GRPO. The Markdown it returns is a card a user can paste into a paper.
Metric and cost definitions are data (``data/bench/definitions.csv``); the methodology family
comes from the method inventory (``data/methods.csv`` and ``data/inventory/baselines.csv``,
matched on the ``labkit_function`` column).

Only records are read: nothing here runs an estimator. Conventions a run can use to fill more:

* an *ablation* of estimator ``X`` is any record whose estimator is named ``X_ablation...``
  (the same method with only its credit-assignment component removed);
* a tiny-LM task names its model in ``task_params["model"]`` (and optionally ``checkpoint``,
  ``n_params``) and its data split in ``task_params["split"]``;
* ``record["trajectory_lengths"]`` (keys min/median/max/mean) gives the length distribution.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Iterable

import pandas as pd

from labkit.core.paths import data_path, require_data
from labkit.credit import ESTIMATORS
from labkit.bench.records import COST_FIELDS, METRIC_FIELDS, read_records, validate_record
from labkit.survey import load_baselines, load_methods
from labkit.survey.checklist import load_checklist

__all__ = ["STATUSES", "ITEM_COLUMNS", "load_definitions", "checklist_card", "write_card"]

STATUSES = ("filled", "partial", "missing")
ITEM_COLUMNS = ("key", "category", "priority", "item", "status", "value", "reason")
# cost counts the estimator spends beyond the shared batch (wall seconds are reported apart)
_OWN_COUNTS = tuple(c for c in COST_FIELDS if not c.startswith("sampled_") and c != "wall_seconds")
_MARK = {"filled": "✓ filled", "partial": "◐ partial", "missing": "✗ missing"}
_LENGTH_KEYS = ("min", "median", "max", "mean")


def _read_csv(parts: tuple[str, ...], what: str) -> list[dict]:
    path = require_data(data_path(*parts), what)
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def load_definitions() -> dict[str, dict]:
    """The exact definition of every bench metric and cost field, by name, from
    ``data/bench/definitions.csv`` (columns name, kind, definition)."""
    rows = _read_csv(("bench", "definitions.csv"), "the bench metric definitions")
    return {r["name"]: {"kind": r["kind"], "definition": r["definition"]} for r in rows}


def _checklist() -> list[dict]:
    return [item._asdict() for item in load_checklist()]


def _inventory_row(estimator: str) -> dict | None:
    """The inventory row whose ``labkit_function`` is the registered estimator's function."""
    fn = ESTIMATORS.get(estimator)
    if fn is None:
        return None
    target = f"{fn.__module__}.{getattr(fn, '__wrapped__', fn).__name__}"
    for table in (load_methods(), load_baselines()):
        rows = table[table["labkit_function"] == target]
        if len(rows):
            return rows.iloc[0].to_dict()
    return None


def _fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _int(x: float) -> str:
    return f"{int(x):,}"


def _check_records(records) -> list[dict]:
    if isinstance(records, (str, bytes, dict)) or not isinstance(records, Iterable):
        raise TypeError(f"records: expected a list of bench records (dicts), got {type(records).__name__}")
    out = list(records)
    if not out:
        raise ValueError("records: empty; run labkit.bench.run_suite first")
    for i, r in enumerate(out):
        if not isinstance(r, dict):
            raise TypeError(f"records: item {i} is a {type(r).__name__}, not a record dict")
        try:
            validate_record(r)
        except ValueError as e:
            raise ValueError(f"records: item {i} ({r.get('key')}) is not a valid record: {e}") from None
    return out


def checklist_card(records, estimator: str, *, baseline: str = "grpo") -> tuple[str, pd.DataFrame]:
    """Fill the reporting checklist for ``estimator`` from a bench run's ``records``.

    Returns ``(markdown, items)``: ``items`` has one row per checklist key (columns
    :data:`ITEM_COLUMNS`, all text; status one of :data:`STATUSES`, ``reason`` non-empty exactly
    when the status is not 'filled'), ``markdown`` the card. ``baseline`` is the episode-level estimator the
    baseline items compare against on the same tasks and seeds. A ValueError names ``estimator``
    when no record holds it, ``records`` when the records are empty or invalid.
    """
    recs = _check_records(records)
    for name, value in (("estimator", estimator), ("baseline", baseline)):
        if not isinstance(value, str) or not value:
            raise TypeError(f"{name}: expected an estimator's name (a non-empty str), got {value!r}")
    mine = [r for r in recs if r["estimator"] == estimator]
    if not mine:
        raise ValueError(f"estimator: no record for {estimator!r}; the records hold "
                         f"{sorted({r['estimator'] for r in recs})}")
    ok = [r for r in mine if r["status"] == "ok"]
    not_run = [r for r in mine if r["status"] != "ok"]
    cell = lambda r: (r["suite"], r["task"], r["seed"])  # noqa: E731
    tasks = {}  # task name -> (family, params), in record order
    for r in ok:
        tasks.setdefault(r["task"], (r["family"], r["task_params"]))
    no_run_reason = (f"no record of {estimator} ran (" +
                     "; ".join(sorted({f"{r['task']}: {r['status']}, {r['reason']}" for r in not_run}))[:300] + ")")
    items: dict[str, tuple[str, str, str | None]] = {}

    def put(key, status, value, reason=None):
        items[key] = (status, value, "" if status == "filled" else (reason or "not reported"))

    # ---- model & data: the policy that produced the batches, the worlds and sample sizes
    if not ok:
        put("base_model", "missing", "", no_run_reason)
        put("training_data", "missing", "", no_run_reason)
    else:
        models, lm_without_ckpt, no_model = [], [], []
        for t, (_, p) in tasks.items():
            if "model" in p:
                models.append(f"{t}: {p['model']}" + (f" ({p['n_params']} parameters)" if "n_params" in p else "")
                              + (f", checkpoint {p['checkpoint']}" if "checkpoint" in p else ""))
                if "checkpoint" not in p and "n_params" not in p:
                    lm_without_ckpt.append(t)
            elif "policy" in p:
                models.append(f"{t}: {p['policy']} policy")
            elif "strength" in p:
                models.append(f"{t}: scripted {p.get('env', '')} policy, strength {p['strength']:g}")
            else:
                no_model.append(t)
        if no_model and not models:
            put("base_model", "missing", "", f"no task's parameters name its model or policy ({', '.join(no_model)})")
        elif no_model or lm_without_ckpt:
            put("base_model", "partial", "; ".join(models),
                (f"no model or policy named for {', '.join(no_model)}" if no_model else "")
                + ("; " if no_model and lm_without_ckpt else "")
                + (f"no parameter count or checkpoint for {', '.join(lm_without_ckpt)}" if lm_without_ckpt else ""))
        else:
            put("base_model", "filled", "; ".join(models))
        sizes = defaultdict(set)
        for r in ok:
            sizes[r["task"]].add(r["cost"]["sampled_trajectories"])
        data, lm_without_split = [], []
        for t, (fam, p) in tasks.items():
            world = ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("policy", "model", "checkpoint", "n_params"))
            n = "/".join(str(s) for s in sorted(sizes[t]))
            data.append(f"{t} ({fam}): {world}; {n} sampled trajectories per seed")
            if "model" in p and "split" not in p:
                lm_without_split.append(t)
        if lm_without_split:
            put("training_data", "partial", "; ".join(data), f"no data split recorded for {', '.join(lm_without_split)}")
        else:
            put("training_data", "filled", "; ".join(data) + "; batches sampled from the worlds, nothing filtered")

    # ---- credit method: the level the estimator worked at, the inventory's family
    inv = _inventory_row(estimator)
    levels = sorted({r["granularity"] for r in ok})
    if ok:
        gran = f"{', '.join(levels)} (the level the run's credit was computed at)"
        if inv is not None:
            gran += f"; inventory: {inv['granularity']}"
        put("granularity", "filled", gran)
    else:
        put("granularity", "missing", "", no_run_reason)
    if inv is not None:
        src = inv.get("name", estimator)
        put("family", "filled", f"{inv['methodology_family']} ({src} in the survey inventory)")
    else:
        put("family", "missing", "", f"{estimator} has no row in data/methods.csv or data/inventory/baselines.csv "
                                     "(a registered labkit_function); add one to place it in the taxonomy")

    # ---- baselines: the same cells run with the baseline, and what each side spent
    base_ok = {cell(r): r for r in recs if r["estimator"] == baseline and r["status"] == "ok"}
    shared = [(r, base_ok[cell(r)]) for r in ok if cell(r) in base_ok]
    if estimator == baseline and ok:
        put("episode_baseline", "filled", f"{estimator} is itself the episode-level baseline")
        put("equal_compute", "filled", f"{estimator} is itself the baseline (same cells, same budget)")
    elif not ok:
        put("episode_baseline", "missing", "", no_run_reason)
        put("equal_compute", "missing", "", no_run_reason)
    elif not shared:
        why = f"no ok record of the baseline {baseline!r} on the tasks and seeds {estimator} ran on"
        put("episode_baseline", "missing", "", why)
        put("equal_compute", "missing", "", why)
    else:
        v = (f"{baseline} on the same batches (same task, seed and sampled rollouts): "
             f"{len(shared)} of {len(ok)} cells")
        if len(shared) == len(ok):
            put("episode_baseline", "filled", v)
        else:
            put("episode_baseline", "partial", v, f"{len(ok) - len(shared)} of {estimator}'s cells have no {baseline} run")

        def total(r):  # everything either method paid for: the shared batch plus its own extra
            c = r["cost"]
            return {"env steps": c["sampled_env_steps"] + c["env_steps"], "policy forwards": c["policy_forwards"],
                    "env resets": c["env_resets"], "aux calls": c["aux_calls"]}
        same = all(total(a) == total(b) for a, b in shared)
        sums = {k: (sum(total(a)[k] for a, _ in shared), sum(total(b)[k] for _, b in shared)) for k in total(shared[0][0])}
        parts = [f"{k}: {_int(x)} vs {_int(y)}" + (f" ({x / y:.3g}x)" if y else "") for k, (x, y) in sums.items() if x or y]
        account = f"{estimator} vs {baseline} over the shared cells, " + "; ".join(parts)
        if same:
            put("equal_compute", "filled", account + " (identical budgets)")
        else:
            put("equal_compute", "partial", account,
                "budgets differ (an explicit account, not a compute-controlled baseline: the run scores "
                "credit on one shared batch and does not give the baseline more rollouts)")

    ablations = sorted({r["estimator"] for r in recs if r["estimator"].startswith(f"{estimator}_ablation")
                        and r["status"] == "ok"})
    if ablations:
        put("ablation", "filled", ", ".join(ablations))
    else:
        put("ablation", "missing", "", f"the records hold no ablation of {estimator} (a run with only its "
                                       f"credit component removed, named '{estimator}_ablation...')")

    # ---- evaluation: tasks, metric definitions, spread over seeds
    defs = load_definitions()
    if ok:
        seeds_by_task = defaultdict(set)
        for r in ok:
            seeds_by_task[r["task"]].add(r["seed"])
        suites = sorted({r["suite"] for r in ok})
        put("benchmarks", "filled", f"suite {', '.join(suites)}: " + "; ".join(
            f"{t} ({fam}, seeds {', '.join(map(str, sorted(seeds_by_task[t])))})" for t, (fam, _) in tasks.items()))
        used = [m for m in METRIC_FIELDS if any(r["metrics"][m] is not None for r in ok)]
        undefined = [m for m in used if m not in defs]
        text = "; ".join(f"{m}: {defs[m]['definition']}" for m in used if m in defs)
        if undefined:
            put("metric", "partial", text, f"no definition in data/bench/definitions.csv for {', '.join(undefined)}")
        else:
            put("metric", "filled", text)
        spread, n_seeds = [], []
        for t in tasks:
            rs = [r for r in ok if r["task"] == t]
            n_seeds.append(len({r["seed"] for r in rs}))
            stats = []
            for m in METRIC_FIELDS:
                xs = [r["metrics"][m] for r in rs if r["metrics"][m] is not None]
                if xs:
                    sd = statistics.stdev(xs) if len(xs) > 1 else float("nan")
                    stats.append(f"{m} {statistics.fmean(xs):.3f} ± {_fmt(sd)}")
            spread.append(f"{t}: {n_seeds[-1]} seed{'s' * (n_seeds[-1] != 1)}, " + ", ".join(stats))
        value = "mean ± std over seeds (sample std); " + "; ".join(spread)
        least = min(n_seeds)
        if least >= 3:
            put("variance", "filled", value)
        elif max(n_seeds) >= 2:
            put("variance", "partial", value, f"fewer than 3 seeds (at least {least}) on some task")
        else:
            put("variance", "missing", value, "1 seed per task: no spread over seeds")
    else:
        for k in ("benchmarks", "metric", "variance"):
            put(k, "missing", "", no_run_reason)

    # ---- compute: what the run spent, and what credit assignment itself cost
    wall = sum(r["cost"]["wall_seconds"] for r in mine)
    cpu_only = all("+cpu" in r["torch_version"] for r in mine)
    totals = {c: sum(r["cost"][c] for r in ok) for c in COST_FIELDS if c != "wall_seconds"}
    summary = f"{len(mine)} cells, {wall:.3g} s wall for the estimator; " + ", ".join(
        f"{c} {_int(v)}" for c, v in totals.items())
    if cpu_only:
        put("gpu_hours", "filled", f"0 GPU-hours (torch {mine[0]['torch_version']}, a CPU-only build; a scoring "
                                  "run, no training); " + summary)
    else:
        put("gpu_hours", "partial", summary, "the records hold wall seconds but not the device they ran on")
    if ok:
        own = {c: sum(r["cost"][c] for r in ok) for c in _OWN_COUNTS}
        per = sum(r["cost"]["sampled_trajectories"] for r in ok)
        put("ca_overhead", "filled", "beyond the sampled rollouts: " + ", ".join(
            f"{c} {_int(v)} ({v / per:.3g} per sampled trajectory)" for c, v in own.items())
            + f"; {sum(r['cost']['wall_seconds'] for r in ok):.3g} s")
    else:
        put("ca_overhead", "missing", "", no_run_reason)

    # ---- trajectories: the mean from the batch sizes, the spread only where records carry it
    if ok:
        with_lengths = [r for r in ok if r.get("trajectory_lengths") is not None]
        by_task = {}
        for r in ok:
            by_task.setdefault(r["task"], r)
        put("mean_length", "filled", "; ".join(
            f"{t}: {r['cost']['sampled_env_steps'] / max(1, r['cost']['sampled_trajectories']):.3g}"
            for t, r in by_task.items()) + " (generated positions per trajectory: tokens for the chain, "
            "turns for ToolWorld, agent actions for TeamTask; first seed)")
        if with_lengths:
            first = {}
            for r in with_lengths:
                first.setdefault(r["task"], r["trajectory_lengths"])
            value = "; ".join(f"{t}: " + ", ".join(f"{k} {_fmt(L[k])}" for k in _LENGTH_KEYS) for t, L in first.items())
            if len(first) == len(tasks):
                put("length_distribution", "filled", value)
            else:
                put("length_distribution", "partial", value,
                    f"trajectory_lengths missing for {', '.join(t for t in tasks if t not in first)}")
        else:
            put("length_distribution", "missing", "", "the records carry no trajectory_lengths (min/median/max)")
    else:
        put("mean_length", "missing", "", no_run_reason)
        put("length_distribution", "missing", "", no_run_reason)

    rows = []
    for it in _checklist():
        status, value, reason = items.get(it["key"], ("missing", "", "this card does not know how to fill the item"))
        rows.append({"key": it["key"], "category": it["category"], "priority": it["priority"], "item": it["item"],
                     "status": status, "value": value, "reason": reason})
    table = pd.DataFrame(rows, columns=list(ITEM_COLUMNS))
    return _markdown(table, estimator, baseline, mine), table


def _cell_text(s: str) -> str:
    return (s or "").replace("|", "\\|").replace("\n", " ")


def _markdown(table: pd.DataFrame, estimator: str, baseline: str, mine: list[dict]) -> str:
    suites = ", ".join(sorted({r["suite"] for r in mine}))
    counts = {s: int((table["status"] == s).sum()) for s in STATUSES}
    lines = [f"## Reporting checklist: {estimator} (labkit.bench suite {suites})", "",
             f"Filled automatically from {len(mine)} bench records (labkit {mine[0]['labkit_version']}, "
             f"baseline {baseline}) against the survey's Appendix C: {counts['filled']} filled, "
             f"{counts['partial']} partial, {counts['missing']} missing.", "",
             "| Category | Item | Status | Value |", "|---|---|---|---|"]
    for r in table.itertuples(index=False):
        value = r.value if r.status == "filled" else (f"{r.value} — *{r.reason}*" if r.value else f"*{r.reason}*")
        lines.append(f"| {r.category} | {_cell_text(r.item)} ({r.priority}) | {_MARK[r.status]} | {_cell_text(value)} |")
    return "\n".join(lines) + "\n"


def write_card(records_dir, estimator: str, out_path, *, baseline: str = "grpo") -> Path:
    """Write ``estimator``'s checklist card (Markdown) for the run in ``records_dir`` (a folder
    holding records.jsonl) to ``out_path``; returns the path written."""
    folder = Path(records_dir)
    if not folder.is_dir():
        raise ValueError(f"records_dir: {folder} is not a folder")
    records = read_records(folder)
    if not records:
        raise ValueError(f"records_dir: no records in {folder} (records.jsonl is missing or empty)")
    markdown, _ = checklist_card(records, estimator, baseline=baseline)
    out = Path(out_path)
    if out.is_dir():
        raise ValueError(f"out_path: {out} is a folder; name the Markdown file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown, encoding="utf-8")
    return out
