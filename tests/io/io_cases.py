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
