"""The taxonomy (labkit.survey.taxonomy): vocabularies, counts, filters and look-ups over the inventory."""
from __future__ import annotations

import pytest

from labkit import survey
from labkit.survey import GRANULARITIES, METHODOLOGY_FAMILIES, filter_methods, split_multi, taxonomy_counts


# --------------------------------------------------------------------------------------------
# Taxonomy counts
# --------------------------------------------------------------------------------------------

def test_taxonomy_counts_add_up(methods):
    counts = taxonomy_counts(methods)
    assert list(counts.columns) == ["granularity", "methodology_family", "count", "methods"]
    pairs = sum(len(split_multi(g)) for g in methods["granularity"])
    assert counts["count"].sum() == pairs
    assert pairs >= len(methods)
    assert len(counts) == len(GRANULARITIES) * len(METHODOLOGY_FAMILIES)
    for row in counts.itertuples(index=False):
        listed = row.methods.split(", ") if row.methods else []
        assert len(listed) == row.count


def test_taxonomy_counts_order_and_multi_granularity(methods):
    counts = taxonomy_counts(methods, include_empty=False)
    assert (counts["count"] > 0).all()
    order = [GRANULARITIES.index(g) for g in counts["granularity"]]
    assert order == sorted(order)
    cells = {(r.granularity, r.methodology_family): r.methods.split(", ")
             for r in counts.itertuples(index=False)}
    assert "TEMPO" in cells[("token", "mc")] and "TEMPO" in cells[("segment", "mc")]
    assert "GiGPO" in cells[("step", "group")]


def test_taxonomy_counts_filters(methods):
    survey_only = taxonomy_counts(methods, collection="survey_snapshot")
    snap = methods[methods["collection"] == "survey_snapshot"]
    assert survey_only["count"].sum() == sum(len(split_multi(g)) for g in snap["granularity"])
    multi = taxonomy_counts(methods, setting="multi-agent", include_empty=False)
    names = {n for cell in multi["methods"] for n in cell.split(", ")}
    assert {"C3", "CCPO", "SHARP", "Dr. MAS"} <= names
    assert "VinePPO" not in names
    with pytest.raises(ValueError, match="allowed values"):
        taxonomy_counts(methods, setting="robotics")
    with pytest.raises(ValueError, match="collection"):
        taxonomy_counts(methods, collection="survey")


# --------------------------------------------------------------------------------------------
# Filters and lookup
# --------------------------------------------------------------------------------------------

def test_text_filter_is_case_insensitive_substring(methods):
    hits = filter_methods(methods, text="vinEPpo")
    assert list(hits["name"]) == ["VinePPO"]
    shapley = set(filter_methods(methods, text="SHAPLEY")["name"])
    assert {"SCAR", "SHARP"} <= shapley
    assert len(filter_methods(methods, text="  ")) == len(methods)
    assert filter_methods(methods, text="no method mentions this phrase").empty


def test_field_filters(methods):
    agentic = filter_methods(methods, setting="agentic")
    assert "C3" in set(agentic["name"]) and "VinePPO" not in set(agentic["name"])
    seg = filter_methods(methods, granularity="segment")
    assert {"SPO", "TEMPO", "SCAR"} <= set(seg["name"])
    both = filter_methods(methods, granularity=["segment", "multi-agent"])
    assert len(both) == len(seg) + len(filter_methods(methods, granularity="multi-agent"))
    judge = filter_methods(methods, family="judge", status="stand-in")
    assert set(judge["name"]) == {"CAPO", "LLM-MCA", "MAPPA", "QLLM", "TARL", "LaRe", "SCRIBE", "TRIAGE",
                                  "Rubric-Grounded RL"}
    recent = filter_methods(methods, collection="recent_addition")
    assert len(recent) == 26
    combo = filter_methods(methods, text="entropy", setting="agentic", family="entropy_information")
    assert "CARL" in set(combo["name"])
    assert list(combo.index) == list(range(len(combo)))


@pytest.mark.parametrize("kwargs, arg", [
    ({"setting": "robotics"}, "setting"),
    ({"granularity": "paragraph"}, "granularity"),
    ({"family": "magic"}, "family"),
    ({"status": "done"}, "status"),
    ({"collection": "survey"}, "collection"),
    ({"granularity": []}, "granularity"),
    ({"text": 3}, "text"),
])
def test_filters_reject_bad_values(methods, kwargs, arg):
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        filter_methods(methods, **kwargs)


def test_filters_on_baselines(baselines):
    assert list(filter_methods(baselines, text="deepseekmath")["name"]) == ["GRPO"]
    assert len(filter_methods(baselines, status="implemented")) == int((baselines["status"] == "implemented").sum()) >= 6
    with pytest.raises(ValueError, match="collection"):
        filter_methods(baselines, collection="survey_snapshot")


def test_split_multi():
    assert split_multi("token; segment") == ["token", "segment"]
    assert split_multi("") == []
    with pytest.raises(TypeError):
        split_multi(None)


# --------------------------------------------------------------------------------------------
# Vocabularies and the reporting checklist
# --------------------------------------------------------------------------------------------

def test_vocabularies():
    assert GRANULARITIES == ("token", "segment", "step", "turn", "multi-agent", "episode")
    assert 8 <= len(METHODOLOGY_FAMILIES) <= 13
    assert all(isinstance(g, str) and len(g) > 20 for g in METHODOLOGY_FAMILIES.values())
    assert set(survey.GRANULARITY_GLOSSES) == set(GRANULARITIES)


def test_survey_lookup_and_filters():
    df = survey.load_methods()
    with pytest.raises(TypeError, match=r"^names: expected a list"):
        survey.lookup(None)
    with pytest.raises(TypeError, match=r"^names: expected method names"):
        survey.lookup([3])
    with pytest.raises(TypeError, match=r"^df: expected a DataFrame"):
        survey.filter_methods(None)
    with pytest.raises(TypeError, match=r"^colour: not a filter of filter_methods"):
        survey.filter_methods(df, colour="x")
    with pytest.raises(TypeError, match=r"^df: expected a DataFrame"):
        survey.taxonomy_counts("x")
    assert len(survey.filter_methods(df)) == len(df)
