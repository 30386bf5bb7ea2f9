"""Tests for labkit.viz: assertions on the Vega-Lite specs (chart.to_dict()) and on headless
widgets (set a control's value, check the dashboard recomputed)."""
from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest

from labkit.viz import (
    MAX_ROWS,
    Dashboard,
    bar_chart,
    compare_heatmaps,
    credit_heatmap,
    dropdown,
    enable_offline,
    heat_table,
    interact,
    line_chart,
    slider,
    visible_text,
)

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
# credit_heatmap


def test_domain_is_symmetric_and_equals_max_abs():
    v = np.array([[0.5, -2.0, 1.0], [0.25, 0.0, -0.75]])
    spec = credit_heatmap(v).to_dict()
    sc = color_scale(spec)
    assert sc["domain"] == [-2.0, 2.0]
    assert sc["scheme"] == "redblue"
    assert sc["clamp"] is True


def test_domain_ignores_masked_cells_and_masked_cells_absent():
    v = np.array([[0.5, -9.0, 1.0, 3.0], [0.25, 0.0, -0.75, 99.0]])
    mask = np.array([[1, 0, 1, 1], [1, 1, 1, 0]], dtype=bool)
    spec = credit_heatmap(v, mask=mask).to_dict()
    recs = records(spec)
    assert len(recs) == int(mask.sum())
    drawn = {(r["row"], r["pos"]) for r in recs}
    assert ("row 0", 1) not in drawn and ("row 1", 3) not in drawn
    assert ("row 0", 0) in drawn and ("row 1", 2) in drawn
    assert color_scale(spec)["domain"] == [-3.0, 3.0]  # 9 and 99 are masked


def test_given_domain_is_used():
    spec = credit_heatmap(np.array([0.1, -0.2]), domain=5).to_dict()
    assert color_scale(spec)["domain"] == [-5.0, 5.0]


def test_all_zero_gives_valid_domain():
    spec = credit_heatmap(np.zeros((2, 5))).to_dict()
    assert color_scale(spec)["domain"] == [-1.0, 1.0]


def test_1d_input_works():
    v = np.array([0.1, -0.3, 0.2])
    spec = credit_heatmap(v, tokens=["a", "b", "c"]).to_dict()
    recs = records(spec)
    assert [r["pos"] for r in recs] == [0, 1, 2]
    assert [r["token"] for r in recs] == ["a", "b", "c"]
    assert color_scale(spec)["domain"] == [-0.3, 0.3]


def test_torch_tensor_input():
    torch = pytest.importorskip("torch")
    v = torch.tensor([[0.5, -1.0], [0.0, 0.25]], requires_grad=True) * 1.0
    mask = torch.tensor([[True, True], [True, False]])
    recs = records(credit_heatmap(v, mask=mask).to_dict())
    assert len(recs) == 3
    assert sorted(r["value"] for r in recs) == [-1.0, 0.0, 0.5]


def test_default_wrap_fits_a_laptop_column():
    """Without wrap=, a heatmap puts as many cells on a line as fit FIT_WIDTH pixels (at most 40):
    54-pixel turn cells wrap at 12, 16-pixel token cells keep 40."""
    from labkit.viz.heatmap import FIT_WIDTH
    v = np.zeros((1, 100))
    wide = credit_heatmap(v, cell_size=(54, 18)).to_dict()
    cols = {d["col"] for d in wide["datasets"][next(iter(wide["datasets"]))]}
    assert max(cols) + 1 == FIT_WIDTH // 54 == 12
    narrow = credit_heatmap(v, cell_size=16).to_dict()
    assert max({d["col"] for d in narrow["datasets"][next(iter(narrow["datasets"]))]}) + 1 == 40


def test_wrap_places_position_45_on_line_1_col_5():
    v = np.linspace(-1, 1, 100)[None, :]
    spec = credit_heatmap(v, wrap=40, row_labels=["traj"]).to_dict()
    recs = records(spec)
    r = cell(recs, 45, "traj")
    assert r["col"] == 5
    y_domain = layers(spec)[0]["encoding"]["y"]["scale"]["domain"]
    assert y_domain == ["traj @0", "traj @40", "traj @80"]
    assert y_domain.index(r["line"]) == 1
    assert layers(spec)[0]["encoding"]["x"]["scale"]["domain"] == list(range(40))


