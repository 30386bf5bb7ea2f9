"""The method inventory (labkit.survey.inventory): data/methods.csv and data/baselines.csv, their
source tables in data/inventory/ and the script that builds them, and the loaders.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pandas as pd
import pytest

from labkit import survey
from labkit.survey import (GRANULARITIES, METHODOLOGY_FAMILIES, METHODOLOGY_TO_FAMILY, NOTEBOOKS,
                           load_baselines, load_methods, lookup, split_multi)
from repo_scripts import load_script


REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "data" / "survey_catalog.csv"  # the survey authors' catalog, shipped (MIT)
INVENTORY = REPO / "data" / "inventory"         # the hand-edited tables methods.csv is built from


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    return pd.read_csv(CATALOG, dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def beyond() -> pd.DataFrame:
    """The methods the inventory holds beyond the catalog, with the catalog's facts and tags."""
    return pd.read_csv(INVENTORY / "beyond_catalog.csv", dtype=str, keep_default_na=False)


# --------------------------------------------------------------------------------------------
# methods.csv: shape and provenance
# --------------------------------------------------------------------------------------------

def test_one_row_per_catalog_entry_and_beyond(methods, beyond):
    assert len(methods) == 73 + len(beyond) and len(beyond) == 7
    assert methods["id"].is_unique
    assert methods["name"].is_unique
    assert list(methods.columns) == list(survey.METHOD_COLUMNS)


def test_ids_equal_catalog_ids_then_beyond(methods, catalog, beyond):
    assert list(methods["id"])[:73] != [] and sorted(methods["id"][:73]) == sorted(catalog["id"])
    assert list(methods["id"][73:]) == list(beyond["id"])
    assert len(catalog) == 73 and not set(beyond["id"]) & set(catalog["id"])
    assert (methods["collection"][73:] == "beyond_catalog").all()


def test_catalog_facts_carried_over(methods, catalog, beyond):
    cat = pd.concat([catalog, beyond.assign(collection="beyond_catalog")]).set_index("id")
    for row in methods.itertuples(index=False):
        src = cat.loc[row.id]
        assert row.title == src["title"], row.id
        assert row.year == int(src["year"]), row.id
        assert row.collection == src["collection"], row.id
        assert row.paper_url == src["paper_url"], row.id
        assert row.code_url == src["code_url"], row.id


def test_recent_additions_keep_catalog_tags(methods, catalog):
    cat = catalog.set_index("id")
    recent = methods[methods["collection"] == "recent_addition"]
    assert len(recent) == 26
    for row in recent.itertuples(index=False):
        assert row.granularity_label == cat.loc[row.id, "granularity"]
        assert row.methodology == cat.loc[row.id, "methodology"]
        scope = cat.loc[row.id, "scope"]
        expected = {"Core": "core", "Near-Core": "enabler", "Adjacent": "enabler"}.get(
            scope, "related")
        assert row.type == expected, (row.name, scope)


def test_survey_numbers_are_1_to_47_once_each(methods):
    snap = methods[methods["collection"] == "survey_snapshot"]
    assert len(snap) == 47
    assert sorted(snap["survey_number"].astype(int)) == list(range(1, 48))
    recent = methods[methods["collection"] == "recent_addition"]
    assert recent["survey_number"].isna().all()


def test_appendix_b_type_split(methods):
    snap = methods[methods["collection"] == "survey_snapshot"]
    # The survey: 41 core methods (#1-35, #42-47) and 6 enablers (#36-41).
    assert (snap["type"] == "core").sum() == 41
    enablers = snap.loc[snap["type"] == "enabler", "survey_number"].astype(int)
    assert sorted(enablers) == list(range(36, 42))
    assert set(snap["evidence"]) <= set(survey.EVIDENCE_LEVELS)
    assert (snap["evidence"] != "").all()


