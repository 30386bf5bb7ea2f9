"""Hand-made batches and files that the io tests share."""
from __future__ import annotations

import json

import torch

from labkit.core.rollouts import Rollouts


def hand_made() -> Rollouts:
    """Every field, tool output inside trajectories, a trajectory with nothing generated."""
    m = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    turn = torch.tensor([[0, 0, -1, -1, 1, 1], [0, -1, 1, -1, -1, -1], [-1] * 6])
    rewards = torch.zeros(3, 6, dtype=torch.float64)
    rewards[0, 1], rewards[0, 5], rewards[1, 2] = 0.25, 1.0, -0.5
    return Rollouts(
        tokens=torch.tensor([[5, 6, 90, 91, 7, 8], [5, 92, 9, 0, 0, 0], [0] * 6]), mask=m, rewards=rewards,
        group_ids=torch.tensor([3, 3, 0]), step_ids=turn, turn_ids=turn.clone(),
        agent_ids=torch.tensor([[1, 1, -1, -1, 0, 0], [0, -1, 1, -1, -1, -1], [-1] * 6]),
        logprobs=torch.where(m, -0.5, 0.0).to(torch.float64), entropies=torch.where(m, 1.25, 0.0).to(torch.float64),
        states=torch.tensor([[0, 1, 1, 2, 2, 3], [0, 4, 4, 0, 0, 0], [0] * 6]),
        anchor_keys=[["s0", "s2"], ["s0", "s4"], []],
        text=[["a", "b", "<tool>", "</tool>", "c", "d"], ["a", "<t>", "e", "", "", ""], [""] * 6],
        prompts=["p0", "p1", "p2"])


def write_jsonl(tmp_path, records, blank_after=None) -> str:
    lines = []
    for i, rec in enumerate(records):
        lines.append(rec if isinstance(rec, str) else json.dumps(rec))
        if blank_after is not None and i == blank_after:
            lines.append("")
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def small_record(i, **kw):
    return {"group_id": i // 2, "tokens": [1, 2, 3], "reward": float(i % 2), **kw}


#: Per-row entries of a text reader's ``info`` (they follow the rows into every chunk).
TEXT_ROW_INFO = ("training_steps", "advantages", "reward_parts")
#: Batch-level entries of a text reader's ``info`` (the same in every chunk as read whole).
TEXT_BATCH_INFO = ("source", "format", "grouping", "position_unit", "tokenizer", "reward_columns",
                   "reward_part_names")


def assert_chunks_are_the_whole(source, batch_rows: int, **read) -> list[Rollouts]:
    """``iter_rollouts(source, batch_rows=...)`` hands out, chunk by chunk, the batch that
    ``read_rollouts(source)`` reads whole (each chunk padded to its own longest row); returns
    the chunks."""
    from labkit.io import iter_rollouts, read_rollouts

    whole = read_rollouts(source, **read)
    chunks = list(iter_rollouts(source, batch_rows=batch_rows, progress=False, **read))
    assert [c.batch_size for c in chunks[:-1]] == [batch_rows] * (len(chunks) - 1)
    assert sum(c.batch_size for c in chunks) == whole.batch_size
    assert [c.info["offset"] for c in chunks] == list(range(0, whole.batch_size, batch_rows))
    # group ids: the run's numbering in every chunk, names numbered so far
    assert torch.equal(torch.cat([c.group_ids for c in chunks]), whole.group_ids)
    assert chunks[-1].info["group_names"] == whole.info["group_names"]
    for c in chunks:
        rows = torch.arange(c.info["offset"], c.info["offset"] + c.batch_size)
        ref = whole.select(rows)
        T = c.horizon
        assert T <= ref.horizon and not bool(ref.mask[:, T:].any())
        for name in ("tokens", "mask", "rewards", "step_ids", "turn_ids"):
            assert torch.equal(getattr(ref, name)[:, :T], getattr(c, name)), name
        assert c.prompts == ref.prompts and c.text is None
        assert c.info["group_names"] == whole.info["group_names"][:len(c.info["group_names"])]
        for key in TEXT_ROW_INFO:
            assert (key in c.info) == (key in whole.info)
            if key in c.info:
                assert torch.equal(c.info[key].nan_to_num(-7.0), ref.info[key].nan_to_num(-7.0)), key
        for key in TEXT_BATCH_INFO:
            assert c.info.get(key) == whole.info.get(key), key
    return chunks


def assert_rows_are_the_whole(source, rows: list[int], **read) -> Rollouts:
    """``read_rollouts(source, rows=rows)`` reads the rows ``rows`` of the whole batch (groups
    numbered among the rows read, by the same names); returns it."""
    import numpy as np

    from labkit.io import read_rollouts

    whole = read_rollouts(source, **read)
    sub = read_rollouts(source, rows=np.array(rows), **read)
    ref = whole.select(rows)
    T = sub.horizon
    assert sub.batch_size == len(rows) and T <= ref.horizon and not bool(ref.mask[:, T:].any())
    for name in ("tokens", "mask", "rewards"):
        assert torch.equal(getattr(ref, name)[:, :T], getattr(sub, name)), name
    assert sub.prompts == ref.prompts
    names, local = whole.info["group_names"], sub.info["group_names"]
    assert [local[g] for g in sub.group_ids.tolist()] == [names[g] for g in ref.group_ids.tolist()]
    for key in TEXT_ROW_INFO:
        if key in whole.info:
            assert torch.equal(sub.info[key].nan_to_num(-7.0), ref.info[key].nan_to_num(-7.0)), key
    return sub