def test_wrap_lines_ordered_row_major_for_several_rows():
    v = np.zeros((2, 10))
    spec = credit_heatmap(v, wrap=4).to_dict()
    y_domain = layers(spec)[0]["encoding"]["y"]["scale"]["domain"]
    assert y_domain == ["row 0 @0", "row 0 @4", "row 0 @8", "row 1 @0", "row 1 @4", "row 1 @8"]


def test_fully_masked_wrapped_line_is_dropped():
    v = np.zeros((1, 10))
    mask = np.array([[True] * 4 + [False] * 6])
    spec = credit_heatmap(v, mask=mask, wrap=4).to_dict()
    assert layers(spec)[0]["encoding"]["y"]["scale"]["domain"] == ["row 0 @0"]


def test_highlight_outlines_exactly_given_positions():
    v = np.zeros((2, 12))
    spec = credit_heatmap(v, highlight=[[3, 7], [0]]).to_dict()
    recs = records(spec)
    marked = {(r["row"], r["pos"]) for r in recs if r["hl"]}
    assert marked == {("row 0", 3), ("row 0", 7), ("row 1", 0)}
    outline = [l for l in layers(spec) if l["mark"]["type"] == "rect" and l["mark"].get("fill", "x") is None]
    assert len(outline) == 1
    assert outline[0]["transform"] == [{"filter": {"field": "hl", "equal": True}}]
    assert outline[0]["mark"]["stroke"] == "black"


def test_highlight_as_bool_array_and_1d_list():
    v = np.zeros((2, 5))
    hl = np.zeros((2, 5), dtype=bool)
    hl[1, 4] = True
    recs = records(credit_heatmap(v, highlight=hl).to_dict())
    assert [(r["row"], r["pos"]) for r in recs if r["hl"]] == [("row 1", 4)]
    recs = records(credit_heatmap(np.zeros(6), highlight=[2, 5]).to_dict())
    assert [r["pos"] for r in recs if r["hl"]] == [2, 5]
    # (B, T) input with one position per row, and None for a row without one
    recs = records(credit_heatmap(np.zeros((3, 4)), highlight=[1, None, 3]).to_dict())
    assert [(r["row"], r["pos"]) for r in recs if r["hl"]] == [("row 0", 1), ("row 2", 3)]


def test_no_outline_layer_without_highlight():
    spec = credit_heatmap(np.zeros((1, 3))).to_dict()
    assert len(layers(spec)) == 2  # cells + text
    assert "hl" not in records(spec)[0]
    spec = credit_heatmap(np.zeros((1, 3)), show_text=False).to_dict()
    assert "layer" in spec and len(spec["layer"]) == 1


EVIL = [
    "<script>alert(1)</script>",
    '"quotes" & \'apostrophes\'',
    "{{ template }}",
    "back\\slash\\n",
    "datum.value > 0 || alert('x')",
    "${signal}",
    "[0].x.y",
]


def test_malicious_tokens_are_inert_data():
    v = np.arange(len(EVIL), dtype=float)[None, :] - 3
    spec = credit_heatmap(v, tokens=[EVIL], row_labels=["<b>row</b>"]).to_dict()
    recs = records(spec)
    # The full token travels as a plain data value. It is NOT html-escaped here on purpose:
    # vega-embed's tooltip handler escapes every tooltip key and value itself (checked in a real
    # browser by tests/test_browser.py), so escaping twice would show "&lt;" to the student.
    for r, tok in zip(recs, EVIL):
        assert r["token"] == tok
    assert recs[0]["row"] == "<b>row</b>"
    # the tooltip shows the full token field, not the truncated display text
    for l in layers(spec):
        fields = [t["field"] for t in l["encoding"].get("tooltip", [])]
        assert "token" in fields and "text" not in fields
    # nothing derived from a token appears anywhere outside the data rows
    spec_wo_data = dict(spec)
    spec_wo_data.pop("datasets")
    blob = json.dumps(spec_wo_data)
    for tok in EVIL:
        for form in (tok, visible_text(tok, 3), json.dumps(tok)[1:-1]):
            assert form not in blob, form
    # and no field name / expression / signal anywhere holds token material
    for path, key, val in walk(spec_wo_data):
        if key in ("expr", "signal", "field", "labelExpr", "calculate", "test", "filter"):
            s = json.dumps(val)
            assert not any(t[:4] in s for t in EVIL), (path, key, val)
    fields = {val for _, key, val in walk(spec_wo_data) if key == "field"}
    assert fields <= {"row", "line", "col", "pos", "value", "token", "text", "ink", "hl"}


