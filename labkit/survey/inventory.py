"""The method inventory on disk: where the CSVs are, their columns, loading and validation.

Data files (see ``data/README.md``)
-----------------------------------
``data/methods.csv``
    One row for every entry of the survey authors' catalog (47 methods reviewed in arXiv
    2604.09459 plus later additions). Labels for the 47 come from the survey's Appendix B; for
    later additions from the catalog's own columns. Descriptions are written for this lab.
``data/inventory/baselines.csv``
    The background estimators the survey builds on but does not count (REINFORCE, RLOO, GRPO,
    ...), with the same lab columns.

``scripts/build_methods_csv.py`` writes both from the hand-edited tables in ``data/inventory/``
and the survey authors' catalog ``data/survey_catalog.csv``. The loaders check every cell
against the vocabularies of :mod:`labkit.survey.taxonomy` and raise an error naming the file,
column and row of the first problem.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

import pandas as pd

from labkit.core.paths import data_dir, require_data

from .taxonomy import (
    BASELINE_FAMILIES, COLLECTIONS, EVIDENCE_LEVELS, GRANULARITIES, GRANULARITY_LABELS,
    METHODOLOGY_FAMILIES, METHODOLOGY_TO_FAMILY, MULTI_SEP, SETTINGS, STATUSES, TYPES,
    split_multi,
)

__all__ = [
    "DATA_DIR", "METHODS_CSV", "BASELINES_CSV", "NOTEBOOKS", "CREDIT_MODULES", "METHOD_COLUMNS",
    "BASELINE_COLUMNS", "load_methods", "load_baselines", "lookup", "after_survey_estimators",
]

#: The data folder in use (``labkit.core.paths``: ``$LABKIT_DATA``, the wheel's ``labkit/_data``
#: or a clone's ``data/``).
DATA_DIR = data_dir()
METHODS_CSV = DATA_DIR / "methods.csv"
BASELINES_CSV = DATA_DIR / "inventory" / "baselines.csv"  # hand-edited; no build step

#: The course's notebooks, the values the ``notebook`` column may take.
NOTEBOOKS: tuple[str, ...] = (
    "00_map.ipynb",
    "01_reinforce_variance.ipynb",
    "02_critics_gae.ipynb",
    "03_vineppo.ipynb",
    "04_process_rewards.ipynb",
    "05_why_agents_harder.ipynb",
    "06_gigpo.ipynb",
    "07_critical_actions.ipynb",
    "08_hindsight_counterfactual.ipynb",
    "09_multiagent.ipynb",
    "10_benchmark.ipynb",
)

#: The submodules of ``labkit.credit`` a ``labkit_function`` may point into.
CREDIT_MODULES: tuple[str, ...] = (
    "episode", "token_baseline", "td", "mc", "group", "process", "entropy", "information", "redistribution",
    "implicit", "hindsight", "counterfactual", "privileged", "judge", "multiagent", "traces", "search_trees",
    "token_weights", "temporal", "turn_trees", "entropy_modulation", "structured_actions", "checked_turns",
    "self_distillation", "role_judges",
)

METHOD_COLUMNS: tuple[str, ...] = (
    "id", "name", "title", "year", "collection", "survey_number", "type", "setting",
    "granularity", "granularity_label", "methodology", "methodology_family", "baseline_family",
    "evidence", "benchmarks", "paper_url", "code_url", "description", "labkit_function",
    "notebook", "status", "status_note",
)

BASELINE_COLUMNS: tuple[str, ...] = (
    "name", "arxiv_id", "year", "reference", "setting", "granularity", "methodology_family",
    "description", "labkit_function", "notebook", "status", "status_note",
)

_FUNCTION_RE = re.compile(r"^labkit\.credit\.([a-z_]+)\.([a-z_][a-z0-9_]*)$")
#: A method whose mechanism is a rule of the training loop (how the loss treats a batch, or which
#: credit is used at which iteration), not a credit estimator, points into the loop or its
#: schedules instead (SORL's off-policy renormalisation; PilotRL's and PRS's schedules); a method
#: that is a yardstick of credit rather than a credit (QVal) points into the benchmark's metrics.
_LOOP_FUNCTION_RE = re.compile(r"^labkit\.(learn\.(loop|schedules)|bench\.qval)\.[a-z_][a-z0-9_]*$")
_ARXIV_RE = re.compile(r"^(\d{4}\.\d{4,5}|openreview-[A-Za-z0-9_-]+)$")


def _read_csv(path: str | Path | None, default: Path, what: str) -> tuple[pd.DataFrame, Path]:
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path (str or pathlib.Path) to the CSV, or None for "
                        f"the repository's copy, got {type(path).__name__}")
    path = default if path is None else Path(path)
    if path.is_dir():
        raise ValueError(f"path: {path} is a folder; pass the CSV file itself ({default.name})")
    if not path.is_file():
        # FileNotFoundError (not ValueError): the standard type for a missing file, which
        # callers catch; the message still starts with the argument's name.
        require_data(path, what, "path")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise ValueError(f"path: {path} is empty; expected {what} with a header row") from None
    return df, path


class _Checker:
    """Collects context so every validation error names the file, the column and the row."""

    def __init__(self, df: pd.DataFrame, source: Path, key: str):
        self.df, self.source, self.key = df, source, key

    def fail(self, column: str, i: int | None, msg: str) -> None:
        where = f"path: {self.source.name}: column '{column}'"
        if i is not None:
            where += f", row {i + 1} ({self.key} {self.df.iloc[i][self.key]!r})"
        raise ValueError(f"{where}: {msg}")

    def columns(self, expected: tuple[str, ...]) -> None:
        missing = [c for c in expected if c not in self.df.columns]
        if missing:
            raise ValueError(f"path: {self.source.name}: missing column(s) {missing}; "
                             f"expected {list(expected)}")
        extra = [c for c in self.df.columns if c not in expected]
        if extra:
            raise ValueError(f"path: {self.source.name}: unexpected column(s) {extra}")

    def choice(self, column: str, allowed: tuple[str, ...], *, empty_ok: bool = False,
               multi: bool = False) -> None:
        for i, cell in enumerate(self.df[column]):
            if cell == "":
                if not empty_ok:
                    self.fail(column, i, "is empty")
                continue
            parts = split_multi(cell) if multi else [cell]
            for part in parts:
                if part not in allowed:
                    self.fail(column, i, f"{part!r} is not one of {allowed}")
            if multi:
                canonical = sorted(set(parts), key=allowed.index)
                if parts != canonical:
                    self.fail(column, i, f"write {MULTI_SEP.join(canonical)!r} (no repeats, "
                                         f"canonical order) instead of {cell!r}")

    def nonempty(self, column: str) -> None:
        for i, cell in enumerate(self.df[column]):
            if not cell.strip():
                self.fail(column, i, "is empty")

    def unique(self, column: str) -> None:
        dup = self.df[column][self.df[column].duplicated()]
        if len(dup):
            i = int(dup.index[0])
            self.fail(column, i, f"{self.df.iloc[i][column]!r} appears more than once")

    def year(self) -> None:
        for i, cell in enumerate(self.df["year"]):
            if not (cell.isdigit() and 1950 <= int(cell) <= 2100):
                self.fail("year", i, f"{cell!r} is not a four-digit year")

    def lab_columns(self) -> None:
        """labkit_function / notebook / status / status_note must agree with each other."""
        self.choice("status", STATUSES)
        self.choice("notebook", NOTEBOOKS, empty_ok=True)
        for i, row in enumerate(self.df.itertuples(index=False)):
            fn, status = row.labkit_function, row.status
            if fn and not _LOOP_FUNCTION_RE.match(fn):
                m = _FUNCTION_RE.match(fn)
                if not m or m.group(1) not in CREDIT_MODULES:
                    self.fail("labkit_function", i,
                              f"{fn!r} is not labkit.credit.<module>.<function> with <module> "
                              f"one of {CREDIT_MODULES} (or labkit.learn.loop.<function> / "
                              "labkit.learn.schedules.<function> for a training-loop rule or schedule, "
                              "labkit.bench.qval.<function> for a yardstick)")
            if status in ("implemented", "stand-in", "planned"):
                if not fn:
                    self.fail("labkit_function", i, f"status {status!r} needs a labkit function")
                if not row.notebook:
                    self.fail("notebook", i, f"status {status!r} needs a notebook")
            if status == "stand-in" and not row.status_note:
                self.fail("status_note", i, "a stand-in must say what stands in for what")
            if status == "concept-only":
                if fn:
                    self.fail("labkit_function", i, "concept-only rows have no labkit function")
                if not row.status_note.strip():
                    self.fail("status_note", i, "concept-only rows must give the reason")


def load_methods(path: str | Path | None = None) -> pd.DataFrame:
    """Load and validate the method inventory (``data/methods.csv`` by default).

    Returns one row per catalog entry with the columns of :data:`METHOD_COLUMNS`. ``year`` is an
    ``int`` column and ``survey_number`` a nullable ``Int64`` column (1-47 for the survey's
    methods, missing for later additions); every other column is text, with ``""`` for "none".

    Raises ``FileNotFoundError`` if the file is missing and ``ValueError`` naming the column and
    row of the first problem: an unknown label, a duplicate id, a methodology tag whose family
    disagrees with :data:`METHODOLOGY_TO_FAMILY`, or lab columns that contradict each other
    (e.g. a planned method with no labkit function).
    """
    df, src = _read_csv(path, METHODS_CSV, "Method inventory (methods.csv)")
    check = _Checker(df, src, "id")
    check.columns(METHOD_COLUMNS)
    for col in ("id", "name", "title", "description", "methodology", "granularity_label",
                "paper_url"):
        check.nonempty(col)
    check.unique("id")
    check.unique("name")
    for i, value in enumerate(df["id"]):
        if not _ARXIV_RE.match(value):
            check.fail("id", i, f"{value!r} is not an arXiv id (or openreview-<id>)")
    for i, value in enumerate(df["name"]):
        if "," in value:
            check.fail("name", i, "names may not contain commas (taxonomy_counts joins on ', ')")
    check.year()
    check.choice("collection", COLLECTIONS)
    check.choice("type", TYPES)
    check.choice("setting", SETTINGS, multi=True)
    check.choice("granularity", GRANULARITIES, multi=True)
    check.choice("methodology_family", tuple(METHODOLOGY_FAMILIES))
    check.choice("baseline_family", BASELINE_FAMILIES, empty_ok=True)
    check.choice("evidence", EVIDENCE_LEVELS, empty_ok=True)
    for i, row in enumerate(df.itertuples(index=False)):
        expected = METHODOLOGY_TO_FAMILY.get(row.methodology)
        if expected is None:
            check.fail("methodology", i, f"tag {row.methodology!r} has no family in "
                                         f"METHODOLOGY_TO_FAMILY")
        if row.methodology_family != expected:
            check.fail("methodology_family", i, f"tag {row.methodology!r} maps to {expected!r}, "
                                                f"not {row.methodology_family!r}")
        gran = GRANULARITY_LABELS.get(row.granularity_label)
        if gran is None:
            check.fail("granularity_label", i, f"tag {row.granularity_label!r} is not in "
                                               f"GRANULARITY_LABELS")
        if tuple(split_multi(row.granularity)) != gran:
            check.fail("granularity", i, f"tag {row.granularity_label!r} maps to "
                                         f"{MULTI_SEP.join(gran)!r}, not {row.granularity!r}")
        in_survey = row.collection == "survey_snapshot"
        if in_survey != bool(row.survey_number):
            check.fail("survey_number", i, "must be filled exactly for survey_snapshot rows")
        if in_survey and not (row.survey_number.isdigit() and 1 <= int(row.survey_number) <= 47):
            check.fail("survey_number", i, f"{row.survey_number!r} is not an integer in 1..47")
        if not in_survey and (row.evidence or row.baseline_family):
            check.fail("evidence", i, "evidence and baseline_family come from Appendix B, so "
                                      "only survey_snapshot rows carry them")
    numbered = df.loc[df["survey_number"] != "", "survey_number"]
    repeated = numbered[numbered.duplicated()]
    if len(repeated):
        check.fail("survey_number", int(repeated.index[0]),
                   f"{repeated.iloc[0]!r} appears more than once")
    check.lab_columns()
    out = df.copy()
    out["year"] = out["year"].astype(int)
    out["survey_number"] = pd.array(
        [int(v) if v else pd.NA for v in df["survey_number"]], dtype="Int64")
    return out


def load_baselines(path: str | Path | None = None) -> pd.DataFrame:
    """Load and validate the background estimators (``data/inventory/baselines.csv`` by default).

    These are the estimators the surveyed methods are measured against or built from
    (REINFORCE, RLOO, GRPO, Dr. GRPO, REINFORCE++, GAE, Math-Shepherd); the survey discusses them
    but does not count them among its 47. Columns are :data:`BASELINE_COLUMNS`; ``year`` is
    ``int``. Errors are raised as in :func:`load_methods`.
    """
    df, src = _read_csv(path, BASELINES_CSV, "Baseline estimators (baselines.csv)")
    check = _Checker(df, src, "name")
    check.columns(BASELINE_COLUMNS)
    for col in ("name", "reference", "description"):
        check.nonempty(col)
    check.unique("name")
    for i, value in enumerate(df["arxiv_id"]):
        if value and not _ARXIV_RE.match(value):
            check.fail("arxiv_id", i, f"{value!r} is not an arXiv id")
    check.year()
    check.choice("setting", SETTINGS, multi=True)
    check.choice("granularity", GRANULARITIES, multi=True)
    check.choice("methodology_family", tuple(METHODOLOGY_FAMILIES))
    check.lab_columns()
    out = df.copy()
    out["year"] = out["year"].astype(int)
    return out


def lookup(names: Iterable[str], *, methods: pd.DataFrame | None = None,
           baselines: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows for the given method names from both inventories, in the order asked.

    The result has the columns ``name, source ("methods" or "baselines"), methodology_family,
    granularity, description, labkit_function, notebook, status``. Handy for showing the
    candidates of a :class:`Recommendation`. Unknown names raise ``ValueError`` listing them.
    """
    if isinstance(names, str):
        names = [names]
    if names is None or not isinstance(names, Iterable):
        raise TypeError(f"names: expected a list of method names (or one name), got {names!r}")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"names: expected method names (strings), got {bad}")
    methods = load_methods() if methods is None else methods
    baselines = load_baselines() if baselines is None else baselines
    cols = ["name", "methodology_family", "granularity", "description", "labkit_function",
            "notebook", "status"]
    both = pd.concat([methods[cols].assign(source="methods"),
                      baselines[cols].assign(source="baselines")], ignore_index=True)
    unknown = [n for n in names if n not in set(both["name"])]
    if unknown:
        raise ValueError(f"names: not in methods.csv or baselines.csv: {unknown}")
    order = {n: k for k, n in enumerate(names)}
    picked = both[both["name"].isin(order)].copy()
    picked["_order"] = picked["name"].map(order)
    picked = picked.sort_values("_order").drop(columns="_order").reset_index(drop=True)
    return picked[["name", "source"] + cols[1:]]


def after_survey_estimators(methods: pd.DataFrame | None = None) -> dict[str, str]:
    """The estimators of the methods published after the survey's snapshot (the catalog's later
    additions and the methods beyond it): the name of each row's ``labkit.credit`` function
    (its registered name) -> the method's name, in the inventory's order. ``methods``: a
    ``load_methods`` table (default: the shipped one)."""
    table = load_methods() if methods is None else methods
    later = table[(table["collection"] != "survey_snapshot") & table["labkit_function"].str.startswith("labkit.credit.")]
    return {fn.rpartition(".")[2]: name for name, fn in zip(later["name"], later["labkit_function"])}
