"""Draw a small fixed-layout tree (the method-selection decision tree) with one path lit up."""
from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from labkit.viz.charts import _check_df

ACTIVE, IDLE = "#d95f02", "#bbbbbb"


def tree_chart(nodes: pd.DataFrame, edges: pd.DataFrame, *, title: str | None = None,
               width: int = 820, height: int = 380) -> alt.LayerChart:
    """Nodes (id, label, kind, x, y, active) joined by edges (x, y, x2, y2, label, active).

    Layout comes from the data (y grows downwards); active nodes and edges are drawn in colour,
    the rest in grey. Labels may contain newlines.
    """
    _check_df(nodes, "tree_chart", x="x", y="y", label="label", active="active", kind="kind")
    _check_df(edges, "tree_chart", x="x", y="y", x2="x2", y2="y2", label="label", active="active")
    pad = 0.45
    xs = alt.Scale(domain=[float(nodes.x.min()) - pad, float(nodes.x.max()) + pad])
    ys = alt.Scale(domain=[float(nodes.y.min()) - 0.4, float(nodes.y.max()) + 0.5], reverse=True)
    colour = alt.condition("datum.active", alt.value(ACTIVE), alt.value(IDLE))
    x = alt.X("x:Q", scale=xs, axis=None)
    y = alt.Y("y:Q", scale=ys, axis=None)
    # answer labels sit a third of the way down each edge, clear of the labels at either end
    e = edges.assign(mx=edges.x + (edges.x2 - edges.x) * 0.35, my=edges.y + (edges.y2 - edges.y) * 0.35)
    lines = alt.Chart(e).mark_rule().encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q", color=colour,
        strokeWidth=alt.condition("datum.active", alt.value(3), alt.value(1)))
    answers = alt.Chart(e).mark_text(fontSize=10, dy=-4, fontStyle="italic").encode(
        x=alt.X("mx:Q", scale=xs, axis=None), y=alt.Y("my:Q", scale=ys, axis=None),
        text="label:N", color=colour)
    dots = alt.Chart(nodes).mark_point(filled=True, size=160).encode(
        x=x, y=y, color=colour,
        shape=alt.Shape("kind:N", scale=alt.Scale(domain=["question", "leaf"], range=["circle", "square"]),
                        legend=None),
        tooltip=[alt.Tooltip("label:N", title="node")])
    text_colour = alt.condition("datum.active", alt.value("#000000"), alt.value("#8a8a8a"))
    lined = nodes.assign(lines=nodes.label.map(lambda s: sum((textwrap.wrap(part, 22) for part in s.split("\n")), [])))
    # Questions are labelled above their dot (edges leave downwards), leaves below theirs. A
    # multi-line label grows downwards from its anchor, so lift question labels by their height.
    units_per_px = (ys.domain[1] - ys.domain[0]) / height
    q = lined[lined.kind == "question"]
    q = q.assign(label_y=q.y - units_per_px * (10 + 13 * q.lines.map(len)))
    above = alt.Chart(q).mark_text(fontSize=11, baseline="top").encode(
        x=x, y=alt.Y("label_y:Q", scale=ys, axis=None), text="lines:N", color=text_colour)
    below = alt.Chart(lined[lined.kind != "question"]).mark_text(fontSize=11, dy=10, baseline="top").encode(
        x=x, y=y, text="lines:N", color=text_colour)
    chart = alt.layer(lines, answers, dots, above, below).properties(width=width, height=height)
    return chart.properties(title=title) if title else chart
