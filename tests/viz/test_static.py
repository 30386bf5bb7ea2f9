"""Static pictures of charts for stored notebooks (labkit.viz._static, LABKIT_STATIC_IMAGES).

With the variable set a displayed chart's bundle carries a PNG beside its live view and a
dashboard's carries one of its state; without it, nothing is added. The PNG re-encoding is
checked pixel for pixel against vl-convert's own file, and scripts/execute_notebooks.py's
post-processing keeps the pictures while it drops the live views.
"""
from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import altair as alt
import nbformat
import numpy as np
import pandas as pd
import pytest

from labkit import viz
from labkit.viz import _static
from repo_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def decode_png(png: bytes) -> np.ndarray:
    """A PNG's pixels (h, w, channels), for 8-bit RGB/RGBA/indexed files with any of the five
    filters (an indexed file comes back as RGB); checks the signature and every chunk's CRC."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, ihdr, plte = 8, b"", None, None
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"PLTE":
            plte = np.frombuffer(body, np.uint8).reshape(-1, 3)
        pos += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", ihdr[:10])
    assert depth == 8 and colour in (2, 3, 6)
    c = {2: 3, 3: 1, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8)
    assert raw.size == h * (1 + w * c)
    raw = raw.reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), np.int64)
    prev = np.zeros(w * c, np.int64)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        row = np.zeros(w * c, np.int64)
        for x in range(w * c):
            a = row[x - c] if x >= c else 0
            b = prev[x]
            cc = prev[x - c] if x >= c else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - cc
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
            row[x] = (line[x] + pred) % 256
        out[y] = prev = row
    if colour == 3:
        assert plte is not None and out.max() < len(plte)
        return plte[out]
    return out.reshape(h, w, c).astype(np.uint8)


def small_chart(y0: float = 0.0, title: str = "a small chart") -> alt.Chart:
    df = pd.DataFrame({"x": [0, 1, 2, 3], "y": [y0, 1.0, 0.5, 2.0]})
    return alt.Chart(df, width=120, height=80, title=title).mark_line().encode(x="x:Q", y="y:Q")


@pytest.fixture
def formatter():
    from IPython.core.formatters import DisplayFormatter

    f = DisplayFormatter()
    assert _static.install_chart_hook(f)
    return f


def test_chart_bundle_holds_a_decodable_png_with_the_variable_set(monkeypatch, formatter):
    monkeypatch.setenv(_static.ENV_VAR, "1")
    with alt.renderers.enable("jupyter", offline=True):
        data, _ = formatter.format(small_chart())
    assert WIDGET_VIEW in data  # the live view is still there
    img = decode_png(data["image/png"])
    # the 120 x 80 plot plus axes and title, at 1 px per CSS px
    assert 120 < img.shape[1] < 300 and 80 < img.shape[0] < 250
    assert len(np.unique(img.reshape(-1, img.shape[2]), axis=0)) > 2  # something was drawn


def test_no_png_without_the_variable(monkeypatch, formatter):
    monkeypatch.delenv(_static.ENV_VAR, raising=False)
    with alt.renderers.enable("jupyter", offline=True):
        data, _ = formatter.format(small_chart())
    assert WIDGET_VIEW in data and "image/png" not in data
    monkeypatch.setenv(_static.ENV_VAR, "0")
    assert not _static.static_images_enabled()
    with alt.renderers.enable("jupyter", offline=True):
        data, _ = formatter.format(small_chart())
    assert "image/png" not in data


def _rgba_png(img: np.ndarray) -> bytes:
    """An RGBA PNG written the way vl-convert writes it (Sub filter on every row)."""
    h, w, _ = img.shape
    x = img.astype(np.int16)
    f = x.copy()
    f[:, 1:] -= x[:, :-1]
    rows = np.concatenate([np.ones((h, 1), np.uint8), (f % 256).astype(np.uint8).reshape(h, 4 * w)], 1)
    return (b"\x89PNG\r\n\x1a\n" + _static._chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + _static._chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + _static._chunk(b"IEND", b""))


def test_reencoding_is_exact_for_few_colours():
    rng = np.random.default_rng(1)
    colours = rng.integers(0, 256, size=(40, 3))
    img = np.concatenate([colours[rng.integers(0, 40, size=(60, 90))], np.full((60, 90, 1), 255)], 2)
    original = _rgba_png(img.astype(np.uint8))
    np.testing.assert_array_equal(decode_png(original), img)  # the test's writer is right
    small = _static._shrink_png(original)
    assert len(small) < len(original)
    np.testing.assert_array_equal(decode_png(small), img[..., :3])


def test_reencoded_chart_keeps_its_frequent_colours_and_is_smaller():
    import vl_convert as vlc

    rng = np.random.default_rng(0)
    chart = viz.credit_heatmap(rng.normal(size=(3, 12)), cell_size=14)
    original = vlc.vegalite_to_png(chart.to_dict(), scale=1)
    small = _static._shrink_png(original)
    a, b = decode_png(original), decode_png(small)
    assert (a[..., 3] == 255).all() and a.shape[:2] == b.shape[:2]
    a = a[..., :3].reshape(-1, 3)
    b = b.reshape(-1, 3)
    key = (a[:, 0].astype(np.int64) << 16) | (a[:, 1].astype(np.int64) << 8) | a[:, 2]
    uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    assert len(uniq) > 256  # anti-aliasing: this chart needs the quantised path
    top = np.isin(inv.reshape(-1), np.argsort(-counts, kind="stable")[:256])
    assert top.mean() > 0.9  # most pixels are in the kept colours ...
    np.testing.assert_array_equal(a[top], b[top])  # ... and those are exact
    # the rest moved to their nearest kept colour: a shade, not a different colour
    assert np.abs(a[~top].astype(int) - b[~top]).max(axis=1).mean() < 16
    assert len(small) < len(original) / 2
    # a transparent picture is left as vl-convert wrote it
    clear = _rgba_png(np.zeros((4, 4, 4), np.uint8))
    assert _static._shrink_png(clear) == clear


def test_chart_png_rejects_bad_input():
    with pytest.raises(TypeError, match="^chart"):
        _static.chart_png("not a chart")
    with pytest.raises(ValueError, match="^scale"):
        _static.chart_png(small_chart(), scale=0)


def _dashboard():
    def compute(level):
        return small_chart(level), f"level = {level:.2f}; mean y = {(level + 3.5) / 4:.3f}"

    return viz.interact(compute, controls={"level": viz.slider("level", 0.0, 1.0, 0.25, 0.5)}, mode="widget")


def test_dashboard_bundle_holds_a_picture_of_its_state(monkeypatch):
    monkeypatch.setenv(_static.ENV_VAR, "1")
    with alt.renderers.enable("jupyter", offline=True):
        dash = _dashboard()
        bundle = dash._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle["text/plain"].startswith("Dashboard(")
    img = decode_png(base64.b64decode(bundle["image/png"]))
    bare = decode_png(_static.chart_png(dash.chart))
    # the same chart with two more title lines (the settings and the summary) above it
    assert img.shape[1] >= bare.shape[1] and img.shape[0] >= bare.shape[0] + 20
    # a control moved: the picture shows the new state
    dash.controls["level"].value = 1.0
    moved = decode_png(base64.b64decode(dash._repr_mimebundle_()["image/png"]))
    assert moved.shape != img.shape or (moved != img).any()


def test_dashboard_picture_wraps_a_long_summary():
    long = "; ".join(f"estimator {i} scores {i / 7:.4f}" for i in range(40))  # ~1000 characters
    short = decode_png(_static.dashboard_png(small_chart(), {"level": 0.5}, "one line"))
    wrapped = decode_png(_static.dashboard_png(small_chart(), {"level": 0.5}, long))
    assert wrapped.shape[1] < 800  # not one 6000 px line
    assert wrapped.shape[0] > short.shape[0] + 5 * 10  # the summary's ten or so lines, stacked


def test_dashboard_display_publishes_view_and_picture(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
    monkeypatch.setenv(_static.ENV_VAR, "1")
    with alt.renderers.enable("jupyter", offline=True):
        dash = _dashboard()
        dash._ipython_display_()
        (args, kwargs), = shown
        assert kwargs.get("raw") is True and {WIDGET_VIEW, "image/png"} <= set(args[0])
        monkeypatch.delenv(_static.ENV_VAR)
        shown.clear()
        dash._ipython_display_()
    (args, kwargs), = shown
    assert args[0] is dash.widget and "image/png" not in (dash._repr_mimebundle_() or {})


def _execute_script():
    return load_script("execute_notebooks")


def test_execute_post_processing_keeps_images_and_drops_widget_views():
    pytest.importorskip("nbclient", reason="scripts/execute_notebooks.py runs notebooks with nbclient (in requirements.lock)")
    ex = _execute_script()
    png = base64.b64encode(_static.chart_png(small_chart())).decode()
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("chart", outputs=[
        nbformat.v4.new_output("display_data", data={
            WIDGET_VIEW: view, "text/plain": "<altair.jupyter.jupyter_chart.JupyterChart object at 0x1>",
            "image/png": png}),
        nbformat.v4.new_output("execute_result", execution_count=1, data={
            WIDGET_VIEW: view, "text/plain": "Dashboard(controls=['n'])", "image/png": png}),
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: view, "text/plain": "VBox(children=())"}),
        nbformat.v4.new_output("execute_result", execution_count=2, data={
            WIDGET_VIEW: view, "text/plain": "Predict: how many?\nAnswer: 3",
            "text/html": "<details class=\"reveal\"><summary>answer</summary><p>3</p></details>"}),
        nbformat.v4.new_output("stream", name="stdout", text="42\n"),
    ])]
    assert ex.strip_widget_views(nb) == 4
    chart, dash, other, prediction, stream = nb.cells[0].outputs
    # a widget with its own static form keeps it (text and HTML), only the live view goes
    assert set(prediction["data"]) == {"text/plain", "text/html"}
    assert prediction["data"]["text/plain"].startswith("Predict: ")
    assert chart["data"] == {"text/plain": ex.PLACEHOLDER, "image/png": png}
    assert dash["data"] == {"text/plain": ex.PLACEHOLDER, "image/png": png}
    assert other["data"] == {"text/plain": ex.WIDGET_PLACEHOLDER}
    assert stream["text"] == "42\n"
    nbformat.validate(nb)
