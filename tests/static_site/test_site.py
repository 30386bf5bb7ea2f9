"""`make site`: the course as static HTML built from the stored notebooks, with no kernel.

The site builds into a temporary folder (the outline, the times and the plan pages from the
made-up inputs of site_fixture; test_site_pages.py checks what the index and the other pages
say); every notebook has its page, linked from the index in course order with prev/next links; every chart output stored in a notebook carries a PNG and
that PNG is on the notebook's page; no page loads anything from the network (checked in the
HTML, and in Chromium with every non-file request aborted where Chromium is present).
"""
from __future__ import annotations

import os
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from repo_scripts import load_script
from static_site import site_fixture

# The site is built with nbconvert, a tool of the repository's lock (not a labkit dependency): where it
# is absent (make test-other-end's environment of labkit's lower ends) there is no site to test.
pytest.importorskip("nbconvert", reason="make site needs nbconvert (in requirements.lock, not a labkit dependency)")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CHROMIUM = "/usr/bin/chromium"


def _load(name: str):
    return load_script(name)


site = _load("render_site")
execute = _load("execute_notebooks")
PATHS = site.course_notebooks(NOTEBOOKS)


class _Refs(HTMLParser):
    """Collects (tag, attribute, value) for every src/href, and every <a href> in order."""

    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href", "srcset", "data") and v is not None:
                self.refs.append((tag, k, v))


def _refs(page: Path) -> list[tuple[str, str, str]]:
    p = _Refs()
    p.feed(page.read_text(encoding="utf-8"))
    return p.refs


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    numbers = [p.name[:2] for p in PATHS]
    outline = site_fixture.write_outline(tmp_path_factory.mktemp("outline") / "outline.csv", numbers)
    pages = site.build(out, NOTEBOOKS, outline=outline, times=site_fixture.times(numbers),
                       pages=site_fixture.PLAN_PAGES)
    return out, pages


def _chart_outputs(nb):
    """(cell index, output) for every output stored in place of a chart's or dashboard's view."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get("text/plain", "")
            if text == execute.PLACEHOLDER:
                yield i, out


def test_every_notebook_has_a_page_linked_from_the_index_in_course_order(built):
    out, pages = built
    assert len(PATHS) >= 10 and pages[0] == out / "index.html"
    names = [p.stem + ".html" for p in PATHS]
    assert [p.name for p in pages[1:1 + len(names)]] == names
    for name in names:
        assert (out / name).stat().st_size > 1000
    links = [v for tag, k, v in _refs(out / "index.html") if tag == "a" and k == "href"]
    course_links = [v for v in links if v in names]
    assert course_links[:1] == names[:1]  # the top "next" link opens the first notebook
    html = (out / "index.html").read_text(encoding="utf-8")
    listed = re.findall(r'<a class="nb" href="([^"]+)"', html)
    assert listed == names  # the contents table, in course order
    for p in PATHS:  # titled from the notebook's first heading
        title = site.notebook_title(nbformat.read(p, as_version=4))
        assert title and f">{escape(title)}<" in html


def test_prev_next_links_walk_the_course(built):
    out, _ = built
    names = [p.stem + ".html" for p in PATHS]
    for i, name in enumerate(names):
        text = (out / name).read_text(encoding="utf-8")
        prev = re.findall(r'rel="prev" href="([^"]+)"', text)
        nxt = re.findall(r'rel="next" href="([^"]+)"', text)
        assert set(prev) == ({names[i - 1]} if i else set())
        assert set(nxt) == ({names[i + 1]} if i + 1 < len(names) else set())
        assert 'href="index.html"' in text


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_chart_output_has_its_picture_stored_and_on_its_page(built, path):
    out, _ = built
    nb = nbformat.read(path, as_version=4)
    charts = list(_chart_outputs(nb))
    assert charts, f"{path.name}: no chart outputs stored (was it executed by scripts/execute_notebooks.py?)"
    page = re.sub(r"\s+", "", (out / (path.stem + ".html")).read_text(encoding="utf-8"))
    missing = [i for i, o in charts if "image/png" not in o["data"]]
    assert not missing, f"{path.name}: chart outputs without a picture in cells {missing}"
    for i, o in charts:
        png = re.sub(r"\s+", "", o["data"]["image/png"])
        assert png.startswith("iVBORw0KGgo")  # base64 of the PNG signature
        assert "data:image/png;base64," + png in page, f"{path.name}: cell {i}'s picture is not on its page"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_no_checked_cell_stores_a_picture(path):
    """nbval compares only the cells marked NBVAL_CHECK_OUTPUT (--nbval-lax), and skips image/png
    even there; a chart in a checked cell would still fail on its live view's text, so the
    stored pictures stay out of every comparison."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in cell.source:
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                assert "image/png" not in data and data.get("text/plain") != execute.PLACEHOLDER, \
                    f"{path.name}: checked cell {i} displays a chart"


