"""Sliders, dropdowns and dashboards (labkit.viz.widgets), headless: set a control's value, check the
dashboard recomputed.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import pytest

from labkit import viz
from labkit.viz import Dashboard, credit_heatmap, dropdown, interact, line_chart, slider

from chart_specs import records


# ----------------------------------------------------------------------------------------------
# widgets (headless)


def test_slider_types_and_validation():
    import ipywidgets as W
    s = slider("horizon", 5, 200, 5, 20)
    assert isinstance(s, W.IntSlider) and s.continuous_update is False
    assert s.description == "horizon"
    assert isinstance(slider("n", np.int64(1), np.int64(9), 1, 3), W.IntSlider)
    f = slider("lam", 0, 1, 0.05, 0.95, description="GAE λ")
    assert isinstance(f, W.FloatSlider) and not isinstance(f, W.IntSlider) and f.description == "GAE λ"
    assert f.readout_format == ".2f"
    with pytest.raises(ValueError, match="outside"):
        slider("x", 0, 1, 0.1, 2)
    with pytest.raises(ValueError, match="min"):
        slider("x", 1, 1, 1, 1)
    d = dropdown(["GRPO", "RLOO"])
    assert d.value == "GRPO"
    assert dropdown({"a": 1, "b": 2}, 2).value == 2
    with pytest.raises(ValueError, match="not one of the options"):
        dropdown(["a"], "b")


def test_slider_values_snap_to_the_step():
    """A number typed into the box lands on the grid min + k * step (half up), inside [min, max]:
    notebook 01's batch slider (step 8) never hands its experiment 132."""
    s = slider("batch", 8, 256, 8, 32)
    for typed, shown in ((132, 136), (131, 128), (7, 8), (999, 256), (40, 40)):
        s.value = typed
        assert s.value == shown
    f = slider("noise", 0.0, 2.0, 0.1, 0.0)
    for typed, shown in ((0.33, 0.3), (0.35, 0.4), (1.96, 2.0), (-3.0, 0.0)):
        f.value = typed
        assert f.value == pytest.approx(shown)
    g = slider("x", 0, 10, 3, 3)  # the grid stops at 9, short of max
    g.value = 10
    assert g.value == 9
    with pytest.raises(ValueError, match="^value: 30 is not on the slider's grid"):
        slider("batch", 8, 256, 8, 30)
    # a dashboard sees only snapped values
    seen = []
    dash = interact(lambda batch: (seen.append(batch), credit_heatmap(np.zeros(3)))[1],
                    controls={"batch": slider("batch", 8, 256, 8, 32)}, mode="output")
    dash.controls["batch"].value = 132
    assert seen == [32, 136]


def _compute(horizon, method="GRPO"):
    if horizon < 0:
        raise RuntimeError(f"negative horizon {horizon}")
    v = np.sin(np.arange(horizon) / 3.0)
    return credit_heatmap(v, title=method), f"horizon={horizon} sum={v.sum():.3f}"


@pytest.fixture(params=["output", "widget"])
def dash(request):
    return interact(_compute, controls={"horizon": slider("horizon", -5, 100, 1, 10),
                                        "method": dropdown(["GRPO", "RLOO"])}, mode=request.param)


def test_dashboard_recomputes_on_slider_change(dash):
    assert dash.n_updates == 1 and dash.error is None
    spec0 = dash.chart.to_dict()
    dash.controls["horizon"].value = 50
    assert dash.n_updates == 2
    spec1 = dash.chart.to_dict()
    assert spec1 != spec0
    assert len(records(spec1)) == 50
    assert dash.summary.startswith("horizon=50 ")
    assert "horizon=50" in dash._summary_html.value
    dash.controls["method"].value = "RLOO"
    assert dash.n_updates == 3 and dash.chart.to_dict()["title"]["text"] == "RLOO"
    dash.controls["horizon"].value = 50  # no change -> no recompute
    assert dash.n_updates == 3
    if dash.mode == "widget":
        assert dash.view is not None and dash.view.spec == dash.chart.to_dict()
        assert dash._chart_box.children == (dash.view,)
    else:
        (out,) = dash.output.outputs
        assert out["output_type"] == "display_data"


def test_shown_values_use_the_labels_the_controls_show():
    dash = interact(_compute, controls={"horizon": slider("horizon", 0, 100, 1, 10, description="chain length"),
                                        "method": dropdown(["GRPO", "RLOO"])}, mode="output")
    assert dash.values == {"horizon": 10, "method": "GRPO"}
    # the picture of a dashboard prints the words the student reads on the sliders
    assert dash.shown_values == {"chain length": 10, "method": "GRPO"}


