"""Real-browser check: JupyterLab + Debian Chromium driven by the playwright Python package.

Serves a copy of tests/browser/browser_fixture.ipynb from a temporary directory with JupyterLab bound to
127.0.0.1, opens it in /usr/bin/chromium (never `playwright install`), runs all cells, waits for
the altair charts to render through the offline jupyter renderer, hovers an HTML-looking token
and checks the tooltip shows it as inert text, moves the dashboard's slider and checks the chart
and summary were redrawn, locks a guess in a prediction block and checks the answer appears only
then, and saves artifacts/browser_check.png.

Every request the page makes to anything but the local server is blocked and recorded, and the
test fails if there was any: the charts must render with no network at all.
Skips with a reason when chromium or playwright is missing (.ci/install_browser.sh installs
chromium). Everything is bounded in time; the server is shut down in a finally block.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "browser_fixture.ipynb"
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = REPO / "artifacts" / "browser_check.png"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Hang guards, not speed checks: a check that waits longer than this has hung (a kernel that died,
# a page that never rendered) and fails instead of blocking the run. They are several times the
# normal time (about 30 s for the fixture, at most 60 s per course notebook on 2 cores) so a slow
# laptop or a busy CI machine never trips them; speed is measured by benchmarks/notebook_budget.py.
BUDGET_S = 300
COURSE_BUDGET_S = 600

pytestmark = pytest.mark.browser


def file_only_gate(blocked: list[str]):
    """A playwright route handler for static pages: file: and data: requests go through, any other
    is aborted and its URL appended to ``blocked`` (a page read offline must attempt none)."""

    def gate(route):
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    return gate


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(proc: subprocess.Popen, url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "api/status", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    pytest.fail(f"jupyter lab did not answer within {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def _start_lab(root: Path, port: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    # keep the user's Jupyter state out of the test, and the test's out of the user's
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
                     ("IPYTHONDIR", "ipython")):
        (root.parent / sub).mkdir(exist_ok=True)
        env[var] = str(root.parent / sub)
    # user settings: start the notebook's kernel without the "Select Kernel" dialog, and do not
    # offer to fetch Jupyter news (a network request)
    for plugin, settings in (("notebook-extension/tracker", {"autoStartDefaultKernel": True}),
                             ("apputils-extension/notification", {"fetchNews": "false"})):
        path = root.parent / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    cmd = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        # An empty token is acceptable ONLY because the server is bound to 127.0.0.1 for a test.
        # (IdentityProvider.token is jupyter_server 2's name for the deprecated ServerApp.token.)
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        # nothing from the server side reaches for the network either
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands by id
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI and these machines run as root
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # jupyter shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


class _Budget:
    """One time budget for the whole check: every wait gets at most what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def ms(self, cap_s: float) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            pytest.fail("browser check ran out of its time budget")
        return 1000 * min(cap_s, left)

    def s(self, cap_s: float) -> float:
        return self.ms(cap_s) / 1000


class _Session:
    """What a browser session recorded: blocked external requests and console errors."""

    def __init__(self) -> None:
        self.external: list[str] = []
        self.console_errors: list[str] = []


@contextlib.contextmanager
def _notebook_in_browser(tmp_path: Path, notebook: Path, budget: _Budget, shot: Path):
    """Serve ``notebook`` on 127.0.0.1, open it in chromium, run all cells; yield (page, session).

    On failure inside the block, saves a screenshot next to ``shot`` and prints the cell outputs,
    console errors, blocked requests and the server log. The server always stops.
    """
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (run .ci/install_browser.sh as root to install Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(notebook, root / notebook.name)
    port = _free_port()
    base = f"http://127.0.0.1:{port}/"
    log = tmp_path / "jupyter.log"
    proc = _start_lab(root, port, log)
    session = _Session()
    page = None
    try:
        _wait_for_server(proc, base, log, timeout=budget.s(45))
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=budget.ms(30)
            )
            try:
                # a 1366 x 900 laptop screen, the smallest a workshop room brings
                page = browser.new_page(viewport={"width": 1366, "height": 900})
                page.set_default_timeout(budget.ms(20))

                def gate(route):
                    url = route.request.url
                    if url.startswith(base) or url.startswith(("data:", "blob:")):
                        route.continue_()
                    else:
                        session.external.append(url)
                        route.abort()

                page.route("**/*", gate)
                page.on("console", lambda m: session.console_errors.append(m.text) if m.type == "error" else None)

                page.goto(base + "lab/tree/" + notebook.name, wait_until="domcontentloaded", timeout=budget.ms(45))
                page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=budget.ms(45))
                page.wait_for_function(
                    "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                    " && window.jupyterapp.shell.currentWidget.sessionContext",
                    timeout=budget.ms(30),
                )
                # Wait for the kernel (bounded in the page too: evaluate has no timeout of its own),
                # then run the command behind Run > Run All Cells.
                page.evaluate(
                    """async (ms) => {
                        const app = window.jupyterapp, nb = app.shell.currentWidget;
                        const late = new Promise((_, no) => setTimeout(() => no(new Error('kernel not ready')), ms));
                        await Promise.race([Promise.all([nb.context.ready, nb.sessionContext.ready]), late]);
                        await app.commands.execute('notebook:run-all-cells');
                    }""",
                    budget.ms(45),
                )
                yield page, session
                shot.parent.mkdir(exist_ok=True)
                page.wait_for_timeout(300)
                page.screenshot(path=str(shot), timeout=budget.ms(15))
            except BaseException:
                # leave evidence for whoever reads the CI log
                shot.parent.mkdir(exist_ok=True)
                try:
                    if page is not None:
                        page.screenshot(path=str(shot.with_name(shot.stem + "_failure.png")), timeout=10_000)
                        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
                        print("cell outputs:", json.dumps(outputs)[:4000])
                except Exception as exc:  # the page may be gone
                    print("could not capture the page:", exc)
                print("console errors:", session.console_errors[:20])
                print("blocked requests:", session.external[:20])
                print("jupyter log tail:", log.read_text()[-3000:])
                raise
            finally:
                browser.close()
    finally:
        _stop(proc)
    assert not session.external, f"the page tried to reach the network: {session.external}"
    vega_errors = [e for e in session.console_errors if "vega" in e.lower() or "anywidget" in e.lower()]
    assert not vega_errors, vega_errors


