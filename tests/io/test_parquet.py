"""Parquet files (labkit.io.parquet): a malformed row is refused with its row and field."""
from __future__ import annotations

import pytest

from labkit.io import RecordError, iter_rollouts, read_rollouts


def _parquet(tmp_path, **columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    return path


def test_bad_parquet_rows_are_refused_with_their_row_and_field(tmp_path):
    import pyarrow as pa

    base = dict(group_id=[0, 0, 1], tokens=[[1, 2], [3], [4, 5, 6]], reward=[1.0, 0.0, 1.0])
    cases = [
        (dict(base, reward=["1", "0", "x"]), 0, "reward", "expected a number"),
        (dict(base, tokens=[[1, 2], None, [4]]), 1, "tokens", "missing"),
        (dict(base, logprobs=[[-1.0, -1.0], [-1.0], [-1.0]]), 2, "logprobs", "has 1 entries but 'tokens' has 3"),
        (dict(base, generated=[[1, 1], [1], [1, 0, 1]], rewards=[[0, 0], [0], [0, 3.0, 0]]), 2, "rewards",
         "position 1 carries reward 3"),
        (dict(base, turn_ids=[[0, 0], [1], [0, 1, 2]]), 1, "turn_ids", "must count 0, 1, 2"),
        (dict(base, tokens=pa.array([[1, 2], [3, None], [4]])), 1, "tokens", "null at position 1"),
        ({k: v for k, v in base.items() if k != "group_id"}, 0, "group_id", "missing"),
    ]
    for columns, row, field, fragment in cases:
        with pytest.raises(RecordError) as info:
            read_rollouts(_parquet(tmp_path, **columns))
        assert (info.value.record, info.value.field) == (row, field), columns
        assert str(info.value).startswith(f"source: row {row}, field {field!r}") and fragment in str(info.value)
    with pytest.raises(RecordError, match="empty file"):
        read_rollouts(_parquet(tmp_path, group_id=pa.array([], pa.int64()), tokens=pa.array([], pa.list_(pa.int64())),
                               reward=pa.array([], pa.float64())))


def test_a_bad_parquet_row_in_a_later_chunk_is_named_by_its_row_in_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 10
    tokens = [[1, 2]] * n
    turns = [[0, 0]] * n
    turns[8] = [0, 2]  # skips turn 1: the Rollouts boundary refuses it, traced to its row
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(dict(group_id=list(range(n)), tokens=tokens, reward=[1.0] * n, turn_ids=turns)), path,
                   row_group_size=4)
    with pytest.raises(RecordError) as info:
        list(iter_rollouts(path, batch_rows=3))
    assert (info.value.record, info.value.field) == (8, "turn_ids")
    with pytest.raises(RecordError) as info:
        read_rollouts(path, rows=[1, 8])
    assert info.value.record == 8
    assert read_rollouts(path, rows=[1, 9]).batch_size == 2  # row 8 is not read
