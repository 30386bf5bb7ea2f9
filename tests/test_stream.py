"""Bounded-memory reading and diagnosis of files: ``labkit.io.iter_rollouts``,
``read_rollouts(rows=...)`` and ``diagnose(path)``, which streams a file through a ``Tally``.

The central check: a file diagnosed in chunks gives exactly what the same file read whole and
diagnosed in memory gives (every measured number, the tree's walk, the compared sample, every
estimator's credit and the agreement matrix), on both shipped samples, as JSONL and as Parquet,
with integer and with string group ids, at a chunk size that cuts the file (and its groups)
into several pieces.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.diagnose import (Tally, diagnose, measure_groups, measure_lengths, measure_positions, measure_rewards,
                             measure_stochasticity, sample_groups, sample_rows)
from labkit.io import RecordError, iter_rollouts, read_rollouts, write_rollouts

SAMPLES = ("arithmetic_lm.jsonl", "toolworld.jsonl")


def _with_string_groups(ro: Rollouts) -> Rollouts:
    """The same batch with string group ids whose first-appearance order differs from the codes'."""
    n = int(ro.group_ids.max()) + 1
    return ro.with_(info={**ro.info, "group_names": tuple(f"task-{(n - 1 - g) * 7}" for g in range(n))})


@pytest.fixture(scope="module", params=[(s, f, g) for s in SAMPLES for f in ("jsonl", "parquet")
                                        for g in ("int", "str")],
                ids=lambda p: "-".join(p))
def dump(request, tmp_path_factory):
    """A shipped sample as a file: the shipped JSONL itself, or a copy (Parquet; string ids)."""
    name, fmt, groups = request.param
    path = data_path("sample_rollouts", name)
    if fmt == "jsonl" and groups == "int":
        return path
    ro = read_rollouts(path)
    if groups == "str":
        ro = _with_string_groups(ro)
    return write_rollouts(ro, tmp_path_factory.mktemp("dump") / f"{name.split('.')[0]}.{fmt}")


def _fields(x) -> dict:
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


def test_a_streamed_file_diagnoses_exactly_as_the_batch_read_whole(dump):
    whole = read_rollouts(dump)
    batch_rows = 48  # several chunks, and groups cut across chunk boundaries
    assert whole.batch_size > 3 * batch_rows
    streamed = diagnose(dump, batch_rows=batch_rows, sample=100, progress=False)
    memory = diagnose(whole, sample=100, progress=False)
    assert set(streamed.seconds) >= {"read", "measure", "stochasticity", "sample", "estimators"}
    for name in ("n_trajectories", "horizon", "lengths", "rewards", "groups", "positions", "stochasticity",
                 "features", "inputs", "evidence", "answers", "recommendation", "seed"):
        assert getattr(streamed, name) == getattr(memory, name), name
    # ... and those are the measure_* functions' numbers on the whole batch
    assert streamed.lengths == measure_lengths(whole) and streamed.rewards == measure_rewards(whole)
    assert streamed.groups == measure_groups(whole) and streamed.positions == measure_positions(whole)
    assert streamed.stochasticity == measure_stochasticity(whole)
    a, b = streamed.comparison, memory.comparison
    assert torch.equal(a.rows, b.rows) and torch.equal(a.rows, sample_groups(whole, 100, 0))
    assert 100 <= a.rows.numel() < whole.batch_size  # a sample of whole groups, not everything
    assert (a.ran, a.skipped, a.not_supported) == (b.ran, b.skipped, b.not_supported)
    assert len(a.ran) >= 3
    for name in a.ran:
        assert torch.equal(a.credit[name], b.credit[name]), name
    pd.testing.assert_frame_equal(a.agreement, b.agreement, check_exact=True)
    pd.testing.assert_frame_equal(a.disagreement, b.disagreement, check_exact=True)
    for name in ("tokens", "mask", "rewards", "group_ids", "turn_ids", "step_ids"):
        assert torch.equal(getattr(a.sample_rollouts, name), getattr(b.sample_rollouts, name)), name
    assert a.sample_rollouts.info.get("group_names") == b.sample_rollouts.info.get("group_names")


