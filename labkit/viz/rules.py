"""Rules every chart the course shows must pass, checked on its Vega-Lite spec.

One rule so far: **a colour that encodes data has a key.** A colour channel (``color``,
``fill`` or ``stroke``) bound to a field through a scale tells categories (or amounts) apart only
if the reader can look the colours up: in a legend, or in text drawn beside the marks (a text
layer showing the same field, "direct labels"). A literal colour taken from the data
(``scale: null``, e.g. a heatmap's white or black text ink) encodes nothing and needs no key.

The subtle way to lose a legend: Vega-Lite merges the legends of every layer or panel that
shares a colour scale, and one ``legend: null`` among them removes the merged legend for all of
them (a band layer that hides its "duplicate" legend hides the line layer's too). So a
suppressed legend is judged per shared scale, not per layer: ``resolve`` with
``"independent"`` splits the sharing.

Under the tests (``$LABKIT_STRICT_CHECKS=1``) every chart a notebook displays is checked
(``labkit.viz._static.install_chart_hook``, ``Dashboard``'s display), and a chart that breaks a
rule fails its cell with :class:`ChartRuleError` naming the chart and the problem. In a
reader's own session nothing is checked. Imports only ``labkit.core`` (where the variable
is defined).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from labkit.core.checks import STRICT_ENV, strict_checks_enabled


COLOUR_CHANNELS = ("color", "fill", "stroke")
#: keys under which a composite spec holds its sub-specs (a list, or one spec)
_CHILD_LISTS = ("layer", "hconcat", "vconcat", "concat")
_CHILD_SPECS = ("spec",)  # facet and repeat

__all__ = ["STRICT_ENV", "ChartRuleError", "chart_problems", "check_chart", "check_chart_if_strict",
           "chart_title", "strict_checks_enabled"]


class ChartRuleError(AssertionError):
    """A chart breaks one of the rules in :mod:`labkit.viz.rules`."""


@dataclass(frozen=True)
class _Colour:
    """One colour channel bound to a field, as drawn by one unit spec."""

    channel: str
    field: str
    legend_group: tuple  # units with the same group share one merged legend
    stack: tuple  # the layer stack the unit is drawn in (its direct labels live there)
    hides_legend: bool  # this unit says legend: null (or disable: true) for the channel
    panel: str  # the title of the nearest titled spec around the unit


@dataclass(frozen=True)
class _Text:
    field: str
    stack: tuple


def chart_problems(spec: Mapping[str, Any]) -> list[str]:
    """What makes the chart ``spec`` (``chart.to_dict()``) hard to read; [] when nothing does.

    Checks that every colour encoding of a field (color, fill, stroke; a ``scale: null``
    literal colour excepted) has a visible legend or a text layer in the same layer stack
    that draws the same field. A legend is suppressed when any unit sharing the scale (in a
    layer, concat or facet, unless resolved "independent") says ``legend: null`` or
    ``disable: true``, or when ``config.legend.disable`` is set.
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"spec: must be a Vega-Lite spec dict (chart.to_dict()), got {type(spec).__name__}")
    colours: list[_Colour] = []
    texts: list[_Text] = []
    for unit, groups, stack, panel in _units(spec, {}, (), ""):
        colours += _colours_of(unit, groups, stack, panel)
        text_field = _field_of((unit.get("encoding") or {}).get("text"))
        if text_field is not None and _mark_type(unit) == "text":
            texts.append(_Text(text_field, stack))
    all_off = bool(((spec.get("config") or {}).get("legend") or {}).get("disable"))
    hidden = {(c.channel, c.legend_group) for c in colours if c.hides_legend}
    top_title = _title_text(spec.get("title"))
    problems: list[str] = []
    for c in colours:
        key = (c.channel, c.legend_group)
        if not (all_off or key in hidden):
            continue
        if any(t.field == c.field and t.stack == c.stack for t in texts):
            continue  # labelled directly
        why = ("config.legend.disable is set" if all_off else
               "legend: null on it or on a layer or panel sharing its colour scale, whose legends "
               "Vega-Lite merges into one that a single null removes")
        where = f"panel {c.panel!r}: " if c.panel and c.panel != top_title else ""
        problem = (f"{where}{c.channel} encodes field {c.field!r} but no legend is drawn ({why}) and no text "
                   f"layer labels it; a colour that encodes data needs a legend or direct labels")
        if problem not in problems:
            problems.append(problem)
    return problems


