"""Static pictures of charts for stored notebooks (``LABKIT_STATIC_IMAGES=1`` only).

A stored notebook cannot show a live chart: the widget's state (and altair's ~1 MB offline Vega
bundle with it) is not stored. So when ``scripts/execute_notebooks.py`` runs a notebook it sets
``LABKIT_STATIC_IMAGES=1`` for the kernel, and every chart displayed then also carries an
``image/png`` in its display bundle, rendered offline by vl-convert; a dashboard carries a
picture of its initial state. Static viewers (code hosts, nbviewer, ``make site``) show the
picture, and a live kernel replaces it with the interactive widget when the cell is run.

With the variable unset (students, nbval) no picture is made: no rendering cost, no extra
output. The same display hook also enforces the chart rules (``labkit.viz.rules``) under the
tests' strict checks (``LABKIT_STRICT_CHECKS=1``): a displayed chart that breaks one raises, and
IPython reports the error as the cell's, so nbval fails that cell. Nothing here imports the rest
of labkit beyond ``labkit.viz.rules``.
"""
from __future__ import annotations

import base64
import os
import struct
import textwrap
import zlib
from typing import Any, Mapping

import altair as alt

from labkit.viz.rules import check_chart_if_strict, strict_checks_enabled

ENV_VAR = "LABKIT_STATIC_IMAGES"
TITLE_WRAP = 100  # characters per line of a dashboard picture's settings and summary (~650 px)
PNG_SCALE = 1.0  # 1 px per CSS px: a 550 x 360 heatmap is ~30 KB once re-encoded (see _shrink_png)

__all__ = ["ENV_VAR", "static_images_enabled", "chart_png", "dashboard_png", "install_chart_hook",
           "chart_hook_wanted", "png_base64"]