def test_whitespace_visible_and_truncated():
    recs = records(credit_heatmap(np.zeros(4), tokens=[" ", "\n", "\t", "abcdefgh"]).to_dict())
    assert [r["text"] for r in recs[:3]] == ["\u2423", "\u21b5", "\u21e5"]
    assert recs[3]["text"] == "ab\u2026"
    assert recs[3]["token"] == "abcdefgh"  # full token in the tooltip
    assert visible_text(" a\tb\n") == "\u2423a\u21e5b\u21b5"


def test_positions_shown_without_tokens():
    recs = records(credit_heatmap(np.zeros((1, 3))).to_dict())
    assert [r["text"] for r in recs] == ["0", "1", "2"]
    assert all("token" not in r for r in recs)


def test_coarse_values_with_labels():
    # e.g. per-turn credit of a 4-turn episode, labelled by turn
    spec = credit_heatmap(
        [[0.1, -0.5, 0.9, 0.0]], tokens=[["search", "read", "calculator", "stop"]],
        row_labels=["episode 7"], position_label="turn", cell_size=(42, 20),
    ).to_dict()
    recs = records(spec)
    assert [r["token"] for r in recs] == ["search", "read", "calculator", "stop"]
    assert [r["text"] for r in recs] == ["search", "read", "calcul\u2026", "stop"]
    assert spec["width"] == {"step": 42} and spec["height"] == {"step": 20}
    tips = layers(spec)[0]["encoding"]["tooltip"]
    assert {"field": "pos", "title": "turn", "type": "quantitative"} in tips


def test_short_token_rows_allowed_when_padding_masked():
    v = np.zeros((2, 4))
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool)
    recs = records(credit_heatmap(v, tokens=[list("abcd"), list("xy")], mask=mask).to_dict())
    assert len(recs) == 6
    with pytest.raises(ValueError, match=r"tokens\[1\].*position 2 is not masked"):
        credit_heatmap(v, tokens=[list("abcd"), list("xy")])


def test_duplicate_row_labels_do_not_merge():
    spec = credit_heatmap(np.zeros((2, 2)), row_labels=["g", "g"]).to_dict()
    assert layers(spec)[0]["encoding"]["y"]["scale"]["domain"] == ["g #0", "g #1"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(values=np.zeros((2, 3)), tokens=[["a", "b", "c"]]), r"^tokens has 1 rows but values has 2"),
        (dict(values=np.zeros((2, 3)), tokens=[["a", "b", "c"], ["a", "b", "c", "d"]]), r"^tokens\[1\] has 4"),
        (dict(values=np.zeros((2, 3)), mask=np.ones((2, 4), bool)), r"^mask has shape \(2, 4\)"),
        (dict(values=np.zeros((2, 3)), mask=np.full((2, 3), 2)), r"^mask must be boolean"),
        (dict(values=np.zeros((2, 3)), row_labels=["a"]), r"^row_labels has 1 entries"),
        (dict(values=np.zeros((2, 3)), highlight=[[1]]), r"^highlight has 1 rows"),
        (dict(values=np.zeros((2, 3)), highlight=[[3], []]), r"^highlight\[0\] has position 3 outside"),
        (dict(values=np.zeros((1, 3)), mask=[[1, 0, 1]], highlight=[[1]]), r"^highlight marks position \(0, 1\) which the mask hides"),
        (dict(values=np.array([[0.0, np.nan, 1.0]])), r"^values contains NaN at \(0, 1\)"),
        (dict(values=np.array([[0.0, 1.0], [np.inf, 0.0]])), r"^values contains inf at \(1, 0\)"),
        (dict(values=np.zeros((2, 3)), wrap=0), r"^wrap must be an integer >= 1"),
        (dict(values=np.zeros((2, 3)), wrap=2.5), r"^wrap must be"),
        (dict(values=np.zeros((2, 3, 4))), r"^values must have shape \(B, T\) or \(T,\)"),
        (dict(values=np.zeros((0, 3))), r"^values is empty"),
        (dict(values=np.array(["a", "b"])), r"^values must be a numeric array"),
        (dict(values=np.zeros(3), domain=0), r"^domain must be a positive"),
        (dict(values=np.zeros(3), domain=[-1, 1]), r"^domain must be a positive"),
        (dict(values=np.zeros((1, 3)), mask=np.zeros((1, 3), bool)), r"^mask hides every position"),
        (dict(values=np.zeros(3), tokens="abc"), r"^tokens must be a list"),
        (dict(values=np.zeros(3), cell_size=2), r"^cell_size must be"),
        (dict(values=np.zeros(3), cell_size=(20, 20, 20)), r"^cell_size must be"),
    ],
)
def test_invalid_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        credit_heatmap(**kwargs)


