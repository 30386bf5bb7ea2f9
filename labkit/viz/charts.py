"""Plain charts for the notebooks: learning/variance curves, bar comparisons, count tables.

Every function takes a pandas DataFrame in long form plus column names, checks that the columns
exist (ValueError naming the missing one and listing the available ones), keeps only the columns
it draws (small specs), and passes column names to Vega-Lite escaped, so names with dots or
brackets ("loss.mean", "grad[0]") plot correctly. Category order is the order of first
appearance in the data unless told otherwise, and is passed as a scale domain (plain data).
"""
from __future__ import annotations

from typing import Any, Sequence

import altair as alt
import numpy as np
import pandas as pd

from labkit.viz._common import MAX_ROWS, vl_field

__all__ = ["line_chart", "bar_chart", "heat_table"]


def _check_df(df: Any, fn: str, **columns: Any) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: must be a pandas DataFrame, got {type(df).__name__} ({fn})")
    available = [str(c) for c in df.columns]
    for arg, col in columns.items():
        if col is None:
            continue
        cols = col if isinstance(col, (tuple, list)) else (col,)
        for c in cols:
            if c not in df.columns:
                raise ValueError(
                    f"{arg}: {arg}={c!r} is not a column of df; available columns: {available} ({fn})"
                )
    if len(df) == 0:
        raise ValueError(f"df: is empty; there is nothing to draw ({fn})")
    if len(df) > MAX_ROWS:
        raise ValueError(
            f"df: has {len(df)} rows, more than {MAX_ROWS} ({fn}); aggregate first "
            f"(e.g. df.groupby(...).mean()) so the chart stays small"
        )
    used: list[str] = []
    for col in columns.values():
        for c in col if isinstance(col, (tuple, list)) else (col,):
            if c is not None and c not in used:
                used.append(c)
    return df[used].copy()


def _kind(s: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(s):
        return "nominal"
    if pd.api.types.is_numeric_dtype(s):
        return "quantitative"
    if pd.api.types.is_datetime64_any_dtype(s):
        return "temporal"
    return "nominal"


def _order(s: pd.Series) -> list:
    """Categories in order of first appearance, as plain JSON values."""
    return [v.item() if isinstance(v, np.generic) else v for v in pd.unique(s.dropna())]


def _titled(chart: Any, title: str | None) -> Any:
    """``chart`` with ``title`` above it; None leaves it untitled (no empty title block)."""
    return chart if title is None else chart.properties(title=title)


def _tip(col: str, kind: str) -> alt.Tooltip:
    fmt = ".4g" if kind == "quantitative" else alt.Undefined
    return alt.Tooltip(field=vl_field(col), type=kind, title=str(col), format=fmt)


def line_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    color: str | None = None,
    band: tuple[str, str] | None = None,
    log_x: bool = False,
    log_y: bool = False,
    title: str | None = None,
    x_title: str | None = None,
    y_title: str | None = None,
    points: bool = True,
) -> alt.Chart | alt.LayerChart:
    """Lines of y against x, one per value of ``color``, with an optional shaded band.

    ``band=(lower, upper)`` names two columns drawn as a translucent area around each line
    (e.g. mean +- std, or a 10-90% quantile range). Log axes require positive values.
    """
    if band is not None and (not isinstance(band, (tuple, list)) or len(band) != 2):
        raise ValueError(f"band: must be a (lower, upper) pair of column names, got {band!r}")
    data = _check_df(df, "line_chart", x=x, y=y, color=color, band=band)
    for flag, cols in (("log_x", [x]), ("log_y", [y, *(band or ())])):
        if (log_x if flag == "log_x" else log_y):
            for c in cols:
                vals = pd.to_numeric(data[c], errors="coerce")
                if not (vals > 0).all():
                    raise ValueError(f"{flag}: {flag}=True but column {c!r} has values <= 0 or non-numeric")
    xk = _kind(data[x]) if _kind(data[x]) != "nominal" else "ordinal"
    x_enc = alt.X(
        field=vl_field(x), type=xk, title=x_title if x_title is not None else x,
        scale={"type": "log"} if log_x else alt.Undefined,
    )
    y_scale = {"type": "log"} if log_y else {"zero": False}
    y_label = y_title if y_title is not None else y
    y_enc = alt.Y(field=vl_field(y), type="quantitative", title=y_label, scale=y_scale)
    enc: dict[str, Any] = {"x": x_enc}
    tips = [_tip(x, xk), _tip(y, "quantitative")]
    if color is not None:
        enc["color"] = alt.Color(
            field=vl_field(color), type="nominal", title=color,
            scale={"domain": _order(data[color])},
        )
        tips.insert(0, _tip(color, "nominal"))
    base = alt.Chart(data)
    layers = []
    if band is not None:
        lo, hi = band
        band_enc = dict(enc)
        if color is not None:  # the legend comes from the line layer (solid swatches)
            band_enc["color"] = alt.Color(
                field=vl_field(color), type="nominal", scale={"domain": _order(data[color])}, legend=None
            )
        layers.append(
            base.mark_area(opacity=0.2).encode(
                y=alt.Y(field=vl_field(lo), type="quantitative", scale=y_scale, title=y_label),
                y2=alt.Y2(field=vl_field(hi)),
                **band_enc,
            )
        )
        tips += [_tip(lo, "quantitative"), _tip(hi, "quantitative")]
    layers.append(base.mark_line(point=bool(points)).encode(y=y_enc, tooltip=tips, **enc))
    chart = layers[0] if len(layers) == 1 else alt.layer(*layers)
    return _titled(chart, title)


