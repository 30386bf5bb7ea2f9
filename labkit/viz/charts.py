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


def _value_domain(value_domain: Any, *, log: bool = False) -> list[float] | None:
    """``value_domain`` checked: None, or a (lo, hi) pair of finite numbers with lo < hi (and
    lo > 0 on a log axis), returned as a plain list for the spec."""
    if value_domain is None:
        return None
    ok = isinstance(value_domain, (tuple, list)) and len(value_domain) == 2 and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        and np.isfinite(v) for v in value_domain)
    if not ok:
        raise ValueError(f"value_domain: must be None or a (lo, hi) pair of finite numbers, got {value_domain!r}")
    lo, hi = (float(v) for v in value_domain)
    if not lo < hi:
        raise ValueError(f"value_domain: lo must be below hi, got ({lo:g}, {hi:g})")
    if log and lo <= 0:
        raise ValueError(f"value_domain: a log axis needs lo > 0, got ({lo:g}, {hi:g})")
    return [lo, hi]


def _label_limit(labels: Sequence) -> int:
    """Pixels an axis may give its category labels before cutting them with an ellipsis: the
    longest label at a generous 7 px per character (Vega's 10 px sans-serif averages ~6), at least
    Vega's default 180 and at most 400, so names like "reinforce_baseline" are shown whole."""
    longest = max((len(str(v)) for v in labels), default=0)
    return int(min(400, max(180, 7 * longest)))


