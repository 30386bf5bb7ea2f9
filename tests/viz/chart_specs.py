"""Readers of Vega-Lite specs (chart.to_dict()) that the viz tests share."""
from __future__ import annotations

import re


# ----------------------------------------------------------------------------------------------
# helpers


def walk(node, path=()):
    """Yield (path, key, value) for every dict entry in a nested spec."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path, k, v
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


def records(spec: dict) -> list[dict]:
    """The rows of the single dataset a chart embeds."""
    datasets = spec["datasets"]
    assert len(datasets) == 1, list(datasets)
    return next(iter(datasets.values()))


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def color_scale(spec: dict) -> dict:
    scales = [l["encoding"]["color"]["scale"] for l in layers(spec) if "color" in l.get("encoding", {})]
    assert len(scales) == 1
    return scales[0]


def cell(recs, pos, row_label="row 0"):
    hits = [r for r in recs if r["pos"] == pos and r["row"] == row_label]
    assert len(hits) == 1, (pos, row_label, hits)
    return hits[0]


# ----------------------------------------------------------------------------------------------
# rendered charts (vl-convert draws the SVG a browser would)


def render_svg(chart) -> str:
    """The SVG of an altair chart or spec dict, drawn offline with the Vega-Lite version altair
    writes (as labkit.viz._static.chart_png does)."""
    import vl_convert as vlc
    from altair.utils._importers import vl_version_for_vl_convert

    spec = chart.to_dict() if hasattr(chart, "to_dict") else chart
    return vlc.vegalite_to_svg(spec, vl_version=vl_version_for_vl_convert())


def legend_count(svg: str) -> int:
    """How many legends the SVG draws (Vega marks each legend's group with role-legend)."""
    return len(re.findall(r'class="[^"]*\brole-legend"', svg))


def axis_ranges(svg: str) -> dict[str, str]:
    """The value range each drawn axis states in its description, e.g.
    {"X": "5 to 200", "Y": "-0.3 to 1.0"} (Vega writes "X-axis titled ... with values from 5 to
    200", rounded, with a typographic minus that is read back as "-")."""
    found = re.findall(r'aria-label="([XY])-axis[^"]*? values from ([^"]*)"', svg)
    return {axis: text.replace("\u2212", "-") for axis, text in found}