def check_chart(chart: Any) -> None:
    """Raise :class:`ChartRuleError` naming the chart's title and every problem
    :func:`chart_problems` finds in it (an altair chart or a spec dict)."""
    spec = chart.to_dict(validate=False) if hasattr(chart, "to_dict") else chart
    problems = chart_problems(spec)
    if problems:
        raise ChartRuleError(f"chart {chart_title(spec)!r} is hard to read:\n" +
                             "\n".join(f"  - {p}" for p in problems))


def check_chart_if_strict(chart: Any) -> None:
    """:func:`check_chart` under strict checks (the tests); nothing in a reader's session."""
    if strict_checks_enabled() and chart is not None:
        check_chart(chart)


def chart_title(spec: Mapping[str, Any], default: str = "(untitled chart)") -> str:
    """The title a reader sees on ``spec``: its own, else its panels' titles joined by " | "."""
    own = _title_text(spec.get("title"))
    if own:
        return own
    parts = [chart_title(child, default="") for child in _children(spec)]
    parts = [p for p in parts if p]
    return " | ".join(parts) if parts else default


# -- walking a spec -----------------------------------------------------------------------------

def _units(node: Mapping[str, Any], groups: dict, path: tuple, panel: str
           ) -> Iterator[tuple[Mapping[str, Any], dict, tuple, str]]:
    """Every unit (single-mark) spec under ``node``, with its legend group per colour channel,
    its layer stack and its panel title."""
    panel = _title_text(node.get("title")) or panel
    kids = list(_children_with_keys(node))
    if not kids:
        yield node, groups, _stack_of(path), panel
        return
    resolve = node.get("resolve") or {}
    for key, index, child in kids:
        child_path = path + (key, index)
        child_groups = dict(groups)
        for channel in COLOUR_CHANNELS:
            split = ((resolve.get("scale") or {}).get(channel) == "independent"
                     or (resolve.get("legend") or {}).get(channel) == "independent")
            if split:
                child_groups[channel] = groups.get(channel, ()) + (child_path,)
        yield from _units(child, child_groups, child_path, panel)


def _stack_of(path: tuple) -> tuple:
    """A unit's layer stack: the path of its nearest enclosing layer spec, or its own path."""
    for i in range(len(path) - 2, -1, -2):
        if path[i] == "layer":
            return path[:i]
    return path


def _children_with_keys(node: Mapping[str, Any]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    for key in _CHILD_LISTS:
        for i, child in enumerate(node.get(key) or ()):
            if isinstance(child, Mapping):
                yield key, i, child
    for key in _CHILD_SPECS:
        child = node.get(key)
        if isinstance(child, Mapping):
            yield key, 0, child


def _children(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [child for _, _, child in _children_with_keys(node)]


def _colours_of(unit: Mapping[str, Any], groups: dict, stack: tuple, panel: str) -> list[_Colour]:
    out = []
    encoding = unit.get("encoding") or {}
    for channel in COLOUR_CHANNELS:
        field_def = _field_def(encoding.get(channel))
        if field_def is None:
            continue
        if "scale" in field_def and field_def["scale"] is None:
            continue  # a literal colour from the data: encodes no category
        legend = field_def.get("legend", {})
        hides = legend is None or (isinstance(legend, Mapping) and legend.get("disable") is True)
        out.append(_Colour(channel, _field_of(field_def), groups.get(channel, ()), stack, hides, panel))
    return out


def _field_def(channel_def: Any) -> Mapping[str, Any] | None:
    """The part of a channel that binds it to data (itself, or its ``condition``: where its
    scale and legend live too); None for a literal value, a datum or no channel."""
    if not isinstance(channel_def, Mapping):
        return None
    if "field" in channel_def or "aggregate" in channel_def:
        return channel_def
    return _field_def(channel_def.get("condition"))


def _field_of(channel_def: Any) -> str | None:
    """The field a channel is bound to, as text (an aggregate without a field as "count(*)")."""
    field_def = _field_def(channel_def)
    if field_def is None:
        return None
    field = field_def.get("field")
    if field is None:
        return f"{field_def['aggregate']}(*)"
    return field if isinstance(field, str) else repr(field)


def _mark_type(unit: Mapping[str, Any]) -> str | None:
    mark = unit.get("mark")
    return mark.get("type") if isinstance(mark, Mapping) else mark


def _title_text(title: Any) -> str:
    if isinstance(title, Mapping):
        title = title.get("text")
    if isinstance(title, (list, tuple)):
        title = " ".join(str(t) for t in title)
    return str(title) if title else ""
