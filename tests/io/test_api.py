"""Reading and writing rollouts (labkit.io.api): round trips through every format from the lab's own
rollouts (ToolWorld; the tiny LM's shipped sample) and a hand-made batch that uses every field,
the shipped sample files, reading in chunks and by rows, and arguments named in errors.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.diagnose import diagnose
from labkit.io import (FORMATS, RecordError, iter_rollouts, read_rollouts, to_trl, to_verl_batch,
                       write_rollouts)

from io_cases import hand_made, small_record, write_jsonl
from repo_scripts import load_script


TENSORS = ("tokens", "mask", "rewards", "group_ids", "step_ids", "turn_ids", "agent_ids", "logprobs", "entropies",
           "states")
LISTS = ("anchor_keys", "text", "prompts")
SAMPLES = data_path("sample_rollouts")


def assert_same(a: Rollouts, b: Rollouts) -> None:
    """Equal in every field the format stores; ``b`` may drop trailing padding columns of ``a``."""
    T = b.horizon
    assert T <= a.horizon
    assert not bool(a.mask[:, T:].any()) and not bool(a.rewards[:, T:].any())
    for name in TENSORS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is None:
            continue
        if x.dim() == 2:
            x = x[:, :T]
        assert x.shape == y.shape, name
        assert torch.equal(x.double(), y.double()) if x.is_floating_point() else torch.equal(x, y), name
    for name in LISTS:
        x, y = getattr(a, name), getattr(b, name)
        if name == "text" and x is not None:
            x = [row[:T] for row in x]
        assert x == y, name


def roundtrip(ro: Rollouts, fmt: str, tmp_path) -> Rollouts:
    if fmt in ("jsonl", "parquet"):
        return read_rollouts(write_rollouts(ro, tmp_path / f"r.{fmt}"))
    return read_rollouts(to_verl_batch(ro) if fmt == "verl" else to_trl(ro), fmt)


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("fmt", FORMATS)
def test_lab_rollouts_round_trip_through_every_format(fmt, toolworld, tmp_path):
    back = roundtrip(toolworld, fmt, tmp_path)
    assert_same(toolworld, back)
    assert back.info["format"] == fmt and back.rewards.dtype == torch.float64


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_field_round_trips(fmt, tmp_path):
    ro = hand_made()
    back = roundtrip(ro, fmt, tmp_path)
    assert_same(ro, back)
    assert back.scores.tolist() == [1.25, -0.5, 0.0]
    # and a second trip changes nothing, the source's ids included
    again = roundtrip(back, fmt, tmp_path)
    assert_same(back, again)


def test_string_group_ids_survive_a_round_trip(tmp_path):
    ro = hand_made().with_(group_ids=torch.tensor([1, 1, 0]), info={"group_names": ("task-b", "task-a")})
    path = write_rollouts(ro, tmp_path / "g.jsonl")
    assert [json.loads(line)["group_id"] for line in path.read_text().splitlines()] == ["task-a", "task-a", "task-b"]
    back = read_rollouts(path)
    # first appearance numbers them: task-a -> 0, task-b -> 1
    assert back.group_ids.tolist() == [0, 0, 1] and back.info["group_names"] == ("task-a", "task-b")
    for fmt in ("parquet", "verl", "trl"):
        b2 = roundtrip(back, fmt, tmp_path)
        assert b2.group_ids.tolist() == [0, 0, 1] and b2.info["group_names"] == ("task-a", "task-b"), fmt


def test_float32_stays_float32_in_parquet_and_verl(tmp_path):
    ro = hand_made()
    ro = ro.with_(rewards=ro.rewards.float(), logprobs=ro.logprobs.float(), entropies=ro.entropies.float())
    for fmt in ("parquet", "verl"):
        back = roundtrip(ro, fmt, tmp_path)
        assert back.rewards.dtype == torch.float32 and back.logprobs.dtype == torch.float32, fmt
    assert roundtrip(ro, "jsonl", tmp_path).rewards.dtype == torch.float64  # JSON numbers are doubles


def test_mixed_anchor_key_types_go_to_jsonl_not_parquet(tmp_path):
    ro = hand_made().with_(anchor_keys=[["s0", 2], [0, 4], []])
    assert read_rollouts(write_rollouts(ro, tmp_path / "k.jsonl")).anchor_keys == [["s0", 2], [0, 4], []]
    with pytest.raises(TypeError, match="^rollouts: anchor_keys must be all strings or all integers"):
        write_rollouts(ro, tmp_path / "k.parquet")


def test_arguments_are_named_in_errors(tmp_path):
    with pytest.raises(ValueError, match="^source: cannot tell the format"):
        read_rollouts(tmp_path / "x.csv")
    with pytest.raises(FileNotFoundError, match="^source: no such file"):
        read_rollouts(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="^fmt: must be one of"):
        read_rollouts(tmp_path / "x.jsonl", fmt="csv")
    with pytest.raises(ValueError, match="^fmt: write_rollouts writes files"):
        write_rollouts(hand_made(), tmp_path / "x.jsonl", fmt="verl")
    with pytest.raises(TypeError, match="^rollouts: expected a Rollouts"):
        write_rollouts({"tokens": []}, tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="^source: expected a path"):
        read_rollouts(42)
    with pytest.raises(TypeError, match="^progress: expected True or False"):
        read_rollouts(write_rollouts(hand_made(), tmp_path / "x.jsonl"), progress="yes")


# --------------------------------------------------------------------------- the shipped samples
def test_the_arithmetic_sample_reads_with_its_fields():
    path = SAMPLES / "arithmetic_lm.jsonl"
    assert path.stat().st_size < 1.5 * 2 ** 20
    ro = read_rollouts(path)
    assert ro.batch_size == 512 and ro.logprobs is not None and ro.entropies is not None
    assert ro.text is not None and ro.prompts is not None and "ignored_fields" not in ro.info
    sizes = torch.bincount(ro.group_ids)
    assert sizes.numel() == 64 and bool((sizes == 8).all())
    assert set(ro.scores.unique().tolist()) == {0.0, 1.0}
    assert int(ro.n_steps.max()) >= 3  # the ;-separated reasoning steps
    assert bool(ro.mask.any(1).all())


def test_the_toolworld_sample_reads_with_its_fields():
    path = SAMPLES / "toolworld.jsonl"
    assert path.stat().st_size < 1.5 * 2 ** 20
    ro = read_rollouts(path)
    assert ro.batch_size == 256 and bool((torch.bincount(ro.group_ids) == 8).all())
    assert ro.states is not None and ro.anchor_keys is not None and ro.logprobs is not None
    inside = torch.arange(ro.horizon)[None, :] < (ro.horizon - ro.mask.flip(1).int().argmax(1))[:, None]
    assert bool((inside & ~ro.mask).any())  # tool output between the agent's actions
    assert torch.equal(ro.turn_ids, ro.step_ids) and int(ro.n_turns.max()) > 5
    assert [len(k) for k in ro.anchor_keys] == ro.n_turns.tolist()


def test_the_toolworld_sample_is_rebuilt_by_its_script(tmp_path, torch_is_locked):
    build = load_script("build_sample_rollouts")
    path = write_rollouts(build.toolworld(), tmp_path / "toolworld.jsonl")
    if torch_is_locked:
        assert path.read_bytes() == (SAMPLES / "toolworld.jsonl").read_bytes()
    else:  # another torch samples other episodes (its RNG streams differ): same layout, not same bytes
        new, shipped = read_rollouts(path), read_rollouts(SAMPLES / "toolworld.jsonl")
        assert new.batch_size == shipped.batch_size and torch.equal(new.group_ids, shipped.group_ids)
        assert [json.loads(x).keys() for x in path.read_text().splitlines()[:1]] == \
            [json.loads(x).keys() for x in (SAMPLES / "toolworld.jsonl").read_text().splitlines()[:1]]


def test_progress_bar_only_when_asked(tmp_path, capsys):
    path = write_rollouts(hand_made(), tmp_path / "x.jsonl")
    read_rollouts(path)
    assert "x.jsonl" not in capsys.readouterr().err
    read_rollouts(path, progress=True)
    assert "x.jsonl" in capsys.readouterr().err


def test_chunks_concatenate_to_the_file_read_whole(sample_file):
    whole = read_rollouts(sample_file)
    chunks = list(iter_rollouts(sample_file, batch_rows=40, progress=False))
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
    if str(sample_file).endswith(".jsonl"):  # JSONL counts lines from 1 (the shipped files have no blank lines)
        assert [c.info["first_record"] for c in chunks] == [c.info["offset"] + 1 for c in chunks]


def test_rows_reads_only_those_records(sample_file):
    whole = read_rollouts(sample_file)
    rows = [0, 3, 4, 77, whole.batch_size - 1]
    sub = read_rollouts(sample_file, rows=np.array(rows))
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
            read_rollouts(sample_file, rows=bad)
    with pytest.raises(TypeError, match="^rows:"):
        read_rollouts(sample_file, rows=[0.5, 1.5])


def test_all_or_none_fields_and_group_id_kinds_are_checked_across_chunks(tmp_path):
    lp = [-0.5, -0.5, -0.5]
    path = write_jsonl(tmp_path, [small_record(i, logprobs=lp) for i in range(4)] + [small_record(4)])
    with pytest.raises(RecordError, match="^source: line 5, field 'logprobs': missing, but line 1 has it"):
        list(iter_rollouts(path, batch_rows=2))
    path = write_jsonl(tmp_path, [small_record(i) for i in range(4)] + [small_record(4, logprobs=lp)])
    with pytest.raises(RecordError, match="^source: line 1, field 'logprobs': missing, but line 5 has it"):
        list(iter_rollouts(path, batch_rows=2))
    # string ids first: every id is numbered by first appearance, as when the file is read whole
    mixed = [small_record(0, group_id="a"), small_record(1, group_id=3), small_record(2, group_id="a"), small_record(3, group_id=3)]
    path = write_jsonl(tmp_path, mixed)
    ids = torch.cat([c.group_ids for c in iter_rollouts(path, batch_rows=1)])
    assert torch.equal(ids, read_rollouts(path).group_ids)
    # integer ids first, a string later: the chunks handed out cannot be renumbered
    path = write_jsonl(tmp_path, [small_record(0), small_record(1), small_record(2, group_id="late")])
    with pytest.raises(RecordError, match="^source: line 3, field 'group_id': is 'late'"):
        list(iter_rollouts(path, batch_rows=2))
    assert read_rollouts(path).batch_size == 3  # read whole, the mix is fine


def test_iter_rollouts_arguments_are_named_in_errors(tmp_path):
    path = write_jsonl(tmp_path, [small_record(0)])
    with pytest.raises(ValueError, match="^batch_rows:"):
        iter_rollouts(path, batch_rows=0)
    with pytest.raises(FileNotFoundError, match="^source:"):
        iter_rollouts(tmp_path / "none.jsonl")
    with pytest.raises(ValueError, match="^batch_rows:"):
        diagnose(path, batch_rows=-1)
    with pytest.raises(RecordError, match="^source: empty file"):
        list(iter_rollouts(write_jsonl(tmp_path, [""])))