def test_nan_under_mask_is_fine():
    v = np.array([[0.5, np.nan]])
    recs = records(credit_heatmap(v, mask=[[True, False]]).to_dict())
    assert len(recs) == 1


def test_too_many_cells_raises_with_advice():
    v = np.zeros((64, 200))
    with pytest.raises(ValueError, match=r"12800 cells, more than 5000.*fewer rows"):
        credit_heatmap(v)
    mask = np.zeros((64, 200), bool)
    mask[:, :50] = True  # 3200 drawn cells: fine
    spec = credit_heatmap(v, mask=mask, show_text=False).to_dict()
    assert len(records(spec)) == 3200 <= MAX_ROWS


# ----------------------------------------------------------------------------------------------
# compare_heatmaps


def test_compare_heatmaps_shared_domain():
    a = np.array([[0.1, -0.2, 0.3]])
    b = np.array([[2.0, -0.5, 0.0]])
    spec = compare_heatmaps({"exact": a, "REINFORCE": b}, tokens=[list("xyz")]).to_dict()
    # titles sit left, above their panel (a narrow screen still shows which panel is which)
    assert [p["title"] for p in spec["vconcat"]] == [{"text": "exact", "anchor": "start"},
                                                    {"text": "REINFORCE", "anchor": "start"}]
    assert [color_scale(p)["domain"] for p in spec["vconcat"]] == [[-2.0, 2.0], [-2.0, 2.0]]
    assert spec["resolve"]["scale"]["color"] == "shared"


def test_compare_heatmaps_independent_and_explicit_domain():
    a = np.array([[0.1, -0.2, 0.3]])
    b = np.array([[2.0, -0.5, 0.0]])
    spec = compare_heatmaps({"a": a, "b": b}, shared_scale=False).to_dict()
    assert [color_scale(p)["domain"] for p in spec["vconcat"]] == [[-0.3, 0.3], [-2.0, 2.0]]
    assert spec["resolve"]["scale"]["color"] == "independent"
    spec = compare_heatmaps({"a": a, "b": b}, domain=4).to_dict()
    assert [color_scale(p)["domain"] for p in spec["vconcat"]] == [[-4.0, 4.0], [-4.0, 4.0]]


def test_compare_heatmaps_all_zero_and_mask():
    z = np.zeros((2, 3))
    mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    spec = compare_heatmaps({"a": z, "b": z}, mask=mask).to_dict()
    assert color_scale(spec["vconcat"][0])["domain"] == [-1.0, 1.0]
    assert all(len(records_of(p, spec)) == 5 for p in spec["vconcat"])


def records_of(panel, spec):
    return spec["datasets"][panel["data"]["name"]]


def test_compare_heatmaps_validation():
    with pytest.raises(ValueError, match=r"panels\['b'\] has shape \(1, 2\) but panels\['a'\] has shape \(1, 3\)"):
        compare_heatmaps({"a": np.zeros(3), "b": np.zeros(2)})
    with pytest.raises(ValueError, match=r"panels\['b'\] contains NaN at \(0, 1\)"):
        compare_heatmaps({"a": np.zeros(3), "b": np.array([0, np.nan, 0])})
    with pytest.raises(ValueError, match="non-empty dict"):
        compare_heatmaps({})


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
    assert line["encoding"]["x"]["scale"] == {"type": "log"}
    assert line["encoding"]["y"]["title"] == "gradient variance"
    assert line["encoding"]["color"]["scale"]["domain"] == ["REINFORCE", "VinePPO"]
    assert set(records(spec)[0]) == {"horizon", "var", "method", "lo", "hi"}  # unused column dropped
    assert spec["title"] == "Variance grows with horizon"


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
    notebook 01's batch slider (step 8) can no longer hand its experiment 132."""
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