def test_notebook_renders_and_slider_redraws(tmp_path):
    t0 = time.monotonic()
    budget = _Budget(BUDGET_S)
    with _notebook_in_browser(tmp_path, FIXTURE, budget, SCREENSHOT) as (page, session):
        # both charts (static heatmap + dashboard) rendered by vega-embed into SVG/canvas
        page.wait_for_function(
            "() => document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length >= 2",
            timeout=budget.ms(60),
        )
        dash_chart = page.locator(".labkit-dashboard .vega-embed").first
        summary = page.locator(".labkit-summary")
        page.wait_for_function(
            "() => (document.querySelector('.labkit-summary')?.innerText || '').includes('shift=')",
            timeout=budget.ms(15),
        )
        before_text = summary.inner_text()
        before_svg = dash_chart.inner_html()
        assert "shift=+0.00" in before_text, before_text
        assert "dashboard heatmap" in before_svg  # the title is drawn inside the SVG
        assert "static heatmap" in page.locator(".vega-embed").first.inner_html()

        # hovering the "<b>" token shows it as text in the tooltip (vega-tooltip escapes;
        # labkit deliberately does not escape a second time), and injects no element
        page.locator(".vega-embed svg text", has_text="<b>").first.hover(timeout=budget.ms(10))
        tooltip = page.locator("#vg-tooltip-element.visible")
        tooltip.wait_for(timeout=budget.ms(10))
        tip_values = tooltip.locator("td.value").all_inner_texts()
        assert "<b>" in tip_values and "<i>r0</i>" in tip_values, tip_values
        assert tooltip.locator("b, i, script").count() == 0
        page.mouse.move(5, 5)

        # move the slider one step to the right with the keyboard
        handle = page.locator(".labkit-dashboard .noUi-handle").first
        handle.scroll_into_view_if_needed(timeout=budget.ms(10))
        handle.focus(timeout=budget.ms(10))
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(t) => { const s = document.querySelector('.labkit-summary');"
            " return s && s.innerText !== t; }",
            arg=before_text,
            timeout=budget.ms(20),
        )
        after_text = summary.inner_text()
        assert "shift=+0.25" in after_text, after_text
        # the chart itself was redrawn with the new values (new fill colours)
        page.wait_for_function(
            "(h) => { const e = document.querySelector('.labkit-dashboard .vega-embed');"
            " return e && e.innerHTML !== h && e.querySelector('svg, canvas'); }",
            arg=before_svg,
            timeout=budget.ms(20),
        )
        # no error message in the dashboard's output area
        assert page.locator(".labkit-dashboard .labkit-output").inner_text().strip() == ""

        # the prediction block shows its live form, and the answer only once a guess is locked
        block = page.locator(".labkit-prediction").first
        block.scroll_into_view_if_needed(timeout=budget.ms(10))
        assert "Answer:" not in block.inner_text()
        assert page.locator("details.reveal").count() == 0  # the static reveal stays out of a live page
        block.locator("button", has_text="Lock in my guess").click(timeout=budget.ms(10))
        page.wait_for_function(
            "() => (document.querySelector('.labkit-prediction')?.innerText || '').includes('Answer:')",
            timeout=budget.ms(15),
        )
        revealed = block.inner_text()
        assert "You guessed 0.000" in revealed and "total credit" in revealed, revealed
        assert block.locator("button", has_text="Lock in my guess").is_disabled()
        page.locator(".labkit-dashboard").scroll_into_view_if_needed(timeout=budget.ms(5))
    (SCREENSHOT.parent / "browser_check.json").write_text(json.dumps(
        {"seconds": round(time.monotonic() - t0, 1), "summary_before": before_text,
         "summary_after": after_text}, indent=1))


