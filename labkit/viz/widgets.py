"""Sliders that recompute and redraw a chart: the notebooks' one interaction pattern.

    def compute(horizon, n):
        credit = estimate(horizon, n)                  # any (B, T) array
        return credit_heatmap(credit), f"var = {credit.var():.3f}"

    dash = interact(compute, controls={"horizon": slider("horizon", 5, 200, 5, 50),
                                       "n": slider("group size", 2, 64, 1, 8)})
    dash          # displays the controls, the summary line and the chart

``compute(**values)`` receives the controls' current values by name and returns an altair chart,
or a tuple ``(chart, summary)`` where ``summary`` is a short string of measured numbers shown in
monospace right under the controls, above the chart (so it is on screen with the top of a tall
chart). Any exception raised by ``compute`` is shown in the dashboard as a readable message and
kept on ``dash.error``; the controls stay live, so the next good value redraws normally.

How the chart is drawn. When altair's active renderer is "jupyter" (``labkit.viz.enable_offline``
turns it on) the dashboard keeps ONE ``alt.JupyterChart`` widget and swaps its chart on every
update: the offline Vega bundle (~0.9 MB of JavaScript) travels to the browser once, not on every
slider move. With any other renderer the chart's display data is written into ``dash.output``.
Everything also works with no kernel or browser at all (tests set ``control.value`` and read
``dash.chart.to_dict()``).

Answering at once. ``interact(..., cache=N)`` keeps the last N results of ``compute`` keyed by
the control values (least recently used first out), so moving back to a value redraws without
recomputing; ``precompute={"k": [1, 2, 4]}`` (or ``{"k": "all"}``: every value of that control, see
``control_values``) also fills that cache at build time for every combination of the listed values (other controls at their start values), for a slow compute
over a small grid. Only use either when ``compute`` is a pure function of the control values
(same values, same chart and summary): a cached answer is the answer compute gave, not a new one.

Redrawing cheaply. Altair checks a chart against the Vega-Lite JSON schema every time it is
serialised, and that check costs as much as building the chart. A dashboard's charts keep their
structure from move to move (the data and a few numbers change), so the dashboard checks a spec
once per structure (``spec_shape``: the spec with its data rows, titles and numbers left out) and
hands the already-serialised dict to the view afterwards; a chart with a new structure (a layer
that appears, another mark or scale type) is checked again, and an invalid one is shown as an
error like any failed compute. After the first good draw, compute also runs with altair's
build-time checks off (``altair.utils.schemapi.debug_mode(False)``: they serialise and check
every object as it is made; the draw-time check above still runs on every new structure). A
redraw from the cache reuses the spec serialised the first time.

Sliders default to ``continuous_update=False``: compute runs when the handle is released, not on
every pixel of a drag, so a slow recompute never floods the kernel and no debouncing is needed.
"""
from __future__ import annotations

import html
import itertools
import math
import numbers
import traceback
from collections import OrderedDict
from typing import Any, Callable, Mapping, Sequence

import altair as alt
import ipywidgets as W
import jsonschema
import traitlets
from altair.utils import schemapi

from labkit.viz.rules import check_chart_if_strict

__all__ = ["Dashboard", "interact", "slider", "dropdown", "control_values", "spec_shape"]


class _SnapToStep:
    """A slider whose value always lies on its grid min + k * step inside [min, max]. ipywidgets'
    number box accepts any number typed into it (132 on a batch-size slider with step 8), and the
    experiment behind the slider may accept only grid values; snapping in the value's validator
    means the experiment never sees an off-grid value and the box shows the snapped one."""

    @traitlets.validate("value")
    def _validate_value(self, proposal):
        v = min(max(proposal["value"], self.min), self.max)
        k = math.floor((v - self.min) / self.step + 0.5 + 1e-9)  # half up, robust to 3.4999...
        snapped = self.min + k * self.step
        if snapped > self.max:  # the grid may stop short of max
            snapped -= self.step
        return int(snapped) if isinstance(self, W.IntSlider) else round(float(snapped), 12)


class SnapIntSlider(_SnapToStep, W.IntSlider):
    """An IntSlider whose value snaps to min + k * step."""


class SnapFloatSlider(_SnapToStep, W.FloatSlider):
    """A FloatSlider whose value snaps to min + k * step."""


