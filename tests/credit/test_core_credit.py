"""In-context core credit (labkit.credit.multiagent.core_credit): the least core's nucleolus as
per-agent credit, on hand-built 3-player games whose core is worked out on paper.
"""

import pytest
import torch

from labkit.core.games import exact_shapley
from labkit.credit import estimate

from team_games import COMPLEMENTARY, GLOVE, REDUNDANT, agent_values, glove_rollouts, team


def test_core_credit_hand_computed_glove_game():
    # GLOVE: v({0,1}) = v({0,2}) = v(N) = 1, else 0. Core: x0 + x1 >= 1 and x0 + x2 >= 1 with
    # x0 + x1 + x2 = 1 and x1, x2 >= 0 leave only (1, 0, 0), so e* = 0; Shapley gives (2/3, 1/6, 1/6).
    # REDUNDANT: x_i >= 1 - e for each singleton, sum 1 -> (1/3, 1/3, 1/3), e* = 2/3.
    # COMPLEMENTARY: only N is worth 1 -> (1/3, 1/3, 1/3), e* = -1/3 (core non-empty).
    ro = glove_rollouts()
    table = torch.stack([GLOVE, REDUNDANT, COMPLEMENTARY, GLOVE])
    c = estimate("core_credit", ro, coalition_values=table)
    third = [1 / 3] * 3
    expected = torch.tensor([[1.0, 0.0, 0.0], third, third, [1.0, 0.0, 0.0]], dtype=torch.float64)
    assert c.level == "agent" and c.values.shape == (4, 3)
    assert torch.allclose(c.values, expected, atol=1e-12)
    assert torch.allclose(agent_values(c, ro), expected, atol=1e-12)
    assert torch.allclose(c.info["e"], torch.tensor([0.0, 2 / 3, -1 / 3, 0.0], dtype=torch.float64), atol=1e-12)
    assert c.cost.env_steps == 4 * 8 and c.info["n_evaluations"] == 8
    # where it differs from Shapley: the veto player (agent 0) gets 1 instead of 2/3
    assert torch.allclose(exact_shapley(GLOVE), torch.tensor([2 / 3, 1 / 6, 1 / 6], dtype=torch.float64))
    # the callable form of the input gives the same
    c2 = estimate("core_credit", ro, coalition_values=lambda r: table)
    assert torch.equal(c2.values, c.values)


def test_core_credit_sampled_constraints_count_their_evaluations():
    ro = glove_rollouts()
    table = torch.stack([GLOVE] * 4)
    # no sampled coalition: singletons only, all worth 0 -> equal split of 1; 2 + 3 values read each
    c = estimate("core_credit", ro, coalition_values=table, constraints="sampled", n_sampled=0)
    assert torch.allclose(c.values, torch.full((4, 3), 1 / 3, dtype=torch.float64))
    assert c.cost.env_steps == 4 * 5 and c.info["constraints"] == "sampled"
    # every other proper coalition sampled (3 of them): the exact answer, and at most 2**n values
    full = estimate("core_credit", ro, coalition_values=table, constraints="sampled", n_sampled=10)
    assert torch.allclose(full.values, estimate("core_credit", ro, coalition_values=table).values)
    assert full.cost.env_steps == 4 * 8


def test_core_credit_degenerate_one_agent_and_absent_agent():
    ro = team([[0], [0, 0]], [[2.0], [1.0]], n_agents=1)
    c = estimate("core_credit", ro, coalition_values=torch.tensor([[0.5, 2.0], [0.0, 1.0]]))
    assert torch.allclose(c.values, torch.tensor([[1.5], [1.0]], dtype=torch.float64))
    assert torch.isinf(c.info["e"]).all()
    # agent 2 never acts in row 0: its share is kept in info but painted nowhere
    ro3 = team([[0, 1], [0, 1, 2]], [[1, 1, 0], [1, 1, 1]], n_agents=3)
    c3 = estimate("core_credit", ro3, coalition_values=torch.stack([GLOVE, GLOVE]))
    assert torch.allclose(c3.info["x"][0], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))


def test_core_credit_bad_input():
    ro = glove_rollouts()
    table = torch.stack([GLOVE] * 4)
    with pytest.raises(ValueError, match="^coalition_values"):
        estimate("core_credit", ro, coalition_values=torch.zeros(4, 16))
    with pytest.raises(ValueError, match="^coalition_values"):
        estimate("core_credit", ro, coalition_values=torch.zeros(3, 8))
    with pytest.raises(ValueError, match="^coalition_values"):
        estimate("core_credit", ro)
    bad = table.clone()
    bad[1, 3] = float("inf")
    with pytest.raises(ValueError, match="^coalition_values"):
        estimate("core_credit", ro, coalition_values=bad)
    with pytest.raises(ValueError, match="^constraints"):
        estimate("core_credit", ro, coalition_values=table, constraints="some")
    with pytest.raises(ValueError, match="^n_sampled"):
        estimate("core_credit", ro, coalition_values=table, constraints="sampled", n_sampled=-1)
    with pytest.raises(TypeError, match="n_samples"):
        estimate("core_credit", ro, coalition_values=table, n_samples=3)
