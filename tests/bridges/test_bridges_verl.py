"""labkit.bridges.verl in the lab's own environment, where verl is absent: labkit imports without it,
the wrappers turn verl-shaped tensors into labkit credit (hand cases), and ``register`` names the
extra it needs. Parity with verl's own functions:
tests/bridges/test_bridges_verl_parity.py (``make test-verl``)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import labkit.bridges.verl as lb

HAS_VERL = importlib.util.find_spec("verl") is not None


def _batch():
    # prompt a: two responses scoring 1 and 0; prompt b: one response scoring 2 (a group of one)
    r = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    return r, m, np.array(["a", "a", "b"], dtype=object)


def test_grpo_by_hand():
    r, m, uid = _batch()
    adv, ret = lb.labkit_grpo(r, m, uid)
    s = 0.5 / (0.5 ** 0.5 + 1e-6)  # (1 - 0.5) / (unbiased std of {1, 0} = sqrt(1/2), + eps)
    want = torch.tensor([[s, s, 0.0], [-s, -s, -s], [2 / (1 + 1e-6), 0.0, 0.0]])
    torch.testing.assert_close(adv, want)
    assert torch.equal(adv, ret) and adv.dtype == r.dtype


def test_rloo_and_dr_grpo_by_hand():
    r, m, uid = _batch()
    torch.testing.assert_close(lb.labkit_rloo(r, m, uid)[0], torch.tensor([[1.0, 1, 0], [-1, -1, -1], [0, 0, 0]]))
    torch.testing.assert_close(lb.labkit_dr_grpo(r, m, uid)[0], torch.tensor([[.5, .5, 0], [-.5, -.5, -.5], [2, 0, 0]]))


def test_reinforce_pp_returns_are_reward_to_go_and_advantages_are_whitened():
    r, m, _ = _batch()
    adv, ret = lb.labkit_reinforce_pp(r, m, config={"gamma": 0.5})
    torch.testing.assert_close(ret, torch.tensor([[0.5, 1.0, 0], [0, 0, 0], [2.0, 0, 0]]))
    on = m.bool()
    assert abs(float(adv[on].mean())) < 1e-6 and abs(float(adv[on].var(unbiased=False)) - 1) < 1e-4
    assert torch.all(adv[~on] == 0)


def test_gae_returns_are_advantage_plus_value():
    r, m, _ = _batch()
    v = torch.full_like(r, 0.25)
    adv, ret = lb.labkit_gae(r, v, m, gamma=1.0, lam=1.0, whiten_advantages=False)
    # lam = gamma = 1: A = reward-to-go - V on every response token
    torch.testing.assert_close(adv, torch.tensor([[0.75, 0.75, 0], [-.25, -.25, -.25], [1.75, 0, 0]]))
    torch.testing.assert_close(ret[m.bool()], (adv + v)[m.bool()])


def test_bad_input_names_the_argument():
    r, m, uid = _batch()
    with pytest.raises(ValueError, match="^index"):
        lb.labkit_grpo(r, m, None)
    with pytest.raises(ValueError, match="^index"):
        lb.labkit_grpo(r, m, uid[:2])
    with pytest.raises(ValueError, match="^token_level_rewards"):
        lb.labkit_rloo(r, torch.zeros_like(m).index_fill_(1, torch.tensor([2]), 1.0), uid)
    with pytest.raises(ValueError, match="^response_mask"):
        lb.labkit_rloo(r, m[:, :2], uid)
    with pytest.raises(ValueError, match="^values"):
        lb.labkit_gae(r, None, m)
    with pytest.raises(ValueError, match="^names"):
        lb.register(["gigpo"])
    with pytest.raises(TypeError, match="^names"):
        lb.register("grpo")


@pytest.mark.skipif(HAS_VERL, reason="verl is installed here: test_bridges_verl_parity.py covers register()")
def test_register_without_verl_names_the_extra():
    with pytest.raises(ImportError, match=r"labkit\[verl\]"):
        lb.register()


@pytest.mark.parametrize("where, value", [((0, 1), float("nan")), ((2, 0), float("inf")),
                                          ((1, 2), float("-inf")), ((0, 2), float("nan"))])
def test_non_finite_rewards_are_refused_naming_the_argument(where, value):
    # on the mask and off it (0, 2): the fast check folds both rules into one pass, so a bad value
    # off the mask must still be reported as non-finite, not as a misplaced reward
    r, m, uid = _batch()
    r[where] = value
    for call in (lambda: lb.labkit_grpo(r, m, uid), lambda: lb.labkit_reinforce_pp(r, m),
                 lambda: lb.labkit_gae(r, torch.zeros_like(r), m), lambda: lb.rollouts_from_verl(r, m, uid)):
        with pytest.raises(ValueError, match=r"^token_level_rewards: contains a non-finite value"):
            call()


def _validated(r, m, uid):
    """The same batch as a Rollouts built through every check (np.unique's group codes)."""
    from labkit.core.rollouts import Rollouts
    codes = torch.from_numpy(np.unique(uid, return_inverse=True)[1].astype(np.int64))
    return Rollouts(tokens=torch.zeros(r.shape, dtype=torch.long), mask=m, rewards=r, group_ids=codes)


def _big_batch(seed=0, shuffle=False):
    g = torch.Generator().manual_seed(seed)
    B, T = 48, 10
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    m = (torch.arange(T)[None, :] < lengths[:, None]).float()
    m[:, 1:-1] *= (torch.rand(B, T - 2, generator=g) > 0.2).float()  # holes (tool output)
    r = torch.randn(B, T, generator=g) * m
    uid = np.array([f"p{i // 6}" for i in range(B)], dtype=object)
    uid[5] = "p0"  # p0 appears again after another prompt's run: not consecutive runs
    if shuffle:
        perm = torch.randperm(B, generator=g)
        r, m, uid = r[perm], m[perm], uid[perm.numpy()]
    return r, m, uid


@pytest.mark.parametrize("shuffle", [False, True])
def test_bridge_equals_the_estimator_on_a_fully_validated_rollouts_bit_for_bit(shuffle):
    from labkit.credit.episode import dr_grpo, grpo, reinforce_pp, rloo
    from labkit.credit.td import gae
    r, m, uid = _big_batch(shuffle=shuffle)
    ro = _validated(r, m, uid)
    assert torch.equal(lb.labkit_grpo(r, m, uid)[0], grpo(ro).token)
    assert torch.equal(lb.labkit_dr_grpo(r, m, uid)[0], dr_grpo(ro).token)
    assert torch.equal(lb.labkit_rloo(r, m, uid)[0], rloo(ro).token)
    assert torch.equal(lb.labkit_reinforce_pp(r, m, uid, group_baseline=True)[0],
                       reinforce_pp(ro, group_baseline=True).token)
    adv, ret = lb.labkit_reinforce_pp(r, m, config={"gamma": 0.9})
    one = _validated(r, m, np.zeros(len(uid)))
    assert torch.equal(adv, reinforce_pp(one, gamma=0.9).token) and torch.equal(ret, one.returns(0.9))
    v = torch.randn(r.shape, generator=torch.Generator().manual_seed(3))
    assert torch.equal(lb.labkit_gae(r, v, m, gamma=0.9, lam=0.8)[0],
                       gae(one, values=v, gamma=0.9, lam=0.8, whiten_advantages=True).token)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "opo", "grpo_passk", "gpg", "reinforce_pp_baseline"])
