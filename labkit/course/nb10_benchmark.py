"""Notebook 10, the benchmark and the efficiency frontier: the survey's §9.3 protocol as a run
(every estimator against exact truth, one record per task x estimator x seed), its leaderboard
per family, the §9.2 question answered on the toy (fine-grained credit against GRPO at equal
compute, per horizon: on the chain with a shared-weight policy, the tabular chain as the
contrast, and ToolWorld), the Appendix C checklist filled from the run, and a reader's own
estimator put through the same protocol.

Everything heavy is cached in ``data/bench/`` (``scripts/build_bench_full.py``,
``scripts/build_frontier.py``); the live part is the quick suite on a few estimators (seconds).
Runners return DataFrames (or Markdown text for the card).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

from labkit.bench import leaderboard, run_suite
from labkit.bench.run import load_full_run  # noqa: F401  (the notebook reads it from here)
from labkit.bench.leaderboard import GROUPINGS, against_baseline
from labkit.bench.card import checklist_card
from labkit.bench.frontier import (FRONTIER_DIR, SHARED_FRONTIER_DIR, VINE_KS, VINE_STEP_LENS, crossover, frontier_band, gaps,
                                   load_frontier, time_to_success, vine_arm_name)
from labkit.bench.records import METRIC_FIELDS
from labkit.core.cache import rebuild_command
from labkit.core.checks import check_choice, check_int, check_number
from labkit.course.presets import NB10_BASELINE, NB10_LIVE_ESTIMATORS, NB10_SUITE
from labkit.credit import ESTIMATORS, register

FRONTIER_METRICS = {"success": "final exact success J", "credit_rank": "credit quality (Spearman with exact advantage)"}
WORLD_NAMES = {"chain_shared": "BifurcationChain, shared weights", "chain": "BifurcationChain, tabular (contrast)",
               "toolworld": "ToolWorld"}
SUCCESS_THRESHOLD = 0.9   # "time to success": the first budget whose mean exact success reaches it
COLLAPSE_BELOW = 0.1      # a run whose final success ends below this has collapsed (uniform policy: 0.25)

# names registered through add_your_own: only these may be registered again
_OWN: set[str] = set()


def run_summary(records: Iterable[dict]) -> pd.DataFrame:
    """Per family: tasks, estimators that ran ('ok'), records ok / skipped / error."""
    rows = list(records)
    if not rows:
        raise ValueError("records: no records")
    df = pd.DataFrame({"family": [r["family"] for r in rows], "task": [r["task"] for r in rows],
                       "estimator": [r["estimator"] for r in rows], "status": [r["status"] for r in rows]})
    g = df.groupby("family", sort=True)
    out = pd.DataFrame({"tasks": g.task.nunique(),
                        "estimators_ran": df[df.status == "ok"].groupby("family").estimator.nunique(),
                        **{s: df[df.status == s].groupby("family").size() for s in ("ok", "skipped", "error")}})
    return out.fillna(0).astype(int).reset_index()


# --------------------------------------------------------------------------- the live run
def live_run(estimators: Sequence[str] = NB10_LIVE_ESTIMATORS, *, suite: str = NB10_SUITE, out=None) -> list[dict]:
    """Run ``suite`` (default the quick one) on ``estimators`` into ``out`` (default a fresh
    temporary folder, so every call recomputes) and return its records."""
    if out is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run_suite(suite, list(estimators), tmp, progress=False)["records"]
    return run_suite(suite, list(estimators), out, progress=False)["records"]


# --------------------------------------------------------------------------- the leaderboard
def leaderboard_table(records: Iterable[dict], *, metric: str = "rank_correlation", by: str = "family") -> pd.DataFrame:
    """``labkit.bench.leaderboard`` as one table: the group (column ``family``, or ``world`` with
    ``by="world"``: the tiny LM's fixed batch and the chain apart), rank (1 = best mean within the
    group), estimator, mean, std (over tasks and seeds), n records, tasks, fed ("oracle" /
    "stand-in" / "": whether some input came from the exact truth or a stand-in judge)."""
    check_choice("metric", metric, METRIC_FIELDS)
    check_choice("by", by, GROUPINGS)
    board = leaderboard(list(records), metric=metric, by=by)
    rows = [{by: group, "rank": i + 1, **row} for group, rows in board.items() for i, row in enumerate(rows)]
    cols = [by, "rank", "estimator", "mean", "std", "n", "tasks", "fed"]
    return pd.DataFrame(rows, columns=cols)


def after_survey_table(records: Iterable[dict]) -> pd.DataFrame:
    """The methods published after the survey that run here as registered estimators (the
    inventory's later additions and its methods beyond the catalog, ``labkit.survey``) on the
    leaderboard per world: each one's mean rank correlation with exact truth, its rank among
    the world's estimators ("3/45"), its status, and GRPO's mean in the same world for
    contrast. One row per (method, world) it ran in, in the inventory's order."""
    from labkit.credit import spec
    from labkit.survey import after_survey_estimators

    names = {n: m for n, m in after_survey_estimators().items() if n in ESTIMATORS}
    board = leaderboard_table(records, by="world")
    rows = []
    for estimator, name in names.items():
        for world, group in board.groupby("world", sort=False):
            mine = group[group["estimator"] == estimator]
            if mine.empty:
                continue
            grpo = group.loc[group["estimator"] == "grpo", "mean"]
            rows.append({"method": name, "estimator": estimator, "status": spec(estimator).status, "world": world,
                         "mean": float(mine["mean"].iloc[0]), "rank": f"{int(mine['rank'].iloc[0])}/{len(group)}",
                         "GRPO": float(grpo.iloc[0]) if len(grpo) else float("nan")})
    return pd.DataFrame(rows)


def paired_gaps(records: Iterable[dict], *, family: str = "agentic", baseline: str = NB10_BASELINE,
                estimators: Sequence[str] | None = None, level: float = 0.95, n_boot: int = 4000,
                seed: int = 0) -> pd.DataFrame:
    """Each estimator's rank correlation minus ``baseline``'s on the same task and seed of
    ``family``, with a paired bootstrap interval (``labkit.bench.leaderboard.against_baseline``:
    the (task, seed) pairs both scored resampled ``n_boot`` times, seeded ``seed``, the ``level``
    percentile interval of the mean gap). Pairing removes the task-to-task spread both
    share (a long ToolWorld is hard for every estimator), which the leaderboard's std keeps.
    ``estimators``: default the later methods (``labkit.survey.after_survey_estimators``) that
    scored in ``family``. Returns one row per estimator, largest gap first: estimator, fed (as
    on the leaderboard), mean, gap, low, high, ahead ("25/27": pairs where it beats the
    baseline)."""
    from labkit.survey import after_survey_estimators

    records = list(records)
    check_choice("family", family, tuple(sorted({r["family"] for r in records})))
    check_number("level", level, low=0.5, high=0.999)
    n_boot = check_int("n_boot", n_boot, low=100)
    seed = check_int("seed", seed, low=0)
    ok = [r for r in records if r["family"] == family and r["status"] == "ok"
          and r["metrics"].get("rank_correlation") is not None]
    scores = pd.DataFrame([{"task": r["task"], "seed": r["seed"], "estimator": r["estimator"],
                            "value": r["metrics"]["rank_correlation"]} for r in ok])
    ran = set(scores.estimator) if len(scores) else set()
    if baseline not in ran:
        raise ValueError(f"baseline: {baseline!r} has no scored record in family {family!r}")
    if estimators is None:
        estimators = [e for e in after_survey_estimators() if e in ran and e != baseline]
    missing = [e for e in estimators if e not in ran]
    if missing:
        raise ValueError(f"estimators: no scored record in family {family!r} for {missing}")
    fed = leaderboard_table(ok).set_index("estimator").fed
    rows = [{"estimator": r["estimator"], "fed": fed[r["estimator"]], "mean": r["mean"], "gap": r["diff"],
             "low": r["low"], "high": r["high"], "ahead": f"{r['ahead']}/{r['cells']}"}
            for r in against_baseline(ok, estimators, baseline=baseline, family=family, level=level, n_boot=n_boot,
                                      seed=seed)]
    return pd.DataFrame(rows).sort_values(["gap", "estimator"], ascending=[False, True], ignore_index=True)


def top_bottom(table: pd.DataFrame, *, own_inputs: bool = True, k: int = 1) -> pd.DataFrame:
    """Per group (family or world, whichever the ``leaderboard_table`` has), the ``k`` best and
    ``k`` worst rows; with ``own_inputs`` only estimators that ran on their own inputs (``fed``
    empty: no oracle, no stand-in judge). Columns: the group, end ("top" / "bottom"),
    estimator, mean, std, n."""
    if not isinstance(table, pd.DataFrame) or not {"estimator", "mean", "fed"} <= set(table.columns) \
            or not set(GROUPINGS) & set(table.columns):
        raise ValueError("table: expected a leaderboard_table DataFrame")
    group = "world" if "world" in table.columns else "family"
    k = check_int("k", k, low=1)
    d = table[table.fed == ""] if own_inputs else table
    rows = []
    for name, part in d.groupby(group, sort=True):
        part = part.sort_values(["mean", "estimator"], ascending=[False, True])
        for end, sel in (("top", part.head(k)), ("bottom", part.tail(k).iloc[::-1])):
            rows += [{group: name, "end": end, "estimator": r["estimator"], "mean": r["mean"], "std": r["std"],
                      "n": r["n"]} for _, r in sel.iterrows()]
    return pd.DataFrame(rows, columns=[group, "end", "estimator", "mean", "std", "n"])


def leaderboard_chart(table: pd.DataFrame, family: str, *, top: int = 40):
    """A bar chart of one family's leaderboard (mean with a mean +- std rule), best first,
    the ``top`` best estimators (default: all of them); bars coloured by ``fed``. About 420 px
    wide (names longer than 170 px are cut, the tooltip has them whole), so two fit side by side
    in a 900 px notebook column."""
    import altair as alt

    check_choice("family", family, tuple(sorted(set(table.family))))
    d = table[table.family == family].head(check_int("top", top, low=1)).copy()
    d["fed"] = d.fed.replace("", "own inputs")
    d["lo"], d["hi"] = d["mean"] - d["std"], d["mean"] + d["std"]
    order = list(d.estimator)
    y = alt.Y("estimator:N", sort=order, title=None, axis=alt.Axis(labelLimit=170))
    bars = alt.Chart(d).mark_bar().encode(x=alt.X("mean:Q", title="rank correlation with exact credit"), y=y,
                                          color=alt.Color("fed:N", title="inputs",
                                                          scale=alt.Scale(domain=["own inputs", "oracle", "stand-in"])),
                                          tooltip=["estimator", "mean", "std", "n", "fed"])
    rule = alt.Chart(d).mark_rule(color="black").encode(x="lo:Q", x2="hi:Q", y=y)
    return alt.layer(bars, rule).properties(
        title=alt.TitleParams(f"{family}: mean ± std over tasks and seeds", anchor="start"), width=250,
        height=14 * len(d))


# --------------------------------------------------------------------------- the frontier
def frontier_runs() -> pd.DataFrame:
    """Every training run of the two cached frontiers (``scripts/build_frontier.py``): the tabular
    chain and ToolWorld (data/bench/frontier) and the shared-weight chain (``--suite shared``,
    data/bench/frontier_shared), one row per world, horizon, estimator, budget and seed."""
    return pd.concat([load_frontier(FRONTIER_DIR)[0], load_frontier(SHARED_FRONTIER_DIR)[0]], ignore_index=True)


def frontier_builds() -> pd.DataFrame:
    """How each cached frontier was built, from its meta.json: the cache folder, the runs it
    holds, the seeds, the whole build's wall time on its threads, and the command that rebuilds
    it."""
    rows = []
    for folder in (SHARED_FRONTIER_DIR, FRONTIER_DIR):
        meta = load_frontier(folder)[2]
        rows.append({"cache": f"data/bench/{Path(folder).name}", "runs": meta["cells"], "seeds": len(meta["seeds"]),
                     "seconds": meta["wall_seconds_total"], "threads": meta["threads"],
                     "command": rebuild_command(meta["provenance"]["script"], meta["provenance"]["args"])})
    return pd.DataFrame(rows)


def frontier_data(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The frontier (``frontier_runs`` by default) as chart data: per world, horizon,
    estimator, budget (episode equivalents) and ``metric`` ("success" or "credit_rank"), the
    mean / std / min / max over seeds and the number of seeds."""
    table = frontier_runs() if table is None else table
    parts = [frontier_band(table, m).assign(metric=m) for m in FRONTIER_METRICS]
    return pd.concat(parts, ignore_index=True)


def horizons(data: pd.DataFrame, world: str) -> list[int]:
    """The horizons ``world`` has in ``frontier_data``, ascending."""
    check_choice("world", world, tuple(sorted(set(data.world))))
    return sorted(int(h) for h in set(data[data.world == world].horizon))


def vine_arms(step_len: int | None = None) -> list[str]:
    """The shared chain's VinePPO arms (``vineppo_m{m}_k{K}``), all of them or those with steps of
    ``step_len`` tokens (one of ``VINE_STEP_LENS``)."""
    if step_len is not None:
        check_choice("step_len", step_len, VINE_STEP_LENS)
    return [vine_arm_name(m, k) for m in VINE_STEP_LENS for k in VINE_KS if step_len in (None, m)]


def frontier_chart(data: pd.DataFrame, world: str = "chain_shared", horizon_index: int = 0, metric: str = "success",
                   step_len: int | None = None):
    """Final success or credit quality against the budget (log scale, episode equivalents) at
    one horizon of ``world``: one line per estimator (mean over seeds) with a min-max band.
    ``horizon_index`` picks the horizon from ``horizons(data, world)`` (clipped to the last, so
    one slider can serve worlds with different grids). ``step_len`` keeps GRPO and the VinePPO
    arms with steps of that many tokens (the shared chain has six vine arms; other worlds ignore
    it)."""
    from labkit import viz

    check_choice("metric", metric, tuple(FRONTIER_METRICS))
    hs = horizons(data, world)
    h = hs[min(check_int("horizon_index", horizon_index, low=0), len(hs) - 1)]
    d = data[(data.world == world) & (data.horizon == h) & (data.metric == metric)]
    if step_len is not None and world == "chain_shared":
        d = d[d.estimator.isin(["grpo", *vine_arms(step_len)])]
    import altair as alt

    domain = (0.0, 1.0) if metric == "success" else None
    chart = viz.line_chart(d, "budget", "mean", color="estimator", band=("min", "max"), log_x=True,
                           x_title="budget (episode equivalents, log scale)", y_title=FRONTIER_METRICS[metric],
                           value_domain=domain)
    return chart.properties(title=alt.TitleParams(f"{WORLD_NAMES[world]}, horizon {h}: mean and min-max over seeds",
                                                  anchor="start"), width=460)


def frontier_prompt_answers(data: pd.DataFrame) -> dict:
    """What the frontier slider's prediction block asks about, read off ``frontier_data``'s table
    (final success, mean over seeds). Returns a dict: ``budget`` (the largest budget, episode
    equivalents), ``shared`` (DataFrame, estimator x horizon: the shared chain's arms at that
    budget), ``tabular_grpo`` (DataFrame, budget x horizon: GRPO on the tabular chain at every
    budget) and ``tabular_spread`` (the largest difference between two horizons of the tabular
    GRPO at any one budget)."""
    if not isinstance(data, pd.DataFrame) or not {"world", "horizon", "estimator", "budget", "metric",
                                                  "mean"} <= set(data.columns):
        raise ValueError("data: expected frontier_data's table (world, horizon, estimator, budget, metric, mean)")
    success = data[data.metric == "success"]
    for world in ("chain_shared", "chain"):
        if not (success.world == world).any():
            raise ValueError(f"data: holds no final success for the world {world!r}")
    shared = success[success.world == "chain_shared"]
    budget = float(shared.budget.max())
    wide = shared[shared.budget == budget].pivot_table(index="estimator", columns="horizon", values="mean")
    tab = success[(success.world == "chain") & (success.estimator == "grpo")]
    tab = tab.pivot_table(index="budget", columns="horizon", values="mean")
    spread = float((tab.max(axis=1) - tab.min(axis=1)).max())
    return {"budget": budget, "shared": wide, "tabular_grpo": tab, "tabular_spread": spread}


def _budget(b) -> str:
    return b if isinstance(b, str) else f"{b:,.0f}"


def time_to_success_table(runs: pd.DataFrame | None = None, *, threshold: float = SUCCESS_THRESHOLD,
                          worlds: Sequence[str] = ("chain_shared", "chain")) -> pd.DataFrame:
    """``labkit.bench.frontier.time_to_success`` as one table: rows (world, estimator), a column
    per horizon, each cell the first budget (episode equivalents) at which the mean success over
    seeds reaches ``threshold``, then in brackets the seeds' spread: the earliest and the latest
    seed's first budget, or how many seeds reached it when some never did ("none" when the mean
    never does)."""
    runs = frontier_runs() if runs is None else runs
    for w in worlds:
        check_choice("worlds", w, tuple(sorted(set(runs.world))))
    reach = time_to_success(runs[runs.world.isin(list(worlds))], threshold)
    cells = {}
    for r in reach.itertuples():
        if r.seeds_reached < r.seeds:
            spread = f"{r.seeds_reached}/{r.seeds} seeds"
        else:
            spread = f"{_budget(r.seed_first)}–{_budget(r.seed_last)}"
        cells[r.world, r.estimator, r.horizon] = f"{_budget(r.time_to_success)} ({spread})"
    table = pd.Series(cells).unstack()
    order = {w: i for i, w in enumerate(worlds)}
    table = table.loc[sorted(table.index, key=lambda k: (order[k[0]], k[1] != "grpo", k[1]))]
    return table.rename_axis(index=["world", "estimator"], columns="horizon")


def closest_to_grpo(runs: pd.DataFrame | None = None, *, world: str = "chain_shared",
                    threshold: float = SUCCESS_THRESHOLD) -> pd.DataFrame:
    """Per horizon of ``world``, the budget at which GRPO's mean success first reaches
    ``threshold`` (its time to success; the largest budget if it never does) and, at that budget,
    the fine-grained arm closest to it: its mean success, GRPO's, and the gap (fine minus GRPO)
    with its 95 % bootstrap interval over seeds (``labkit.bench.frontier.gaps``); then the fine
    arm (or arms, on a tie) whose own time to success is shortest, and that time. Columns:
    horizon, budget, grpo, arm, arm_mean, gap, gap_low, gap_high, fastest_arm, fastest_time
    ("none" when no fine arm reaches the threshold)."""
    runs = frontier_runs() if runs is None else runs
    check_choice("world", world, tuple(sorted(set(runs.world))))
    part = runs[runs.world == world]
    reach = time_to_success(part, threshold).set_index(["horizon", "estimator"])
    per_budget = gaps(part)
    rows = []
    for h in sorted(set(part.horizon)):
        t = reach.loc[(h, "grpo"), "time_to_success"]
        g = per_budget[per_budget.horizon == h]
        budget = float(g.budget.max()) if t == "none" else float(t)
        at = g[g.budget == budget].sort_values(["gap", "estimator"], ascending=[False, True]).iloc[0]
        fine = reach.loc[h].drop(index="grpo")
        reached = fine[fine.time_to_success != "none"]
        times = reached.time_to_success.astype(float)
        fastest = " / ".join(sorted(times[times == times.min()].index)) if len(times) else "none"
        rows.append({"horizon": int(h), "budget": budget, "grpo": at.base_mean, "arm": at.estimator,
                     "arm_mean": at.fine_mean, "gap": at.gap, "gap_low": at.gap_low, "gap_high": at.gap_high,
                     "fastest_arm": fastest, "fastest_time": float(times.min()) if len(times) else "none"})
    return pd.DataFrame(rows)


def start_credit_quality(runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Credit quality at the uniform policy every run starts from (the same policy for every
    arm, so the credits are compared on equal terms): mean over runs of the rank correlation of
    the arm's credit with the exact advantage on a fresh batch, rows (world, estimator), a
    column per horizon (NaN where a world has no such horizon)."""
    runs = frontier_runs() if runs is None else runs
    return runs.pivot_table(index=["world", "estimator"], columns="horizon", values="credit_rank_start",
                            aggfunc="mean")


def collapses(runs: pd.DataFrame | None = None, *, below: float = COLLAPSE_BELOW) -> pd.DataFrame:
    """Runs whose final success ended below ``below`` (the uniform policy they start from has
    0.25 on the two-bifurcation chain): per world, horizon and estimator that has any, how many
    of its runs (every budget and seed) collapsed, out of how many, and at which budgets."""
    runs = frontier_runs() if runs is None else runs
    below = check_number("below", below, low=0.0, high=1.0)
    bad = runs[runs.success < below]
    rows = []
    for (world, h, name), part in bad.groupby(["world", "horizon", "estimator"], sort=True):
        total = runs[(runs.world == world) & (runs.horizon == h) & (runs.estimator == name)]
        rows.append({"world": world, "horizon": int(h), "estimator": name, "collapsed": len(part), "runs": len(total),
                     "seeds": " ".join(str(s) for s in sorted(set(part.seed))),
                     "budgets": " ".join(_budget(b) for b in sorted(set(part.budget)))})
    return pd.DataFrame(rows, columns=["world", "horizon", "estimator", "collapsed", "runs", "seeds", "budgets"])


def crossover_table(runs: pd.DataFrame | None = None, *, worlds: Sequence[str] | None = None) -> pd.DataFrame:
    """``labkit.bench.frontier.crossover`` of ``runs`` (default ``frontier_runs``; only
    ``worlds`` when given), compact: world, horizon, estimator, crossover (smallest budget where
    the fine method's mean success beats GRPO's, or "none"), stays_ahead_from, wins out of
    budgets, and at that budget (the largest when none) the fine and GRPO mean success and the
    gap with its 95 % bootstrap interval over seeds."""
    runs = frontier_runs() if runs is None else runs
    if worlds is not None:
        for w in worlds:
            check_choice("worlds", w, tuple(sorted(set(runs.world))))
        runs = runs[runs.world.isin(list(worlds))]
    c = crossover(runs)
    c["gap"] = c.fine_mean - c.base_mean
    cols = ["world", "horizon", "estimator", "crossover", "stays_ahead_from", "wins", "budgets",
            "fine_mean", "base_mean", "gap", "gap_low", "gap_high"]
    return c[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- the checklist card
def card(records: Iterable[dict], estimator: str, *, baseline: str = NB10_BASELINE) -> tuple[str, pd.DataFrame]:
    """``labkit.bench.card.checklist_card``: (Markdown card, items table) for ``estimator``."""
    return checklist_card(list(records), estimator, baseline=baseline)


def card_status(items: pd.DataFrame) -> pd.DataFrame:
    """A card's items as key, status and (for items not filled) the reason."""
    return items[["key", "status", "reason"]].reset_index(drop=True)


def card_widget(records: Sequence[dict], estimators: Sequence[str], value: str | None = None,
                *, baseline: str = NB10_BASELINE):
    """A dropdown of ``estimators`` above the selected one's card, rendered as Markdown.
    Returns the ipywidgets box; ``box.dropdown`` and ``box.card`` (the Markdown shown) let a
    test move it."""
    import ipywidgets as W

    from labkit import viz

    records = list(records)
    dd = viz.dropdown(list(estimators), value, description="estimator")
    out = W.Output()
    box = W.VBox([dd, out])

    def show(*_):
        md, _items = card(records, dd.value, baseline=baseline)
        box.card = md
        # set the outputs directly (as viz's Dashboard does): a clear_output message is lost
        # when the notebook is executed without stored widget state
        out.outputs = ({"output_type": "display_data", "data": {"text/markdown": md, "text/plain": md},
                        "metadata": {}},)

    dd.observe(show, names="value")
    box.dropdown = dd
    show()
    return box


# --------------------------------------------------------------------------- your own estimator
def register_own(fn: Callable, name: str) -> Callable:
    """Register ``fn(rollouts, **options) -> Credit`` as ``name`` with ``labkit.credit.register``.
    Registering the same name again (re-running a notebook cell) replaces the earlier one; a
    built-in estimator's name is refused (a ValueError naming ``name``)."""
    if not callable(fn):
        raise TypeError(f"fn: expected a function rollouts -> Credit, got {type(fn).__name__}")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected a Python identifier such as 'my_credit', got {name!r}")
    if name in ESTIMATORS and name not in _OWN:
        raise ValueError(f"name: {name!r} is a built-in estimator; pick another name")
    ESTIMATORS.pop(name, None)   # the registry refuses a name twice: drop the reader's earlier version
    # the registry records a spec: a reader's estimator writes per-token credit from the rollouts alone
    wrapped = register(name, level="token", status="implemented", paper="the reader's own (notebook 10)",
                       equation=r"A_{i,t} = f(\text{rollouts})_{i,t}", symbols="f: the reader's function")(fn)
    _OWN.add(name)
    return wrapped


def add_your_own(fn: Callable, name: str, *, against: Iterable[dict] | None = None, suite: str = NB10_SUITE,
                 baseline: str = NB10_BASELINE) -> dict:
    """Register ``fn`` as ``name`` (``register_own``), run ``suite`` on it and ``baseline`` in a
    fresh folder, and rank it among ``against`` (records of the same suite, e.g. ``live_run``'s;
    their records of ``name`` are replaced). Returns ``records`` (its own), ``leaderboard``
    (``leaderboard_table`` of everything), ``rank`` (per family: its rank, out of how many, its
    mean and std) and ``card`` / ``items`` (its filled checklist against ``baseline``)."""
    others = [r for r in (against or []) if r["estimator"] != name]
    if any(r.get("suite") != suite for r in others):
        raise ValueError(f"against: records of another suite than {suite!r}")
    register_own(fn, name)
    with tempfile.TemporaryDirectory() as tmp:
        mine = run_suite(suite, [name, baseline], tmp, progress=False)["records"]
    have = {(r["task"], r["estimator"], r["seed"]) for r in others}
    allrec = others + [r for r in mine if (r["task"], r["estimator"], r["seed"]) not in have]
    table = leaderboard_table(allrec)
    sizes = table.groupby("family").size()
    own = table[table.estimator == name]
    rank = pd.DataFrame({"family": own.family, "rank": own["rank"], "out_of": [int(sizes[f]) for f in own.family],
                         "mean": own["mean"], "std": own["std"]}).reset_index(drop=True)
    md, items = card(allrec, name, baseline=baseline)
    return {"records": [r for r in mine if r["estimator"] == name], "leaderboard": table, "rank": rank,
            "card": md, "items": items}