@pytest.mark.parametrize("name, field, value", [
    ("VinePPO", "survey_number", 1),
    ("VinePPO", "granularity", "token"),
    ("VinePPO", "methodology", "MC"),
    ("VinePPO", "baseline_family", "PPO"),
    ("VinePPO", "evidence", "strong"),
    ("TEMPO", "granularity", "token;segment"),
    ("TEMPO", "granularity_label", "Token/Seg"),
    ("PURE", "methodology", "Min-form PRM"),
    ("From r to Q*", "evidence", "analytical"),
    ("From r to Q*", "baseline_family", "DPO"),
    ("FinePO", "baseline_family", ""),
    ("POAD", "granularity", "token;turn"),
    ("C3", "setting", "agentic;multi-agent"),
    ("CCPO", "setting", "agentic;multi-agent"),
    ("AgentPRM", "baseline_family", "ORM"),
    ("ArCHer", "baseline_family", "TD"),
    ("GiGPO", "benchmarks", "ALFWorld, WebShop"),
    ("Dr. MAS", "survey_number", 47),
    ("Dr. MAS", "granularity", "multi-agent"),
    ("Agent Lightning", "type", "enabler"),
    ("GRPO-lambda", "granularity", "token;episode"),
    ("In-Context Core Credit", "setting", "other"),
])
def test_labels_spot_checks(methods, name, field, value):
    row = methods.set_index("name").loc[name]
    assert row[field] == value


@pytest.mark.parametrize("column, allowed, multi", [
    ("collection", survey.COLLECTIONS, False),
    ("type", survey.TYPES, False),
    ("setting", survey.SETTINGS, True),
    ("granularity", GRANULARITIES, True),
    ("methodology_family", tuple(METHODOLOGY_FAMILIES), False),
    ("baseline_family", survey.BASELINE_FAMILIES + ("",), False),
    ("evidence", survey.EVIDENCE_LEVELS + ("",), False),
    ("status", survey.STATUSES, False),
    ("notebook", NOTEBOOKS + ("",), False),
])
def test_allowed_values(methods, column, allowed, multi):
    for cell in methods[column]:
        parts = split_multi(cell) if multi else [cell]
        assert parts, f"{column}: empty multi-valued cell"
        for part in parts:
            assert part in allowed, f"{column}: {part!r}"


def test_family_follows_documented_mapping(methods, baselines):
    for row in methods.itertuples(index=False):
        assert METHODOLOGY_TO_FAMILY[row.methodology] == row.methodology_family, row.name
        assert tuple(split_multi(row.granularity)) == survey.GRANULARITY_LABELS[
            row.granularity_label], row.name
    assert set(METHODOLOGY_TO_FAMILY.values()) <= set(METHODOLOGY_FAMILIES)
    used = set(methods["methodology_family"]) | set(baselines["methodology_family"])
    assert used == set(METHODOLOGY_FAMILIES), "every family should have at least one member"


# --------------------------------------------------------------------------------------------
# Descriptions are our own words
# --------------------------------------------------------------------------------------------

