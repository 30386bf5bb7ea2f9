"""labkit.viz.panels: Credits (and the exact truth) to the panels the heatmaps draw, on a hand-made batch
(order, rows, levels, dtype, every refusal naming its argument).
"""
from __future__ import annotations

import re

import pytest
import torch

from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.viz import credit_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def batch(B: int = 4, T: int = 5) -> Rollouts:
    """B rows of T positions, two agents taking turns, every position generated."""
    agents = torch.arange(T).remainder(2).expand(B, T).clone()
    rewards = torch.zeros(B, T, dtype=torch.float64)
    rewards[:, -1] = torch.arange(B, dtype=torch.float64)
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=torch.ones(B, T, dtype=torch.bool),
                    rewards=rewards, agent_ids=agents)


def token_credit(ro: Rollouts, scale: float, method: str = "m") -> Credit:
    values = scale * torch.arange(ro.batch_size * ro.horizon, dtype=torch.float64).reshape(ro.mask.shape)
    return Credit.from_tokens(ro, values, method)


def agent_credit(ro: Rollouts) -> Credit:
    values = torch.tensor([[1.0, -1.0]], dtype=torch.float64).expand(ro.batch_size, 2)
    return Credit.from_level(ro, values, "agent", "split")


# ------------------------------------------------------------------------------ credit_panels itself
def test_truth_first_then_credits_in_order_and_unchanged():
    ro = batch()
    a, b = token_credit(ro, 1.0), token_credit(ro, -2.0)
    truth = torch.ones(ro.mask.shape, dtype=torch.float64)
    panels = credit_panels({"B": b, "A": a}, truth=truth, truth_title="exact A")
    assert list(panels) == ["exact A", "B", "A"]
    # without rows or dtype nothing is copied: a panel is the tensor the caller or estimator made
    assert panels["exact A"] is truth and panels["B"] is b.token and panels["A"] is a.token


def test_truth_is_optional_and_tensors_are_panels_too():
    ro = batch()
    extra = torch.full(ro.mask.shape, 0.5, dtype=torch.float64)
    panels = credit_panels({"credit": token_credit(ro, 1.0), "entropy": extra})
    assert list(panels) == ["credit", "entropy"] and panels["entropy"] is extra


def test_rows_pick_the_same_trajectories_from_every_panel():
    ro = batch()
    credit = token_credit(ro, 1.0)
    truth = -credit.token
    panels = credit_panels({"c": credit}, truth=truth, rows=[3, 1, 3])
    assert torch.equal(panels["c"], credit.token[[3, 1, 3]])
    assert torch.equal(panels["exact advantage"], truth[[3, 1, 3]])
    as_tensor = credit_panels({"c": credit}, rows=torch.tensor([0, 2]))
    assert torch.equal(as_tensor["c"], credit.token[[0, 2]])


def test_level_takes_the_values_a_credit_was_computed_at():
    ro = batch()
    split = agent_credit(ro)
    panels = credit_panels({"split": split}, level="agent", rows=[1])
    assert torch.equal(panels["split"], torch.tensor([[1.0, -1.0]], dtype=torch.float64))
    # per position (the default) the same credit is spread over each agent's positions
    assert torch.equal(credit_panels({"split": split})["split"], split.token)


def test_dtype_casts_every_panel():
    ro = batch()
    truth = torch.zeros(ro.mask.shape, dtype=torch.float32)
    panels = credit_panels({"c": token_credit(ro, 1.0)}, truth=truth, dtype=torch.float32)
    assert all(v.dtype == torch.float32 for v in panels.values())
    assert torch.equal(panels["c"], token_credit(ro, 1.0).token.float())


@pytest.mark.parametrize("rows, error", [
    ([4], ValueError), ([-1], ValueError), ([], ValueError), ([0.5], TypeError), ("0", TypeError), (2, TypeError),
])
def test_bad_rows_are_refused_naming_rows(rows, error):
    ro = batch()
    with pytest.raises(error, match="^rows"):
        credit_panels({"c": token_credit(ro, 1.0)}, rows=rows)


def test_bad_input_is_refused_naming_the_argument():
    ro = batch()
    credit = token_credit(ro, 1.0)
    with pytest.raises(TypeError, match="^credits"):
        credit_panels([credit])
    with pytest.raises(ValueError, match="^credits: nothing"):
        credit_panels({})
    with pytest.raises(ValueError, match=re.escape("credits['short']: has shape (4, 3)")):
        credit_panels({"c": credit, "short": credit.token[:, :3]})
    with pytest.raises(ValueError, match=re.escape("credits['c']: has shape (4, 5) but truth")):
        credit_panels({"c": credit}, truth=torch.zeros(4, 6))
    with pytest.raises(ValueError, match=re.escape("credits['flat']: expected a (rows, positions)")):
        credit_panels({"flat": torch.zeros(5)})
    with pytest.raises(TypeError, match=re.escape("credits['text']")):
        credit_panels({"text": "not numbers"})
    with pytest.raises(ValueError, match="^truth_title"):
        credit_panels({"exact advantage": credit}, truth=credit.token)
    with pytest.raises(ValueError, match="^level"):
        credit_panels({"c": credit}, level="agent")  # computed per token: no agent values
    with pytest.raises(ValueError, match="^level"):
        credit_panels({"c": credit}, level="paragraph")
