"""Group credit (labkit.credit.group): GiGPO's anchor groups and the StarPO batch filter.

All rollouts here are built by hand so every expected number can be computed on paper.
"""

import pytest
import torch

from labkit.credit import ESTIMATORS, estimate
from labkit.credit.episode import dr_grpo, grpo
from labkit.credit.group import anchor_groups, gigpo, starpo_filter

from turn_batches import turn_batch, turn_credit


# --------------------------------------------------------------------------- GiGPO
def _singleton_case(turn_len=1, tool=False):
    rewards = [[0, 0, 1], [0, 0], [0, 1, 0, 0], [0.5], [1, 0]]
    keys = [[f"{b}-{k}" for k in range(len(r))] for b, r in enumerate(rewards)]
    return turn_batch(rewards, groups=[0, 0, 0, 1, 1], keys=keys, turn_len=turn_len, tool=tool)


@pytest.mark.parametrize("turn_len,tool", [(1, False), (3, True)])
def test_gigpo_with_only_singleton_anchor_groups_is_grpo(turn_len, tool):
    ro = _singleton_case(turn_len, tool)
    a = gigpo(ro, norm="mean_norm")
    assert a.info["singleton_share"] == 1.0
    assert torch.allclose(a.token, dr_grpo(ro).token)
    b = gigpo(ro, norm="mean_std_norm", eps=1e-6)
    assert torch.allclose(b.token, grpo(ro, eps=1e-6).token)
    assert torch.allclose(turn_credit(b, ro)[:, 0], grpo(ro).values[:, 0])


def test_gigpo_with_omega_zero_is_the_episode_term():
    ro = turn_batch([[0, 1], [0, 0], [1, 0]], keys=[["s", "a"], ["s", "a"], ["s", "b"]])
    for norm, ref in (("mean_norm", dr_grpo(ro)), ("mean_std_norm", grpo(ro))):
        c = gigpo(ro, omega=0.0, norm=norm)
        assert torch.allclose(c.token, ref.token)
        assert c.info["step_term"].abs().sum() > 0  # the step term exists but is switched off