_STOP = set("a an the of and or to in on for with by from as at is are be its it this that each "
            "into via than then so which their own per not no over under".split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_descriptions_are_not_copied_from_the_catalog(catalog, beyond):
    theirs = catalog.set_index("id")["description"]
    ours_table = pd.read_csv(INVENTORY / "descriptions.csv", dtype=str, keep_default_na=False)
    assert sorted(ours_table["id"]) == sorted(list(catalog["id"]) + list(beyond["id"]))
    for row in ours_table[ours_table["id"].isin(catalog["id"])].itertuples(index=False):
        ours, cat = row.description, theirs[row.id]
        assert ours.strip().lower() != cat.strip().lower(), row.name
        assert cat.strip().lower().rstrip(".") not in ours.lower(), row.name
        a = {w for w in _words(ours) if w not in _STOP and len(w) > 2}
        b = {w for w in _words(cat) if w not in _STOP and len(w) > 2}
        jaccard = len(a & b) / len(a | b)
        assert jaccard < 0.35, (row.name, jaccard, sorted(a & b))
        cat_trigrams = _ngrams(cat, 3)
        shared = len(cat_trigrams & _ngrams(ours, 3)) / max(1, len(cat_trigrams))
        assert shared < 0.2, (row.name, shared)
        assert not (_ngrams(cat, 5) & _ngrams(ours, 5)), (row.name, "5 words in a row copied")


def test_descriptions_are_one_or_two_sentences(methods, baselines):
    for text in list(methods["description"]) + list(baselines["description"]):
        assert 60 <= len(text) <= 460, text
        assert text.endswith("."), text
        # Sentence breaks: ". " followed by a capital letter (abbreviations like "i.e. a" pass).
        assert len(re.findall(r"\.\s+[A-Z]", text)) <= 1, text


# --------------------------------------------------------------------------------------------
# Lab columns
# --------------------------------------------------------------------------------------------

def test_every_catalog_row_has_a_lab_status(methods):
    assert set(methods["status"]) <= set(survey.STATUSES)
    assert len(methods) == 80
    # an implemented method names its function and the notebook that will show it
    done = methods[methods["status"].isin(["implemented", "adaptation", "stand-in"])]
    assert (done["labkit_function"] != "").all() and done["notebook"].isin(NOTEBOOKS).all()


def test_planned_rows_name_a_function_and_notebook(methods):
    planned = methods[methods["status"] == "planned"]   # may be empty once everything planned is built
    for row in planned.itertuples(index=False):
        assert re.fullmatch(r"labkit\.credit\.[a-z_]+\.[a-z_][a-z0-9_]*", row.labkit_function)
        assert row.labkit_function.split(".")[2] in survey.CREDIT_MODULES
        assert row.notebook in NOTEBOOKS


def test_concept_only_rows_give_a_reason(methods):
    concept = methods[methods["status"] == "concept-only"]
    assert (concept["labkit_function"] == "").all()
    assert (concept["status_note"].str.len() > 30).all()


def test_judge_methods_are_stand_ins_built_or_planned(methods):
    judge = methods[methods["methodology_family"] == "judge"]
    planned = judge[judge["status"] == "planned"]
    built = judge[judge["status"] == "stand-in"]
    assert set(planned["name"]) == set()
    assert set(built["name"]) == {"CAPO", "LLM-MCA", "MAPPA", "QLLM", "TARL", "LaRe", "SCRIBE", "TRIAGE",
                                  "Rubric-Grounded RL"}
    for row in pd.concat([planned, built]).itertuples(index=False):
        assert row.labkit_function.startswith(("labkit.credit.judge.", "labkit.credit.role_judges.")), row.name
        assert row.status_note.lower().startswith(("stand-in judge planned", "stand-in judge:")), row.name


def test_infrastructure_is_concept_only_unless_it_runs_in_the_loop(methods):
    """Infrastructure is concept-only, or runs as a rule of the training loop (PilotRL, PRS:
    schedules in labkit.learn; Temporal Scheduling: one stage of its schedule as an estimator), or
    as a yardstick of credit (QVal, in the benchmark)."""
    infra = methods[methods["methodology_family"] == "infrastructure"]
    assert "Agent Lightning" in set(infra["name"])
    built = infra[infra["status"] != "concept-only"].set_index("name")["labkit_function"]
    assert set(built.index) == {"PilotRL", "PRS", "Temporal Scheduling", "QVal"}
    assert built[["PilotRL", "PRS"]].str.startswith("labkit.learn.").all()
    assert built["Temporal Scheduling"] == "labkit.credit.temporal.tp_schedule"
    assert built["QVal"].startswith("labkit.bench.qval.")


@pytest.mark.parametrize("name, function, notebook", [
    ("VinePPO", "labkit.credit.mc.vineppo", "03_vineppo.ipynb"),
    ("GiGPO", "labkit.credit.group.gigpo", "06_gigpo.ipynb"),
    ("PURE", "labkit.credit.process.pure", "04_process_rewards.ipynb"),
    ("SPRO", "labkit.credit.process.spro", "04_process_rewards.ipynb"),
    ("CARL", "labkit.credit.entropy.carl", "07_critical_actions.ipynb"),
    ("IGPO", "labkit.credit.information.igpo", "07_critical_actions.ipynb"),
    ("HCAPO", "labkit.credit.hindsight.hcapo", "08_hindsight_counterfactual.ipynb"),
    ("C3", "labkit.credit.counterfactual.c3", "08_hindsight_counterfactual.ipynb"),
    ("SWEET-RL", "labkit.credit.privileged.sweet_rl", "08_hindsight_counterfactual.ipynb"),
    ("Turn-PPO", "labkit.credit.td.turn_gae", "05_why_agents_harder.ipynb"),
    ("AgentPRM", "labkit.credit.td.turn_gae", "05_why_agents_harder.ipynb"),
    ("RAGEN", "labkit.credit.group.starpo_filter", "05_why_agents_harder.ipynb"),
    ("Dr. MAS", "labkit.credit.multiagent.dr_mas", "09_multiagent.ipynb"),
    ("SHARP", "labkit.credit.multiagent.sharp", "09_multiagent.ipynb"),
])
def test_project_plan_assignments(methods, name, function, notebook):
    row = methods.set_index("name").loc[name]
    assert (row["labkit_function"], row["notebook"]) == (function, notebook)
    assert row["status"] in ("planned", "implemented", "adaptation", "stand-in")


def test_baselines_table(baselines, methods):
    assert list(baselines.columns) == list(survey.BASELINE_COLUMNS)
    episode = baselines[baselines["labkit_function"].str.startswith("labkit.credit.episode.")]
    assert set(episode["labkit_function"]) == {
        "labkit.credit.episode.reinforce", "labkit.credit.episode.reinforce_baseline",
        "labkit.credit.episode.rloo", "labkit.credit.episode.grpo",
        "labkit.credit.episode.dr_grpo",
        "labkit.credit.episode.reinforce_pp",
        "labkit.credit.episode.opo", "labkit.credit.episode.grpo_passk", "labkit.credit.episode.gpg",
        "labkit.credit.episode.remax", "labkit.credit.episode.gdpo"}
    assert set(episode["status"]) == {"implemented"}
    assert set(episode["notebook"]) == {"01_reinforce_variance.ipynb"}
    rest = baselines.set_index("name").loc[["GAE", "Math-Shepherd"]]
    assert set(rest["status"]) <= {"planned", "implemented"}
    assert list(rest["labkit_function"]) == ["labkit.credit.td.gae",
                                             "labkit.credit.mc.math_shepherd"]
    assert not set(baselines["name"]) & set(methods["name"])


def test_implemented_functions_resolve(baselines, methods):
    try:
        importlib.import_module("labkit.credit.episode")
    except ImportError as err:
        pytest.skip(f"labkit.credit.episode is not importable yet ({err}); the episode-level "
                    f"estimators are still being written")
    rows = pd.concat([baselines, methods])
    live = rows[rows["status"].isin(["implemented", "adaptation", "stand-in"])]
    assert len(live) >= 6
    for path in live["labkit_function"]:
        module, _, attr = path.rpartition(".")
        fn = getattr(importlib.import_module(module), attr, None)
        assert callable(fn), f"{path} does not resolve to a callable"


@pytest.fixture(scope="module")
def build():
    """scripts/build_methods_csv.py as a module."""
    return load_script("build_methods_csv")


@pytest.fixture()
def tables(build) -> dict[str, pd.DataFrame]:
    return {p.stem: build.read_csv(p) for p in sorted(INVENTORY.glob("*.csv"))}


def test_build_script_reproduces_committed_csvs(build):
    assert build.main(["--check", "--catalog", str(CATALOG)]) == 0


def test_the_inventory_agrees_with_the_estimator_registry(build, methods, tables):
    from labkit.credit.registry import STATUSES as REGISTERED
    # a registered estimator's status is one the inventory knows; the inventory adds the two
    # statuses of methods with no code
    assert survey.STATUSES[:len(REGISTERED)] == REGISTERED
    assert build.registry_disagreements(methods, tables["baselines"]) == []
    # a slip in either column is caught, with the row and the registered value
    slipped = methods.copy()
    vine = slipped["labkit_function"] == "labkit.credit.mc.vineppo"
    slipped.loc[vine, "status"] = "stand-in"
    slipped.loc[slipped["name"] == "SPO", "id"] = "2505.00000"
    found = build.registry_disagreements(slipped, tables["baselines"])
    assert found == ["methods.csv: VinePPO (labkit.credit.mc.vineppo): status 'stand-in', registered 'implemented'",
                     "methods.csv: SPO (labkit.credit.mc.spo): paper id 2505.00000 is not the registered paper's "
                     "(2505.23564)"]
    baselines = tables["baselines"].copy()
    baselines.loc[baselines["name"] == "GRPO", "status"] = "adaptation"
    assert build.registry_disagreements(methods, baselines) == [
        "baselines.csv: GRPO (labkit.credit.episode.grpo): status 'adaptation', registered 'implemented'"]


def test_build_output_is_byte_identical(build, catalog, tables):
    text = build.to_csv_text(build.build_methods(catalog, tables))
    assert text == survey.METHODS_CSV.read_text(encoding="utf-8")


def test_inventory_tables_are_what_methods_csv_shows(methods, tables):
    by_id = methods.set_index("id")
    assert set(tables) == {"appendix_b", "recent_names", "beyond_catalog", "descriptions", "lab_plan", "baselines",
                           "checklist"}
    assert len(tables["appendix_b"]) == 47 and len(tables["recent_names"]) == 26
    for stem in ("appendix_b", "recent_names", "beyond_catalog", "descriptions", "lab_plan"):
        table = tables[stem].set_index("id")
        for column in table.columns:
            got = by_id.loc[table.index, column].astype(str).tolist()
            assert got == table[column].tolist(), (stem, column)


@pytest.mark.parametrize("stem, edit, message", [
    ("lab_plan", lambda t: t.iloc[1:], r"lab_plan\.csv: .*missing \['2410\.01679'\]"),
    ("descriptions", lambda t: pd.concat([t, t.iloc[[0]]]), r"descriptions\.csv: .*duplicated"),
    ("lab_plan", lambda t: t.assign(name=t["name"].where(t.index != 0, "VinePP0")),
     r"lab_plan\.csv: name column"),
    ("recent_names", lambda t: t.iloc[:-1], r"recent_names\.csv.*missing \['2605\.06920'\]"),
    ("beyond_catalog", lambda t: t.iloc[:-1], r"descriptions\.csv: .*extra \['2509\.09265'\]"),
])
def test_build_rejects_inconsistent_tables(build, catalog, tables, stem, edit, message):
    tables[stem] = edit(tables[stem])
    with pytest.raises(SystemExit, match=message):
        build.build_methods(catalog, tables)


def test_build_rejects_collection_mismatch(build, catalog, tables):
    flipped = catalog.assign(collection=catalog["collection"].where(
        catalog.index != 0, "recent_addition"))
    with pytest.raises(SystemExit, match="collection"):
        build.build_methods(flipped, tables)


# --------------------------------------------------------------------------------------------
# Loading errors
# --------------------------------------------------------------------------------------------

def _write_variant(tmp_path, edit) -> Path:
    df = pd.read_csv(survey.METHODS_CSV, dtype=str, keep_default_na=False)
    df = edit(df)
    path = tmp_path / "methods.csv"
    df.to_csv(path, index=False)
    return path


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="methods.csv"):
        load_methods(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match="^path: .*LABKIT_DATA"):
        load_baselines(tmp_path / "nope.csv")


