"""Build data/methods.csv: a join of data/inventory/*.csv and the catalog.

    python scripts/build_methods_csv.py            # (re)write data/methods.csv
    python scripts/build_methods_csv.py --check    # exit 1 if the committed files differ

Facts (id, title, year, collection, URLs; the later additions' tags) come from the survey
authors' catalog (MIT, data/survey_catalog.LICENSE), found at --catalog, else
$LABKIT_SURVEY_CATALOG, else data/survey_catalog.csv. Methods the catalog does not hold (the
collection "beyond_catalog") carry the same facts and tags in data/inventory/beyond_catalog.csv. Labels and the lab's own text come from
data/inventory/ (its README says which file holds which column); granularity and
methodology_family are derived with labkit.survey's GRANULARITY_LABELS and METHODOLOGY_TO_FAMILY.
The background estimators (data/inventory/baselines.csv) need no join: labkit.survey loads them
as they are, and this script validates them. Both tables are also held to the estimator registry:
a row whose labkit_function is a registered estimator has that estimator's status, and its arXiv
id (a catalog row's id, a baseline's arxiv_id) is one its registered paper names.
"""
from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labkit.survey import (  # noqa: E402  (needs the sys.path line above)
    GRANULARITY_LABELS, METHOD_COLUMNS, METHODOLOGY_TO_FAMILY,
    load_baselines, load_methods,
)

INVENTORY = REPO / "data" / "inventory"
CATALOG = REPO / "data" / "survey_catalog.csv"
OUT_METHODS = REPO / "data" / "methods.csv"
PLAN_COLUMNS = ["labkit_function", "notebook", "status", "status_note"]

# The catalog's own labels for later additions -> the lab's type and setting.
SCOPE_TO_TYPE = {"Core": "core", "Near-Core": "enabler", "Adjacent": "enabler"}  # else related
CATALOG_SETTING = {"Reasoning RL": "reasoning", "Agentic RL": "agentic",
                   "Multi-Agent RL": "multi-agent", "Related / Non-policy RL": "other"}


def read_csv(path: Path) -> pd.DataFrame:
    """Read a CSV with every cell as text and "" (not NaN) for empty cells."""
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")


def find_catalog(explicit: str | None) -> Path:
    """The first existing catalog among --catalog, $LABKIT_SURVEY_CATALOG and data/."""
    env = os.environ.get("LABKIT_SURVEY_CATALOG")
    options = [Path(p) for p in (explicit, env) if p] + [CATALOG]
    for path in options:
        if path.is_file():
            return path
    raise SystemExit(f"survey_catalog.csv not found; tried {[str(p) for p in options]}")


def keyed(table: pd.DataFrame, what: str, ids: list[str],
          names: dict[str, str] | None = None) -> pd.DataFrame:
    """``table`` indexed by id; exits unless it holds every id of ``ids`` (the catalog's and
    beyond_catalog.csv's) once (and, given ``names``, unless its readers' ``name`` column
    matches them)."""
    got = list(table["id"])
    dup = sorted({i for i in got if got.count(i) > 1})
    if dup or set(got) != set(ids):
        raise SystemExit(f"{what}: ids must be the catalog's and beyond_catalog.csv's, once each; duplicated {dup}, "
                         f"missing {sorted(set(ids) - set(got))}, "
                         f"extra {sorted(set(got) - set(ids))}")
    wrong = [(i, n) for i, n in zip(got, table["name"]) if names and names[i] != n]
    if wrong:
        raise SystemExit(f"{what}: name column disagrees with the method names: {wrong}")
    return table.set_index("id")


