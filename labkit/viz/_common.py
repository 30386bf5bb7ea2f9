"""Small helpers shared by the viz modules (array conversion, escaping, field names)."""
from __future__ import annotations

from typing import Any

import numpy as np

# Altair refuses to embed more than 5000 rows of data by default (MaxRowsError). We keep that
# limit instead of disabling it globally: a chart with more cells than this is unreadable in a
# notebook anyway, and every embedded row is sent to the browser as JSON on every redraw.
MAX_ROWS = 5000


def to_numpy(x: Any, name: str) -> np.ndarray:
    """Turn a numpy array, a list or a torch tensor into a numpy array without importing torch."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor (duck-typed)
        t = x.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # e.g. bfloat16 has no numpy dtype
            return t.float().numpy()
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None


def vl_field(name: str) -> str:
    """Escape a column name so Vega-Lite reads it as a plain field, not a nested path.

    Vega-Lite treats ``.`` and ``[...]`` in a field name as nested access; a backslash escapes
    them. Without this a column called ``loss.mean`` silently plots nothing.
    """
    out = str(name).replace("\\", "\\\\")
    for ch in ".[]":
        out = out.replace(ch, "\\" + ch)
    return out