def test_a_small_sample_read_back_is_padded_to_the_files_horizon(dump):
    whole = read_rollouts(dump)
    # a seed whose sample misses every longest record, so the rows read back are narrower
    seed = next(s for s in range(200)
                if read_rollouts(dump, rows=sample_groups(whole, 10, s).numpy()).horizon < whole.horizon)
    kw = dict(sample=10, seed=seed, estimators=["grpo", "reinforce", "dr_grpo"], progress=False)
    a = diagnose(dump, batch_rows=64, **kw).comparison
    b = diagnose(whole, **kw).comparison
    assert torch.equal(a.rows, b.rows) and a.rows.numel() < 20
    assert a.sample_rollouts.horizon == whole.horizon
    assert torch.equal(a.sample_rollouts.tokens, b.sample_rollouts.tokens)
    for name in b.ran:
        assert torch.equal(a.credit[name], b.credit[name]), name
    pd.testing.assert_frame_equal(a.agreement, b.agreement, check_exact=True)


def test_chunks_concatenate_to_the_file_read_whole(dump):
    whole = read_rollouts(dump)
    chunks = list(iter_rollouts(dump, batch_rows=40, progress=False))
    assert [c.batch_size for c in chunks[:-1]] == [40] * (len(chunks) - 1)
    assert [c.info["offset"] for c in chunks] == list(range(0, whole.batch_size, 40))
    ids = torch.cat([c.group_ids for c in chunks])
    assert torch.equal(ids, whole.group_ids)  # the file's group identity, chunk after chunk
    names = whole.info.get("group_names")
    assert chunks[-1].info.get("group_names") == names
    for c in chunks:
        rows = torch.arange(c.info["offset"], c.info["offset"] + c.batch_size)
        ref = whole.select(rows)
        T = c.horizon
        assert T <= ref.horizon and not bool(ref.mask[:, T:].any())
        for name in ("tokens", "mask", "rewards", "turn_ids", "logprobs", "entropies"):
            x = getattr(ref, name)
            assert (x is None) == (getattr(c, name) is None)
            if x is not None:
                assert torch.equal(x[:, :T], getattr(c, name)), name
    if str(dump).endswith(".jsonl"):  # JSONL counts lines from 1 (the shipped files have no blank lines)
        assert [c.info["first_record"] for c in chunks] == [c.info["offset"] + 1 for c in chunks]


def test_a_tally_merged_from_pieces_equals_one_tally_of_the_batch():
    whole = read_rollouts(data_path("sample_rollouts", "toolworld.jsonl"))
    one = Tally().add(whole)
    merged = Tally().add(whole.select(range(0, 100))).merge(Tally().add(whole.select(range(100, 256))))
    for what in ("lengths", "rewards", "groups", "positions", "stochasticity"):
        assert getattr(merged, what)() == getattr(one, what)(), what
    assert torch.equal(merged.group_ids, whole.group_ids) and torch.equal(merged.scores, whole.scores.double())
    with pytest.raises(ValueError, match="^tally:"):
        Tally().lengths()


def test_the_sample_depends_on_group_sizes_not_on_order():
    gid = torch.tensor([5, 5, 2, 2, 2, 9, 9, 7, 7, 7, 7, 1])
    rows = sample_rows(gid, 5, seed=3)
    chosen = set(gid[rows].tolist())
    assert sum(int((gid == g).sum()) for g in chosen) == rows.numel() >= 5  # whole groups only
    perm = torch.randperm(gid.numel(), generator=torch.Generator().manual_seed(0))
    assert set(gid[perm][sample_rows(gid[perm], 5, seed=3)].tolist()) == chosen
    assert sample_rows(gid, None).tolist() == list(range(12))
    with pytest.raises(ValueError, match="^sample:"):
        sample_rows(gid, 0)


