"""labkit.viz: credit heatmaps, plain charts and slider dashboards for the notebooks.

The charts take plain arrays (numpy, lists, or torch tensors) and pandas DataFrames and return
altair charts. One function knows labkit's types: :func:`credit_panels` turns estimators'
``Credit`` objects (their per-token credit, or their values at the level they were computed at)
and the exact truth into the ``{title: (rows, N) tensor}`` panels :func:`compare_heatmaps` draws,
truth first, the same rows picked from each; it is how every lesson builds its heatmaps. Layer:
``labkit.viz`` imports ``labkit.core`` only.

Call :func:`enable_offline` once at the top of a notebook. Why: altair 6's default renderers
either load Vega from a CDN (no internet on a laptop in a workshop, on CI, or here) or emit the
vega-lite mimetype, which JupyterLab 4 no longer renders. The "jupyter" renderer draws each chart
with ``alt.JupyterChart`` (an anywidget), and in offline mode altair asks vl-convert-python for a
self-contained JavaScript bundle of Vega/Vega-Lite/vega-embed, so charts render with no network.
"""
from __future__ import annotations

import altair as alt

from labkit.viz._static import chart_hook_wanted, chart_png, install_chart_hook
from labkit.viz.charts import bar_chart, heat_table, line_chart
from labkit.viz.heatmap import MAX_ROWS, compare_heatmaps, credit_heatmap, visible_text
from labkit.viz.method import method_card, method_cards
from labkit.viz.panels import credit_panels
from labkit.viz.rules import ChartRuleError, chart_problems, check_chart
from labkit.viz.tree import tree_chart
from labkit.viz.widgets import Dashboard, control_values, dropdown, interact, slider

__all__ = [
    "enable_offline",
    "credit_heatmap",
    "compare_heatmaps",
    "credit_panels",
    "visible_text",
    "line_chart",
    "bar_chart",
    "heat_table",
    "tree_chart",
    "chart_png",
    "chart_problems",
    "check_chart",
    "ChartRuleError",
    "method_card",
    "method_cards",
    "Dashboard",
    "interact",
    "slider",
    "dropdown",
    "control_values",
    "MAX_ROWS",
]


def enable_offline() -> None:
    """Render altair charts in JupyterLab 4 without internet (idempotent, cheap).

    Switches altair to the "jupyter" renderer with ``offline=True``. Needs the ``anywidget``
    package (the widget that displays the chart; JupyterLab picks up its frontend extension) and
    ``vl-convert-python`` (which supplies the bundled Vega JavaScript). The bundle is built
    lazily by altair the first time a chart is displayed (a few seconds, once per kernel), so
    calling this function costs nothing; calling it again does nothing.
    Altair's 5000-row data limit stays on: the labkit charts keep their data small instead.

    With ``LABKIT_STATIC_IMAGES=1`` (set by ``scripts/execute_notebooks.py`` for the runs whose
    outputs are stored) every chart displayed afterwards also carries a static PNG, so a stored
    notebook shows its charts without a kernel; see ``labkit.viz._static``. Under the tests'
    strict checks (``LABKIT_STRICT_CHECKS=1``) every chart displayed afterwards is checked
    against the chart rules (``labkit.viz.rules``), and one that breaks them fails its cell.
    """
    if chart_hook_wanted():
        install_chart_hook()
    if alt.renderers.active == "jupyter" and (alt.renderers.options or {}).get("offline") is True:
        return
    alt.renderers.enable("jupyter", offline=True)