def test_dashboard_shows_error_and_recovers(dash):
    dash.controls["horizon"].value = -3
    assert isinstance(dash.error, RuntimeError)
    (out,) = dash.output.outputs
    assert out["output_type"] == "stream" and out["name"] == "stderr"
    assert "compute(horizon=-3, method='GRPO') failed" in out["text"]
    assert "RuntimeError: negative horizon -3" in out["text"]
    assert dash._summary_html.value == ""
    assert dash.n_updates == 2
    dash.controls["horizon"].value = 0  # empty heatmap: credit_heatmap's ValueError is shown too
    assert isinstance(dash.error, ValueError) and "values is empty" in dash.output.outputs[0]["text"]
    dash.controls["horizon"].value = 20
    assert dash.error is None
    assert len(records(dash.chart.to_dict())) == 20
    if dash.mode == "widget":
        assert dash.output.outputs == ()
        assert dash._chart_box.layout.display is None
    else:
        assert dash.output.outputs[0]["output_type"] == "display_data"


def test_dashboard_bad_return_and_validation():
    d = Dashboard(lambda k: "not a chart", {"k": slider("k", 0, 3, 1, 1)}, mode="output")
    assert isinstance(d.error, ValueError) and "must return an altair chart" in str(d.error)
    with pytest.raises(ValueError, match="controls"):
        interact(_compute, controls={})
    with pytest.raises(ValueError, match=r"controls\['horizon'\] must be an ipywidgets widget"):
        interact(_compute, controls={"horizon": 3})
    with pytest.raises(ValueError, match="layout"):
        interact(_compute, controls={"horizon": slider("h", 0, 3, 1, 1)}, layout="diagonal")


def test_summary_sits_between_the_controls_and_the_chart(dash):
    """Top to bottom: controls, summary line, chart (then the output area, where errors go): a
    summary below a tall chart would be off a laptop's screen."""
    controls, body = dash.widget.children
    assert "labkit-controls" in controls._dom_classes
    assert [c._dom_classes for c in body.children] == [("labkit-summary",), ("labkit-chart",), ("labkit-output",)]
    assert "horizon=10" in body.children[0].value
    if dash.mode == "widget":
        assert body.children[1].children == (dash.view,)
    else:  # the chart is drawn into the output area, still below the summary
        assert body.children[2].outputs[0]["output_type"] == "display_data"


def test_dashboard_layout_and_display():
    d = interact(_compute, controls={"horizon": slider("h", 1, 3, 1, 2)}, layout="horizontal", mode="output")
    assert type(d.widget).__name__ == "HBox" and "labkit-dashboard" in d.widget._dom_classes
    bundle = d._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert d.values == {"horizon": 2}
    assert "n_updates=1" in repr(d)


def test_dashboard_compute_that_moves_a_control_is_rerun_with_the_new_value():
    seen = []

    def compute(a, b):
        seen.append((a, b))
        if a > b:
            d.controls["b"].value = a  # keep b >= a
        return credit_heatmap(np.full(3, float(b))), f"a={a} b={b}"

    d = None
    d = Dashboard(compute, {"a": slider("a", 0, 9, 1, 1), "b": slider("b", 0, 9, 1, 2)}, mode="output")
    d.controls["a"].value = 5
    assert seen[-1] == (5, 5) and d.summary == "a=5 b=5"
    assert d.n_updates == 3


def test_dashboard_cache_redraws_a_seen_value_without_recomputing():
    calls = []

    def compute(horizon, method="GRPO"):
        calls.append((horizon, method))
        return _compute(horizon, method)

    d = interact(compute, controls={"horizon": slider("horizon", 1, 100, 1, 10),
                                    "method": dropdown(["GRPO", "RLOO"])}, mode="output", cache=2)
    d.controls["horizon"].value = 40
    d.controls["horizon"].value = 10  # seen: from the cache
    assert d.n_computes == 2 and d.n_updates == 3 and calls == [(10, "GRPO"), (40, "GRPO")]
    # the cached answer is the answer a fresh compute gives
    chart, summary = _compute(10, "GRPO")
    assert d.chart.to_dict() == chart.to_dict() and d.summary == summary
    d.controls["horizon"].value = 70   # third entry: the least recently used (40) drops out
    d.controls["horizon"].value = 40
    assert d.n_computes == 4 and len(d._cache) == 2
    assert records(d.chart.to_dict()) == records(_compute(40)[0].to_dict())


