"""What the course cites from the survey, and whether it holds: its section numbers, the section
the survey files each method under, and the phrases the notebooks quote.

The survey's own text is not shipped with the lab. ``scripts/build_survey_index.py`` reads it where
it is available and writes three small tables of facts to ``data/inventory/``:
``survey_sections.csv`` (every numbered section and appendix with its title),
``survey_method_sections.csv`` (its Appendix A: the section each method is reviewed in) and
``survey_quotes.csv`` (every phrase the notebooks quote from the survey, with the section whose
text holds it). The tests check the notebooks against these tables everywhere, and the tables
against the survey's text where the text is found.

The reading rules, one helper each:

* ``cited_sections``: the sections a markdown text cites, written ``§N.N``, ``§§N–M``,
  ``§N.N–N.M`` or ``Appendix X`` (a plain "section 4" is a notebook's own section, not the
  survey's);
* ``quoted_phrases``: the phrases in double quotes of a sentence that cites the survey (it names
  the survey or cites a ``§``); an ellipsis splits a quote into fragments that must each be found;
* ``normalize``: how a quote and the survey's text are compared (case, quotes, dashes, spaces and
  markdown emphasis ignored);
* ``parse_sections`` / ``parse_method_sections``: the survey's headings and Appendix A index.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SURVEY_ARXIV = "2604.09459"
ABSTRACT = "abstract"   # the text before the first numbered section

_HEADING = re.compile(r"^(\d+(?:\.\d+)*) +(\S.*)$")
_APPENDIX = re.compile(r"^Appendix ([A-Z]) +(\S.*)$")
_INDEX_ROW = re.compile(r"^\| *([^|]+?) *\|[^|]*\|[^|]*\| *§ *(\d+(?:\.\d+)*) *\|")
_SECTION_REF = re.compile(r"§§? *(\d+(?:\.\d+)*)(?: *[–-] *(\d+(?:\.\d+)*))?|Appendix ([A-Z])\b|\b(abstract)\b")
_QUOTE = re.compile(r"[\"“]([^\"“”\n]{3,600}?)[\"”]")
_SENTENCE_END = re.compile(r"(?<=[.!?])[*_]*\s+(?=[*_(\"“]*[A-Z0-9])|\n\s*\n")


def normalize(text: str) -> str:
    """Lower case, one quote mark and one dash, markdown emphasis and backticks dropped, runs of
    white space as one space: what is left must match for a quote to hold."""
    t = text.lower()
    # every quote mark as one: a quote inside a quote is written with single marks in the prose
    for a, b in (("’", '"'), ("‘", '"'), ("'", '"'), ("“", '"'), ("”", '"'), ("–", "-"), ("—", "-"), ("−", "-"),
                 ("˜", " "), ("\u00a0", " ")):
        t = t.replace(a, b)
    t = re.sub(r"[*_`]", "", t)
    return re.sub(r"\s+", " ", t).strip()


def fragments(phrase: str) -> list[str]:
    """The parts of a quoted phrase between ellipses ("..." or "…"), normalized, each without
    the punctuation at its ends; empty parts dropped."""
    parts = re.split(r"\.\.\.|…", phrase)
    out = [normalize(p).strip(" ,;:.!?'\"()[]") for p in parts]
    return [p for p in out if p]


# --------------------------------------------------------------------------- the survey's text
def parse_sections(text: str) -> dict[str, str]:
    """Section number (or appendix letter) -> title, from the survey's heading lines ("4.2
    Challenge 2: Partial Observability", "Appendix C Reporting Checklist ..."). Numbered list
    items ("1. Granularity ...") are not headings."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _HEADING.match(line) or _APPENDIX.match(line)
        if m and m.group(1) not in out and not m.group(2).startswith(("|", "%")):
            out[m.group(1)] = m.group(2).strip()
    return out