def build_methods(catalog: pd.DataFrame, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """methods.csv as a DataFrame: one row per catalog entry, survey numbers first, then the
    methods beyond the catalog."""
    appendix = tables["appendix_b"]
    beyond = tables["beyond_catalog"]
    overlap = sorted(set(beyond["id"]) & set(catalog["id"]))
    if overlap:
        raise SystemExit(f"beyond_catalog.csv: {overlap} are in the catalog; list them there, not here")
    facts = pd.concat([catalog[["id", "title", "year", "collection", "paper_url", "code_url"]],
                       beyond.assign(collection="beyond_catalog")[["id", "title", "year", "collection", "paper_url",
                                                                   "code_url"]]], ignore_index=True)
    ids = list(facts["id"])
    recent = tables["recent_names"].merge(catalog, on="id")  # later additions: catalog tags
    recent = recent.assign(
        survey_number="", type=recent["scope"].map(lambda v: SCOPE_TO_TYPE.get(v, "related")),
        setting=recent["setting"].map(lambda v: CATALOG_SETTING[v]),
        granularity_label=recent["granularity"], baseline_family="", evidence="", benchmarks="")
    beyond_labels = beyond.assign(survey_number="", baseline_family="", evidence="", benchmarks="")
    labels = keyed(pd.concat([appendix, recent[appendix.columns], beyond_labels[appendix.columns]]),
                   "appendix_b.csv + recent_names.csv + beyond_catalog.csv", ids)
    in_appendix = catalog["id"].isin(appendix["id"])
    wrong = catalog.loc[in_appendix != (catalog["collection"] == "survey_snapshot"), "id"]
    if len(wrong):
        raise SystemExit(f"collection disagrees with appendix_b.csv for {list(wrong)}")
    names = labels["name"].to_dict()
    text = keyed(tables["descriptions"], "descriptions.csv", ids, names)
    plan = keyed(tables["lab_plan"], "lab_plan.csv", ids, names)
    df = (facts.join(labels, on="id").join(text["description"], on="id")
          .join(plan[PLAN_COLUMNS], on="id"))
    df["granularity"] = df["granularity_label"].map(lambda t: ";".join(GRANULARITY_LABELS[t]))
    df["methodology_family"] = df["methodology"].map(lambda t: METHODOLOGY_TO_FAMILY[t])
    # Survey methods in Appendix B order, then later additions in catalog order, then the methods
    # beyond the catalog in their file's order (stable sort).
    df = df[list(METHOD_COLUMNS)].sort_values(
        "survey_number", key=lambda s: pd.to_numeric(s, errors="coerce"), kind="stable",
        na_position="last")
    return df.reset_index(drop=True)


def registry_disagreements(methods: pd.DataFrame, baselines: pd.DataFrame) -> list[str]:
    """Rows of the method inventory and the baselines whose ``labkit_function`` is a registered
    estimator but whose status is not its registered status, or whose arXiv id is not among the
    ones its registered paper names; one line per disagreement."""
    problems = []
    for table, file, id_column in ((methods, "methods.csv", "id"), (baselines, "baselines.csv", "arxiv_id")):
        for _, row in table.iterrows():
            for path in filter(None, (p.strip() for p in str(row["labkit_function"]).split(";"))):
                module, _, attr = path.rpartition(".")
                spec = getattr(getattr(importlib.import_module(module), attr, None), "spec", None)
                if spec is None:   # not a registered estimator (a loss, a schedule, a batch filter)
                    continue
                where = f"{file}: {row['name']} ({path})"
                if row["status"] != spec.status:
                    problems.append(f"{where}: status {row['status']!r}, registered {spec.status!r}")
                if row[id_column] and row[id_column] not in spec.paper_ids:
                    problems.append(f"{where}: paper id {row[id_column]} is not the registered paper's ({spec.paper})")
    return problems


def to_csv_text(df: pd.DataFrame) -> str:
    """The exact text written to disk (Unix newlines, minimal quoting)."""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) data/methods.csv; validate the baselines table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", help="path to survey_catalog.csv")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the committed files differ")
    args = parser.parse_args(argv)
    catalog = read_csv(find_catalog(args.catalog))
    tables = {path.stem: read_csv(path) for path in sorted(INVENTORY.glob("*.csv"))}
    load_baselines(INVENTORY / "baselines.csv")
    baselines = tables.pop("baselines")
    tables.pop("checklist", None)      # the reporting checklist, loaded by labkit.survey.checklist
    methods = build_methods(catalog, tables)
    outputs = {OUT_METHODS: to_csv_text(methods)}
    disagreements = registry_disagreements(methods, baselines)
    for line in disagreements:
        print(f"disagrees with the estimator registry: {line}")
    if args.check:
        stale = [p for p, text in outputs.items()
                 if not p.is_file() or p.read_text(encoding="utf-8") != text]
        for p in stale:
            print(f"{p.relative_to(REPO)} is out of date; run scripts/build_methods_csv.py")
        return 1 if stale or disagreements else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
    load_methods(OUT_METHODS)      # validate what was written
    print(f"wrote {OUT_METHODS.relative_to(REPO)}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    raise SystemExit(main())
