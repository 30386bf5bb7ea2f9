"""What the notebooks cite from the survey holds: every phrase quoted in a sentence that cites the
survey is in the survey's text (data/survey/quotes.csv, built from the text by
scripts/build_survey_index.py), inside the section the sentence cites; every cited section exists;
a method named beside a cited section is reviewed in that section (the survey's Appendix A). Where
the survey's text is found, data/survey/ is checked against a rebuild from it."""
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from labkit.survey.references import citations, covers, normalize
from repo_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SURVEY = ROOT / "data" / "survey"


def _markdown(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _table(name: str) -> pd.DataFrame:
    return pd.read_csv(SURVEY / name, dtype=str, keep_default_na=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_quotes_of_the_survey_are_in_its_text_where_the_sentence_cites_them(path):
    quotes = _table("quotes.csv")
    held = {(r.phrase, r.section) for r in quotes[quotes.notebook == path.name].itertuples()}
    where = dict(held)
    wrong = []
    for c in citations(_markdown(path)):
        for phrase in c.quotes:
            if phrase not in where:
                wrong.append(f"{phrase!r} is not in the survey's text (or data/survey/quotes.csv is stale: "
                             f"run scripts/build_survey_index.py)")
            elif c.sections and not any(covers(s, where[phrase]) for s in c.sections):
                wrong.append(f"{phrase!r} is in §{where[phrase]}, the sentence cites {', '.join(c.sections)}")
    assert not wrong, f"{path.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_cited_sections_exist_and_hold_the_methods_named_beside_them(path):
    sections = set(_table("sections.csv").section) | {"abstract"}
    table = _table("method_sections.csv")
    # a sentence may cite the section that reviews a method or any section whose text names it
    where = {r.name: [r.section, *r.mentioned_in.split()] for r in table.itertuples()}
    wrong = []
    for c in citations(_markdown(path)):
        wrong += [f"§{s} is not a section of the survey" for s in c.sections if s not in sections]
        numbered = [s for s in c.sections if not s.isalpha()]
        if not numbered:
            continue
        outside = c.sentence
        for q in c.quotes:   # a method named inside a quote is the survey's wording, not a citation
            outside = outside.replace(q, "")
        words = set(normalize(outside).replace("(", " ").replace(")", " ").replace(",", " ").split())
        for name, homes in where.items():
            if normalize(name) in words and not any(covers(s, h) for s in numbered for h in homes):
                wrong.append(f"{name} is reviewed in §{homes[0]} and named in {' '.join(homes[1:]) or 'no other'}, "
                             f"the sentence cites §{', §'.join(numbered)}: {c.sentence[:120]!r}")
    assert not wrong, f"{path.name}: " + "; ".join(wrong)


def test_the_index_is_what_the_survey_text_gives():
    script = load_script("build_survey_index")
    try:
        text = script.find_text(None)
    except SystemExit:
        pytest.skip("the survey's text is not here (set LABKIT_SURVEY_TEXT to check data/survey/ against it)")
    outputs, _ = script.build(text.read_text(encoding="utf-8"))
    for name, csv in outputs.items():
        assert (SURVEY / name).read_text(encoding="utf-8") == csv, f"data/survey/{name} is stale"
    assert len(_table("sections.csv")) > 50 and len(_table("method_sections.csv")) >= 40


def test_the_reading_rules_on_examples():
    from labkit.survey.references import cited_sections, find_quote, fragments

    assert cited_sections("(arXiv 2604.09459, §5.1–5.3) and §§2–3, Appendix C, its abstract") == \
        ("5.1", "5.2", "5.3", "2", "3", "C", "abstract")
    assert covers("abstract", "abstract") and not covers("3", "abstract")
    assert covers("5", "5.3") and covers("5.3.1", "5.3") and not covers("5.1", "5.3")
    assert fragments("lucky … and actions that were *genuinely* good") == ["lucky", "and actions that were genuinely good"]
    texts = {"1": "Intro text.", "5.2": "Hindsight: knowing the “outcome” lets the critic see luck."}
    assert find_quote("knowing the 'outcome' lets", texts) == "5.2"
    assert find_quote("knowing the outcome ... see luck", texts) is None       # quotes marks kept apart from words
    assert find_quote("knowing the 'outcome' ... see luck", texts) == "5.2"
    assert find_quote("see luck ... knowing", texts) is None                   # fragments in order
    [c] = citations('The survey (§5.2) says "knowing the outcome". A plain "quote" here.')
    assert c.sections == ("5.2",) and c.quotes == ("knowing the outcome",)
