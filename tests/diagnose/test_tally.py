"""The streaming tally (labkit.diagnose.tally): merged from pieces, it equals one tally of the batch."""
from __future__ import annotations

import pytest
import torch

from labkit.core.paths import data_path
from labkit.diagnose import Tally
from labkit.io import read_rollouts


def test_a_tally_merged_from_pieces_equals_one_tally_of_the_batch():
    whole = read_rollouts(data_path("sample_rollouts", "toolworld.jsonl"))
    one = Tally().add(whole)
    merged = Tally().add(whole.select(range(0, 100))).merge(Tally().add(whole.select(range(100, 256))))
    for what in ("lengths", "rewards", "groups", "positions", "stochasticity"):
        assert getattr(merged, what)() == getattr(one, what)(), what
    assert torch.equal(merged.group_ids, whole.group_ids) and torch.equal(merged.scores, whole.scores.double())
    with pytest.raises(ValueError, match="^tally:"):
        Tally().lengths()
