"""`make site`: math as MathML, the index's questions, times and prerequisites, the plan and guide
pages, and prediction reveals that stay collapsed.

Every formula in the course's notebooks (Markdown cells, Markdown and HTML outputs) converts; the
rules around it (only well-formed $...$ pairs, never inside code) are checked on small inputs; the
index and the extra pages on a small course of two notebooks (site_fixture) with made-up outline,
times and plans. The real pages are checked in test_site.py.
"""
from __future__ import annotations

import re
from html import escape
from pathlib import Path

import nbformat
import pytest

from repo_scripts import load_script
from static_site import site_fixture

pytest.importorskip("nbconvert", reason="make site needs nbconvert (in requirements.lock, not a labkit dependency)")
pytest.importorskip("latex2mathml", reason="make site converts TeX with latex2mathml (in requirements.lock)")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
site = load_script("render_site")
PATHS = site.course_notebooks(NOTEBOOKS)
_CODE = re.compile(r"```.*?```|`[^`\n]*`|<pre\b.*?</pre>|<code\b.*?</code>", re.S)


def _formulas(nb) -> list[tuple[str, bool]]:
    """(TeX, display) for each formula in ``nb``'s Markdown cells and Markdown/HTML outputs."""
    sources = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            sources.append(cell.source)
        for out in cell.get("outputs", []):
            sources += [out["data"][k] for k in ("text/markdown", "text/html") if k in out.get("data", {})]
    found = []
    for text in sources:
        text = _CODE.sub(" ", "".join(text) if isinstance(text, list) else text)
        for m in re.finditer(f"(?s:{site.DISPLAY_TEX}|{site.INLINE_TEX})", text):
            block = m.group("math_block_tex")
            found.append((block, True) if block is not None else (m.group("math_inline_tex"), False))
    return found


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_formula_in_the_notebooks_converts_to_mathml(path):
    formulas = _formulas(nbformat.read(path, as_version=4))
    for tex, display in formulas:
        out = site.tex_to_mathml(tex, display=display)  # raises on an error or an unknown command
        assert out.startswith("<math ") and "merror" not in out, tex
        assert f'display="{"block" if display else "inline"}"' in out


def test_the_course_has_formulas_to_convert():
    formulas = [f for p in PATHS for f in _formulas(nbformat.read(p, as_version=4))]
    assert sum(d for _, d in formulas) >= 40 and sum(not d for _, d in formulas) >= 5


def test_tex_to_mathml_keeps_the_tex_and_names_what_it_cannot_convert():
    out = site.tex_to_mathml(r"a < b", display=True)
    assert out.startswith('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">')
    assert '<annotation encoding="application/x-tex">a &lt; b</annotation>' in out
    for bad, why in ((r"\foo x", r"\\foo"), ("a^", "cannot convert"), (r"\left( x", "cannot convert"), (" ", "empty")):
        with pytest.raises(ValueError, match=f"^tex: .*{why}"):
            site.tex_to_mathml(bad)


def test_tex_to_mathml_draws_set_minus_and_named_operators_as_tex_does():
    out = site.tex_to_mathml(r"N \setminus \{i\} - \operatorname{mean}_{j} s_j")
    assert "<mo>&#x02216;</mo>" in out and "29F5" not in out.upper()
    assert '<mo lspace="0" rspace="0.167em">mean</mo>' in out


@pytest.mark.parametrize("text", [
    "a ticket costs $5 and a book $10",
    "from $5 to $10.",
    "$5-$10",
    "$ x $",
    "an escaped \\$x\\$ pair",
    "<code>$x$</code> and <pre>$$y$$</pre>",
    '<span title="$x$">t</span>',
    "<!-- $x$ -->",
])
def test_math_in_html_leaves_prose_dollars_code_and_attributes(text):
    assert site.math_in_html(text) == text


def test_math_in_html_converts_well_formed_pairs_in_text():
    out = site.math_in_html("<p>score $s_i$, cost $5; <b>$a &lt; b$</b></p><pre>$q$</pre>\n$$\\frac{1}{B}$$")
    assert out.count("<math ") == 3 and out.count('display="block"') == 1
    assert "cost $5;" in out and "<pre>$q$</pre>" in out
    assert "<mo>&#x0003C;</mo>" in out  # the entity was TeX's "<", and is one again in the MathML


