"""Columns as the frameworks hand them over, turned into plain Python lists.

TRL and verl users hold their data in many containers: pandas DataFrames (a Parquet file read
back), ``datasets.Dataset``, Arrow tables, numpy arrays, torch tensors, TRL's deques. A value
that went through Parquet comes back as a numpy array even where a list was written. The
readers accept all of them wherever the record format says "list": :func:`as_list` turns one
value into a list (leaving anything that is no sequence alone, so the record check can name
it), :func:`table_columns` turns a whole table into ``{column: list}``.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import torch

__all__ = ["as_list", "table_columns", "is_table"]


def as_list(value: Any) -> Any:
    """``value`` as a list of plain Python values when it is an array-like (numpy array, torch
    tensor, Arrow array, pandas Series, tuple, deque); anything else unchanged. NaN in a numeric
    array stays NaN (the caller decides what a missing number means)."""
    if isinstance(value, (list, str, bytes, dict)) or value is None:
        return value
    if isinstance(value, (tuple, deque)):
        return list(value)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "to_pylist"):  # Arrow Array / ChunkedArray / ListScalar
        return value.to_pylist()
    if hasattr(value, "as_py") and not isinstance(value, (int, float)):  # an Arrow scalar
        return value.as_py()
    if type(value).__module__.startswith("pandas") and hasattr(value, "tolist"):  # Series, Index
        return value.tolist()
    return value


def is_table(source: Any) -> bool:
    """A column container: a mapping of columns, a DataFrame, a ``datasets.Dataset``, an Arrow table."""
    if isinstance(source, (list, tuple, str, bytes)):
        return False
    return isinstance(source, dict) or hasattr(source, "column_names") or (
        hasattr(source, "keys") and hasattr(source, "__getitem__"))


def table_columns(source: Any) -> dict[str, list]:
    """``{column name: list of values}`` of a table (see :func:`is_table`). A ``datasets.Dataset``
    and an Arrow table are read column by column; nested values (lists per row) become lists."""
    if hasattr(source, "column_names") and hasattr(source, "column"):  # pyarrow.Table
        return {name: source.column(name).to_pylist() for name in source.column_names}
    if hasattr(source, "column_names") and hasattr(source, "to_dict"):  # datasets.Dataset
        return {k: [as_list(v) for v in vals] for k, vals in source.to_dict().items()}
    out = {}
    for key in source.keys():
        values = as_list(source[key])
        out[str(key)] = [as_list(v) for v in values] if isinstance(values, list) else values
    return out