def test_dashboard_precompute_fills_the_grid_at_build_time():
    calls = []

    def compute(horizon, method="GRPO"):
        calls.append((horizon, method))
        return _compute(horizon, method)

    d = interact(compute, controls={"horizon": slider("horizon", -5, 100, 1, 10),
                                    "method": dropdown(["GRPO", "RLOO"])}, mode="output",
                 precompute={"horizon": [-3, 10, 50], "method": ["GRPO", "RLOO"]})
    assert sorted(calls) == sorted((h, m) for h in (-3, 10, 50) for m in ("GRPO", "RLOO"))
    assert len(d._cache) == 4  # a value whose compute failed is not kept
    n = d.n_computes
    d.controls["method"].value = "RLOO"
    d.controls["horizon"].value = 50
    assert d.n_computes == n and d.summary == _compute(50, "RLOO")[1]
    d.controls["horizon"].value = -3  # failed at build time: computed (and shown as an error) now
    assert isinstance(d.error, RuntimeError) and d.n_computes == n + 1
    d.controls["horizon"].value = 11  # off the grid: computed, not kept (no extra cache room)
    assert d.n_computes == n + 2 and d.error is None


def test_dashboard_cache_arguments_are_checked():
    ctl = {"horizon": slider("h", 0, 3, 1, 1)}
    with pytest.raises(ValueError, match="^cache: "):
        interact(_compute, controls=ctl, cache=-1)
    with pytest.raises(ValueError, match="^precompute: 'k' is not a control"):
        interact(_compute, controls=ctl, precompute={"k": [1]})
    with pytest.raises(ValueError, match="^precompute: the values for 'horizon'"):
        interact(_compute, controls=ctl, precompute={"horizon": []})


def test_control_values_lists_what_a_control_can_hold():
    import ipywidgets as W

    from labkit.viz import control_values

    s = slider("noise", 0.0, 0.5, 0.05, 0.3)
    vals = control_values(s)
    assert len(vals) == 11 and vals[0] == 0.0 and vals[-1] == 0.5
    for v in vals:  # exactly the floats the slider holds, so cache keys match
        s.value = v
        assert s.value == v
    assert control_values(slider("x", 0, 10, 3, 3)) == [0, 3, 6, 9]
    assert control_values(dropdown({"a": 1, "b": 2})) == [1, 2]
    assert control_values(W.Checkbox()) == [False, True]
    with pytest.raises(ValueError, match="^control: "):
        control_values(W.Text())
    calls = []
    d = interact(lambda k: (calls.append(k), _compute(k))[1], controls={"k": slider("k", 1, 5, 2, 3)},
                 mode="output", precompute={"k": "all"})
    assert sorted(calls) == [1, 3, 5] and d.n_computes == 3


# -- cheap redraws: one schema check per spec structure, the spec handed to the view ------------


def _two_shapes(k):
    """A valid heatmap for k < 3; for k == 3 a chart the Vega-Lite schema rejects (width "abc",
    set past altair's build-time checks), for k == 4 one with an outline layer (a new structure)."""
    v = np.sin(np.arange(4 + k) / 3.0)
    chart = credit_heatmap(v, highlight=[1] if k == 4 else None, title=f"k={k}")
    if k == 3:
        chart.width = "abc"
    return chart, f"k={k}"


def test_dashboard_checks_each_spec_structure_once_and_draws_the_validated_spec(monkeypatch):
    from altair.utils import schemapi

    checks = []
    orig = alt.LayerChart.validate.__func__

    def spy(cls, instance, schema=None):
        checks.append(1)
        return orig(cls, instance, schema)

    monkeypatch.setattr(alt.LayerChart, "validate", classmethod(spy))
    d = interact(_two_shapes, controls={"k": slider("k", 0, 4, 1, 0)}, mode="widget")
    assert len(checks) == 1 and d.error is None
    drawn = {}
    for k in (1, 2, 0):  # same structure, other data and title: no further check
        d.controls["k"].value = k
        drawn[k] = d.view.spec
    assert len(checks) == 1 and len(d._checked_shapes) == 1
    for k, spec in drawn.items():
        assert spec == _two_shapes(k)[0].to_dict()  # exactly what altair's checked to_dict gives
    n = len(checks)
    d.controls["k"].value = 4  # an outline layer: a new structure, checked
    assert len(checks) == n + 1 and d.error is None and d.view.spec == _two_shapes(4)[0].to_dict()
    d.controls["k"].value = 3  # invalid: caught and shown like a failed compute
    assert isinstance(d.error, schemapi.SchemaValidationError)
    assert "width" in d.output.outputs[0]["text"]
    with pytest.raises(schemapi.SchemaValidationError):
        _two_shapes(3)[0].to_dict()  # altair's own check rejects it too
    d.controls["k"].value = 1
    assert d.error is None and d.view.spec == _two_shapes(1)[0].to_dict()
    assert "to_dict" not in vars(d.chart)  # the shadowed to_dict is gone after the draw