def slider(
    name: str,
    min: float,
    max: float,
    step: float,
    value: float,
    description: str | None = None,
    **kw: Any,
) -> W.IntSlider | W.FloatSlider:
    """An IntSlider when min, max, step and value are all integers, else a FloatSlider; either
    way its value snaps to the grid min + k * step (a number typed into the box included), so a
    control never hands its experiment a value off its step.

    ``continuous_update=False`` by default (pass ``continuous_update=True`` to override).
    """
    nums = {"min": min, "max": max, "step": step, "value": value}
    for k, v in nums.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or v != v:
            raise ValueError(f"{k}: must be a number, got {v!r} (slider {name!r})")
        if not math.isfinite(v):  # an infinite bound has no grid and no handle position
            raise ValueError(f"{k}: must be finite, got {v!r} (slider {name!r})")
    is_int = all(isinstance(v, numbers.Integral) for v in nums.values())
    min, max, step, value = (int(v) if is_int else float(v) for v in nums.values())
    if not min < max:
        raise ValueError(f"max: must be larger than min ({min}), got {max} (slider {name!r})")
    if not step > 0:
        raise ValueError(f"step: must be positive, got {step} (slider {name!r})")
    if not min <= value <= max:
        raise ValueError(f"value: {value} is outside [{min}, {max}]; pick a start value inside the range "
                         f"(slider {name!r})")
    if is_int:
        if (value - min) % step:
            raise ValueError(f"value: {value} is not on the slider's grid {min} + k * {step} (slider {name!r})")
    elif abs((value - min) / step - round((value - min) / step)) > 1e-9:
        raise ValueError(f"value: {value} is not on the slider's grid {min} + k * {step} (slider {name!r})")
    cls = SnapIntSlider if is_int else SnapFloatSlider
    kw.setdefault("continuous_update", False)
    kw.setdefault("style", {"description_width": "initial"})
    if not is_int:
        kw.setdefault("readout_format", _float_format(step))
    return cls(
        min=min, max=max, step=step, value=value,
        description=name if description is None else description, **kw,
    )


def _float_format(step: float) -> str:
    s = f"{step:.10f}".rstrip("0")
    decimals = len(s.split(".")[1]) if "." in s else 0
    return f".{min(max(decimals, 1), 6)}f"


def dropdown(options: Any, value: Any = None, description: str = "", **kw: Any) -> W.Dropdown:
    """A Dropdown over ``options`` (a list, or a dict label -> value), starting at ``value``
    (default: the first option)."""
    opts = list(options.items()) if isinstance(options, Mapping) else list(options)
    if not opts:
        raise ValueError("options: is empty; pass a list (or a dict label -> value) of choices (dropdown)")
    values = [o[1] for o in opts] if isinstance(options, Mapping) else opts
    if value is None:
        value = values[0]
    elif value not in values:
        raise ValueError(f"value: {value!r} is not one of the options {values!r} (dropdown)")
    kw.setdefault("style", {"description_width": "initial"})
    return W.Dropdown(options=opts, value=value, description=description, **kw)


def control_values(control: W.ValueWidget) -> list:
    """Every value a control can take, in order: a snapping slider's grid min + k * step (the
    floats exactly as the slider holds them), the option values of a selection widget (dropdown,
    selection slider, toggle buttons), False/True for a checkbox. Raises for a free control (a
    text box, a plain slider)."""
    if isinstance(control, _SnapToStep):
        n = int(math.floor((control.max - control.min) / control.step + 1e-9))
        vals = [control.min + k * control.step for k in range(n + 1)]
        return [int(v) for v in vals] if isinstance(control, W.IntSlider) else [round(float(v), 12) for v in vals]
    if isinstance(control, W.Checkbox):
        return [False, True]
    if isinstance(control, (W.Dropdown, W.SelectionSlider, W.ToggleButtons, W.RadioButtons, W.Select)):
        return list(getattr(control, "_options_values", None) or [o[1] if isinstance(o, tuple) else o
                                                                   for o in control.options])
    raise ValueError(f"control: cannot list the values of a {type(control).__name__}; pass them as a list")


#: keys whose content is data or free text: its strings never change what the schema accepts
_DATA_KEYS = frozenset({"datasets", "values"})
_TEXT_KEYS = frozenset({"title", "text", "description", "subtitle", "name", "data", "format"})


