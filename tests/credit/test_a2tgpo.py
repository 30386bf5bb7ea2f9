"""A2TGPO (labkit.credit.information.a2tgpo): information gain z-scored per turn position, on hand-built rollouts."""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit import estimate
from labkit.credit.information import a2tgpo, igpo

from turn_batches import turn_batch, turn_credit

R3, R2 = math.sqrt(3), math.sqrt(2)
NAN = float("nan")


def _case():
    # one task group of three trajectories, outcomes 1, 0, 1 (the last turn's reward)
    ro = turn_batch([[0, 0, 1], [0, 0], [0, 1]], groups=[0, 0, 0])
    p = torch.tensor([[0.5, 0.6, 0.8, 1.0],     # gains 0.1, 0.2, 0.2
                      [0.5, 0.4, 0.0, NAN],     # gains -0.1, -0.4 (column 3 past the end: ignored)
                      [0.5, 0.2, 1.0, NAN]],    # gains -0.3, 0.8
                     dtype=torch.float64)
    return ro, p


def test_a2tgpo_hand_computed():
    ro, p = _case()
    c = a2tgpo(ro, success_prob=p, eps=0.0)
    assert torch.allclose(c.info["ig"], torch.tensor([[0.1, 0.2, 0.2], [-0.1, -0.4, 0], [-0.3, 0.8, 0]],
                                                     dtype=torch.float64))
    # turn 0 pools {0.1, -0.1, -0.3}: mean -0.1, unbiased std 0.2 -> z = 1, 0, -1
    # turn 1 pools {0.2, -0.4, 0.8}: mean 0.2, unbiased std 0.6 -> z = 0, -1, 1
    # turn 2 holds trajectory 0 alone: nothing to compare with -> z = 0
    z = torch.tensor([[1.0, 0, 0], [0, -1, 0], [-1, 1, 0]], dtype=torch.float64)
    assert torch.allclose(c.info["turn_rewards"], z)
    # gamma = 1: G_k = sum_{j >= k} z_j, divided by sqrt(turns left)
    acc = torch.tensor([[1 / R3, 0, 0], [-1 / R2, -1, 0], [0, 1, 0]], dtype=torch.float64)
    assert torch.allclose(c.info["accumulated"], acc)
    assert torch.allclose(c.info["scale"], torch.tensor([[R3, R2, 1], [R2, 1, 0], [R2, 1, 0]], dtype=torch.float64))
    # outcome term: s = 1, 0, 1, mean 2/3, unbiased std sqrt(1/3) -> 1/sqrt3, -2/sqrt3, 1/sqrt3
    o = torch.tensor([1 / R3, -2 / R3, 1 / R3], dtype=torch.float64)
    assert torch.allclose(c.info["outcome_term"], o)
    want = torch.tensor([[2 / R3, 1 / R3, 1 / R3], [-2 / R3 - 1 / R2, -2 / R3 - 1, 0], [1 / R3, 1 / R3 + 1, 0]],
                        dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    # the clip range: 0.2 (1 + tanh|z|) on every turn, 0 off them
    t = 0.2 * (1 + math.tanh(1.0))
    assert torch.allclose(c.info["clip_range"], torch.tensor([[t, 0.2, 0.2], [0.2, t, 0], [t, t, 0]],
                                                             dtype=torch.float64))
    assert c.level == "turn" and c.cost == Cost()
    # the gains are IGPO's (final "ig"): one computation for both
    assert torch.equal(c.info["ig"], igpo(ro, success_prob=p, final="ig").info["ig"])
    assert torch.allclose(estimate("a2tgpo", ro, success_prob=p, eps=0.0).token, c.token)


def test_a2tgpo_discount_rescale_and_weights():
    ro, p = _case()
    # gamma = 0.5: trajectory 1, turn 0: G = 0 + 0.5 * (-1) = -0.5, c = sqrt(1 + 0.25)
    c = a2tgpo(ro, success_prob=p, eps=0.0, gamma=0.5, outcome_weight=0.0)
    got = turn_credit(c, ro)
    assert got[1, 0].item() == pytest.approx(-0.5 / math.sqrt(1.25))
    # trajectory 0, turn 0: G = 1, c = sqrt(1 + 0.25 + 0.0625)
    assert got[0, 0].item() == pytest.approx(1 / math.sqrt(1.3125))
    # no rescale: the plain discounted sum
    d = a2tgpo(ro, success_prob=p, eps=0.0, gamma=0.5, outcome_weight=0.0, rescale="none")
    assert turn_credit(d, ro)[1, :2].tolist() == pytest.approx([-0.5, -1.0])
    e = a2tgpo(ro, success_prob=p, eps=0.0, clip=0.1, clip_spread=0.0)
    assert torch.allclose(e.info["clip_range"], torch.where(e.info["scale"] > 0, 0.1, 0.0).to(torch.float64))


def test_a2tgpo_degenerate_input():
    # a group of one: every (group, turn) pool is a singleton -> z = 0, only the outcome term
    ro = turn_batch([[0, 1], [0, 0]], groups=[0, 1])
    p = torch.tensor([[0.5, 0.7, 1.0], [0.5, 0.1, 0.0]], dtype=torch.float64)
    c = a2tgpo(ro, success_prob=p, eps=0.0)
    assert turn_credit(c, ro).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    # a trajectory with no turn gets 0; a callable counts one forward per probability read
    ro = turn_batch([[0, 1], [], [0, 0]], groups=[0, 0, 0])
    p = torch.tensor([[0.5, 0.7, 1.0], [0.5, NAN, NAN], [0.5, 0.1, 0.0]], dtype=torch.float64)
    c = a2tgpo(ro, success_prob=lambda r: p)
    assert torch.isfinite(c.token).all() and float(c.token[1].abs().sum()) == 0.0
    assert c.cost.policy_forwards == 3 + 1 + 3


def test_a2tgpo_rejects_bad_input():
    ro, p = _case()
    with pytest.raises(ValueError, match=r"^success_prob: expected shape \(3, 4\)"):
        a2tgpo(ro, success_prob=p[:, :3])
    bad = p.clone()
    bad[0, 1] = 1.5
    with pytest.raises(ValueError, match="^success_prob"):
        a2tgpo(ro, success_prob=bad)
    bad[0, 1] = NAN
    with pytest.raises(ValueError, match="^success_prob: contains a non-finite"):
        a2tgpo(ro, success_prob=bad)
    with pytest.raises(ValueError, match="^rescale"):
        a2tgpo(ro, success_prob=p, rescale="std")
    for option in ("clip", "clip_spread", "outcome_weight", "eps"):
        with pytest.raises(ValueError, match=f"^{option}"):
            a2tgpo(ro, success_prob=p, **{option: -1.0})
    with pytest.raises(ValueError, match="^gamma"):
        a2tgpo(ro, success_prob=p, gamma=1.5)
