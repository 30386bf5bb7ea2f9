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