def test_rows_reads_only_those_records(dump):
    whole = read_rollouts(dump)
    rows = [0, 3, 4, 77, whole.batch_size - 1]
    sub = read_rollouts(dump, rows=np.array(rows))
    ref = whole.select(rows)
    T = sub.horizon
    assert sub.batch_size == 5 and T <= ref.horizon
    for name in ("tokens", "mask", "rewards", "turn_ids", "logprobs"):
        assert torch.equal(getattr(ref, name)[:, :T], getattr(sub, name)), name
    names = whole.info.get("group_names")
    if names is None:
        assert torch.equal(sub.group_ids, ref.group_ids)
    else:  # string ids are numbered among the records read; the names say which group
        local = sub.info["group_names"]
        assert [local[g] for g in sub.group_ids.tolist()] == [names[g] for g in ref.group_ids.tolist()]
    for bad, match in (([3, 1], "^rows: must be sorted"), ([-1, 2], "^rows: record indices start at 0"),
                       ([], "^rows: expected a non-empty"), ([whole.batch_size], "^rows: .*past the")):
        with pytest.raises(ValueError, match=match):
            read_rollouts(dump, rows=bad)
    with pytest.raises(TypeError, match="^rows:"):
        read_rollouts(dump, rows=[0.5, 1.5])


def _jsonl(tmp_path, records, blank_after=None) -> str:
    lines = []
    for i, rec in enumerate(records):
        lines.append(rec if isinstance(rec, str) else json.dumps(rec))
        if blank_after is not None and i == blank_after:
            lines.append("")
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _rec(i, **kw):
    return {"group_id": i // 2, "tokens": [1, 2, 3], "reward": float(i % 2), **kw}


def test_a_bad_record_in_a_later_chunk_is_named_by_its_line_in_the_file(tmp_path):
    records = [_rec(i) for i in range(9)]
    records[7] = _rec(7, tokens=[1, -4, 2])
    path = _jsonl(tmp_path, records, blank_after=2)  # a blank line: record 7 sits on line 9
    chunks = iter_rollouts(path, batch_rows=3)
    assert next(chunks).info["first_record"] == 1
    assert next(chunks).info["first_record"] == 5  # the blank line 4 is counted, not read
    with pytest.raises(RecordError) as info:
        next(chunks)
    assert (info.value.record, info.value.field) == (9, "tokens")
    assert str(info.value).startswith("source: line 9, field 'tokens'")


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


def test_all_or_none_fields_and_group_id_kinds_are_checked_across_chunks(tmp_path):
    lp = [-0.5, -0.5, -0.5]
    path = _jsonl(tmp_path, [_rec(i, logprobs=lp) for i in range(4)] + [_rec(4)])
    with pytest.raises(RecordError, match="^source: line 5, field 'logprobs': missing, but line 1 has it"):
        list(iter_rollouts(path, batch_rows=2))
    path = _jsonl(tmp_path, [_rec(i) for i in range(4)] + [_rec(4, logprobs=lp)])
    with pytest.raises(RecordError, match="^source: line 1, field 'logprobs': missing, but line 5 has it"):
        list(iter_rollouts(path, batch_rows=2))
    # string ids first: every id is numbered by first appearance, as when the file is read whole
    mixed = [_rec(0, group_id="a"), _rec(1, group_id=3), _rec(2, group_id="a"), _rec(3, group_id=3)]
    path = _jsonl(tmp_path, mixed)
    ids = torch.cat([c.group_ids for c in iter_rollouts(path, batch_rows=1)])
    assert torch.equal(ids, read_rollouts(path).group_ids)
    # integer ids first, a string later: the chunks handed out cannot be renumbered
    path = _jsonl(tmp_path, [_rec(0), _rec(1), _rec(2, group_id="late")])
    with pytest.raises(RecordError, match="^source: line 3, field 'group_id': is 'late'"):
        list(iter_rollouts(path, batch_rows=2))
    assert read_rollouts(path).batch_size == 3  # read whole, the mix is fine


def test_iter_rollouts_arguments_are_named_in_errors(tmp_path):
    path = _jsonl(tmp_path, [_rec(0)])
    with pytest.raises(ValueError, match="^batch_rows:"):
        iter_rollouts(path, batch_rows=0)
    with pytest.raises(FileNotFoundError, match="^source:"):
        iter_rollouts(tmp_path / "none.jsonl")
    with pytest.raises(ValueError, match="^batch_rows:"):
        diagnose(path, batch_rows=-1)
    with pytest.raises(RecordError, match="^source: empty file"):
        list(iter_rollouts(_jsonl(tmp_path, [""])))
