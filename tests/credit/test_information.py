"""Information-gain credit (labkit.credit.information): IGPO, on hand-built rollouts."""

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit import estimate
from labkit.credit.information import igpo

from turn_batches import turn_batch, turn_credit


def _igpo_case():
    # traj 0: 3 turns, success; traj 1: 2 turns, failure; traj 2 (own group): 1 turn, success
    ro = turn_batch([[0, 0, 1], [0, 0], [1]], groups=[0, 0, 1], turn_len=2, tool=True)
    p = torch.tensor([[0.5, 0.6, 0.9, 1.0],
                      [0.5, 0.2, 0.0, 9.0],      # column 3 is past the end: ignored
                      [0.3, 1.0, float("nan"), float("nan")]], dtype=torch.float64)
    return ro, p


def test_igpo_with_perfect_probabilities_telescopes():
    ro, p = _igpo_case()
    c = igpo(ro, success_prob=p, final="ig", normalize=False)
    # A_k = p_n - p_{k-1} = outcome - value before turn k
    want = torch.tensor([[0.5, 0.4, 0.1], [-0.5, -0.2, 0.0], [0.7, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    # the paper's final turn (the outcome instead of the last gain): A_k = s + p_{n-1} - p_{k-1}
    d = igpo(ro, success_prob=p, normalize=False)
    want = torch.tensor([[1 + 0.9 - 0.5, 1 + 0.9 - 0.6, 1.0], [0 + 0.2 - 0.5, 0.0, 0.0], [1.0, 0.0, 0.0]],
                        dtype=torch.float64)
    assert torch.allclose(turn_credit(d, ro), want)
    e = igpo(ro, success_prob=p, final="ig_plus_outcome", normalize=False, gamma=0.5)
    assert torch.allclose(e.info["ig"], torch.tensor([[0.1, 0.3, 1.1], [-0.3, -0.2, 0.0], [1.7, 0, 0]],
                                                     dtype=torch.float64))
    assert e.info["turn_rewards"][0].tolist() == pytest.approx([0.1, 0.3, 1.1])
    assert turn_credit(e, ro)[0].tolist() == pytest.approx([0.1 + 0.5 * 0.3 + 0.25 * 1.1, 0.3 + 0.5 * 1.1, 1.1])


def test_igpo_hand_computed_with_group_normalisation():
    ro, p = _igpo_case()
    c = igpo(ro, success_prob=p, gamma=0.5, eps=0.0)
    # group 0 pools the 5 turn rewards 0.1, 0.3, 1 | -0.3, 0 (outcome on the final turns)
    pool = torch.tensor([0.1, 0.3, 1.0, -0.3, 0.0], dtype=torch.float64)
    z = (pool - pool.mean()) / pool.std()
    want0 = [z[0] + 0.5 * z[1] + 0.25 * z[2], z[1] + 0.5 * z[2], z[2]]
    want1 = [z[3] + 0.5 * z[4], z[4]]
    got = turn_credit(c, ro)
    assert got[0].tolist() == pytest.approx([float(x) for x in want0])
    assert got[1, :2].tolist() == pytest.approx([float(x) for x in want1])
    # group 1 is a pool of one: mean 0, std 1, so its raw reward (the outcome 1) survives
    assert got[2, 0].item() == pytest.approx(1.0)
    # normalised rewards of a pool have mean 0 and unbiased std 1
    r = c.info["turn_rewards"]
    present = ro.view(ro.rewards, "turn")[1]
    g0 = r[:2][present[:2]]
    assert float(g0.mean()) == pytest.approx(0.0, abs=1e-12) and float(g0.std()) == pytest.approx(1.0)
    assert c.level == "turn" and c.cost == Cost()
    # a callable is evaluated once and counted as one teacher-forced pass per probability
    d = igpo(ro, success_prob=lambda r: p, gamma=0.5, eps=0.0)
    assert torch.allclose(d.token, c.token) and d.cost.policy_forwards == 4 + 3 + 2
    assert torch.allclose(estimate("igpo", ro, success_prob=p).token, igpo(ro, success_prob=p).token)


def test_igpo_rejects_bad_input():
    ro, p = _igpo_case()
    with pytest.raises(ValueError, match=r"^success_prob: expected shape \(3, 4\)"):
        igpo(ro, success_prob=p[:, :3])
    with pytest.raises(ValueError, match="^success_prob: expected shape"):
        igpo(ro, success_prob=lambda r: p[:2])
    bad = p.clone()
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError, match="^success_prob: contains a non-finite"):
        igpo(ro, success_prob=bad)
    with pytest.raises(TypeError, match="^success_prob"):
        igpo(ro, success_prob="high")
    with pytest.raises(ValueError, match="^final"):
        igpo(ro, success_prob=p, final="sum")
    with pytest.raises(ValueError, match="^gamma"):
        igpo(ro, success_prob=p, gamma=2.0)
