"""Turn views of Rollouts (labkit.core.turns)."""

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.core.turns import action_discounts

from turn_batches import three_tokens


def test_action_discounts_hand_case():
    ro = three_tokens()
    assert action_discounts(ro, 0.9).tolist() == [[1.0, 0.9, 0.9]]
    padded = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long), mask=torch.tensor([[True, True, False, False]]),
                      rewards=torch.zeros(1, 4), turn_ids=torch.tensor([[0, 0, -1, -1]]))
    assert action_discounts(padded, 0.5).tolist() == [[1.0, 0.5, 0.0, 0.0]]
    with pytest.raises(ValueError, match="gamma"):
        action_discounts(ro, 1.5)