def test_bad_value_names_column_and_row(tmp_path):
    def edit(df):
        df.loc[2, "granularity"] = "paragraph"
        return df
    with pytest.raises(ValueError, match=r"column 'granularity', row 3 .*'paragraph'"):
        load_methods(_write_variant(tmp_path, edit))


@pytest.mark.parametrize("column, value, message", [
    ("methodology_family", "td", "maps to"),
    ("status", "done", "not one of"),
    ("setting", "agentic;reasoning", "canonical order"),
    ("labkit_function", "labkit.credit.magic.thing", "labkit.credit"),
    ("survey_number", "48", "1..47"),
    ("year", "20x4", "four-digit"),
])
def test_inconsistent_rows_are_rejected(tmp_path, column, value, message):
    def edit(df):
        df.loc[0, column] = value   # row 0 is VinePPO (mc, planned, survey #1)
        return df
    with pytest.raises(ValueError, match=message):
        load_methods(_write_variant(tmp_path, edit))


def test_duplicate_ids_and_missing_columns_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="more than once"):
        load_methods(_write_variant(tmp_path, lambda df: pd.concat([df, df.iloc[[0]]])))
    with pytest.raises(ValueError, match="missing column"):
        load_methods(_write_variant(tmp_path, lambda df: df.drop(columns="status")))


