"""Notebook 10, the benchmark and the efficiency frontier: the survey's §9.3 protocol as a run
(every estimator against exact truth, one record per task x estimator x seed), its leaderboard
per family, the §9.2 question answered on the toy (fine-grained credit against GRPO at equal
compute, per horizon), the Appendix C checklist filled from the run, and a reader's own
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

from labkit.bench import leaderboard, read_records, run_suite
from labkit.bench.leaderboard import GROUPINGS
from labkit.bench.card import checklist_card
from labkit.bench.frontier import frontier_band, load_frontier
from labkit.bench.records import JSONL, METRIC_FIELDS
from labkit.core.cache import read_cache
from labkit.core.checks import check_choice, check_int
from labkit.core.paths import data_path
from labkit.course.presets import NB10_BASELINE, NB10_LIVE_ESTIMATORS, NB10_SUITE
from labkit.credit import ESTIMATORS, register

FRONTIER_METRICS = {"success": "final exact success J", "credit_rank": "credit quality (Spearman with exact advantage)"}
WORLD_NAMES = {"chain": "BifurcationChain", "toolworld": "ToolWorld"}

# names registered through add_your_own: only these may be registered again
_OWN: set[str] = set()


# --------------------------------------------------------------------------- the cached full run
def load_full_run(path: Path | None = None) -> tuple[list[dict], dict]:
    """The cached full run (``scripts/build_bench_full.py`` writes it to ``path``, default
    ``data/bench/full``): its records and its meta.json (suite, counts, ``wall_seconds`` of the
    build). Raises if the run is missing, foreign or stale (its LM task read the tiny model, its
    reward models and tuned copies: ``labkit.core.cache``)."""
    meta, files = read_cache(path if path is not None else data_path("bench", "full"), script="build_bench_full.py",
                             files=[JSONL], what="cached full bench run")
    return read_records(files[JSONL].parent), meta


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
    the ``top`` best estimators (default: all of them); bars coloured by ``fed``. About 440 px
    wide, so two fit side by side in a 900 px notebook column."""
    import altair as alt

    check_choice("family", family, tuple(sorted(set(table.family))))
    d = table[table.family == family].head(check_int("top", top, low=1)).copy()
    d["fed"] = d.fed.replace("", "own inputs")
    d["lo"], d["hi"] = d["mean"] - d["std"], d["mean"] + d["std"]
    order = list(d.estimator)
    y = alt.Y("estimator:N", sort=order, title=None)
    bars = alt.Chart(d).mark_bar().encode(x=alt.X("mean:Q", title="rank correlation with exact credit"), y=y,
                                          color=alt.Color("fed:N", title="inputs",
                                                          scale=alt.Scale(domain=["own inputs", "oracle", "stand-in"])),
                                          tooltip=["estimator", "mean", "std", "n", "fed"])
    rule = alt.Chart(d).mark_rule(color="black").encode(x="lo:Q", x2="hi:Q", y=y)
    return alt.layer(bars, rule).properties(
        title=alt.TitleParams(f"{family}: mean ± std over tasks and seeds", anchor="start"), width=290,
        height=14 * len(d))


# --------------------------------------------------------------------------- the frontier
def frontier_data(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The frontier (``load_frontier``'s rows by default) as chart data: per world, horizon,
    estimator, budget (episode equivalents) and ``metric`` ("success" or "credit_rank"), the
    mean / std / min / max over seeds and the number of seeds."""
    table = load_frontier()[0] if table is None else table
    parts = [frontier_band(table, m).assign(metric=m) for m in FRONTIER_METRICS]
    return pd.concat(parts, ignore_index=True)


def horizons(data: pd.DataFrame, world: str) -> list[int]:
    """The horizons ``world`` has in ``frontier_data``, ascending."""
    check_choice("world", world, tuple(sorted(set(data.world))))
    return sorted(int(h) for h in set(data[data.world == world].horizon))


def frontier_chart(data: pd.DataFrame, world: str = "chain", horizon_index: int = 0, metric: str = "success"):
    """Final success or credit quality against the budget (log scale, episode equivalents) at
    one horizon of ``world``: one line per estimator (mean over seeds) with a min-max band.
    ``horizon_index`` picks the horizon from ``horizons(data, world)`` (clipped to the last, so
    one slider can serve worlds with different grids)."""
    from labkit import viz

    check_choice("metric", metric, tuple(FRONTIER_METRICS))
    hs = horizons(data, world)
    h = hs[min(check_int("horizon_index", horizon_index, low=0), len(hs) - 1)]
    d = data[(data.world == world) & (data.horizon == h) & (data.metric == metric)]
    import altair as alt

    chart = viz.line_chart(d, "budget", "mean", color="estimator", band=("min", "max"), log_x=True,
                           x_title="budget (episode equivalents, log scale)", y_title=FRONTIER_METRICS[metric])
    budgets = sorted(float(b) for b in set(d.budget))
    for layer in chart.layer:
        # ticks at the budgets themselves (a log axis otherwise crowds 100, 200, 300 together)
        layer.encoding.x.axis = alt.Axis(values=budgets, format=",.0f")
    return chart.properties(title=alt.TitleParams(f"{WORLD_NAMES[world]}, horizon {h}: mean and min-max over seeds",
                                                  anchor="start"), width=460)


def crossover_table(crossover: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cached crossover table (``load_frontier``), compact: world, horizon, estimator,
    crossover (smallest budget where the fine method's mean success beats GRPO's, or "none"),
    stays_ahead_from, wins out of budgets, and at that budget (the largest when none) the fine
    and GRPO mean success and the per-seed gap range."""
    c = load_frontier()[1] if crossover is None else crossover
    cols = ["world", "horizon", "estimator", "crossover", "stays_ahead_from", "wins", "budgets",
            "fine_mean", "base_mean", "gap_min", "gap_max"]
    missing = sorted(set(cols) - set(c.columns))
    if missing:
        raise ValueError(f"crossover: missing columns {missing}")
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