def test_gigpo_hand_computed():
    # one task group, three trajectories; turn rewards, gamma = 0.5
    #   traj 0: keys s, a   rewards 0, 1  -> R = 0.5, 1
    #   traj 1: keys s, a   rewards 0, 0  -> R = 0,   0
    #   traj 2: keys s, b   rewards 1, 0  -> R = 1,   0
    ro = turn_batch([[0, 1], [0, 0], [1, 0]], keys=[["s", "a"], ["s", "a"], ["s", "b"]], turn_len=2, tool=True)
    c = gigpo(ro, gamma=0.5, omega=2.0)
    ep = torch.tensor([1 - 2 / 3, 0 - 2 / 3, 1 - 2 / 3], dtype=torch.float64)
    # anchor "s": R = 0.5, 0, 1 (mean 0.5); anchor "a": R = 1, 0 (mean 0.5); "b" singleton -> 0
    step = torch.tensor([[0.0, 0.5], [-0.5, -0.5], [0.5, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), ep[:, None] + 2.0 * step)
    assert c.level == "turn" and c.values.shape == (3, 2)
    assert c.info["anchor_sizes"].tolist() == [3, 2, 1]
    assert c.info["singleton_share"] == pytest.approx(1 / 3)
    assert c.info["singleton_turn_share"] == pytest.approx(1 / 6)
    # mean_std_norm divides each part by its group's unbiased std + eps
    d = gigpo(ro, gamma=0.5, norm="mean_std_norm", eps=0.0)
    s_ep = torch.tensor([1.0, 0, 1]).std()
    s_s, s_a = torch.tensor([0.5, 0, 1]).std(), torch.tensor([1.0, 0]).std()
    want = ep[:, None] / s_ep + torch.tensor([[0.0, 0.5 / s_a], [-0.5 / s_s, -0.5 / s_a], [0.5 / s_s, 0.0]],
                                             dtype=torch.float64)
    assert torch.allclose(turn_credit(d, ro), want)


def test_gigpo_anchor_groups_respect_task_groups_and_repeat_visits():
    # the same key in two task groups is two anchor groups; a loop within one trajectory is one
    ro = turn_batch([[0, 0, 1], [1], [0]], groups=[0, 0, 1], keys=[["s", "x", "s"], ["s"], ["s"]])
    df = anchor_groups(ro)
    assert list(df.columns) == ["group", "key", "size"]
    assert df.values.tolist() == [[0, "s", 3], [0, "x", 1], [1, "s", 1]]
    c = gigpo(ro)
    assert c.info["anchor_index"].tolist() == [[0, 1, 0], [0, -1, -1], [2, -1, -1]]


def test_gigpo_step_term_sums_to_zero_in_each_anchor_group():
    g = torch.Generator().manual_seed(0)
    rewards = [[float(torch.randint(0, 2, (1,), generator=g)) for _ in range(n)] for n in (3, 4, 2, 5, 3, 4)]
    keys = [[int(torch.randint(0, 3, (1,), generator=g)) for _ in r] for r in rewards]
    ro = turn_batch(rewards, groups=[0, 0, 0, 1, 1, 1], keys=keys, turn_len=2)
    c = gigpo(ro, gamma=0.9)
    idx, step = c.info["anchor_index"], c.info["step_term"]
    sums = torch.zeros(int(idx.max()) + 1, dtype=step.dtype).index_add_(0, idx[idx >= 0], step[idx >= 0])
    assert torch.allclose(sums, torch.zeros_like(sums), atol=1e-12)
    assert (c.info["anchor_sizes"] > 1).any()


def test_gigpo_is_registered_and_rejects_bad_input():
    ro = turn_batch([[0, 1], [1, 0]], keys=[["s", "a"], ["s", "b"]])
    assert torch.allclose(estimate("gigpo", ro).token, gigpo(ro).token)
    for kw, name in (({"norm": "std"}, "norm"), ({"omega": -1.0}, "omega"), ({"gamma": 1.5}, "gamma"),
                     ({"eps": -1.0}, "eps"), ({"omega": float("nan")}, "omega")):
        with pytest.raises(ValueError, match=f"^{name}"):
            gigpo(ro, **kw)
    with pytest.raises(ValueError, match="^anchor_keys"):
        gigpo(turn_batch([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="^anchor_keys"):
        anchor_groups(turn_batch([[0, 1]]))
    with pytest.raises(TypeError, match="^anchor_keys"):
        gigpo(turn_batch([[0, 1]], keys=[[["unhashable"], "a"]]))


# --------------------------------------------------------------------------- StarPO filter
def _filter_case():
    # group 0: all equal (std 0); group 1: 0/1 split; group 2: spread 0..2; group 3: one trajectory
    scores = [[1], [1], [0], [1], [0], [2], [5]]
    return turn_batch(scores, groups=[0, 0, 1, 1, 2, 2, 3])


def test_starpo_filter_keeps_the_highest_variance_groups():
    ro = _filter_case()
    out = starpo_filter(ro, keep=0.5)  # 2 of 4 groups
    assert out.info["starpo"]["kept_groups"] == [1, 2]
    assert out.group_ids.tolist() == [1, 1, 2, 2]
    assert out.scores.tolist() == [0, 1, 0, 2]
    assert out.info["starpo"]["spreads"][3] == 0.0
    one = starpo_filter(ro, keep=0.25)
    assert one.info["starpo"]["kept_groups"] == [2]
    # at least one group even when keep * n_groups < 1
    assert starpo_filter(ro, keep=0.01).info["starpo"]["kept_groups"] == [2]


def test_starpo_filter_keep_one_keeps_everything_and_ties_go_to_the_lower_group_id():
    ro = _filter_case()
    out = starpo_filter(ro, keep=1.0)
    assert out.batch_size == ro.batch_size and torch.equal(out.rewards, ro.rewards)
    tie = turn_batch([[0], [1], [0], [1], [0], [0]], groups=[5, 5, 2, 2, 7, 7])
    assert starpo_filter(tie, keep=0.34).info["starpo"]["kept_groups"] == [2]


def test_starpo_filter_rejects_bad_keep():
    ro = _filter_case()
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^keep"):
            starpo_filter(ro, keep=bad)
    with pytest.raises(TypeError, match="^keep"):
        starpo_filter(ro, keep="all")
    assert "starpo_filter" not in ESTIMATORS


def test_gigpo_with_eps_zero_gives_all_equal_groups_zero():
    # task group 0: two trajectories with equal scores and equal anchor returns (std 0 everywhere)
    ro = turn_batch([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 0.0]], groups=[0, 0, 1, 1],
                    keys=[["a", "b"], ["a", "b"], ["a", "c"], ["a", "c"]])
    c = gigpo(ro, norm="mean_std_norm", eps=0.0)
    assert bool(torch.isfinite(c.token).all())
    assert turn_credit(c, ro)[:2].abs().max().item() == 0.0
    assert turn_credit(c, ro)[2:].abs().max().item() > 0.0