def test_every_group_wrapper_equals_its_estimator_on_a_fully_validated_rollouts(name, shuffle):
    # the score-only ones run on one position per response (lb._SCORE_ONLY): same values, and the
    # same tokens up to the sign of an off-mask zero (verl's own estimators give -0.0 there too)
    from labkit.credit import get_estimator
    r, m, uid = _big_batch(seed=4, shuffle=shuffle)
    r[:6] = 0.0  # a group whose scores are all equal
    want = get_estimator(name)(_validated(r, m, uid)).token
    for mask in (m, m.bool(), m.double()):
        adv, ret = lb.BRIDGED[name](r, mask, uid)
        assert torch.equal(adv, want) and adv is ret and adv.dtype == r.dtype
    assert torch.equal(lb.BRIDGED[name](r.double(), m, uid)[0], get_estimator(name)(_validated(r.double(), m, uid)).token)


def test_score_only_estimators_read_nothing_but_scores_and_groups():
    # the claim the fast path rests on: moving rewards inside a response (same score) or changing
    # its length changes none of their advantages' values
    from labkit.credit import get_estimator
    r, m, uid = _big_batch(seed=5)
    m2 = m.clone()
    m2[:, -1] = 1.0  # every response one token longer
    r2 = torch.zeros_like(r)
    r2[:, -1] = r.sum(1)  # the whole score on the last token
    for name in lb._SCORE_ONLY:
        a = get_estimator(name)(_validated(r, m, uid)).values
        b = get_estimator(name)(_validated(r2, m2, uid)).values
        assert torch.equal(a, b), name


# the wrappers whose estimator reads nothing but rewards, mask and groups
GROUP_WRAPPERS = sorted(set(lb.BRIDGED) - {"gae", "reinforce_pp", "gdpo", "optimal_token_baseline",
                                           "tir_optimal_token_baseline"})


