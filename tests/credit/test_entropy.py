"""Entropy-guided credit (labkit.credit.entropy): CARL and HICRA, on hand-built rollouts."""

import pytest
import torch

from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.credit import estimate
from labkit.credit.entropy import carl, hicra
from labkit.credit.episode import grpo, reinforce_pp

from credit_cases import two_steps
from turn_batches import turn_batch, turn_credit

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _carl_case(turn_len=2):
    rewards = [[0, 0, 1], [0, 1], [0, 0, 0, 0], [1], [0, 0, 1]]
    g = torch.Generator().manual_seed(3)
    ent = [torch.rand(len(r), generator=g, dtype=torch.float64).tolist() for r in rewards]
    return turn_batch(rewards, groups=[0, 0, 0, 1, 1], entropies=ent, turn_len=turn_len, tool=True), ent


def test_carl_keeps_the_top_fraction_of_turns_by_entropy():
    ro, ent = _carl_case()
    n = sum(len(e) for e in ent)  # 13 turns
    c = carl(ro, top_fraction=0.3)
    kept = c.info["kept"]
    assert int(kept.sum()) == 4 and c.info["share_updated"] == pytest.approx(4 / n)  # ceil(3.9)
    flat = sorted((e for row in ent for e in row), reverse=True)
    assert c.info["entropy_threshold"] == pytest.approx(flat[3])
    kept_ent = [ent[b][k] for b in range(len(ent)) for k in range(len(ent[b])) if kept[b, k]]
    assert sorted(kept_ent, reverse=True) == pytest.approx(flat[:4])
    # kept turns carry the base (GRPO) credit, the others nothing
    base = turn_credit(grpo(ro), ro)
    assert torch.allclose(turn_credit(c, ro), torch.where(kept, base, 0))
    assert c.level == "turn"
    # an exact fraction gives exactly that share
    ro10 = turn_batch([[0] * 5, [1] * 5], entropies=[[0.1 * k for k in range(5)], [0.5 + 0.1 * k for k in range(5)]])
    assert carl(ro10, top_fraction=0.3).info["share_updated"] == pytest.approx(0.3)
    assert carl(ro10, top_fraction=0.3).info["kept"].tolist() == [[False] * 5, [False, False, True, True, True]]


def test_carl_with_top_fraction_one_is_the_base_estimator():
    ro, _ = _carl_case()
    assert torch.allclose(carl(ro, top_fraction=1.0).token, grpo(ro).token)
    c = carl(ro, top_fraction=1.0, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    assert torch.allclose(c.token, reinforce_pp(ro, gamma=0.9).token)
    assert c.level == "token"  # the base varies inside a turn, so token credit is kept as is
    half = carl(ro, top_fraction=0.5, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    on = ro.broadcast(half.info["kept"].long(), "turn").bool()
    assert torch.allclose(half.token, torch.where(on, reinforce_pp(ro, gamma=0.9).token, 0))


def test_carl_ties_break_by_position_and_bad_input_errors():
    ro = turn_batch([[0, 1], [1, 0]], entropies=[[0.5, 0.5], [0.5, 0.5]])
    assert carl(ro, top_fraction=0.5).info["kept"].tolist() == [[True, True], [False, False]]
    assert torch.allclose(estimate("carl", ro, top_fraction=0.5).token, carl(ro, top_fraction=0.5).token)
    with pytest.raises(ValueError, match="^entropies"):
        carl(turn_batch([[0, 1], [1, 0]]))
    for bad in (0.0, 1.2, -0.5):
        with pytest.raises(ValueError, match="^top_fraction"):
            carl(ro, top_fraction=bad)
    with pytest.raises(ValueError, match="^base: no estimator 'nope'"):
        carl(ro, base="nope")
    with pytest.raises(ValueError, match="^base"):
        carl(ro, base="carl")
    with pytest.raises(TypeError, match="^base_kwargs"):
        carl(ro, base_kwargs=[1])


# --------------------------------------------------------------------------- HICRA
def test_hicra_hand_computed():
    ro = Rollouts(tokens=torch.zeros(1, 3, dtype=torch.long), mask=torch.ones(1, 3, dtype=torch.bool),
                  rewards=torch.tensor([[0.0, 0.0, 1.0]]))
    A = torch.tensor([[1.0, -1.0, 2.0]])
    c = hicra(ro, planning_mask=torch.tensor([[True, True, False]]), alpha=0.5, base_credit=A)
    assert c.token[0].tolist() == pytest.approx([1.5, -0.5, 2.0])
    assert c.info["planning_share"] == pytest.approx(2 / 3)
    # default base: GRPO over a group of two (scores 1 and 0 -> +-1/sqrt(2))
    two = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.ones(2, 2, dtype=torch.bool),
                   rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    g = estimate("hicra", two, planning_mask=torch.tensor([[True, False], [True, False]]))
    a = 2 ** -0.5 / (1 + 1e-6 * 2 ** 0.5)
    assert g.token[:, 0].tolist() == pytest.approx([1.2 * a, -0.8 * a], rel=1e-5)
    assert g.token[:, 1].tolist() == pytest.approx([a, -a], rel=1e-5)


def test_hicra_degenerate_and_bad_arguments():
    ro = two_steps()
    A = torch.tensor([[1.0, -1.0, 2.0, 0.0]])
    none = hicra(ro, planning_mask=torch.zeros(1, 4, dtype=torch.bool), base_credit=A)
    assert torch.allclose(none.token, A)
    every = hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=A, alpha=0.2)
    assert every.token[0].tolist() == pytest.approx([1.2, -0.8, 2.4, 0.0])
    assert torch.allclose(hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=A, alpha=0).token, A)
    base = Credit.from_tokens(ro, A, "given")
    assert hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=base).info["base"] == "given"
    with pytest.raises(TypeError, match="^planning_mask"):
        hicra(ro, planning_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="^planning_mask"):
        hicra(ro, planning_mask=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="^base"):
        hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base="nope")
    with pytest.raises(ValueError, match="^alpha"):
        hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), alpha=-0.1)
