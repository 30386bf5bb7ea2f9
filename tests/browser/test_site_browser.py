"""The static site (`make site`) in a real Chromium: math drawn, reveals that open, no CSP complaint.

Builds a small site into a temporary folder (the two notebooks of tests/static_site/site_fixture,
one of the course's notebooks with many formulas, a plan page and the guide), opens its pages
from file: in /usr/bin/chromium with every request that is not file: or data: aborted, and
checks: every <math> element has a box (Chromium drew the MathML), a display fraction is taller
than a line of text, the console shows no error (a Content-Security-Policy violation is one), and
a prediction's <details> starts closed and shows its answer once its summary is clicked.
Skips with a reason when chromium, playwright, nbconvert or latex2mathml is missing.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from repo_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
MATH_NOTEBOOK = REPO / "notebooks" / "04_process_rewards.ipynb"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site_pages(tmp_path_factory):
    """The small site built into a folder: its pages, index first."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (run .ci/install_browser.sh as root to install Debian's chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    pytest.importorskip("nbconvert", reason="make site needs nbconvert (in requirements.lock)")
    pytest.importorskip("latex2mathml", reason="make site converts TeX with latex2mathml (in requirements.lock)")
    from static_site import site_fixture

    site = load_script("render_site")
    notebooks = site_fixture.small_course(tmp_path_factory.mktemp("notebooks"))
    shutil.copy(MATH_NOTEBOOK, notebooks / MATH_NOTEBOOK.name)
    numbers = ["01", "02", MATH_NOTEBOOK.name[:2]]
    outline = site_fixture.write_outline(tmp_path_factory.mktemp("outline") / "outline.csv", numbers)
    return site.build(tmp_path_factory.mktemp("site"), notebooks, outline=outline,
                      times=site_fixture.times(numbers), pages=site_fixture.PLAN_PAGES)


def test_site_math_renders_and_reveals_open_with_no_csp_complaint(site_pages):
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM_ARGS, file_only_gate

    blocked: list[str] = []
    console: list[str] = []

    gate = file_only_gate(blocked)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(60_000)
            page.route("**/*", gate)
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
                    else None)
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            formulas = 0
            for p in site_pages:
                page.goto(p.as_uri(), wait_until="load")
                boxes = page.evaluate(
                    "() => Array.from(document.querySelectorAll('math')).map(m => {"
                    " const r = m.getBoundingClientRect();"
                    " return [m instanceof MathMLElement, r.width, r.height]; })")
                assert all(is_mathml and w > 0 and h > 0 for is_mathml, w, h in boxes), \
                    f"{p.name}: math without a box: {[b for b in boxes if not (b[0] and b[1] > 0 and b[2] > 0)][:3]}"
                formulas += len(boxes)
                if p.name == MATH_NOTEBOOK.stem + ".html":
                    # a display formula with a fraction stands taller than a line of text
                    tall = page.evaluate(
                        "() => { const line = parseFloat(getComputedStyle(document.body).lineHeight);"
                        " const m = Array.from(document.querySelectorAll('math[display=block]'))"
                        "   .find(m => m.querySelector('mfrac'));"
                        " return [m.getBoundingClientRect().height, line]; }")
                    assert tall[0] > 1.2 * tall[1], f"{p.name}: fraction {tall[0]:.0f}px for a {tall[1]:.0f}px line"
            assert formulas >= 20

            page.goto(site_pages[1].as_uri(), wait_until="load")  # 01_first.html: the prediction's reveal
            details = page.locator("details", has_text="Reveal the answer")
            answer = details.get_by_text("The measured share was 0.25")
            assert details.evaluate("d => d.open") is False and not answer.is_visible()
            details.locator("summary").click()
            assert details.evaluate("d => d.open") is True
            answer.wait_for(state="visible", timeout=10_000)
            box = details.locator("math").bounding_box()
            assert box and box["width"] > 0 and box["height"] > 0
        finally:
            browser.close()
    assert not blocked, f"pages requested: {blocked[:5]}"
    assert not console, f"console: {console[:5]}"