def section_texts(text: str) -> dict[str, str]:
    """Section number (or appendix letter) -> its own text, up to the next heading (a
    subsection's text is not repeated in its parent's), and ``ABSTRACT`` -> the text before the
    first heading."""
    out: dict[str, list[str]] = {ABSTRACT: []}
    current = ABSTRACT
    for line in text.splitlines():
        s = line.strip()
        m = _HEADING.match(s) or _APPENDIX.match(s)
        if m and m.group(1) not in out and not m.group(2).startswith(("|", "%")):
            current = m.group(1)
            out[current] = [m.group(2)]
            continue
        out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def method_mentions(text: str, names) -> dict[str, list[str]]:
    """Method name -> the sections whose own text names it (as a word), in the survey's order:
    where a sentence may cite the survey about it (a discussion section names methods reviewed
    elsewhere)."""
    texts = section_texts(text)
    out = {}
    for name in names:
        pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        out[name] = [k for k, body in texts.items() if pattern.search(body)]
    return out


def parse_method_sections(text: str) -> dict[str, str]:
    """Method name -> the section Appendix A (the survey's quick-reference index) reviews it in."""
    out: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("Appendix A"):
            inside = True
            continue
        if inside and line.startswith("Appendix "):
            break
        m = _INDEX_ROW.match(line.strip()) if inside else None
        if m and m.group(1) not in ("Abbreviation",):
            out[m.group(1)] = m.group(2)
    return out


def covers(cited: str, section: str) -> bool:
    """A citation of ``cited`` holds for ``section`` when one contains the other (§5 covers 5.3;
    §5.3.1 is inside 5.3); the abstract covers only itself."""
    if ABSTRACT in (cited, section):
        return cited == section
    a, b = cited.split("."), section.split(".")
    n = min(len(a), len(b))
    return a[:n] == b[:n]


# --------------------------------------------------------------------------- the notebooks' prose
@dataclass(frozen=True)
class Citation:
    """One sentence of prose that cites the survey: its ``sections`` (``cited_sections``), its
    survey ``quotes`` and the ``sentence`` itself."""

    sentence: str
    sections: tuple[str, ...]
    quotes: tuple[str, ...]


def sentences(markdown: str) -> list[str]:
    """A markdown text split into sentences (and paragraphs), line breaks inside one joined."""
    return [re.sub(r"\s+", " ", s).strip() for s in _SENTENCE_END.split(markdown) if s and s.strip()]


def cited_sections(sentence: str) -> tuple[str, ...]:
    """The survey sections a text cites: ``§N.N`` and the ends of a range ``§N.N–N.M`` (also
    every section between them when both have one more level than their common parent, e.g.
    §5.1–5.3 gives 5.1, 5.2, 5.3), ``§§2–3`` as 2 and 3, ``Appendix C`` as "C", and the word
    "abstract" as ``ABSTRACT``."""
    found: list[str] = []
    for m in _SECTION_REF.finditer(sentence):
        if m.group(3) or m.group(4):
            found.append(m.group(3) or ABSTRACT)
            continue
        lo, hi = m.group(1), m.group(2)
        found.append(lo)
        if hi:
            a, b = lo.split("."), hi.split(".")
            if len(a) == len(b) and a[:-1] == b[:-1] and int(b[-1]) > int(a[-1]):
                found += [".".join(a[:-1] + [str(k)]) for k in range(int(a[-1]) + 1, int(b[-1]) + 1)]
            else:
                found.append(hi)
    return tuple(dict.fromkeys(found))


def _cites_survey(sentence: str) -> bool:
    return "survey" in sentence.lower() or "§" in sentence or SURVEY_ARXIV in sentence


def citations(markdown: str) -> list[Citation]:
    """Every sentence of ``markdown`` that cites the survey (names it, its arXiv id or a §),
    with its cited sections and the phrases it quotes (double quotes: "..." or “...”)."""
    out = []
    for s in sentences(markdown):
        if not _cites_survey(s):
            continue
        quotes = tuple(q.group(1) for q in _QUOTE.finditer(s))
        out.append(Citation(sentence=s, sections=cited_sections(s), quotes=quotes))
    return out


def find_quote(phrase: str, texts: dict[str, str]) -> str | None:
    """The first section (in the survey's order) whose own text holds every fragment of
    ``phrase`` in order, or None."""
    parts = fragments(phrase)
    if not parts:
        return None
    for key, body in texts.items():
        t = normalize(body)
        at = 0
        for p in parts:
            at = t.find(p, at)
            if at < 0:
                break
            at += len(p)
        else:
            return key
    return None
