"""Episode-level credit (labkit.credit.episode): REINFORCE, RLOO, GRPO, Dr. GRPO, REINFORCE++."""

import pytest
import torch
from hypothesis import strategies as st
from hypothesis import given, settings

from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_stats
from labkit.credit import ESTIMATORS, estimate, get_estimator
from labkit.credit.episode import dr_grpo, grpo, reinforce, reinforce_baseline, reinforce_pp, rloo
from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.policies import TabularSoftmaxPolicy
from labkit.scoring import cosine


def batch(scores, groups, T=4):
    scores = torch.as_tensor(scores, dtype=torch.float64)
    B = len(scores)
    rewards = torch.zeros(B, T, dtype=torch.float64)
    rewards[:, -1] = scores
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=torch.ones(B, T, dtype=torch.bool),
                    rewards=rewards, group_ids=torch.as_tensor(groups))


groups_and_scores = st.integers(1, 6).flatmap(lambda n_groups: st.lists(
    st.tuples(st.integers(0, n_groups - 1), st.floats(-10, 10, allow_nan=False)), min_size=1, max_size=24))


@settings(max_examples=60, deadline=None)
@given(groups_and_scores)
def test_grpo_and_dr_grpo_sum_to_zero_within_each_group(rows):
    groups = [g for g, _ in rows]
    r = batch([s for _, s in rows], groups)
    for fn in (grpo, dr_grpo):
        adv = fn(r).values[:, 0]
        for g in set(groups):
            members = torch.tensor(groups) == g
            if int(members.sum()) > 1:
                assert abs(float(adv[members].sum())) < 1e-6 * (1 + float(adv[members].abs().sum()))


@settings(max_examples=60, deadline=None)
@given(groups_and_scores)
def test_rloo_is_scaled_centred_score_and_leave_one_out(rows):
    groups = torch.tensor([g for g, _ in rows])
    scores = torch.tensor([s for _, s in rows], dtype=torch.float64)
    adv = rloo(batch(scores, groups)).values[:, 0]
    mean, _, size = group_stats(scores, groups)
    for i in range(len(scores)):
        others = (groups == groups[i]) & (torch.arange(len(scores)) != i)
        if int(size[i]) == 1:
            assert float(adv[i]) == 0.0
        else:
            n = float(size[i])
            assert float(adv[i]) == pytest.approx(n / (n - 1) * float(scores[i] - mean[i]), abs=1e-9)
            assert float(adv[i]) == pytest.approx(float(scores[i] - scores[others].mean()), abs=1e-9)


def test_degenerate_groups_follow_documented_conventions():
    r = batch([3.0, 1.0, 1.0, 1.0], [0, 1, 1, 1])  # a singleton and a zero-variance group
    g = grpo(r).values[:, 0]
    assert g.tolist() == pytest.approx([3.0 / (1 + 1e-6), 0.0, 0.0, 0.0])  # singleton: raw score / (1 + eps), as verl; constant group: 0
    assert dr_grpo(r).values[:, 0].tolist() == [3.0, 0.0, 0.0, 0.0]
    assert rloo(r).values[:, 0].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert torch.isfinite(reinforce_pp(batch([1.0, 1.0], [0, 0])).token).all()
    assert reinforce_pp(batch([1.0, 1.0], [0, 0])).token.abs().max() == 0
    one = batch([2.0], [0])
    assert reinforce_baseline(one).values.item() == 0.0
    assert reinforce(one).values.item() == 2.0


def test_grpo_normalises_by_unbiased_std():
    r = batch([1.0, 0.0, 0.0, 0.0], [0, 0, 0, 0])
    std = torch.tensor([1.0, 0.0, 0.0, 0.0]).std()  # unbiased
    assert grpo(r).values[0, 0].item() == pytest.approx((1 - 0.25) / (float(std) + 1e-6))


def test_reinforce_pp_whitens_over_the_batch():
    c = reinforce_pp(batch([1.0, 0.0, 2.0], [0, 0, 1]))
    vals = c.token.flatten()
    assert vals.mean().item() == pytest.approx(0.0, abs=1e-9)
    assert vals.var(unbiased=False).item() == pytest.approx(1.0, abs=1e-6)
    base = reinforce_pp(batch([1.0, 0.0, 2.0], [0, 0, 1]), group_baseline=True)
    assert torch.isfinite(base.token).all() and c.level == "token"


def test_discounting_makes_reinforce_pp_vary_along_the_trajectory():
    c = reinforce_pp(batch([1.0, 0.0], [0, 0], T=5), gamma=0.5)
    row = c.token[0].tolist()
    assert row == sorted(row)  # later tokens are closer to the reward


def test_every_token_gets_the_same_episode_credit():
    r = batch([1.0, 0.0, 1.0], [0, 0, 0])
    for name in ("reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo"):
        tok = estimate(name, r).token
        assert torch.all(tok == tok[:, :1]), name