def bar_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    color: str | None = None,
    title: str | None = None,
    sort: str | Sequence | None = None,
    horizontal: bool = False,
) -> alt.Chart:
    """Bars of value ``y`` per category ``x`` (one row per category, or per (x, color) pair).

    With ``color`` the bars are grouped side by side (not stacked), e.g. one group per task and
    one bar per estimator. ``sort``: None keeps the data's order of first appearance;
    "ascending"/"descending" order categories by their (summed) y; a list gives the order.
    ``horizontal`` puts the categories on the vertical axis (better for long names).
    """
    data = _check_df(df, "bar_chart", x=x, y=y, color=color)
    if not pd.api.types.is_numeric_dtype(data[y]):
        raise ValueError(f"y: y={y!r} must be a numeric column, got dtype {data[y].dtype}")
    if sort is None:
        order = _order(data[x])
    elif isinstance(sort, str):
        if sort not in ("ascending", "descending"):
            raise ValueError(f"sort: must be None, 'ascending', 'descending' or a list, got {sort!r}")
        totals = data.groupby(x, sort=False)[y].sum().sort_values(ascending=(sort == "ascending"), kind="stable")
        order = [v.item() if isinstance(v, np.generic) else v for v in totals.index]
    else:
        order = list(sort)
        missing = [c for c in _order(data[x]) if c not in order]
        if missing:
            raise ValueError(f"sort: the sort list is missing categories {missing}")
    cat = dict(field=vl_field(x), type="nominal", title=x, scale={"domain": order})
    val = dict(field=vl_field(y), type="quantitative", title=y)
    tips = [_tip(x, "nominal"), _tip(y, "quantitative")]
    enc: dict[str, Any]
    if horizontal:
        enc = {"y": alt.Y(**cat), "x": alt.X(**val)}
    else:
        enc = {"x": alt.X(**cat, axis={"labelAngle": -30}), "y": alt.Y(**val)}
    if color is not None:
        corder = _order(data[color])
        enc["color"] = alt.Color(field=vl_field(color), type="nominal", title=color, scale={"domain": corder})
        off = dict(field=vl_field(color), type="nominal", scale={"domain": corder})
        enc["yOffset" if horizontal else "xOffset"] = (alt.YOffset if horizontal else alt.XOffset)(**off)
        tips.insert(1, _tip(color, "nominal"))
    chart = alt.Chart(data).mark_bar().encode(tooltip=tips, **enc)
    return _titled(chart, title)


def heat_table(
    df: pd.DataFrame,
    row: str,
    col: str,
    value: str,
    *,
    text: bool = True,
    title: str | None = None,
) -> alt.Chart | alt.LayerChart:
    """Categorical heatmap: one cell per (row, col) pair coloured by ``value``, e.g. how many
    surveyed methods sit at each granularity x methodology. Missing pairs are left blank.
    Rows and columns keep the data's order of first appearance."""
    data = _check_df(df, "heat_table", row=row, col=col, value=value)
    if not pd.api.types.is_numeric_dtype(data[value]):
        raise ValueError(f"value: value={value!r} must be a numeric column, got dtype {data[value].dtype}")
    dup = data.duplicated([row, col])
    if dup.any():
        r = data[dup].iloc[0]
        raise ValueError(f"df: more than one row for ({row}={r[row]!r}, {col}={r[col]!r}); aggregate first")
    vals = pd.to_numeric(data[value])
    vmax = float(vals.max()) if len(vals) else 0.0
    vmin = float(min(0.0, vals.min()))
    # text colour from data (no expression): white on the darkest cells
    data["_ink"] = np.where(vals > vmin + 0.6 * (vmax - vmin), "white", "black") if vmax > vmin else "black"
    integer = pd.api.types.is_integer_dtype(data[value])
    fmt = "d" if integer else ".3g"
    base = alt.Chart(data).encode(
        x=alt.X(field=vl_field(col), type="nominal", title=col, scale={"domain": _order(data[col])},
                axis={"orient": "top", "labelAngle": -30}),
        y=alt.Y(field=vl_field(row), type="nominal", title=row, scale={"domain": _order(data[row])}),
        tooltip=[_tip(row, "nominal"), _tip(col, "nominal"),
                 alt.Tooltip(field=vl_field(value), type="quantitative", title=str(value), format=fmt)],
    )
    rect = base.mark_rect(stroke="white").encode(
        color=alt.Color(field=vl_field(value), type="quantitative", title=value,
                        scale={"scheme": "blues", "domain": [vmin, vmax if vmax > vmin else vmin + 1]})
    )
    chart: alt.Chart | alt.LayerChart = rect
    if text:
        chart = alt.layer(
            rect,
            base.mark_text(fontSize=11).encode(
                text=alt.Text(field=vl_field(value), type="quantitative", format=fmt),
                fill=alt.Fill(field="_ink", type="nominal", scale=None),
            ),
        )
    chart = chart.properties(width={"step": 44}, height={"step": 24})
    return _titled(chart, title)
