"""The chart rules (labkit.viz.rules): a colour that encodes data has a legend or direct labels.

The rule is checked on hand-written specs, against the SVG vl-convert draws for the library's own
charts (the rule says "no legend" exactly where none is drawn), and where it is enforced: the
display hook of every chart and a dashboard's display, under strict checks only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labkit import viz
from labkit.viz import _static, rules
from labkit.viz.rules import ChartRuleError, chart_problems, chart_title, check_chart

from chart_specs import legend_count, render_svg

DATA = {"values": [{"x": 1, "y": 2.0, "m": "a"}, {"x": 2, "y": 1.0, "m": "b"}]}


def unit(mark="line", title=None, **encoding):
    spec = {"data": DATA, "mark": mark, "encoding": {"x": {"field": "x", "type": "quantitative"},
                                                     "y": {"field": "y", "type": "quantitative"}, **encoding}}
    if title is not None:
        spec["title"] = title
    return spec


def colour(legend=..., channel_type="nominal", **extra):
    enc = {"field": "m", "type": channel_type, **extra}
    if legend is not ...:
        enc["legend"] = legend
    return enc


def layer(*units, **top):
    return {"layer": [{k: v for k, v in u.items() if k != "data"} for u in units], "data": DATA, **top}


# ----------------------------------------------------------------------------------------------
# the rule on specs


def test_a_colour_with_its_legend_passes_and_one_without_fails():
    assert chart_problems(unit(color=colour())) == []
    assert chart_problems(unit(color=colour(legend={"orient": "top"}))) == []
    (problem,) = chart_problems(unit(color=colour(legend=None)))
    assert "color encodes field 'm'" in problem and "legend" in problem
    assert chart_problems(unit(color=colour(legend={"disable": True})))


@pytest.mark.parametrize("channel", ["color", "fill", "stroke"])
def test_every_colour_channel_counts(channel):
    (problem,) = chart_problems(unit(**{channel: colour(legend=None)}))
    assert problem.startswith(f"{channel} encodes field 'm'")


def test_a_quantity_in_colour_needs_its_key_too():
    assert chart_problems(unit("rect", color=colour(legend=None, channel_type="quantitative")))


def test_a_literal_colour_from_the_data_needs_no_key():
    ink = {"field": "m", "type": "nominal", "scale": None}
    assert chart_problems(unit("text", fill=ink, text={"field": "y", "type": "quantitative"})) == []
    assert chart_problems(unit(color={"value": "red"})) == []
    conditional = {"condition": {"test": "datum.x > 1", "value": "red"}, "value": "grey"}
    assert chart_problems(unit(color=conditional)) == []


def test_a_field_inside_a_condition_is_an_encoding():
    conditional = {"condition": {"param": "pick", "field": "m", "type": "nominal"}, "value": "grey"}
    assert chart_problems(unit(color=conditional)) == []
    conditional["condition"]["legend"] = None  # where a conditional field keeps its legend
    assert chart_problems(unit(color=conditional))


def test_one_null_legend_in_a_layer_hides_the_shared_legend_of_every_layer():
    band = unit("area", color=colour(legend=None))
    line = unit("line", color=colour())
    problems = chart_problems(layer(band, line, title="curves"))
    assert problems and all("color encodes field 'm'" in p for p in problems)
    # each layer with its own scale: the line's legend is back, the band's own colour is still unkeyed
    split = chart_problems(layer(band, line, resolve={"scale": {"color": "independent"}}))
    assert len(split) == 1
    both_keyed = layer(unit("area", color=colour()), line)
    assert chart_problems(both_keyed) == []


def test_concatenated_panels_share_their_legend_unless_resolved_independent():
    plain = unit(color=colour(), title="left")
    hidden = unit(color=colour(legend=None), title="right")
    shared = chart_problems({"hconcat": [plain, hidden]})
    assert len(shared) == 2 and "panel 'left'" in shared[0] and "panel 'right'" in shared[1]
    independent = chart_problems({"hconcat": [plain, hidden], "resolve": {"scale": {"color": "independent"}}})
    assert len(independent) == 1 and "panel 'right'" in independent[0]
    legends_apart = chart_problems({"vconcat": [plain, hidden], "resolve": {"legend": {"color": "independent"}}})
    assert len(legends_apart) == 1 and "panel 'right'" in legends_apart[0]


def test_direct_labels_stand_in_for_the_legend():
    line = unit(color=colour(legend=None))
    labels = unit("text", text={"field": "m", "type": "nominal"}, color=colour(legend=None))
    assert chart_problems(layer(line, labels)) == []
    other_labels = unit("text", text={"field": "y", "type": "quantitative"})
    assert chart_problems(layer(line, other_labels))
    # a text layer in another panel labels nothing here
    assert chart_problems({"hconcat": [line, labels]})


def test_facets_and_a_disabled_legend_config_are_seen():
    facet = {"data": DATA, "facet": {"field": "x", "type": "ordinal"},
             "spec": {k: v for k, v in unit(color=colour(legend=None)).items() if k != "data"}}
    assert chart_problems(facet)
    off = {**unit(color=colour()), "config": {"legend": {"disable": True}}}
    (problem,) = chart_problems(off)
    assert "config.legend.disable" in problem


def test_chart_problems_rejects_what_is_not_a_spec():
    with pytest.raises(ValueError, match="^spec: must be a Vega-Lite spec dict"):
        chart_problems("a chart")


def test_chart_title_names_the_chart_or_its_panels():
    assert chart_title(unit(title={"text": ["held-out", "success"]})) == "held-out success"
    assert chart_title({"hconcat": [unit(title="left"), unit(), unit(title="right")]}) == "left | right"
    assert chart_title(unit()) == "(untitled chart)"


# ----------------------------------------------------------------------------------------------
# the rule against the rendered SVG of the library's charts


def _curves() -> pd.DataFrame:
    df = pd.DataFrame({"horizon": [5, 10, 20, 50, 100, 200] * 2,
                       "var": [1.0, 1.5, 2.2, 2.4, 2.8, 3.0, 1.0, 1.1, 1.2, 1.1, 1.3, 1.2],
                       "method": ["REINFORCE"] * 6 + ["VinePPO"] * 6})
    return df.assign(lo=df["var"] - 0.3, hi=df["var"] + 0.3)


def _band_hidden_legend():
    """A band chart whose band layer hides its legend (the way line_chart drew bands before):
    the shared legend is gone for the line layer too."""
    spec = viz.line_chart(_curves(), "horizon", "var", color="method", band=("lo", "hi")).to_dict()
    spec["layer"][0]["encoding"]["color"]["legend"] = None
    return spec


def _tree():
    nodes = pd.DataFrame({"id": [0, 1], "label": ["question?", "leaf"], "kind": ["question", "leaf"],
                          "x": [0.0, 1.0], "y": [0.0, 1.0], "active": [True, False]})
    edges = pd.DataFrame({"x": [0.0], "y": [0.0], "x2": [1.0], "y2": [1.0], "label": ["yes"], "active": [True]})
    return viz.tree_chart(nodes, edges)


_rng = np.random.default_rng(0)
_PANELS = {"exact": _rng.normal(size=(2, 6)), "GRPO": _rng.normal(size=(2, 6))}

# name -> (chart or spec builder, legends drawn, problems expected)
LIBRARY_CHARTS = {
    "line_chart": (lambda: viz.line_chart(_curves(), "horizon", "var", color="method"), 1, False),
    "line_chart with band": (lambda: viz.line_chart(_curves(), "horizon", "var", color="method",
                                                    band=("lo", "hi"), log_x=True), 1, False),
    "band with a hidden legend": (_band_hidden_legend, 0, True),
    "panels, one hiding the shared legend": (
        lambda: {"hconcat": [viz.line_chart(_curves(), "horizon", "var", color="method").to_dict(),
                             _band_hidden_legend()]}, 0, True),
    "bar_chart with color": (lambda: viz.bar_chart(_curves(), "horizon", "var", color="method"), 1, False),
    "heat_table": (lambda: viz.heat_table(_curves(), "method", "horizon", "var"), 1, False),
    "credit_heatmap": (lambda: viz.credit_heatmap(_PANELS["exact"]), 1, False),
    "compare_heatmaps shared": (lambda: viz.compare_heatmaps(_PANELS), 1, False),
    "compare_heatmaps independent": (lambda: viz.compare_heatmaps(_PANELS, shared_scale=False), 2, False),
    "tree_chart": (_tree, 0, False),  # colours by condition only: nothing to key
}


@pytest.mark.parametrize("name", LIBRARY_CHARTS)
def test_the_rule_agrees_with_the_drawn_legends(name):
    build, legends, bad = LIBRARY_CHARTS[name]
    chart = build()
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    assert legend_count(render_svg(spec)) == legends
    assert bool(chart_problems(spec)) is bad


# ----------------------------------------------------------------------------------------------
# where the rule is enforced


def _bad_chart(title="no key"):
    import altair as alt

    df = pd.DataFrame({"x": [1, 2, 3, 4], "y": [1.0, 2.0, 0.5, 1.5], "m": list("aabb")})
    return alt.Chart(df, title=title).mark_line().encode(x="x:Q", y="y:Q", color=alt.Color("m:N", legend=None))


def test_check_chart_names_the_chart_and_the_problem():
    with pytest.raises(ChartRuleError, match=r"chart 'no key' is hard to read:\n  - color encodes field 'm'"):
        check_chart(_bad_chart())
    check_chart(viz.line_chart(_curves(), "horizon", "var", color="method", band=("lo", "hi")))


def test_strict_checks_follow_the_notebook_checks_variable(monkeypatch):
    monkeypatch.setenv(rules.STRICT_ENV, "1")
    assert rules.strict_checks_enabled() and _static.chart_hook_wanted()
    monkeypatch.setenv(rules.STRICT_ENV, "0")
    monkeypatch.delenv(_static.ENV_VAR, raising=False)
    assert not rules.strict_checks_enabled() and not _static.chart_hook_wanted()


def test_the_display_hook_fails_a_bad_chart_under_strict_checks_only(monkeypatch):
    from IPython.core.formatters import DisplayFormatter

    formatter = DisplayFormatter()
    assert _static.install_chart_hook(formatter)
    hook = formatter.formatters["image/png"].lookup(_bad_chart())  # what IPython calls on display
    monkeypatch.delenv(_static.ENV_VAR, raising=False)
    monkeypatch.setenv(rules.STRICT_ENV, "1")
    with pytest.raises(ChartRuleError, match="chart 'no key'"):
        hook(_bad_chart())
    assert hook(viz.line_chart(_curves(), "horizon", "var", color="method")) is None  # no picture asked
    monkeypatch.delenv(rules.STRICT_ENV)
    assert hook(_bad_chart()) is None  # a reader's session: shown, not judged


def test_enable_offline_installs_the_hook_under_strict_checks(monkeypatch):
    import altair as alt

    installed = []
    monkeypatch.setattr(viz, "install_chart_hook", lambda: installed.append(True))
    monkeypatch.delenv(_static.ENV_VAR, raising=False)
    before = (alt.renderers.active, dict(alt.renderers.options or {}))
    try:
        monkeypatch.delenv(rules.STRICT_ENV, raising=False)
        viz.enable_offline()
        assert installed == []
        monkeypatch.setenv(rules.STRICT_ENV, "1")
        viz.enable_offline()
        assert installed == [True]
    finally:
        alt.renderers.enable(before[0], **before[1])


def test_a_dashboard_with_a_bad_chart_fails_its_display_under_strict_checks(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    monkeypatch.delenv(_static.ENV_VAR, raising=False)
    monkeypatch.setenv(rules.STRICT_ENV, "1")
    controls = {"k": viz.slider("k", 1, 3, 1, 2)}
    bad = viz.interact(lambda k: _bad_chart(f"dashboard at k = {k}"), controls=controls, mode="output")
    with pytest.raises(ChartRuleError, match="chart 'dashboard at k = 2'"):
        bad._ipython_display_()
    with pytest.raises(ChartRuleError):
        bad._repr_mimebundle_()
    good = viz.interact(lambda k: viz.bar_chart(_curves(), "method", "var", title=f"k = {k}"),
                        controls={"k": viz.slider("k", 1, 3, 1, 2)}, mode="output")
    good._ipython_display_()
    assert shown == [(good.widget,)]
    monkeypatch.delenv(rules.STRICT_ENV)
    bad._ipython_display_()  # a reader's session: shown, not judged
    assert shown[-1] == (bad.widget,)