@pytest.mark.parametrize("name", GROUP_WRAPPERS)
def test_group_wrappers_refuse_bad_rewards_naming_the_argument(name):
    r, m, uid = _batch()
    bad = r.clone()
    bad[0, 2] = 1.0  # off the mask
    with pytest.raises(ValueError, match="^token_level_rewards: non-zero reward"):
        lb.BRIDGED[name](bad, m, uid)
    bad[0, 2] = float("nan")
    with pytest.raises(ValueError, match="^token_level_rewards: contains a non-finite value"):
        lb.BRIDGED[name](bad, m, uid)
    with pytest.raises(ValueError, match="^index"):
        lb.BRIDGED[name](r, m, None)
    with pytest.raises(ValueError, match="^response_mask"):
        lb.BRIDGED[name](r, m[:, :2], uid)


def test_group_ids_from_runs_and_from_np_unique_group_the_same_rows():
    for uid in (np.array(["b", "b", "a", "a", "a", "c"], dtype=object),  # consecutive runs
                np.array(["b", "a", "b", "c", "a", "a"], dtype=object),  # a uid in two runs
                np.array([7, 7, 3, 3, 9, 9]), np.array([[1], [1], [2], [2], [3], [3]])[:, 0]):
        ids = lb._group_ids(uid, len(uid)).numpy()
        same = uid[:, None] == uid[None, :]
        assert ids.dtype == np.int64 and np.array_equal(ids[:, None] == ids[None, :], same)


def test_rollouts_from_verl_is_a_valid_rollouts_with_default_labels():
    from labkit.core.rollouts import Rollouts
    from labkit.core.segments import default_labels
    r, m, uid = _big_batch()
    ro = lb.rollouts_from_verl(r, m, uid)
    full = _validated(r, m, uid)
    assert isinstance(ro, Rollouts) and ro.mask.dtype == torch.bool and torch.equal(ro.mask, full.mask)
    assert torch.equal(ro.rewards, r) and torch.equal(ro.tokens, full.tokens)
    for name, want in default_labels(full.mask).items():  # built on first read
        assert torch.equal(getattr(ro, name), want) and torch.equal(getattr(full, name), want)
    assert torch.equal(ro.n_steps, full.n_steps)
    # the public Rollouts keeps its own copy of the float mask: changing verl's tensor later changes nothing
    before = ro.mask_as(torch.float32).clone()
    m.zero_()
    assert torch.equal(ro.mask_as(torch.float32), before)
    # select / with_ give Rollouts that went through every check
    sub = ro.select([0, 2])
    assert type(sub) is Rollouts and torch.equal(sub.step_ids, full.step_ids[[0, 2]])
    changed = ro.with_(rewards=torch.zeros_like(r))
    assert type(changed) is Rollouts and torch.equal(changed.step_ids, full.step_ids)
    with pytest.raises(ValueError, match="^step_ids"):
        ro.with_(step_ids=torch.ones_like(full.step_ids))


def test_a_bool_mask_and_a_mask_of_another_dtype_give_the_same_advantages():
    r, m, uid = _big_batch()
    want = lb.labkit_grpo(r, m, uid)[0]
    assert torch.equal(lb.labkit_grpo(r, m.bool(), uid)[0], want)
    assert torch.equal(lb.labkit_grpo(r, m.double(), uid)[0], want)
    with pytest.raises(ValueError, match="^token_level_rewards: non-zero reward"):
        lb.labkit_grpo(r, m.bool().logical_not(), uid)


def test_kept_returns_follow_changes_to_rewards_mask_gamma_and_the_returns_themselves():
    from labkit.core.stats import discounted_returns
    r, m, uid = _big_batch(seed=6)
    ro = lb.rollouts_from_verl(r, m, uid)
    first = ro.returns(0.9)
    assert torch.equal(first, discounted_returns(r, m.bool(), 0.9))
    again = ro.returns(0.9)
    assert torch.equal(again, first) and again is not first  # a copy: changing it changes nothing kept
    again.zero_()
    assert torch.equal(ro.returns(0.9), first)
    assert torch.equal(ro.returns(1.0), discounted_returns(r, m.bool(), 1.0))  # another gamma
    first.zero_()  # the kept tensor itself changed: computed afresh
    assert torch.equal(ro.returns(1.0), discounted_returns(r, m.bool(), 1.0))
    doubled = 2.0 * ro.rewards
    ro.rewards.mul_(2.0)  # rewards changed in place
    assert torch.equal(ro.returns(1.0), discounted_returns(doubled, m.bool(), 1.0))
    ro.mask[:, 0] = False  # mask changed in place
    assert torch.equal(ro.returns(1.0), discounted_returns(doubled, ro.mask, 1.0))