def test_markdown_converts_math_but_not_code_escapes_or_prices():
    out = site.markdown_to_html("Price $5 and $10, code `$x$`, escaped \\$y\\$, math $z_1$.\n\n"
                                "```\n$$ a $$\n```\n\n$$\n\\sum_i x_i\n$$\n")
    assert "Price $5 and $10" in out and "<code>$x$</code>" in out and "escaped $y$" in out
    assert out.count("<math ") == 2 and "$$ a $$" in out


def test_collapse_details_removes_only_the_open_attribute():
    assert site.collapse_details("<details open><summary>s</summary></details>") == \
        "<details><summary>s</summary></details>"
    assert site.collapse_details('<details class="x" open="open" id="d">') == '<details class="x" id="d">'
    assert site.collapse_details('<details data-open="1">') == '<details data-open="1">'


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small course built into a folder: (out, pages, numbers)."""
    notebooks = site_fixture.small_course(tmp_path_factory.mktemp("notebooks"))
    numbers = ["01", "02"]
    outline = site_fixture.write_outline(tmp_path_factory.mktemp("outline") / "outline.csv", numbers)
    out = tmp_path_factory.mktemp("site")
    pages = site.build(out, notebooks, outline=outline, times=site_fixture.times(numbers),
                       pages=site_fixture.PLAN_PAGES)
    return out, pages, numbers


def test_index_gives_each_notebook_its_question_time_and_prerequisites(small):
    out, pages, numbers = small
    assert [p.name for p in pages] == ["index.html", "01_first.html", "02_second.html", "plan-three-hour.html",
                                       "plan-full-day.html", "guide-instructors.html"]
    index = (out / "index.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr><td><a class=\"nb\".*?</tr>", index, re.S)
    assert len(rows) == 2
    times = site_fixture.times(numbers).set_index("notebook")
    for row, n, name in zip(rows, numbers, ["01_first.html", "02_second.html"]):
        assert f'href="{name}"' in row and escape(site_fixture.question(n)) in row
        t = times.loc[n]
        assert f"about {t.total} min" in row
        assert (f"core {t.core} + optional {t.optional}" if t.optional else "all core") in row
    assert '<td class="prereqs">none</td>' in rows[0]
    assert '<td class="prereqs"><a class="prereq" href="01_first.html">01</a></td>' in rows[1]
    assert f"about {times.core.sum()} min on the core path, {times.total.sum()} min" in index


def test_extra_pages_are_rendered_and_linked_from_every_page(small):
    out, pages, _ = small
    extra = ["plan-three-hour.html", "plan-full-day.html", "guide-instructors.html"]
    for page in pages:
        nav = re.search(r'<nav class="top">(.*?)</nav>', page.read_text(encoding="utf-8"), re.S).group(1)
        for name in ["index.html", *extra]:
            assert f'href="{name}"' in nav, f"{page.name}: no link to {name}"
    plan = (out / "plan-three-hour.html").read_text(encoding="utf-8")
    assert "<title>Three-hour plan</title>" in plan and "<table>" in plan and "<td>break</td>" in plan
    assert plan.count("<math ") == 1 and 'href="01_first.html"' in plan
    assert 'aria-current="page">Three-hour plan<' in plan
    guide = (out / "guide-instructors.html").read_text(encoding="utf-8")
    assert "<title>Instructor&#x27;s guide</title>" in guide or "<title>Instructor's guide</title>" in guide
    assert 'href="01_first.html"' in guide  # ../01_first.ipynb in the guide's Markdown
    assert "tickets cost $5 or $10" in guide and guide.count("<math ") == 1
    assert "$$ not math $$" in re.sub(r"<[^>]+>", "", guide)  # the code block, as it was
    index = (out / "index.html").read_text(encoding="utf-8")
    for name in extra:
        assert f'<li><a href="{name}">' in index


def test_prediction_reveal_stays_collapsed_and_styled(small):
    out, _, _ = small
    page = (out / "01_first.html").read_text(encoding="utf-8")
    details = re.findall(r"<details\b[^>]*>", page)
    assert len(details) == 2 and all(d == "<details>" for d in details)  # the reveal and the card's code
    assert "<summary>Reveal the answer</summary>" in page
    reveal = page[page.index("Reveal the answer"):]
    assert "The measured share was 0.25" in reveal and "<math " in reveal[:reveal.index("</details>")]
    assert "jupyter-widgets" not in page and "<script" not in page  # no widget state: the HTML is shown
    assert "details > summary" in page
    assert len(re.findall(r'<math\b[^>]*\bdisplay="block"', page)) == 2
    text = re.sub(r"<(pre|code|math)\b.*?</\1>", "", page, flags=re.S)
    assert "a ticket costs $5 and a book $10" in text and "literally $x$ here" in text
    assert "$$" not in text.replace("$$ stays $$", "")


def test_small_site_makes_no_request(small):
    out, pages, _ = small
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text and f'content="{site.CSP}"' in text
        assert not re.search(r'(src|href)="(https?:)?//', text)


def test_outline_must_exist_and_cover_the_notebooks(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^outline: .*missing\.csv is missing"):
        site.read_outline(tmp_path / "missing.csv", ["01"])
    path = site_fixture.write_outline(tmp_path / "o.csv", ["01", "02"])
    assert site.read_outline(path, ["01", "02"])["02"] == {"question": site_fixture.question("02"),
                                                          "prerequisites": ["01"]}
    with pytest.raises(ValueError, match=r"^outline: .*no question for notebooks \['03'\]"):
        site.read_outline(path, ["01", "02", "03"])
    with pytest.raises(ValueError, match=r"^outline: .*prerequisites \['01'\] are not course notebooks"):
        site.read_outline(path, ["02"])
    (tmp_path / "bad.csv").write_text("notebook,title\n01,x\n")
    with pytest.raises(ValueError, match=r"^outline: .*needs the columns"):
        site.read_outline(tmp_path / "bad.csv", ["01"])


def test_build_says_which_input_is_missing(tmp_path):
    notebooks = site_fixture.small_course(tmp_path / "nb")
    outline = site_fixture.write_outline(tmp_path / "o.csv", ["01", "02"])
    with pytest.raises(FileNotFoundError, match="^outline: .*none.csv"):
        site.build(tmp_path / "s", notebooks, outline=tmp_path / "none.csv", times=site_fixture.times(["01", "02"]),
                   pages=[])
    with pytest.raises(ValueError, match=r"^times: no time for notebooks \['02'\]"):
        site.build(tmp_path / "s", notebooks, outline=outline, times=site_fixture.times(["01"]), pages=[])
    with pytest.raises(ValueError, match="^pages: "):
        site.build(tmp_path / "s", notebooks, outline=outline, times=site_fixture.times(["01", "02"]),
                   pages=[("01_first.html", "clash", "# x")])
    with pytest.raises(TypeError, match="^pages: "):
        site.build(tmp_path / "s", notebooks, outline=outline, times=site_fixture.times(["01", "02"]),
                   pages=[("plan.html", "no markdown")])


def test_the_course_outline_times_and_plans_feed_the_site():
    """The real inputs, where they exist: data/course/outline.csv covers every notebook, the timing
    rule gives every notebook its minutes, and every plan renders as a page."""
    if not site.OUTLINE.is_file():
        pytest.skip(f"{site.OUTLINE.relative_to(REPO)} is not written yet")
    pytest.importorskip("labkit.course.timing", reason="labkit.course.timing is not written yet")
    numbers = [p.name[:2] for p in PATHS]
    outline = site.read_outline(site.OUTLINE, numbers)
    times = site._read_times(site.default_times(NOTEBOOKS), numbers)
    assert set(outline) >= set(numbers) and set(times) >= set(numbers)
    assert all(t["total"] == t["core"] + t["optional"] > 0 for t in times.values())
    plans = site.default_pages()
    assert len(plans) >= 2
    for _, _, source in plans + site.guide_pages(NOTEBOOKS):
        assert "<" in site.markdown_to_html(source)
