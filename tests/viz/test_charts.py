"""Line, bar and heat-table charts (labkit.viz.charts) and offline rendering: assertions on the Vega-Lite specs."""
from __future__ import annotations

import altair as alt
import pandas as pd
import pytest

from labkit import viz
from labkit.viz import MAX_ROWS, bar_chart, enable_offline, heat_table, line_chart

from chart_specs import axis_ranges, legend_count, records, render_svg


# ----------------------------------------------------------------------------------------------
# charts


@pytest.fixture
def curves():
    df = pd.DataFrame({"horizon": [4, 8, 16, 32] * 2, "var": [1.0, 2.0, 4.5, 9.0, 0.5, 0.6, 0.7, 0.8],
                       "method": ["REINFORCE"] * 4 + ["VinePPO"] * 4, "unused": list("abcdefgh")})
    df["lo"], df["hi"] = df["var"] * 0.8, df["var"] * 1.2
    return df


def test_line_chart_spec(curves):
    spec = line_chart(curves, "horizon", "var", color="method", band=("lo", "hi"), log_x=True,
                      title="Variance grows with horizon", y_title="gradient variance").to_dict()
    area, line = spec["layer"]
    assert area["mark"]["type"] == "area" and area["encoding"]["y2"]["field"] == "hi"
    assert line["mark"] == {"type": "line", "point": True}
    assert line["encoding"]["x"]["scale"] == {"type": "log", "nice": False}
    assert line["encoding"]["y"]["title"] == "gradient variance"
    assert line["encoding"]["color"]["scale"]["domain"] == ["REINFORCE", "VinePPO"]
    assert set(records(spec)[0]) == {"horizon", "var", "method", "lo", "hi"}  # unused column dropped
    assert spec["title"] == "Variance grows with horizon"


def test_a_band_keeps_the_line_legend(curves):
    """The band and line layers share one colour scale and so one merged legend: neither may
    switch it off, and its swatches are solid although the band is pale."""
    for band in (None, ("lo", "hi")):
        chart = line_chart(curves, "horizon", "var", color="method", band=band)
        assert legend_count(render_svg(chart)) == 1
        assert viz.chart_problems(chart.to_dict()) == []
    spec = line_chart(curves, "horizon", "var", color="method", band=("lo", "hi")).to_dict()
    assert [layer["encoding"]["color"]["legend"] for layer in spec["layer"]] == [{"symbolOpacity": 1}] * 2


@pytest.mark.parametrize("log_x", [False, True])
def test_line_chart_x_axis_ends_at_the_data(curves, log_x):
    wide = curves.assign(horizon=curves.horizon.map({4: 5, 8: 20, 16: 50, 32: 200}))
    spec = line_chart(wide, "horizon", "var", color="method", log_x=log_x).to_dict()
    assert spec["encoding"]["x"]["scale"]["nice"] is False
    # rounded out to "nice" numbers, the log axis ran from 1 to 1,000
    assert axis_ranges(render_svg(spec))["X"] == "5 to 200"
    ordinal = line_chart(curves.assign(horizon=curves.horizon.astype(str)), "horizon", "var").to_dict()
    assert "scale" not in ordinal["encoding"]["x"]


def test_a_log_x_axis_with_few_values_ticks_at_them(curves):
    import re

    wide = curves.assign(horizon=curves.horizon.map({4: 10, 8: 40, 16: 100, 32: 16384}))
    svg = render_svg(line_chart(wide, "horizon", "var", color="method", log_x=True))
    labels = re.findall(r'<text[^>]*>([^<]*)</text>', svg.split('aria-label="Y-axis')[0].split('aria-label="X-axis')[1])
    # the data's own values, thousands separated; no crowd of 20 30 50 60 70 80 between them
    assert [t for t in labels if t[:1].isdigit()] == ["10", "40", "100", "16,384"]
    many = pd.DataFrame({"horizon": range(1, 40), "var": 1.0})
    assert "axis" not in line_chart(many, "horizon", "var", log_x=True).to_dict()["encoding"]["x"]
    # linear: Vega's own ticks, whole numbers only for an integer column (no step 1.5)
    assert line_chart(wide, "horizon", "var").to_dict()["encoding"]["x"]["axis"] == {"format": ",d", "tickMinStep": 1}
    floats = wide.assign(horizon=wide["horizon"].astype(float))
    assert "axis" not in line_chart(floats, "horizon", "var").to_dict()["encoding"]["x"]


def test_value_domain_fixes_the_value_axis(curves):
    spec = line_chart(curves, "horizon", "var", color="method", band=("lo", "hi"), value_domain=(0, 12)).to_dict()
    for layer in spec["layer"]:
        assert layer["encoding"]["y"]["scale"] == {"zero": False, "domain": [0.0, 12.0], "clamp": True}
    bars = bar_chart(curves[curves.horizon == 4], "method", "var", horizontal=True, value_domain=(-0.25, 1))
    assert bars.to_dict()["encoding"]["x"]["scale"] == {"domain": [-0.25, 1.0], "clamp": True}
    assert axis_ranges(render_svg(bars))["X"] == "-0.3 to 1.0"  # as the axis description rounds it
    for bad, match in [((1, 0), "lo must be below hi"), ((0, float("nan")), "finite numbers"),
                       ((0, 1, 2), "pair"), ("0-1", "pair"), ((False, 1), "finite numbers")]:
        with pytest.raises(ValueError, match=f"^value_domain: .*{match}"):
            bar_chart(curves, "method", "var", value_domain=bad)
    with pytest.raises(ValueError, match="^value_domain: a log axis needs lo > 0"):
        line_chart(curves, "horizon", "var", log_y=True, value_domain=(0, 10))