COURSE = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# Width of every rendered chart (its vega-embed's SVG or canvas) against the output column it sits
# in, in document order; scrolls each into view first (JupyterLab lazily renders far cells).
_CHART_WIDTHS_JS = """() => {
    const out = [];
    document.querySelectorAll('.jp-Cell').forEach((cell, i) => {
        cell.querySelectorAll('.vega-embed').forEach(embed => {
            const el = embed.querySelector('svg, canvas');
            const area = embed.closest('.jp-OutputArea-output') || cell.querySelector('.jp-OutputArea');
            if (!el || !area) return;
            out.push({cell: i, chart: Math.round(el.getBoundingClientRect().width),
                      column: Math.round(area.getBoundingClientRect().width)});
        });
    });
    return out;
}"""


# Charts that encode something by colour and show no key to it: per rendered chart, the distinct
# chromatic colours its data marks are drawn in (greys, white and black are ink, not encodings;
# axes, titles, legends and text marks are left out) against its legend groups and text marks.
# Two or more colours with neither a legend nor text on the marks cannot be read.
_UNKEYED_CHARTS_JS = """() => {
    const chromatic = c => {
        const m = /^#([0-9a-f]{6})$/i.exec(c || '') || /^#([0-9a-f]{3})$/i.exec(c || '');
        if (!m) return false;
        const h = m[1].length === 3 ? m[1].replace(/./g, x => x + x) : m[1];
        const [r, g, b] = [0, 2, 4].map(i => parseInt(h.slice(i, i + 2), 16));
        return Math.max(r, g, b) - Math.min(r, g, b) > 24;
    };
    const out = [];
    document.querySelectorAll('.jp-Cell').forEach((cell, i) => {
        cell.querySelectorAll('.vega-embed svg').forEach(svg => {
            const colours = new Set();
            svg.querySelectorAll('g.role-mark').forEach(g => {
                const cls = g.getAttribute('class') || '';
                if (cls.includes('mark-text') || g.closest('.role-legend, .role-axis, .role-title')) return;
                g.querySelectorAll('path, rect, line, circle').forEach(el => {
                    for (const a of ['fill', 'stroke']) {
                        const c = el.getAttribute(a);
                        if (chromatic(c)) colours.add(c.toLowerCase());
                    }
                });
            });
            const legends = svg.querySelectorAll('g.role-legend').length;
            const labels = [...svg.querySelectorAll('g.mark-text.role-mark')]
                .filter(g => !g.closest('.role-legend, .role-axis, .role-title')).length;
            if (colours.size >= 2 && legends === 0 && labels === 0) {
                const title = svg.querySelector('.role-title text');
                out.push({cell: i, colours: colours.size, title: title ? title.textContent : ''});
            }
        });
    });
    return out;
}"""

# The data marks of the n-th dashboard's chart (no axes, titles or legends), and its axis labels:
# what a slider move must change, and what a fixed axis keeps.
_DASHBOARD_DRAWING_JS = """(n) => {
    const svg = document.querySelectorAll('.labkit-dashboard')[n]?.querySelector('.vega-embed svg');
    if (!svg) return null;
    const marks = [...svg.querySelectorAll('g.role-mark')]
        .filter(g => !g.closest('.role-legend, .role-axis, .role-title')).map(g => g.innerHTML).join('');
    const axes = [...svg.querySelectorAll('.role-axis-label text')].map(t => t.textContent);
    return {marks, axes};
}"""


def _move_first_control(page, dashboard, budget: _Budget) -> bool:
    """Push the dashboard's first slider to its far end with the keyboard (End, or Home when it
    already sits at the end), or pick the last option of its first dropdown (the first, when the
    last is picked); False if it has neither. A far end, not one step: one step can stay inside
    the same answer (notebook 00's advice is GRPO at 2,000 and at 20,000 tokens alike)."""
    handle = dashboard.locator(".noUi-handle").first
    if handle.count():
        handle.scroll_into_view_if_needed(timeout=budget.ms(10))
        handle.focus(timeout=budget.ms(10))
        at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        page.keyboard.press("Home" if at_end else "End")
        return True
    select = dashboard.locator("select").first
    if select.count():
        n, current = select.evaluate("s => [s.options.length, s.selectedIndex]")
        select.select_option(index=0 if current == n - 1 else n - 1, timeout=budget.ms(10))
        return True
    return False