def test_registry():
    assert {"reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo", "reinforce_pp"} <= set(ESTIMATORS)
    with pytest.raises(ValueError, match="no estimator"):
        get_estimator("magic")
    with pytest.raises(ValueError, match="eps"):
        grpo(batch([1.0], [0]), eps=-1.0)


@pytest.mark.parametrize("name", ["reinforce", "rloo", "dr_grpo"])
def test_unbiased_estimators_match_the_exact_gradient(name):
    """The mean of many batch gradients converges to the exact gradient (within MC error)."""
    env = BifurcationChain(horizon=6, n_bifurcations=2, slip=0.1, noise_std=0.3, seed=4)
    pol = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.8, seed=2)
    tr = exact_truth(env.mdp(), pol)
    n_batches, size = 400, 32
    ro = env.sample(pol, n_batches * size, group_size=8, seed=9)
    fn = ESTIMATORS[name]
    credit = torch.cat([fn(b).token for b in ro.split(n_batches)])
    per_traj = pol.trajectory_gradients(ro, credit).reshape(len(ro), -1)
    mean, se = per_traj.mean(0), per_traj.std(0) / len(ro) ** 0.5
    exact = tr.grad.reshape(-1)
    if name == "rloo":  # group-of-8 RLOO is unbiased as is
        pass
    elif name == "dr_grpo":  # mean baseline incl. own sample: E[g] = (n-1)/n * exact
        exact = exact * 7 / 8
    z = ((mean - exact).abs() / se.clamp(min=1e-12))[se > 0]
    assert float(z.max()) < 5.0
    assert cosine(mean, exact) > 0.97