@pytest.mark.parametrize("horizontal", [False, True])
def test_long_category_names_are_shown_whole(horizontal):
    names = ["reinforce", "reinforce_baseline_with_a_long_name", "rloo"]
    chart = bar_chart(pd.DataFrame({"estimator": names, "cosine": [0.2, 0.5, 0.4]}), "estimator", "cosine",
                      horizontal=horizontal)
    axis = chart.to_dict()["encoding"]["y" if horizontal else "x"]["axis"]
    assert axis["labelLimit"] >= 7 * len(names[1])
    svg = render_svg(chart)
    assert names[1] in svg and "\u2026" not in svg and "…" not in svg  # no name cut with an ellipsis


def test_line_chart_escapes_dotted_column(curves):
    df = curves.rename(columns={"var": "loss.mean"})
    spec = line_chart(df, "horizon", "loss.mean", points=False).to_dict()
    assert spec["encoding"]["y"]["field"] == "loss\\.mean"
    assert spec["mark"] == {"type": "line", "point": False}


def test_line_chart_validation(curves):
    with pytest.raises(ValueError, match=r"y='varr' is not a column of df; available columns: \['horizon', 'var'"):
        line_chart(curves, "horizon", "varr")
    with pytest.raises(ValueError, match=r"band='nope'"):
        line_chart(curves, "horizon", "var", band=("lo", "nope"))
    with pytest.raises(ValueError, match="log_y=True but column 'lo'"):
        line_chart(curves.assign(lo=0.0), "horizon", "var", band=("lo", "hi"), log_y=True)


def test_bar_chart_spec(curves):
    spec = bar_chart(curves, "method", "var", sort="descending").to_dict()
    assert spec["encoding"]["x"]["scale"]["domain"] == ["REINFORCE", "VinePPO"]
    spec = bar_chart(curves, "horizon", "var", color="method", horizontal=True).to_dict()
    assert spec["encoding"]["y"]["scale"]["domain"] == [4, 8, 16, 32]
    assert spec["encoding"]["yOffset"]["field"] == "method"
    assert spec["encoding"]["x"]["field"] == "var"
    with pytest.raises(ValueError, match=r"color='agent' is not a column"):
        bar_chart(curves, "method", "var", color="agent")
    with pytest.raises(ValueError, match="sort list is missing categories"):
        bar_chart(curves, "method", "var", sort=["VinePPO"])


def test_bar_chart_interval_draws_one_rule_per_bar(curves):
    df = curves.groupby("method", as_index=False)["var"].mean().assign(lo=lambda d: d["var"] - 1,
                                                                          hi=lambda d: d["var"] + 1)
    spec = bar_chart(df, "method", "var", interval=("lo", "hi"), horizontal=True).to_dict()
    bars, rules = spec["layer"]
    assert rules["mark"]["type"] == "rule"
    assert rules["encoding"]["x"]["field"] == "lo" and rules["encoding"]["x2"]["field"] == "hi"
    assert rules["encoding"]["y"]["field"] == "method"
    with pytest.raises(ValueError, match="^interval"):
        bar_chart(df, "method", "var", interval=("lo", "nope"))
    with pytest.raises(ValueError, match="^interval"):
        bar_chart(df, "method", "var", interval="lo")
    with pytest.raises(ValueError, match="^interval"):
        bar_chart(curves, "method", "var", color="horizon", interval=("var", "var"))


def test_heat_table_spec():
    df = pd.DataFrame({"granularity": ["token", "token", "turn"], "methodology": ["MC", "TD", "MC"], "n": [3, 5, 7]})
    spec = heat_table(df, "granularity", "methodology", "n", title="methods").to_dict()
    rect, text = spec["layer"]
    assert rect["encoding"]["color"]["scale"]["domain"] == [0.0, 7.0]
    assert rect["encoding"]["y"]["scale"]["domain"] == ["token", "turn"]
    assert text["encoding"]["text"] == {"field": "n", "format": "d", "type": "quantitative"}
    ink = {(r["granularity"], r["methodology"]): r["_ink"] for r in records(spec)}
    assert ink[("turn", "MC")] == "white" and ink[("token", "MC")] == "black"
    with pytest.raises(ValueError, match=r"value='count' is not a column"):
        heat_table(df, "granularity", "methodology", "count")
    with pytest.raises(ValueError, match="more than one row"):
        heat_table(pd.concat([df, df]), "granularity", "methodology", "n")


def test_chart_row_limit():
    df = pd.DataFrame({"x": range(MAX_ROWS + 1), "y": 0.0})
    with pytest.raises(ValueError, match="aggregate first"):
        line_chart(df, "x", "y")


# ----------------------------------------------------------------------------------------------
# enable_offline


def test_enable_offline_idempotent():
    before = (alt.renderers.active, dict(alt.renderers.options or {}))
    try:
        enable_offline()
        enable_offline()
        assert alt.renderers.active == "jupyter"
        assert alt.renderers.options == {"offline": True}
    finally:
        alt.renderers.enable(before[0], **before[1])


def test_dropdown_and_chart_messages():
    with pytest.raises(ValueError, match=r"^value: 'c' is not one of the options"):
        viz.dropdown(["a", "b"], "c")
    with pytest.raises(ValueError, match=r"^options: is empty"):
        viz.dropdown([])
    df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    for chart in (viz.line_chart, viz.bar_chart):
        with pytest.raises(ValueError, match=r"^df: must be a pandas DataFrame"):
            chart(None, x="a", y="b")
        with pytest.raises(ValueError, match=r"^y: y='zz' is not a column of df"):
            chart(df, x="a", y="zz")
    with pytest.raises(ValueError, match=r"^sort: must be None"):
        viz.bar_chart(df, x="a", y="b", sort="up")
