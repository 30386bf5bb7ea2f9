"""The reduce and broadcast between positions and segments (labkit.core.segments)."""

import torch

from labkit.core.segments import segment_broadcast, segment_reduce


def test_segment_reduce_max_min():
    ids = torch.tensor([[0, 0, 1, -1]])
    x = torch.tensor([[3.0, -1.0, 2.0, 99.0]])
    assert segment_reduce(ids, x, "max")[0].tolist() == [[3.0, 2.0]]
    assert segment_reduce(ids, x, "min")[0].tolist() == [[-1.0, 2.0]]
    assert segment_broadcast(ids, torch.tensor([[7.0, 8.0]])).tolist() == [[7.0, 7.0, 8.0, 0.0]]