def test_no_page_loads_anything_from_the_network(built):
    out, pages = built
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text, f"{page.name}: has a script"
        for tag, attr, value in _refs(page):
            if tag == "a" and attr == "href":
                continue  # a reading link is navigation, not a request the page makes
            assert not re.match(r"\s*(https?:)?//", value, re.I), f"{page.name}: <{tag} {attr}={value!r}>"
            assert value.startswith(("data:", "#")) or "/" not in value, f"{page.name}: <{tag} {attr}={value!r}>"
        assert "Content-Security-Policy" in text


def test_notebook_title_needs_a_heading():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("no heading here"), nbformat.v4.new_markdown_cell("## Second *one*")]
    assert site.notebook_title(nb) == "Second one"
    nb.cells = nb.cells[:1]
    with pytest.raises(ValueError, match="^nb"):
        site.notebook_title(nb)


@pytest.mark.browser
def test_pages_render_offline_in_chromium(built):
    """Each page in Chromium with every request that is not file: or data: aborted: none may be
    attempted, and every picture decodes (a broken data: URI has naturalWidth 0)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (run .ci/install_browser.sh as root to install Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    from test_browser import CHROMIUM_ARGS, file_only_gate

    out, pages = built
    blocked: list[str] = []

    gate = file_only_gate(blocked)

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.set_default_timeout(60_000)
            page.route("**/*", gate)
            for p in pages:
                page.goto(p.as_uri(), wait_until="load")
                n, broken = page.evaluate(
                    "() => [document.images.length,"
                    " Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length]")
                assert broken == 0, f"{p.name}: {broken} of {n} images did not decode"
                if re.match(r"\d\d_", p.name):  # a notebook's page; the index and plans have none
                    assert n > 0, f"{p.name}: no pictures"
        finally:
            browser.close()
    assert not blocked, f"pages requested: {blocked[:5]}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_math_is_mathml_with_no_raw_tex_left(built, path):
    """Every $$...$$ formula of the notebook is a MathML block on its page, and outside code and
    math no TeX is left: no $$, no TeX command, no MathML error."""
    out, _ = built
    page = (out / (path.stem + ".html")).read_text(encoding="utf-8")
    assert "merror" not in page
    nb = nbformat.read(path, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "markdown"]
    sources += [o["data"]["text/markdown"] for c in nb.cells for o in c.get("outputs", [])
                if "text/markdown" in o.get("data", {})]
    code = re.compile(r"```.*?```|`[^`\n]*`", re.S)
    blocks = sum(len(re.findall(r"\$\$.+?\$\$", code.sub("", s), re.S)) for s in sources)
    assert len(re.findall(r'<math\b[^>]*\bdisplay="block"', page)) == blocks
    text = re.sub(r"<(pre|code|math|style)\b.*?</\1>", "", page, flags=re.S)
    assert "$$" not in text
    left = re.findall(r"\\(?:frac|operatorname|sum|mathbf|left|right|text|gamma|hat)\b", text)
    assert not left, f"{path.name}: raw TeX {left[:5]}"


def test_every_details_element_is_collapsed(built):
    out, pages = built
    for page in pages:
        tags = re.findall(r"<details\b[^>]*>", page.read_text(encoding="utf-8"))
        assert all(not re.search(r"\sopen\b", t) for t in tags), page.name