# ---- the engines' other group baselines (verl's opo, grpo_passk, gpg, reinforce_plus_plus_baseline;
#      TRL's scale_rewards="batch"); their parity with verl runs in tests/bridges (make test-verl)
def _hand(scores, groups, lengths):
    T = max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    rewards = torch.zeros(len(scores), T, dtype=torch.float64)
    rewards[torch.arange(len(scores)), torch.tensor(lengths) - 1] = torch.tensor(scores, dtype=torch.float64)
    return Rollouts(tokens=torch.ones(len(scores), T, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.tensor(groups))


def test_opo_baseline_weighs_scores_by_length():
    from labkit.credit.episode import opo

    ro = _hand([1.0, 0.0, 1.0, 2.0], [0, 0, 0, 1], [4, 2, 4, 3])
    c = opo(ro)
    # group 0: b = (4*1 + 2*0 + 4*1) / 10 = 0.8; a group of one keeps its raw score
    assert torch.allclose(c.values[:, 0], torch.tensor([0.2, -0.8, 0.2, 2.0], dtype=torch.float64))
    equal = _hand([1.0, 0.0, 1.0], [0, 0, 0], [3, 3, 3])
    assert torch.allclose(opo(equal).values, dr_grpo(equal).values)   # equal lengths: Dr. GRPO


def test_grpo_passk_credits_the_best_answer_by_its_margin():
    from labkit.credit.episode import grpo_passk

    ro = _hand([0.2, 0.9, 0.5, 1.0, 1.0, 3.0], [0, 0, 0, 1, 1, 2], [2] * 6)
    raw = grpo_passk(ro, normalize_std=False).values[:, 0]
    # group 0: best 0.9, second 0.5 -> 0.4 on row 1 only; a tie (group 1) -> 0; a group of one -> 0
    assert torch.allclose(raw, torch.tensor([0, 0.4, 0, 0, 0, 0], dtype=torch.float64))
    scaled = grpo_passk(ro).values[:, 0]
    std = torch.tensor([0.2, 0.9, 0.5], dtype=torch.float64).std()
    assert torch.isclose(scaled[1], 0.4 / (std + 1e-6)) and grpo_passk(ro).info["best"][[1, 3]].all()


def test_gpg_scales_the_group_mean_advantage_by_the_inverse_share_of_rewards():
    from labkit.credit.episode import gpg

    ro = _hand([1.0, 0.0, 0.0, 0.0], [0, 0, 1, 1], [2] * 4)
    c = gpg(ro)
    assert c.info["alpha"] == 4.0 and torch.allclose(c.values, 4.0 * dr_grpo(ro).values)
    with pytest.raises(ValueError, match="^f_norm:"):
        gpg(ro, f_norm=0.0)


def test_reinforce_pp_baseline_is_reinforce_pp_with_the_group_baseline():
    from labkit.credit.episode import reinforce_pp_baseline

    ro = _hand([1.0, 0.0, 0.5, 2.0], [0, 0, 1, 1], [3, 2, 3, 1])
    ours = reinforce_pp_baseline(ro)
    assert ours.method == "reinforce_pp_baseline"
    assert torch.equal(ours.values, reinforce_pp(ro, group_baseline=True).values)


def test_grpo_batch_std_divides_every_group_by_the_batch_std():
    ro = _hand([1.0, 0.0, 0.5, 2.0], [0, 0, 1, 1], [2] * 4)
    c = grpo(ro, batch_std=True)
    centred = dr_grpo(ro).values[:, 0]
    batch = torch.tensor([1.0, 0.0, 0.5, 2.0], dtype=torch.float64).std()
    assert torch.allclose(c.values[:, 0], centred / (batch + 1e-6)) and c.info["batch_std"] == pytest.approx(float(batch))
    with pytest.raises(ValueError, match="^batch_std:"):
        grpo(ro, batch_std=True, normalize_std=False)


def test_gdpo_normalises_each_reward_function_in_its_group_before_summing():
    from labkit.credit.episode import gdpo

    ro = _hand([0.0] * 4, [0, 0, 0, 0], [2] * 4)
    # a correctness reward (0/1) and a length bonus 100x larger in scale
    parts = torch.tensor([[1.0, 0.0], [1.0, 100.0], [0.0, 0.0], [0.0, 100.0]], dtype=torch.float64)
    c = gdpo(ro, reward_parts=parts)
    # each part counts by its rank in the group: correctness and the bonus weigh alike
    assert torch.allclose(c.values[0, 0], -c.values[3, 0]) and torch.allclose(c.values[1, 0], c.values[2, 0] * -1)
    summed = grpo(_hand(parts.sum(1).tolist(), [0, 0, 0, 0], [2] * 4)).values[:, 0]
    assert torch.corrcoef(torch.stack([summed, parts[:, 1]]))[0, 1] > 0.999   # GRPO: the bonus drowns correctness
    tokens = c.token[ro.mask]   # whitened over the batch's 8 tokens (unbiased variance)
    assert abs(float(tokens.mean())) < 1e-12 and abs(float(tokens.var()) - 1.0) < 1e-6
    weighted = gdpo(ro, reward_parts=parts, weights=[1.0, 0.0]).info["summed"]
    assert torch.allclose(weighted, c.info["part_advantages"][:, 0])
    for bad, match in (({"reward_parts": parts[:3]}, "^reward_parts:"), ({"reward_parts": parts[:, :0]}, "^reward_parts:"),
                       ({"reward_parts": parts, "weights": [1.0]}, "^weights:"),
                       ({"reward_parts": parts * float("nan")}, "^reward_parts:"), ({"reward_parts": None}, "^reward_parts:")):
        with pytest.raises(ValueError, match=match):
            gdpo(ro, **bad)


def test_remax_subtracts_the_greedy_score_from_the_return_to_go():
    from labkit.credit.episode import remax

    ro = _hand([1.0, 0.0, 1.0], [0, 0, 1], [3, 2, 3])
    c = remax(ro, greedy_scores=torch.tensor([0.5, 0.5, 1.0]))
    assert torch.allclose(c.token[:, 0], torch.tensor([0.5, -0.5, 0.0], dtype=torch.float64))
    assert c.cost.policy_forwards == 0
    called = remax(ro, greedy_scores=lambda r: torch.ones(r.batch_size))
    assert called.cost.policy_forwards == 2   # one greedy response per prompt group
    with pytest.raises(ValueError, match="^greedy_scores:"):
        remax(ro, greedy_scores=torch.ones(2))
    with pytest.raises(ValueError, match="^greedy_scores:"):
        remax(ro, greedy_scores=torch.tensor([0.0, float("inf"), 0.0]))


def _equal_group_batch():
    # group 0: equal scores (std 0); group 1: different scores
    mask = torch.ones(4, 2, dtype=torch.bool)
    rewards = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    return Rollouts(tokens=torch.zeros(4, 2, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.tensor([0, 0, 1, 1]))


@pytest.mark.parametrize("name,kw", [("grpo", {}), ("grpo", {"batch_std": True}), ("grpo_passk", {})])
def test_eps_zero_gives_an_all_equal_group_zero(name, kw):
    ro = _equal_group_batch()
    adv = estimate(name, ro, eps=0.0, **kw).values[:, 0]
    assert adv[:2].tolist() == [0.0, 0.0]
    assert bool(torch.isfinite(adv).all()) and adv[2].item() > 0.0
    # eps > 0 keeps its own (unchanged) arithmetic: close to eps = 0 away from equal groups
    near = estimate(name, ro, eps=1e-12, **kw).values[:, 0]
    assert torch.allclose(adv, near)
    if not kw:  # a whole batch of equal scores (batch_std's std is then 0 too)
        flat = ro.with_(rewards=torch.zeros(4, 2, dtype=torch.float64))
        assert estimate(name, flat, eps=0.0, **kw).values.abs().max().item() == 0.0


def test_grpo_batch_std_with_eps_zero_on_equal_scores_gives_zero():
    ro = _equal_group_batch().with_(rewards=torch.zeros(4, 2, dtype=torch.float64))
    assert estimate("grpo", ro, eps=0.0, batch_std=True).values.abs().max().item() == 0.0