def _chart_cells(notebook: Path) -> int:
    """Code cells whose stored output is a chart or dashboard (a widget view when executed)."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum(1 for c in cells if c["cell_type"] == "code"
               and any("interactive chart" in str(o.get("data", {}).get("text/plain", "")) for o in c.get("outputs", [])))


@pytest.mark.parametrize("notebook", COURSE, ids=[p.stem for p in COURSE])
def test_course_notebook_runs_and_renders_in_browser(tmp_path, notebook):
    """Each course notebook, run top to bottom in JupyterLab: every cell finishes, no cell shows
    an error, and every chart cell draws at least one Vega view."""
    budget = _Budget(COURSE_BUDGET_S)
    expected = _chart_cells(notebook)
    assert expected > 0, "the stored notebook shows no chart: re-run scripts/execute_notebooks.py"
    shot = REPO / "artifacts" / f"browser_{notebook.stem}.png"
    with _notebook_in_browser(tmp_path, notebook, budget, shot) as (page, session):
        # run-all has been queued; wait until no cell is pending ("[*]") and the kernel is idle
        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll('.jp-InputArea-prompt')];"
            " return p.length > 0 && p.every(e => !e.innerText.includes('*'))"
            " && document.querySelector('.jp-Notebook-ExecutionIndicator[data-status=\"idle\"], "
            ".jp-NotebookPanel') !== null; }",
            timeout=budget.ms(COURSE_BUDGET_S),
        )
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
        assert not tracebacks, tracebacks[:2]
        page.wait_for_function(
            "(n) => document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length >= n",
            arg=expected, timeout=budget.ms(60),
        )
        assert page.locator(".labkit-dashboard .labkit-output").all_inner_texts() == [""] * page.locator(
            ".labkit-dashboard .labkit-output").count()
        # every chart fits the output column of a 1366-pixel screen: no sideways scrolling to
        # find a panel's title or the colour legend
        widths = page.evaluate(_CHART_WIDTHS_JS)
        print(f"{notebook.stem}: chart widths (px) against the column:", json.dumps(widths))
        assert widths, "no chart was measured"
        too_wide = [w for w in widths if w["chart"] > w["column"] + 1]
        assert not too_wide, f"charts wider than the {widths[0]['column']} px output column: {too_wide}"
        _save_chart_pictures(page, notebook, budget)
        # every chart that colours by category says which colour is which
        unkeyed = page.evaluate(_UNKEYED_CHARTS_JS)
        assert not unkeyed, f"charts with several colours and no legend or labels: {unkeyed}"
        # every dashboard redraws its marks when its first control moves to its end; notebook 01's keeps
        # its axes, so the change is seen in the bars and not only in the tick labels
        for n in range(page.locator(".labkit-dashboard").count()):
            dashboard = page.locator(".labkit-dashboard").nth(n)
            before = page.evaluate(_DASHBOARD_DRAWING_JS, n)
            if before is None or not _move_first_control(page, dashboard, budget):
                continue
            page.wait_for_function(
                f"(b) => {{ const d = ({_DASHBOARD_DRAWING_JS})({n}); return d && d.marks !== b; }}",
                arg=before["marks"], timeout=budget.ms(60),
            )
            after = page.evaluate(_DASHBOARD_DRAWING_JS, n)
            if notebook.stem.startswith("01_"):
                assert after["axes"] == before["axes"], (before["axes"], after["axes"])
            assert dashboard.locator(".labkit-output").inner_text().strip() == ""


def _save_chart_pictures(page, notebook: Path, budget: _Budget) -> None:
    """The screen a student sees at 1366 x 900 with each chart cell's output scrolled to the top,
    in artifacts/ (``browser_<notebook>_cell<N>.png``), for a person to look at."""
    (REPO / "artifacts").mkdir(exist_ok=True)
    cells = page.locator(".jp-Notebook .jp-Cell")
    for i in range(cells.count()):
        output = cells.nth(i).locator(".jp-Cell-outputArea").first
        if not output.count() or not output.locator(".vega-embed").count():
            continue
        # cells above may still be laid out as they come into view (JupyterLab renders far cells
        # lazily): scroll again until the output's top stays put
        top = None
        for _ in range(10):
            now = output.evaluate("e => { e.scrollIntoView({block: 'start'}); return e.getBoundingClientRect().top; }")
            page.wait_for_timeout(150)
            if top is not None and abs(now - top) < 1:
                break
            top = now
        page.screenshot(path=str(REPO / "artifacts" / f"browser_{notebook.stem}_cell{i}.png"),
                        timeout=budget.ms(15))