def static_images_enabled() -> bool:
    """Whether displayed charts should carry a static PNG (the environment variable
    ``LABKIT_STATIC_IMAGES`` is set to a true value: 1, true, yes, on)."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")


def chart_png(chart: Any, *, scale: float = PNG_SCALE) -> bytes:
    """The PNG bytes of an altair chart (or of a Vega-Lite spec dict), rendered offline by
    vl-convert at ``scale`` pixels per CSS pixel, stored as an indexed PNG of at most 256
    colours to be small (see ``_shrink_png``)."""
    if isinstance(chart, alt.TopLevelMixin):
        spec = chart.to_dict()
    elif isinstance(chart, Mapping):
        spec = dict(chart)
    else:
        raise TypeError(f"chart: must be an altair chart or a Vega-Lite spec dict, got {type(chart).__name__}")
    if not (isinstance(scale, (int, float)) and not isinstance(scale, bool) and 0 < scale <= 8):
        raise ValueError(f"scale: must be a number in (0, 8], got {scale!r}")
    import vl_convert as vlc

    try:  # the Vega-Lite version altair writes (a private altair helper: may move)
        from altair.utils._importers import vl_version_for_vl_convert

        kw = {"vl_version": vl_version_for_vl_convert()}
    except ImportError:  # vl-convert's default Vega-Lite then
        kw = {}
    png = vlc.vegalite_to_png(spec, scale=scale, **kw)
    return _shrink_png(png)


def dashboard_png(chart: Any, values: Mapping[str, Any], summary: str = "", *,
                  scale: float = PNG_SCALE) -> bytes:
    """The PNG of a dashboard's state: its chart, with the control values and the summary
    line added to the chart's title as subtitle lines, wrapped at ``TITLE_WRAP`` characters (so
    the picture says which settings it shows and what was measured at them)."""
    if not isinstance(values, Mapping):
        raise TypeError(f"values: must be a mapping of control name -> value, got {type(values).__name__}")
    if not isinstance(summary, str):
        raise TypeError(f"summary: must be a string, got {type(summary).__name__}")
    spec = chart.to_dict() if isinstance(chart, alt.TopLevelMixin) else dict(chart)
    title = spec.get("title")
    if title is None:
        title = {"text": ""}
    elif not isinstance(title, dict):  # a string or a list of lines
        title = {"text": title}
    else:
        title = dict(title)
    sub = title.get("subtitle", [])
    sub = [sub] if isinstance(sub, str) else list(sub)
    lines = ["settings: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in values.items())]
    lines += [line for line in summary.splitlines() if line.strip()]
    # wrapped, so a long summary does not stretch the picture far past its chart
    sub.extend(part for line in lines for part in textwrap.wrap(line, TITLE_WRAP, subsequent_indent="  "))
    title["subtitle"] = sub
    title.setdefault("subtitleFont", "monospace")
    title.setdefault("anchor", "start")
    spec["title"] = title
    return chart_png(spec, scale=scale)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def chart_hook_wanted() -> bool:
    """Whether displayed charts need the hook: for their pictures (``LABKIT_STATIC_IMAGES``) or
    for the chart rules (strict checks)."""
    return static_images_enabled() or strict_checks_enabled()


def _png_for_display(chart: Any) -> bytes | None:
    """IPython's image/png formatter for altair charts: the picture, or None (no image, no
    traceback in the stored notebook) when the variable is unset or vl-convert refuses.
    Under strict checks it first checks the chart against the chart rules and raises
    ``ChartRuleError`` for one that breaks them (the tests must see it, unlike a failed picture)."""
    check_chart_if_strict(chart)
    if not static_images_enabled():
        return None
    try:
        return chart_png(chart)
    except Exception:  # a chart vl-convert cannot draw keeps its live view; tests count images
        return None


def install_chart_hook(display_formatter: Any = None) -> bool:
    """Make every altair chart displayed through ``display_formatter`` (default: the running
    IPython shell's) also carry an ``image/png`` next to its live view. Returns False when there
    is no IPython shell. The hook itself checks the variables on each display, so it
    costs nothing once they are unset. Under strict checks it also enforces the chart rules."""
    if display_formatter is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython ships with the lab
            return False
        shell = get_ipython()
        if shell is None:
            return False
        display_formatter = shell.display_formatter
    # A per-type image/png printer: IPython adds its result to the bundle the chart's own
    # _repr_mimebundle_ returns (the JupyterChart widget view), so both are published.
    display_formatter.formatters["image/png"].for_type(alt.TopLevelMixin, _png_for_display)
    return True


def png_base64(png: bytes) -> str:
    """A PNG as the base64 text a notebook's ``image/png`` entry stores."""
    return base64.b64encode(png).decode("ascii")


# -- PNG re-encoding ---------------------------------------------------------------------------
# vl-convert writes 8-bit RGBA with the Sub filter at a fast zlib level: ~190 KB for a 550 x 360
# heatmap, ~170 KB for a tall 744 x 2143 panel of four. Charts hold few colours (a few thousand
# distinct ones, nearly all from anti-aliased edges), so the picture is stored as an indexed PNG
# of at most 256 colours: exact when the chart has no more, else each rarer colour drawn as the
# nearest of the 256 most frequent (an edge pixel a shade off; flat fills, text and lines keep
# their colours). With zlib level 9 that is ~40% of the RGB size, which keeps the notebooks with
# a dozen charts under ~400 KB. Measured on the course's largest pictures: 169 -> 83 KB,
# 132 -> 67 KB, 140 -> 92 KB (an exact 39-colour one).

def _shrink_png(png: bytes) -> bytes:
    try:
        return _reencode(png) or png
    except Exception:  # an unexpected layout: the original file is a valid PNG anyway
        return png


def _reencode(png: bytes) -> bytes | None:
    import numpy as np

    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, ihdr, idat = 8, None, []
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    if ihdr is None:
        return None
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    if depth != 8 or colour != 6 or interlace != 0:
        return None
    rows = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + 4 * w)
    img = _unfilter(rows, w, h)
    if img is None or img[..., 3].min() < 255:  # transparency: keep vl-convert's file
        return None
    index, palette = _quantize(img[..., :3])
    body = np.concatenate([np.zeros((h, 1), np.uint8), index], 1)  # filter None on indices
    out = (png[:8] + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0))
           + _chunk(b"PLTE", palette.tobytes()) + _chunk(b"IDAT", zlib.compress(body.tobytes(), 9))
           + _chunk(b"IEND", b""))
    return out if len(out) < len(png) else None


def _quantize(rgb):
    """(index (h, w) uint8, palette (k, 3) uint8), k <= 256: the 256 most frequent colours, every
    other colour mapped to its nearest (squared RGB distance) among them."""
    import numpy as np

    h, w, _ = rgb.shape
    flat = rgb.reshape(-1, 3).astype(np.int32)
    key = (flat[:, 0] << 16) | (flat[:, 1] << 8) | flat[:, 2]
    uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    colours = np.stack([(uniq >> 16) & 255, (uniq >> 8) & 255, uniq & 255], 1)
    keep = np.argsort(-counts, kind="stable")[:256]
    palette = colours[keep]
    dist = ((colours[:, None, :] - palette[None, :, :]) ** 2).sum(2)
    nearest = dist.argmin(1)  # a kept colour is at distance 0 from itself
    return nearest[inverse.reshape(-1)].astype(np.uint8).reshape(h, w), palette.astype(np.uint8)


def _unfilter(rows, w: int, h: int):
    import numpy as np

    filters = rows[:, 0]
    data = rows[:, 1:].reshape(h, w, 4).astype(np.int64)
    if (filters == 1).all():  # what vl-convert writes: Sub, undone by a running sum per row
        return (np.cumsum(data, axis=1) % 256).astype(np.uint8)
    if (filters == 0).all():
        return data.astype(np.uint8)
    return None  # other filters: keep the original file


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