def spec_shape(spec: Any, _text: bool = False) -> Any:
    """The structure of a Vega-Lite spec (a dict from ``chart.to_dict()``), hashable: what the
    schema check depends on, without the data. Dict keys and nesting are kept; data rows
    (``datasets``, ``values``) are left out; numbers and booleans are kept by type only; strings
    by value (mark types, orientations, field types are strings the schema restricts), except
    under titles, names and formats (free text); a list keeps the set of its items' shapes, so
    a longer scale domain of the same kind has the same shape. Two specs with one shape pass or
    fail the schema check together, as long as the schema restricts no free-text string and
    no number's value (Vega-Lite's schema checks numbers by type only, bar a few bounds)."""
    if isinstance(spec, Mapping):
        return tuple(sorted((str(k), None if k in _DATA_KEYS else spec_shape(v, _text or k in _TEXT_KEYS))
                            for k, v in spec.items()))
    if isinstance(spec, (list, tuple)):
        return ("list", frozenset(spec_shape(v, _text) for v in spec))
    if isinstance(spec, str) and not _text:
        return spec
    return type(spec).__name__


class Dashboard:
    """Controls, summary line and chart (top to bottom), recomputed whenever a control's value
    changes.

    Attributes: ``controls`` (name -> widget), ``output`` (ipywidgets.Output: the chart when
    altair's renderer is not "jupyter", and error messages), ``view`` (the persistent
    ``alt.JupyterChart`` in "widget" mode, else None), ``chart`` (last chart compute returned),
    ``summary`` (last summary string, "" if none), ``error`` (exception from the last update, or
    None), ``n_updates`` (how many times the dashboard redrew), ``n_computes`` (how many times
    compute itself ran; a redraw from the cache does not count), ``widget`` (the box to show).

    ``cache``: how many results of compute to keep, keyed by the control values (0: none).
    ``precompute``: control name -> values (or "all"); every combination is computed at build time and kept
    (the cache grows to hold them all, plus ``cache`` more); in widget mode its chart is serialised
    then too, so a move to a precomputed value costs no serialisation.
    """

    def __init__(
        self,
        compute: Callable[..., Any],
        controls: Mapping[str, W.ValueWidget],
        *,
        layout: str = "vertical",
        mode: str = "auto",
        cache: int = 0,
        precompute: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        if not callable(compute):
            raise ValueError(f"compute must be callable, got {type(compute).__name__}")
        if not isinstance(controls, Mapping) or not controls:
            raise ValueError("controls must be a non-empty dict of name -> widget")
        for key, w in controls.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"controls: key {key!r} must be a valid Python identifier (it becomes a keyword argument)")
            if not isinstance(w, W.Widget) or not hasattr(w, "value"):
                raise ValueError(f"controls[{key!r}] must be an ipywidgets widget with a .value, got {type(w).__name__}")
        if layout not in ("vertical", "horizontal"):
            raise ValueError(f"layout must be 'vertical' or 'horizontal', got {layout!r}")
        if mode == "auto":
            mode = "widget" if alt.renderers.active == "jupyter" else "output"
        if mode not in ("widget", "output"):
            raise ValueError(f"mode must be 'auto', 'widget' or 'output', got {mode!r}")
        if isinstance(cache, bool) or not isinstance(cache, numbers.Integral) or cache < 0:
            raise ValueError(f"cache: must be a whole number >= 0 (results to keep), got {cache!r}")
        grid = dict(precompute or {})
        for key, vals in grid.items():
            if key not in controls:
                raise ValueError(f"precompute: {key!r} is not a control (controls: {list(controls)})")
            if vals == "all":
                grid[key] = vals = control_values(controls[key])
            if isinstance(vals, (str, bytes)) or not isinstance(vals, Sequence) or not vals:
                raise ValueError(f"precompute: the values for {key!r} must be a non-empty list or 'all', got {vals!r}")

        self.compute = compute
        self.controls: dict[str, W.ValueWidget] = dict(controls)
        self.mode = mode
        self.chart: alt.TopLevelMixin | None = None
        self.summary: str = ""
        self.error: BaseException | None = None
        self.n_updates = 0
        self.n_computes = 0
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = int(cache)
        self._checked_shapes: set = set()  # spec structures that passed the schema check
        self._busy = False
        self._pending = False

        self.view: Any = None
        self.output = W.Output()
        self.output.add_class("labkit-output")
        self._summary_html = W.HTML(value="")
        self._summary_html.add_class("labkit-summary")
        self._chart_box = W.Box()
        self._chart_box.add_class("labkit-chart")

        for w in self.controls.values():
            if hasattr(w, "description") and not w.description:
                w.description = next(k for k, v in self.controls.items() if v is w)
            w.observe(self._on_change, names="value")

        ctl = W.VBox(list(self.controls.values()))
        ctl.add_class("labkit-controls")
        # the summary line sits between the controls and the chart: a tall chart would push a
        # line below it out of a laptop's screen, away from the numbers a prompt asks about
        body = W.VBox([self._summary_html, self._chart_box, self.output])
        self.widget = W.VBox([ctl, body]) if layout == "vertical" else W.HBox([ctl, body])
        self.widget.add_class("labkit-dashboard")
        if grid:
            self._precompute(grid)
        self.refresh()

    # -- state ----------------------------------------------------------------------------------

    @property
    def values(self) -> dict[str, Any]:
        """Current control values by name (what compute receives)."""
        return {k: w.value for k, w in self.controls.items()}

    @property
    def shown_values(self) -> dict[str, Any]:
        """Current control values by the label each control shows (its description, else its
        name): what a picture of the dashboard prints, in the words the slider and the prose use."""
        return {(getattr(w, "description", "") or k): w.value for k, w in self.controls.items()}

    def _on_change(self, change: dict) -> None:
        self.refresh()  # traitlets only reports real changes

    def refresh(self) -> None:
        """Run compute on the current values and redraw (errors are shown, never raised)."""
        if self._busy:  # compute itself moved a control: run again once it returns
            self._pending = True
            return
        self._busy = True
        try:
            for _ in range(3):  # bounded, in case compute keeps moving its own controls
                self._pending = False
                self._update()
                if not self._pending:
                    break
        finally:
            self._busy = False

    def _precompute(self, grid: Mapping[str, Sequence[Any]]) -> None:
        """Compute every combination of the grid's values (other controls at their start values)
        and keep the results; the cache is made large enough to hold them all."""
        start = self.values
        names = list(grid)
        combos = list(itertools.product(*(grid[n] for n in names)))
        self._cache_size += len(combos)
        for combo in combos:
            values = {**start, **dict(zip(names, combo))}
            try:
                entry = self._compute_cached(values)
                if self.mode == "widget":  # serialised now too: a move to it only hands the dict over
                    entry[2] = self._spec(entry[0])
            except Exception:  # shown when the user reaches that value, like any failed compute
                pass

    @staticmethod
    def _key(values: Mapping[str, Any]) -> tuple | None:
        try:
            key = tuple(sorted(values.items()))
            hash(key)
        except TypeError:  # an unhashable control value: never cached
            return None
        return key

    def _compute_cached(self, values: dict) -> list:
        """[chart, summary, spec or None] for these values, from the cache or a fresh compute
        (the spec is filled in by the first draw, so a redraw from the cache reuses it)."""
        key = self._key(values) if self._cache_size else None
        if key is not None and key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        self.n_computes += 1
        if self._checked_shapes:  # a chart has been checked: altair's build-time checks are redundant
            with schemapi.debug_mode(False):
                out = self.compute(**values)
        else:
            out = self.compute(**values)
        result = [*self._split(out), None]
        if key is not None:
            self._cache[key] = result
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result

    def _update(self) -> None:
        values = self.values
        self.n_updates += 1
        try:
            entry = self._compute_cached(values)
        except Exception as exc:  # shown to the user, never kills the widget
            self._show_error(exc, values)
            return
        chart, summary, _ = entry
        self.error = None
        self.chart = chart
        self.summary = summary
        self._summary_html.value = (
            f'<pre style="margin:2px 0;font-size:12px;line-height:1.3">{html.escape(summary)}</pre>'
            if summary else ""
        )
        try:
            entry[2] = self._draw(chart, entry[2])
        except Exception as exc:  # e.g. an invalid spec that altair refuses to serialise
            self._show_error(exc, values)
            return
        if self.mode == "widget":
            self.output.outputs = ()  # clear a previous error message

    @staticmethod
    def _split(result: Any) -> tuple[alt.TopLevelMixin, str]:
        summary: Any = ""
        chart = result
        if isinstance(result, tuple):
            if len(result) != 2:
                raise ValueError(f"compute must return a chart or (chart, summary), got a tuple of {len(result)}")
            chart, summary = result
        if not isinstance(chart, alt.TopLevelMixin):
            raise ValueError(f"compute must return an altair chart (or (chart, summary)), got {type(chart).__name__}")
        if summary is None:
            summary = ""
        if not isinstance(summary, str):
            raise ValueError(f"the summary compute returns must be a string, got {type(summary).__name__}")
        return chart, summary

    def _spec(self, chart: alt.TopLevelMixin) -> dict:
        """``chart.to_dict()``, schema-checked only when its structure (``spec_shape``) is new:
        the same dict, without the check's cost on every move. Raises altair's
        SchemaValidationError for a spec the schema rejects."""
        spec = chart.to_dict(validate=False)
        shape = spec_shape(spec)
        if shape not in self._checked_shapes:
            try:
                chart.validate(spec)
            except jsonschema.ValidationError as err:
                raise schemapi.SchemaValidationError(chart, err) from None
            self._checked_shapes.add(shape)
        return spec

    def _draw(self, chart: alt.TopLevelMixin, spec: dict | None = None) -> dict | None:
        """Show the chart; returns the spec dict it drew (widget mode), for the cache to reuse."""
        if self.mode == "widget":
            if spec is None:
                spec = self._spec(chart)
            # JupyterChart serialises (and schema-checks) the chart it is given; it gets the dict
            # we already have instead, through a to_dict shadowed on this one chart while it reads it
            object.__setattr__(chart, "to_dict", lambda *a, _spec=spec, **k: _spec)
            try:
                if self.view is None:
                    opts = alt.renderers.options or {}
                    alt.JupyterChart.enable_offline(offline=bool(opts.get("offline", False)))
                    self.view = alt.JupyterChart(chart, embed_options=opts.get("embed_options"))
                    self._chart_box.children = (self.view,)
                else:
                    self.view.chart = chart
            finally:
                object.__delattr__(chart, "to_dict")
            self._chart_box.layout.display = None
            return spec
        else:
            bundle = chart._repr_mimebundle_()
            data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
            self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": meta or {}},)
            return None

    def _show_error(self, exc: BaseException, values: dict) -> None:
        self.error = exc
        args = ", ".join(f"{k}={v!r}" for k, v in values.items())
        where = ""
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            f = frames[-1]
            where = f"\n  at {f.filename}:{f.lineno} in {f.name}"
        text = f"compute({args}) failed:\n{type(exc).__name__}: {exc}{where}\n"
        if self.mode == "widget":
            self._chart_box.layout.display = "none"  # do not leave a stale chart looking current
        self._summary_html.value = ""
        self.output.outputs = ({"output_type": "stream", "name": "stderr", "text": text},)

    # -- display --------------------------------------------------------------------------------

    def _ipython_display_(self) -> None:
        from IPython.display import display

        bundle = self._static_bundle()
        if bundle is None:
            display(self.widget)
        else:  # LABKIT_STATIC_IMAGES: the live view plus a picture of this state
            display(bundle, raw=True)

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = self._static_bundle(**kwargs)
        return self.widget._repr_mimebundle_(**kwargs) if bundle is None else bundle

    def _static_bundle(self, **kwargs: Any) -> dict | None:
        """The widget's display bundle plus an image/png of the chart, its control values and
        summary line, when ``LABKIT_STATIC_IMAGES`` is set (stored notebooks); else None. Every
        display goes through it, so under strict checks it first fails a chart that breaks a rule."""
        from labkit.viz._static import dashboard_png, png_base64, static_images_enabled

        check_chart_if_strict(self.chart)
        if not static_images_enabled():
            return None
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = repr(self)  # names it as a dashboard for execute_notebooks.py
        if self.chart is not None and self.error is None:
            try:
                bundle["image/png"] = png_base64(dashboard_png(self.chart, self.shown_values, self.summary))
            except Exception:  # a chart vl-convert cannot draw keeps its live view only
                pass
        return bundle

    def __repr__(self) -> str:
        state = f"error={type(self.error).__name__}" if self.error else f"summary={self.summary!r}"
        return f"Dashboard(controls={list(self.controls)}, mode={self.mode!r}, n_updates={self.n_updates}, {state})"


def interact(
    compute: Callable[..., Any],
    *,
    controls: Mapping[str, W.ValueWidget],
    layout: str = "vertical",
    mode: str = "auto",
    cache: int = 0,
    precompute: Mapping[str, Sequence[Any]] | None = None,
) -> Dashboard:
    """Build a :class:`Dashboard` that calls ``compute(**values)`` now and on every change.

    ``mode``: "auto" (a persistent JupyterChart when altair's renderer is "jupyter", else the
    Output widget), "widget" or "output". ``cache``: keep the last ``cache`` results keyed by
    the control values; ``precompute``: control name -> values computed at build time (see the
    module docstring; for a compute that is a pure function of the control values only).
    """
    return Dashboard(compute, controls, layout=layout, mode=mode, cache=cache, precompute=precompute)
