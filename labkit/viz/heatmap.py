"""Credit heatmaps: one coloured cell per position, rows are trajectories.

``credit_heatmap`` draws credit per token (or per step / turn / agent: pass coarse values and
use ``tokens`` for the per-position labels and ``position_label="step"``). Colour is a
symmetric diverging scale centred on zero, so "no credit" is always the neutral colour and the
sign of the credit is read off the hue.

Safety: token text is treated as data only. It goes into the chart's data table (the cell's
short display text, and the full token for the tooltip), never into a field name, a scale domain,
an axis label expression, a filter or any other Vega expression. Row labels and titles are the
caller's strings; they are drawn as SVG text (inert) and appear in scale domains as plain values.
We deliberately do NOT html-escape the tooltip text ourselves: vega-embed's tooltip handler
(vega-tooltip, also in altair's offline bundle) already escapes every tooltip key and value
before setting innerHTML, so escaping here too would show students "&lt;b&gt;" instead of "<b>".
tests/browser/test_browser.py hovers a "<b>" token in a real browser and checks the tooltip shows it as
text with no element injected.

Size: at most ``MAX_ROWS`` (5000, altair's own default limit) drawn cells per heatmap; above
that we raise a ValueError rather than aggregate, because silently averaging credit would show
something other than what the estimator produced. Slice rows (``values[:16]``) or positions, or
pass coarser per-step values instead.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from labkit.viz._common import MAX_ROWS, to_numpy

__all__ = ["credit_heatmap", "compare_heatmaps", "visible_text", "MAX_ROWS", "SPECIAL_SYMBOLS"]

_WHITESPACE = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d"}
#: One symbol per special token of the tiny LM's tokenizer (``labkit.policies.vocab``; viz does
#: not import it, a test keeps the two in step). Spelled out, "<eos>" fills a cell with "<e…",
#: which reads as a character the model wrote. Each symbol is in Chromium's default monospace
#: fonts (or their fallback) and in vl-convert's PNGs; the tooltip keeps the full token.
SPECIAL_SYMBOLS = {"<eos>": "\u25a0", "<bos>": "\u25ba", "<pad>": "\u00b7", "<unk>": "\ufffd"}  # ■ ► · �
#: Pixels of grid a default-wrapped heatmap may take: with row labels (up to 160 px) it fits the
#: ~930 px output column JupyterLab gives a 1366 x 900 screen.
FIT_WIDTH = 700
_SCHEME = "redblue"  # diverging, light grey in the middle: negative red, positive blue


def visible_text(token: str, max_chars: int | None = None) -> str:
    """Display form of a token: a special token (``SPECIAL_SYMBOLS``: end of sequence, ...) as
    its one symbol, whitespace made visible, optionally truncated with an ellipsis."""
    token = str(token)
    if token in SPECIAL_SYMBOLS:
        return SPECIAL_SYMBOLS[token]
    s = "".join(_WHITESPACE.get(ch, ch) for ch in token)
    if max_chars is not None and len(s) > max_chars:
        s = s[: max(1, max_chars - 1)] + "\u2026"
    return s


# ----------------------------------------------------------------------------------------------
# input validation


def _values_2d(values: Any, name: str = "values") -> tuple[np.ndarray, bool]:
    v = to_numpy(values, name)
    if v.dtype == bool:
        v = v.astype(float)
    if not (np.issubdtype(v.dtype, np.integer) or np.issubdtype(v.dtype, np.floating)):
        raise ValueError(f"{name} must be a numeric array, got dtype {v.dtype}")
    if v.ndim == 1:
        v, was_1d = v[None, :], True
    elif v.ndim == 2:
        was_1d = False
    else:
        raise ValueError(f"{name} must have shape (B, T) or (T,), got shape {v.shape}")
    if v.size == 0:
        raise ValueError(f"{name} is empty (shape {v.shape})")
    return v.astype(float), was_1d


def _mask_2d(mask: Any, shape: tuple[int, int], was_1d: bool) -> np.ndarray:
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = to_numpy(mask, "mask")
    if was_1d and m.ndim == 1:
        m = m[None, :]
    if m.shape != shape:
        want = shape[1:] if was_1d else shape
        raise ValueError(f"mask has shape {m.shape} but values has shape {want}")
    if m.dtype != bool:
        if not np.isin(m, (0, 1)).all():
            raise ValueError("mask must be boolean (or contain only 0 and 1)")
        m = m.astype(bool)
    return m


def _tokens_2d(tokens: Any, shape: tuple[int, int], was_1d: bool, mask: np.ndarray):
    if tokens is None:
        return None
    B, T = shape
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of token strings per row, not a single string")
    rows = list(tokens)
    if was_1d and (len(rows) == 0 or isinstance(rows[0], str) or not _is_sequence(rows[0])):
        rows = [rows]
    if len(rows) != B:
        raise ValueError(f"tokens has {len(rows)} rows but values has {B} rows")
    out = []
    for b, row in enumerate(rows):
        if isinstance(row, str) or not _is_sequence(row):
            raise ValueError(f"tokens[{b}] must be a list of strings, got {type(row).__name__}")
        row = [str(t) for t in row]
        if len(row) > T:
            raise ValueError(f"tokens[{b}] has {len(row)} entries but values has {T} positions")
        if len(row) < T:
            # A shorter token row is fine for padded batches, as long as the padding is masked.
            if mask[b, len(row):].any():
                first = len(row) + int(np.argmax(mask[b, len(row):]))
                raise ValueError(
                    f"tokens[{b}] has {len(row)} entries but values has {T} positions and "
                    f"position {first} is not masked out"
                )
            row = row + [""] * (T - len(row))
        out.append(row)
    return out


def _is_sequence(x: Any) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) or (
        hasattr(x, "__len__") and hasattr(x, "__getitem__") and not isinstance(x, (str, bytes))
    )


def _row_labels(row_labels: Any, B: int) -> list[str]:
    if row_labels is None:
        return [f"row {b}" for b in range(B)]
    if isinstance(row_labels, str):
        row_labels = [row_labels]
    labels = [str(x) for x in row_labels]
    if len(labels) != B:
        raise ValueError(f"row_labels has {len(labels)} entries but values has {B} rows")
    return labels


def _highlight_2d(highlight: Any, shape: tuple[int, int], was_1d: bool, mask) -> np.ndarray:
    B, T = shape
    hl = np.zeros(shape, dtype=bool)
    if highlight is None:
        return hl
    arr = None
    try:
        arr = to_numpy(highlight, "highlight")
    except ValueError:
        pass  # ragged per-row lists: handled below
    if arr is not None and arr.dtype == bool and arr.shape in (shape, shape[1:] if was_1d else ()):
        hl = arr.reshape(shape).copy()
    else:
        rows = list(highlight)
        if was_1d and all(np.ndim(p) == 0 for p in rows):
            rows = [rows]
        if len(rows) != B:
            raise ValueError(f"highlight has {len(rows)} rows but values has {B} rows")
        for b, row in enumerate(rows):
            if row is None:
                continue
            pos = np.atleast_1d(to_numpy(row, f"highlight[{b}]"))
            if pos.size == 0:
                continue
            if pos.dtype == bool or not np.issubdtype(pos.dtype, np.integer):
                raise ValueError(f"highlight[{b}] must hold integer positions, got {pos.dtype}")
            bad = pos[(pos < 0) | (pos >= T)]
            if bad.size:
                raise ValueError(f"highlight[{b}] has position {int(bad[0])} outside [0, {T})")
            hl[b, pos] = True
    outside = hl & ~mask
    if outside.any():
        b, t = np.argwhere(outside)[0]
        raise ValueError(f"highlight marks position ({b}, {t}) which the mask hides")
    return hl


def _has_text(toks: list[list[str]] | None, shape: tuple[int, int]) -> np.ndarray:
    """(B, T) bool: positions whose token has text (all of them without tokens).

    An outline needs something to outline: an empty token is the padding of a batch drawn
    without its mask, and a mark that lands there (a "first wrong step" of -1 matching padding's
    step id -1) would draw an empty box past the end of the text."""
    if toks is None:
        return np.ones(shape, dtype=bool)
    return np.array([[t != "" for t in row] for row in toks], dtype=bool).reshape(shape)


def _cell_size(cell_size: Any) -> tuple[int, int]:
    sizes = cell_size if isinstance(cell_size, (tuple, list)) else (cell_size, cell_size)
    ok = len(sizes) == 2 and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 4 for c in sizes
    )
    if not ok:
        raise ValueError(f"cell_size must be an integer >= 4 or a (width, height) pair of them, got {cell_size!r}")
    return int(sizes[0]), int(sizes[1])


def _check_finite(v: np.ndarray, mask: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(v) & mask
    if bad.any():
        b, t = (int(i) for i in np.argwhere(bad)[0])
        kind = "NaN" if np.isnan(v[b, t]) else "inf"
        raise ValueError(f"{name} contains {kind} at ({b}, {t})")


def _check_domain(domain: Any) -> float | None:
    if domain is None:
        return None
    if isinstance(domain, bool) or not isinstance(domain, (int, float, np.integer, np.floating)):
        raise ValueError(f"domain must be a positive number (half-width of the scale), got {domain!r}")
    d = float(domain)
    if not np.isfinite(d) or d <= 0:
        raise ValueError(f"domain must be a positive finite number, got {domain!r}")
    return d


def _half_width(v: np.ndarray, mask: np.ndarray) -> float:
    drawn = np.abs(v[mask])
    m = float(drawn.max()) if drawn.size else 0.0
    return m if m > 0 else 1.0  # all zeros: any symmetric domain is honest; 1 keeps it valid


# ----------------------------------------------------------------------------------------------
# the chart


def credit_heatmap(
    values: Any,
    tokens: Any = None,
    mask: Any = None,
    *,
    row_labels: Sequence[str] | None = None,
    highlight: Any = None,
    wrap: int | None = None,
    domain: float | None = None,
    title: str | None = None,
    value_label: str = "credit",
    cell_size: int | tuple[int, int] = 18,
    show_text: bool = True,
    position_label: str = "position",
) -> alt.LayerChart:
    """Heatmap of credit per position.

    Parameters
    ----------
    values : (B, T) or (T,) array or tensor
        Credit per position (per token, or per step/turn/agent for coarse views).
    tokens : list of B lists of strings (or one list for (T,) input), optional
        Display text per position. A row may be shorter than T if the rest is masked out.
        Without tokens the cells show position numbers.
    mask : (B, T) bool, optional
        False positions (padding) are not drawn and do not count towards the colour scale.
    row_labels : B strings, optional
        Label per row (default ``"row b"``).
    highlight : optional
        Positions to outline, e.g. the true bifurcation point or the decisive turn: a list with
        one entry per row (a list of positions, one position, or None), or a (B, T) bool array.
        For (T,) input a flat list of positions. Outlining a masked position is an error; a
        position whose token is empty (unmasked padding) is drawn without its outline.
    wrap : int, optional
        Positions per grid line; position t of row b is drawn on line (b, t // wrap) in column
        t % wrap. A wrapped chart labels each line with its row label and the positions it holds
        ("#3, tokens 40-79") and its columns with their offset from the line's first position
        ("+5"). Default: as many cells as fit ``FIT_WIDTH`` pixels (at most 40), so a chart fits
        the output column of a 1366-pixel laptop screen (about 930 px) with its row labels
        beside it.
    domain : float, optional
        Half-width m of the colour scale [-m, m]. Pass the same number to several heatmaps to
        make their colours comparable. Default: max |value| over drawn cells (1 if all zero).
        Values beyond the domain saturate.
    title, value_label, cell_size, show_text, position_label
        Chart title; name of the quantity (legend and tooltip); cell edge in pixels, or a
        (width, height) pair (wide cells suit coarse views with word labels: the text shown is
        truncated to about width/6 characters); draw the (truncated, whitespace-visible) token
        text in each cell; what a position is called ("token", "step", "turn", "agent").

    Returns
    -------
    alt.LayerChart
        Coloured cells, optional text layer, optional outline layer, all from one data table.
    """
    v, was_1d = _values_2d(values)
    B, T = v.shape
    cell_w, cell_h = _cell_size(cell_size)
    if wrap is None:
        wrap = max(1, min(40, FIT_WIDTH // cell_w))
    if isinstance(wrap, bool) or not isinstance(wrap, (int, np.integer)) or wrap < 1:
        raise ValueError(f"wrap must be an integer >= 1, got {wrap!r}")
    m_arr = _mask_2d(mask, (B, T), was_1d)
    toks = _tokens_2d(tokens, (B, T), was_1d, m_arr)
    labels = _row_labels(row_labels, B)
    hl = _highlight_2d(highlight, (B, T), was_1d, m_arr) & _has_text(toks, (B, T))
    half = _check_domain(domain)
    _check_finite(v, m_arr, "values")
    n_cells = int(m_arr.sum())
    if n_cells == 0:
        raise ValueError("mask hides every position: nothing to draw")
    if n_cells > MAX_ROWS:
        raise ValueError(
            f"credit_heatmap would draw {n_cells} cells, more than {MAX_ROWS}; pass fewer rows "
            f"(e.g. values[:8]), a slice of positions, or coarser per-step values"
        )
    if half is None:
        half = _half_width(v, m_arr)

    df = _cells(v, toks, m_arr, labels, hl, int(wrap), half, cell_w, show_text, str(position_label))
    lines = list(dict.fromkeys(df["line"]))  # drawn lines, in row-major order
    ncol = min(int(wrap), T)
    step = 5 if ncol > 10 else 1
    axis = {"orient": "top", "values": list(range(0, ncol, step)), "labelAngle": 0}
    if T > wrap:  # a column is an offset from its line's first position, and says so
        x_title = f"offset from the line's first {position_label}"
        axis["labelExpr"] = "'+' + datum.label"
    else:
        x_title = position_label
    x = alt.X("col:O", title=x_title, scale={"domain": list(range(ncol))}, axis=axis)
    y = alt.Y("line:N", title=None, scale={"domain": lines}, axis={"labelLimit": 160})
    tip = [
        alt.Tooltip("row:N", title="row"),
        alt.Tooltip("pos:Q", title=str(position_label)),
    ]
    if toks is not None:
        tip.append(alt.Tooltip("token:N", title="token"))
    tip.append(alt.Tooltip("value:Q", title=str(value_label), format=".4g"))

    base = alt.Chart(df).encode(x=x, y=y)
    cells = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=alt.Color(
            "value:Q",
            title=value_label,
            scale={"scheme": _SCHEME, "domain": [-half, half], "clamp": True},
            # above the grid, where it is seen without scrolling sideways
            legend={"orient": "top", "direction": "horizontal", "gradientLength": 160, "titleOrient": "left"},
        ),
        tooltip=tip,
    )
    layers: list[alt.Chart] = [cells]
    if show_text:
        layers.append(
            base.mark_text(fontSize=max(6, round(min(cell_w, cell_h) * 0.5)), font="monospace").encode(
                text="text:N", fill=alt.Fill("ink:N", scale=None), tooltip=tip
            )
        )
    if hl.any():
        layers.append(
            base.transform_filter({"field": "hl", "equal": True})
            .mark_rect(fill=None, stroke="black", strokeWidth=2)
            .encode(tooltip=tip)
        )
    chart = alt.layer(*layers).properties(width={"step": cell_w}, height={"step": cell_h})
    if title is not None:  # left, above its panel: stacked panels stay labelled on a narrow screen
        chart = chart.properties(title={"text": str(title), "anchor": "start"})
    return chart


def _cells(v, toks, mask, labels, hl, wrap, half, cell_w, show_text, position_label) -> pd.DataFrame:
    """Long-form table of the drawn cells (one row per unmasked position)."""
    T = v.shape[1]
    bs, ts = np.nonzero(mask)  # row-major order
    n_chars = max(1, cell_w // 6)  # ~6 px per monospace character at half the cell height
    if T > wrap:
        line = _wrapped_lines(labels, bs, ts, wrap, position_label)
    else:
        line = [labels[b] for b in bs]
    line = _dedupe_lines(line, bs)
    vals = v[bs, ts]
    df = {
        "row": [labels[b] for b in bs],
        "line": line,
        "col": (ts % wrap).astype(int),
        "pos": ts.astype(int),
        "value": np.array([float(f"{x:.6g}") for x in vals]),  # 6 significant digits: compact JSON
    }
    if show_text:  # text colour as data (no expression): white on the darkest cells
        df["ink"] = np.where(np.abs(vals) > 0.55 * half, "white", "black")
    if hl.any():
        df["hl"] = hl[bs, ts]
    if toks is not None:
        df["token"] = [toks[b][t] for b, t in zip(bs, ts)]
        df["text"] = [visible_text(toks[b][t], n_chars) for b, t in zip(bs, ts)]
    else:
        df["text"] = [str(t) for t in ts]
    return pd.DataFrame(df)


def _wrapped_lines(labels, bs, ts, wrap, position_label) -> list[str]:
    """Name of each drawn cell's grid line: its row label and the positions drawn on that line,
    e.g. "#3, tokens 40\u201379" (the last one drawn, so a row's short last line says where it ends)."""
    starts = (ts // wrap) * wrap
    last: dict[tuple[int, int], int] = {}
    for b, start, t in zip(bs.tolist(), starts.tolist(), ts.tolist()):
        last[b, start] = max(t, last.get((b, start), t))
    plural = position_label if position_label.endswith("s") else position_label + "s"

    def name(b: int, start: int) -> str:
        end = last[b, start]
        return f"{labels[b]}, {position_label} {start}" if end == start else f"{labels[b]}, {plural} {start}\u2013{end}"

    return [name(b, start) for b, start in zip(bs.tolist(), starts.tolist())]


def _dedupe_lines(line, bs):
    """Rows with the same label would merge on the y axis: suffix repeats with '#b'."""
    owner: dict[str, int] = {}
    clash = set()
    for name, b in zip(line, bs):
        if owner.setdefault(name, int(b)) != b:
            clash.add(name)
    if not clash:
        return line
    return [f"{name} #{b}" if name in clash else name for name, b in zip(line, bs)]


def compare_heatmaps(
    panels: Mapping[str, Any],
    tokens: Any = None,
    mask: Any = None,
    *,
    shared_scale: bool = True,
    **kw: Any,
) -> alt.VConcatChart:
    """Several credit heatmaps of the same rollouts stacked vertically, one per method.

    ``panels`` maps a title (e.g. "exact advantage", "REINFORCE", "GRPO") to a (B, T) or (T,)
    array; every panel must have the same shape. With ``shared_scale`` (default) all panels use
    one symmetric colour domain (max |value| over every panel, or ``domain=`` if given) and one
    legend, so equal colours mean equal credit across methods; otherwise each panel gets its own
    domain and legend. Other keyword arguments go to :func:`credit_heatmap`.
    """
    if not isinstance(panels, Mapping) or len(panels) == 0:
        raise ValueError("panels must be a non-empty dict of title -> values")
    if "title" in kw:
        raise ValueError("compare_heatmaps takes panel titles from the panels keys, not title=")
    arrays = {}
    shape = None
    for name, vals in panels.items():
        v, was_1d = _values_2d(vals, name=f"panels[{name!r}]")
        if shape is None:
            shape, first = v.shape, name
        elif v.shape != shape:
            raise ValueError(
                f"panels[{name!r}] has shape {v.shape} but panels[{first!r}] has shape {shape}"
            )
        arrays[name] = (v, was_1d)
    domain = _check_domain(kw.pop("domain", None))
    if shared_scale and domain is None:
        m = _mask_2d(mask, shape, arrays[first][1])
        for name, (v, _) in arrays.items():
            _check_finite(v, m, f"panels[{name!r}]")
        domain = max(float(np.abs(v[m]).max(initial=0.0)) for v, _ in arrays.values()) or 1.0
    charts = []
    for name, vals in panels.items():
        try:
            charts.append(credit_heatmap(vals, tokens, mask, domain=domain, title=str(name), **kw))
        except ValueError as exc:
            raise ValueError(f"panels[{name!r}]: {exc}") from None
    out = alt.vconcat(*charts, spacing=12)
    return out.resolve_scale(color="shared" if shared_scale else "independent")