def test_planned_without_function_is_rejected(tmp_path):
    def edit(df):
        df.loc[0, "labkit_function"] = ""
        return df
    with pytest.raises(ValueError, match="needs a labkit function"):
        load_methods(_write_variant(tmp_path, edit))


def test_lookup(methods, baselines):
    table = lookup(["GiGPO", "GRPO"], methods=methods, baselines=baselines)
    assert list(table["name"]) == ["GiGPO", "GRPO"]
    assert list(table["source"]) == ["methods", "baselines"]
    with pytest.raises(ValueError, match="Nonexistent"):
        lookup(["GiGPO", "Nonexistent"], methods=methods, baselines=baselines)


def test_a_training_loop_rule_may_point_into_the_loop(methods, tmp_path):
    """SORL's mechanism is how the loss treats a stale batch, not a credit rule: its row names the
    loop function (any other labkit path outside labkit.credit is still refused)."""
    row = methods.set_index("name").loc["SORL"]
    assert row["labkit_function"] == "labkit.learn.loop.policy_loss" and row["status"] == "implemented"
    text = survey.METHODS_CSV.read_text(encoding="utf-8")
    bad = tmp_path / "methods.csv"
    bad.write_text(text.replace("labkit.learn.loop.policy_loss", "labkit.learn.critics.LMCritic"), encoding="utf-8")
    with pytest.raises(ValueError, match="labkit_function"):
        survey.load_methods(bad)


