"""labkit.io.columns: every container a framework user holds becomes plain lists."""
from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from labkit.io.columns import as_list, is_table, table_columns


def test_as_list_turns_array_likes_into_lists_and_leaves_the_rest():
    assert as_list(np.array([1, 2])) == [1, 2] and type(as_list(np.array([1, 2]))[0]) is int
    assert as_list(torch.tensor([[1.5], [2.0]])) == [[1.5], [2.0]]
    assert as_list(pa.array([[1, 2], [3]])) == [[1, 2], [3]]
    assert as_list(pd.Series([1.0, None])) == [1.0, None] or np.isnan(as_list(pd.Series([1.0, None]))[1])
    assert as_list(deque([1, 2], maxlen=3)) == [1, 2] and as_list((1, 2)) == [1, 2]
    for same in ("text", 3, 2.5, None, {"a": 1}, [1, 2]):
        assert as_list(same) == same


def test_tables_become_columns_of_lists():
    df = pd.DataFrame({"ids": [np.array([1, 2]), np.array([3])], "r": [1.0, 0.0]})
    want = {"ids": [[1, 2], [3]], "r": [1.0, 0.0]}
    assert table_columns(df) == want
    assert table_columns(pa.Table.from_pandas(df, preserve_index=False)) == want
    assert table_columns({"ids": [torch.tensor([1, 2]), torch.tensor([3])], "r": torch.tensor([1.0, 0.0])}) == want
    assert all(is_table(t) for t in (df, {"a": [1]}, pa.table({"a": [1]})))
    assert not any(is_table(t) for t in ([{"a": 1}], "a", (1,)))
