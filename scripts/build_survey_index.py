"""Build data/survey/: the facts the course cites from the survey (arXiv 2604.09459), read from
its text where the text is available.

    python scripts/build_survey_index.py                     # (re)write data/survey/*.csv
    python scripts/build_survey_index.py --check             # exit 1 if they differ from a rebuild
    python scripts/build_survey_index.py --survey PATH.txt   # the survey's text elsewhere

The survey's text is found at --survey, else $LABKIT_SURVEY_TEXT, else
../shared/reference/survey_credit_assignment_2604.09459.txt beside the repository; the lab does
not ship it. Writes (``labkit.survey.references`` holds the reading rules):

* sections.csv: ``section``, ``title``: every numbered section and appendix of the survey;
* method_sections.csv: ``name``, ``section``, ``mentioned_in``: Appendix A's section each method
  is reviewed in, and every section (or "abstract") whose text names it;
* quotes.csv: ``notebook``, ``phrase``, ``section``: every phrase a notebook quotes in a
  sentence that cites the survey, with the first section whose text holds it. A quoted phrase
  the survey does not hold is printed and left out, so the notebook test fails on it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labkit.survey.references import (  # noqa: E402  (needs the sys.path line above)
    citations, find_quote, method_mentions, parse_method_sections, parse_sections, section_texts,
)

OUT = REPO / "data" / "survey"
DEFAULT_TEXT = REPO.parent / "shared" / "reference" / "survey_credit_assignment_2604.09459.txt"


def find_text(explicit: str | None) -> Path:
    """The first existing survey text among --survey, $LABKIT_SURVEY_TEXT and ../shared/reference."""
    options = [Path(p) for p in (explicit, os.environ.get("LABKIT_SURVEY_TEXT")) if p] + [DEFAULT_TEXT]
    for path in options:
        if path.is_file():
            return path
    raise SystemExit(f"the survey's text was not found; tried {[str(p) for p in options]}")


def notebook_markdown(path: Path) -> str:
    """Every markdown cell of a notebook, as one text (cells apart by a blank line)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def build(text: str) -> tuple[dict[str, str], list[str]]:
    """(file name -> CSV text, phrases the survey does not hold)."""
    sections = parse_sections(text)
    texts = section_texts(text)
    rows, missing = [], []
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        for c in citations(notebook_markdown(nb)):
            for phrase in c.quotes:
                where = find_quote(phrase, texts)
                if where is None:
                    missing.append(f"{nb.name}: {phrase!r}")
                else:
                    rows.append({"notebook": nb.name, "phrase": phrase, "section": where})
    tables = {
        "sections.csv": pd.DataFrame(sorted(sections.items(), key=lambda kv: _order(kv[0])), columns=["section", "title"]),
        "method_sections.csv": _method_sections(text),
        "quotes.csv": pd.DataFrame(rows, columns=["notebook", "phrase", "section"]).drop_duplicates(),
    }
    return {name: t.to_csv(index=False, lineterminator="\n") for name, t in tables.items()}, missing


def _method_sections(text: str) -> pd.DataFrame:
    """Appendix A's section per method, and every section whose text names the method."""
    reviewed = parse_method_sections(text)
    mentioned = method_mentions(text, sorted(reviewed))
    rows = [{"name": n, "section": s, "mentioned_in": " ".join(mentioned[n])} for n, s in sorted(reviewed.items())]
    return pd.DataFrame(rows, columns=["name", "section", "mentioned_in"])


def _order(key: str) -> tuple:
    """Numbered sections first, in numeric order, then the appendices by letter."""
    return (1, key, ()) if key.isalpha() else (0, "", tuple(int(p) for p in key.split(".")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--survey", help="path to the survey's text")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if data/survey/ differs")
    args = parser.parse_args(argv)
    outputs, missing = build(find_text(args.survey).read_text(encoding="utf-8"))
    for line in missing:
        print(f"not in the survey's text: {line}")
    if args.check:
        stale = [n for n, t in outputs.items() if not (OUT / n).is_file() or (OUT / n).read_text(encoding="utf-8") != t]
        for n in stale:
            print(f"data/survey/{n} is out of date; run scripts/build_survey_index.py")
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, t in outputs.items():
        (OUT / name).write_text(t, encoding="utf-8")
    print(f"wrote data/survey/ ({', '.join(outputs)}); {len(missing)} quoted phrases not in the survey")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