# a log x axis with at most this many distinct values gets its ticks at those values
LOG_TICKS_AT_DATA = 12


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
    value_domain: tuple[float, float] | None = None,
) -> alt.Chart | alt.LayerChart:
    """Lines of y against x, one per value of ``color``, with an optional shaded band.

    ``band=(lower, upper)`` names two columns drawn as a translucent area around each line
    (e.g. mean +- std, or a 10-90% quantile range). Log axes require positive values. A
    quantitative x axis runs from the data's first x to its last (no rounding out to 1,000 on a
    log axis whose data stop at 200); a log x axis with few values (``LOG_TICKS_AT_DATA``) has
    its ticks at them. ``value_domain=(lo, hi)`` fixes the y axis (values
    outside are drawn at its edge), e.g. so a dashboard's curves can be compared from move to
    move instead of the axis rescaling under them.
    """
    if band is not None and (not isinstance(band, (tuple, list)) or len(band) != 2):
        raise ValueError(f"band: must be a (lower, upper) pair of column names, got {band!r}")
    fixed = _value_domain(value_domain, log=log_y)
    data = _check_df(df, "line_chart", x=x, y=y, color=color, band=band)
    for flag, cols in (("log_x", [x]), ("log_y", [y, *(band or ())])):
        if (log_x if flag == "log_x" else log_y):
            for c in cols:
                vals = pd.to_numeric(data[c], errors="coerce")
                if not (vals > 0).all():
                    raise ValueError(f"{flag}: {flag}=True but column {c!r} has values <= 0 or non-numeric")
    xk = _kind(data[x]) if _kind(data[x]) != "nominal" else "ordinal"
    x_scale: dict[str, Any] = {"type": "log"} if log_x else {}
    if xk == "quantitative":  # end the axis at the data, not at the next round number
        x_scale["nice"] = False
    x_axis: Any = alt.Undefined
    xs = sorted(set(pd.to_numeric(data[x], errors="coerce").dropna())) if log_x else []
    if 0 < len(xs) <= LOG_TICKS_AT_DATA:
        # a log axis's own ticks crowd (50 60 70 80 run together); a few horizons or budgets read
        # best as ticks at the values themselves
        x_axis = alt.Axis(values=[float(v) for v in xs], format=",~g")
    elif xk == "quantitative" and not log_x and data[x].dtype.kind in "iu":
        # integer x (training steps, counts): no ticks at 1.5 between them
        x_axis = alt.Axis(tickMinStep=1, format=",d")
    x_enc = alt.X(
        field=vl_field(x), type=xk, title=x_title if x_title is not None else x,
        scale=x_scale or alt.Undefined, axis=x_axis,
    )
    y_scale = {"type": "log"} if log_y else {"zero": False}
    if fixed is not None:
        y_scale = {**y_scale, "domain": fixed, "clamp": True}
    y_label = y_title if y_title is not None else y
    y_enc = alt.Y(field=vl_field(y), type="quantitative", title=y_label, scale=y_scale)
    enc: dict[str, Any] = {"x": x_enc}
    tips = [_tip(x, xk), _tip(y, "quantitative")]
    if color is not None:
        # The band and line layers share this colour scale, and Vega-Lite merges their legends
        # into one: a legend=None on either layer would remove it for both. Both layers carry
        # the same legend; full symbol opacity keeps the swatches as solid as the lines, not as
        # pale as the band.
        enc["color"] = alt.Color(
            field=vl_field(color), type="nominal", title=color,
            scale={"domain": _order(data[color])},
            legend={"symbolOpacity": 1} if band is not None else alt.Undefined,
        )
        tips.insert(0, _tip(color, "nominal"))
    base = alt.Chart(data)
    layers = []
    if band is not None:
        lo, hi = band
        layers.append(
            base.mark_area(opacity=0.2).encode(
                y=alt.Y(field=vl_field(lo), type="quantitative", scale=y_scale, title=y_label),
                y2=alt.Y2(field=vl_field(hi)),
                **enc,
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
    value_domain: tuple[float, float] | None = None,
    interval: tuple[str, str] | None = None,
) -> alt.Chart:
    """Bars of value ``y`` per category ``x`` (one row per category, or per (x, color) pair).

    With ``color`` the bars are grouped side by side (not stacked), e.g. one group per task and
    one bar per estimator. ``sort``: None keeps the data's order of first appearance;
    "ascending"/"descending" order categories by their (summed) y; a list gives the order.
    ``horizontal`` puts the categories on the vertical axis (better for long names); category
    labels get room for the longest name either way. ``value_domain=(lo, hi)`` fixes the value
    axis (a bar beyond it is drawn to the edge; its tooltip keeps the true value): in a
    dashboard, a bar that shrinks then looks shorter instead of the axis rescaling under it.
    ``interval=(low, high)``: two columns drawn as an error bar on each bar (e.g. a 95% interval
    over seeds); not with ``color``.
    """
    fixed = _value_domain(value_domain)
    if interval is not None and (isinstance(interval, str) or len(interval) != 2):
        raise ValueError(f"interval: expected two column names (low, high), got {interval!r}")
    lo, hi = interval if interval is not None else (None, None)
    if interval is not None and color is not None:
        raise ValueError("interval: error bars are drawn on single bars; leave color out")
    data = _check_df(df, "bar_chart", x=x, y=y, color=color, interval=None if interval is None else list(interval))
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
    if fixed is not None:
        val["scale"] = {"domain": fixed, "clamp": True}
    tips = [_tip(x, "nominal"), _tip(y, "quantitative")]
    limit = _label_limit(order)
    enc: dict[str, Any]
    if horizontal:
        enc = {"y": alt.Y(**cat, axis={"labelLimit": limit}), "x": alt.X(**val)}
    else:
        enc = {"x": alt.X(**cat, axis={"labelAngle": -30, "labelLimit": limit}), "y": alt.Y(**val)}
    if color is not None:
        corder = _order(data[color])
        enc["color"] = alt.Color(field=vl_field(color), type="nominal", title=color, scale={"domain": corder})
        off = dict(field=vl_field(color), type="nominal", scale={"domain": corder})
        enc["yOffset" if horizontal else "xOffset"] = (alt.YOffset if horizontal else alt.XOffset)(**off)
        tips.insert(1, _tip(color, "nominal"))
    chart = alt.Chart(data).mark_bar().encode(tooltip=tips, **enc)
    if interval is not None:
        tips = tips + [_tip(lo, "quantitative"), _tip(hi, "quantitative")]
        span = {("x" if horizontal else "y"): enc["x" if horizontal else "y"],
                ("x2" if horizontal else "y2"): (alt.X2 if horizontal else alt.Y2)(field=vl_field(hi))}
        span["x" if horizontal else "y"] = (alt.X if horizontal else alt.Y)(field=vl_field(lo), type="quantitative",
                                                                          **({"scale": val["scale"]} if "scale" in val
                                                                             else {}))
        span["y" if horizontal else "x"] = enc["y" if horizontal else "x"]
        chart = chart + alt.Chart(data).mark_rule(color="black", strokeWidth=1.5).encode(tooltip=tips, **span)
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