def test_dashboard_cache_reuses_the_drawn_spec_and_compute_skips_build_checks_after_a_draw():
    from altair.utils import schemapi

    modes = []

    def compute(k):
        modes.append(schemapi.DEBUG_MODE)
        return _two_shapes(k)

    d = interact(compute, controls={"k": slider("k", 0, 4, 1, 0)}, mode="widget", cache=4)
    first = d.view.spec
    d.controls["k"].value = 2
    d.controls["k"].value = 0  # from the cache: the very dict drawn the first time
    assert d.view.spec is first and d.n_computes == 2
    assert modes == [True, False] and schemapi.DEBUG_MODE  # global setting restored
    d_out = interact(compute, controls={"k": slider("k", 0, 4, 1, 0)}, mode="output")
    d_out.controls["k"].value = 1
    assert modes[-2:] == [True, True]  # no checked spec in output mode: altair checks as usual


def test_spec_shape_ignores_data_titles_and_numbers_but_not_marks():
    from labkit.viz.widgets import spec_shape

    a = credit_heatmap(np.arange(5.0), title="a").to_dict()
    b = credit_heatmap(-np.arange(9.0) / 7, title="another title").to_dict()
    assert spec_shape(a) == spec_shape(b) and hash(spec_shape(a)) == hash(spec_shape(b))
    c = credit_heatmap(np.arange(5.0), highlight=[2], title="a").to_dict()  # an outline layer
    assert spec_shape(c) != spec_shape(a)
    line = line_chart(pd.DataFrame({"x": [1, 2], "y": [3.0, 4.0]}), "x", "y").to_dict()
    point = line_chart(pd.DataFrame({"x": [1, 2], "y": [3.0, 4.0]}), "x", "y").mark_point().to_dict()
    assert spec_shape(line) != spec_shape(point)


def test_dashboard_precompute_serialises_the_grid_in_widget_mode():
    d = interact(_two_shapes, controls={"k": slider("k", 0, 4, 1, 0)}, mode="widget", precompute={"k": [0, 1, 2, 3]})
    kept = {key[0][1]: entry for key, entry in d._cache.items()}
    assert all(kept[k][2] == _two_shapes(k)[0].to_dict() for k in (0, 1, 2))  # serialised at build time
    assert kept[3][2] is None  # the invalid one: left for the move to show the error
    d.controls["k"].value = 2
    assert d.view.spec is kept[2][2] and d.error is None
    d.controls["k"].value = 3
    assert d.error is not None and "width" in d.output.outputs[0]["text"]


# --------------------------------------------------------------------------- bad input names the argument
@pytest.mark.parametrize("args, match", [
    ((5, 1, 1, 3), r"^max: must be larger than min \(5\), got 1 \(slider 'x'\)"),
    ((1, 1, 1, 1), r"^max: must be larger than min"),
    ((0, 1, 0.1, 5.0), r"^value: 5.0 is outside \[0.0, 1.0\]"),
    ((0, 1, 0, 0.5), r"^step: must be positive"),
    ((float("nan"), 1, 0.1, 0.5), r"^min: must be a number"),
    ((0, 1, 0.1, "a"), r"^value: must be a number"),
])
def test_slider_messages_start_with_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        viz.slider("x", *args)


def test_slider_refuses_an_infinite_bound_by_name():
    base = {"min": 0.0, "max": 1.0, "step": 0.1, "value": 0.5}
    for key in base:
        for bad in (float("inf"), float("-inf")):
            with pytest.raises(ValueError, match=rf"^{key}: must be finite, got -?inf \(slider 'x'\)"):
                slider("x", **{**base, key: bad})
