"""Credits to chart panels: the one path from what estimators return to what the heatmaps draw.

:func:`credit_panels` turns ``{title: Credit or tensor}`` (and, optionally, the exact truth)
into ``{title: (rows, N) tensor}``, the form :func:`~labkit.viz.compare_heatmaps` and the
agreement tables take: the truth first, then each method in the given order, every panel the
same shape, the same rows picked from each. This is the one module of ``labkit.viz`` that knows
labkit's types (``labkit.core`` only); the charts themselves take plain arrays.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import torch

from labkit.core.checks import as_tensor, check_choice, check_int
from labkit.core.credit import Credit
from labkit.core.segments import LEVELS

__all__ = ["credit_panels"]


def credit_panels(
    credits: Mapping[str, Credit | torch.Tensor],
    *,
    truth: Credit | torch.Tensor | None = None,
    truth_title: str = "exact advantage",
    rows: Sequence[int] | torch.Tensor | None = None,
    level: str = "token",
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """``{title: (len(rows), N) tensor}`` for :func:`~labkit.viz.compare_heatmaps`.

    ``credits`` maps a panel title to an estimator's :class:`~labkit.core.credit.Credit` or to
    a tensor already laid out per position (an entropy, an exact value, agent-level credit).
    A Credit gives its ``token`` credit (B, T), or with ``level`` another than "token" its
    ``values`` at that level (B, N), which it must have been computed at. ``truth``, when
    given, comes first under ``truth_title``. ``rows`` picks the trajectories to show (default
    all), from every panel alike: credit is computed on the whole batch (group statistics,
    batch ranks) before a few rows are shown. ``dtype`` casts every panel (e.g. float64, so a
    float32 method and a float64 truth print alike). A tensor passed in without rows or dtype
    is returned as it is, not copied.

    Every panel must have the same 2-D shape. Bad input raises a ValueError or TypeError whose
    message starts with the argument's name: ``credits``, ``truth``, ``truth_title``, ``rows``
    or ``level``.
    """
    if not isinstance(credits, Mapping):
        raise TypeError(f"credits: expected a dict of title -> Credit or tensor, got {type(credits).__name__}")
    level = check_choice("level", level, LEVELS)
    panels: dict[str, torch.Tensor] = {}
    if truth is not None:
        if truth_title in credits:
            raise ValueError(f"truth_title: {truth_title!r} is also a title in credits; the truth needs its own")
        panels[truth_title] = _panel("truth", truth, level, dtype)
    for title, credit in credits.items():
        panels[title] = _panel(f"credits[{title!r}]", credit, level, dtype)
    if not panels:
        raise ValueError("credits: nothing to show (no credit and no truth)")
    _check_same_shape(panels, truth is not None)
    if rows is None:
        return panels
    picked = _rows(rows, next(iter(panels.values())).shape[0])
    return {title: values[picked] for title, values in panels.items()}


def _panel(name: str, value: Any, level: str, dtype: torch.dtype | None) -> torch.Tensor:
    """One panel's (B, N) tensor: a Credit's token credit or its values at ``level``, or a tensor."""
    if isinstance(value, Credit):
        if level == "token":
            value = value.token
        elif value.level == level:
            value = value.values
        else:
            raise ValueError(f"level: {name} was computed at level {value.level!r}, so it has no values at "
                             f"level {level!r} (level='token' shows any credit per position)")
    tensor = as_tensor(name, value, dtype=dtype)
    if tensor.dim() != 2:
        raise ValueError(f"{name}: expected a (rows, positions) tensor, got shape {tuple(tensor.shape)}")
    return tensor


def _check_same_shape(panels: dict[str, torch.Tensor], has_truth: bool) -> None:
    """Every panel is drawn on the same grid: the first panel's shape is the one to match."""
    (first, shape), *rest = ((title, values.shape) for title, values in panels.items())
    for title, other in rest:
        if other != shape:
            name = f"credits[{title!r}]"
            against = "truth" if has_truth else f"credits[{first!r}]"
            raise ValueError(f"{name}: has shape {tuple(other)} but {against} has shape {tuple(shape)}")


def _rows(rows: Any, n_rows: int) -> list[int]:
    """``rows`` as a non-empty list of row indices in [0, n_rows)."""
    if hasattr(rows, "tolist"):  # a tensor or numpy array of indices
        rows = rows.tolist()
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows: expected a sequence of row indices, got {type(rows).__name__}")
    picked = [check_int("rows", r, low=0, high=n_rows - 1) for r in rows]
    if not picked:
        raise ValueError("rows: need at least one trajectory to show")
    return picked