def test_training_schedules_point_into_the_schedules_module(methods):
    """PilotRL and PRS are orders in which credit (or reward) is used over training, run as
    stand-in schedules in the loop: their rows name labkit.learn.schedules, labelled stand-in."""
    rows = methods.set_index("name")
    for name, fn in (("PilotRL", "pilotrl_schedule"), ("PRS", "prs_schedule")):
        row = rows.loc[name]
        assert row["labkit_function"] == f"labkit.learn.schedules.{fn}" and row["status"] == "stand-in"
        assert row["status_note"].startswith("Stand-in:") and row["notebook"] == "08_hindsight_counterfactual.ipynb"


# --------------------------------------------------------------------------- bad input names the argument
def test_survey_loaders(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for load in (survey.load_methods, survey.load_baselines):
        with pytest.raises(TypeError, match=r"^path: expected a file path"):
            load(3)
        with pytest.raises(ValueError, match=r"^path: .* is a folder"):
            load(tmp_path)
        with pytest.raises(ValueError, match=r"^path: .* is empty"):
            load(empty)
        with pytest.raises(ValueError, match=r"^path: bad.csv: missing column"):
            load(bad)
        with pytest.raises(FileNotFoundError, match=r"^path: .*not found"):
            load(tmp_path / "nope.csv")
