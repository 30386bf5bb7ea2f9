"""Credit heatmaps (labkit.viz.heatmap): assertions on the Vega-Lite specs (chart.to_dict())."""
from __future__ import annotations

import json

import numpy as np
import pytest

from labkit.viz import MAX_ROWS, compare_heatmaps, credit_heatmap, visible_text

from chart_specs import cell, color_scale, layers, records, walk


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
    assert y_domain == ["traj, positions 0\u201339", "traj, positions 40\u201379", "traj, positions 80\u201399"]
    assert y_domain.index(r["line"]) == 1
    assert layers(spec)[0]["encoding"]["x"]["scale"]["domain"] == list(range(40))


def test_wrap_lines_ordered_row_major_for_several_rows():
    v = np.zeros((2, 10))
    spec = credit_heatmap(v, wrap=4).to_dict()
    y_domain = layers(spec)[0]["encoding"]["y"]["scale"]["domain"]
    assert y_domain == ["row 0, positions 0\u20133", "row 0, positions 4\u20137", "row 0, positions 8\u20139",
                        "row 1, positions 0\u20133", "row 1, positions 4\u20137", "row 1, positions 8\u20139"]


def test_wrapped_chart_says_how_to_read_a_line():
    """A wrapped line names the positions it holds, and a column is labelled as an offset from
    the line's first position: cell "+5" on line "#3, turns 12-23" is turn 17. The last line
    of a row ends at the row's last drawn position."""
    mask = np.ones((1, 30), bool)
    mask[0, 18:] = False  # the rollout ended at turn 17
    spec = credit_heatmap(np.zeros((1, 30)), mask=mask, wrap=12, row_labels=["#3"], position_label="turn").to_dict()
    enc = layers(spec)[0]["encoding"]
    assert enc["y"]["scale"]["domain"] == ["#3, turns 0\u201311", "#3, turns 12\u201317"]
    assert enc["x"]["title"] == "offset from the line's first turn"
    assert enc["x"]["axis"]["labelExpr"] == "'+' + datum.label"
    r = cell(records(spec), 17, "#3")
    assert (r["line"], r["col"]) == ("#3, turns 12\u201317", 5)
    # a line holding one position names it alone; an unwrapped chart keeps plain positions
    one = credit_heatmap(np.zeros((1, 13)), wrap=12, row_labels=["#3"], position_label="turn").to_dict()
    assert layers(one)[0]["encoding"]["y"]["scale"]["domain"] == ["#3, turns 0\u201311", "#3, turn 12"]
    plain = layers(credit_heatmap(np.zeros((1, 12)), wrap=12).to_dict())[0]["encoding"]["x"]
    assert plain["title"] == "position" and "labelExpr" not in plain["axis"]


def test_fully_masked_wrapped_line_is_dropped():
    v = np.zeros((1, 10))
    mask = np.array([[True] * 4 + [False] * 6])
    spec = credit_heatmap(v, mask=mask, wrap=4).to_dict()
    assert layers(spec)[0]["encoding"]["y"]["scale"]["domain"] == ["row 0, positions 0\u20133"]


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


def test_no_outline_on_an_empty_token():
    """An empty token is padding drawn without its mask: an outline there would be an empty box
    past the end of the text, so none is drawn (and with no outline left, no outline layer)."""
    tokens = [["a", "b", "", ""], ["c", "d", "e", "f"]]
    spec = credit_heatmap(np.zeros((2, 4)), tokens, highlight=[[1, 2, 3], [3]]).to_dict()
    assert {(r["row"], r["pos"]) for r in records(spec) if r["hl"]} == {("row 0", 1), ("row 1", 3)}
    spec = credit_heatmap(np.zeros((2, 4)), tokens, highlight=[[2, 3], []]).to_dict()
    assert len(layers(spec)) == 2 and "hl" not in records(spec)[0]


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
    # browser by tests/browser/test_browser.py), so escaping twice would show "&lt;" to the student.
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


def test_special_tokens_drawn_as_one_symbol():
    """<eos> would be truncated to "<\u2026" in a narrow cell, which reads as text the model wrote;
    every special token of the tiny LM's tokenizer is one symbol of its own instead, unlike any
    character of its vocabulary, and the tooltip keeps the token."""
    from labkit.policies.vocab import CHARS, EOS, SPECIAL_TOKENS
    from labkit.viz.heatmap import SPECIAL_SYMBOLS

    symbols = [visible_text(tok, 2) for tok in SPECIAL_TOKENS]
    assert all(len(sym) == 1 for sym in symbols)
    assert len(set(symbols)) == len(SPECIAL_TOKENS)
    assert not set(symbols) & set(CHARS) and not set(symbols) & set("\u2026\u2423\u21b5\u21e5\u240d")
    assert set(SPECIAL_SYMBOLS) == set(SPECIAL_TOKENS)
    assert visible_text(EOS) == "\u25a0"
    assert visible_text("x<eos>") == "x<eos>"  # only a whole token is special
    recs = records(credit_heatmap(np.zeros(3), tokens=["4", "2", EOS], cell_size=16).to_dict())
    assert [r["text"] for r in recs] == ["4", "2", "\u25a0"]
    assert recs[2]["token"] == EOS


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
