"""Entropy-modulated credit (labkit.credit.entropy_modulation): EMPG, AEM and T2PO on hand-built rollouts."""

import dataclasses
import math

import pytest
import torch

from labkit.credit import estimate
from labkit.credit.entropy_modulation import aem, empg, t2po
from labkit.credit.episode import grpo, reinforce_pp

from turn_batches import turn_batch, turn_credit

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# two trajectories of one group, outcomes 1 and 0: GRPO gives +-0.5 / (std sqrt(0.5) + 1e-6)
A = 0.5 / (math.sqrt(0.5) + 1e-6)  # 0.70711


def _close(t, expected, atol):
    return torch.allclose(t, torch.tensor(expected, dtype=t.dtype), atol=atol)


def _two(entropies, rewards=((0, 1), (0, 0)), turn_len=1, tool=False, logprobs=None):
    ro = turn_batch([list(r) for r in rewards], groups=[0] * len(rewards), entropies=entropies,
                    turn_len=turn_len, tool=tool)
    if logprobs is not None:
        lp = torch.zeros_like(ro.entropies)
        for b, row in enumerate(logprobs):
            for k, v in enumerate(row):
                lp[b][(ro.turn_ids[b] == k) & ro.mask[b]] = v
        ro = dataclasses.replace(ro, logprobs=lp)
    return ro


# ------------------------------------------------------------------ EMPG
def test_empg_hand_case():
    # entropies [[0.2, 0.6], [1.0, 0.2]]: min 0.2, max 1.0 -> H~ = [[0, 0.5], [1, 0]]
    ro = _two([[0.2, 0.6], [1.0, 0.2]], turn_len=2, tool=True)
    c = empg(ro)
    e5, e1 = math.exp(-0.5), math.exp(-1.0)      # 0.60653, 0.36788
    mean_g = (1 + e5 + e1 + 1) / 4                # 0.74360
    g = [[1 / mean_g, e5 / mean_g], [e1 / mean_g, 1 / mean_g]]  # [[1.34481, 0.81567], [0.49473, 1.34481]]
    # bonus zeta f(H~ of the next turn): turn (0,0) -> 0.1 e^-0.5, turn (1,0) -> 0.1 e^0 = 0.1, last turns none
    mod = [[g[0][0] * A + 0.1 * e5, g[0][1] * A], [-g[1][0] * A + 0.1, -g[1][1] * A]]
    # = [[1.01158, 0.57677], [-0.24983, -0.95093]]; their mean 0.09690 is subtracted
    mean = sum(sum(r) for r in mod) / 4
    expected = torch.tensor([[m - mean for m in row] for row in mod], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), expected, atol=1e-6)
    assert torch.allclose(c.info["scale"], torch.tensor(g, dtype=torch.float64), atol=1e-6)
    assert c.info["scale"][ro.view(ro.rewards, "turn")[1]].mean().item() == pytest.approx(1.0, abs=1e-6)
    assert _close(c.info["bonus"], [[0.1 * e5, 0.0], [0.1, 0.0]], 1e-8)
    assert c.level == "turn" and c.values[c.present].sum().item() == pytest.approx(0.0, abs=1e-12)
    assert expected[0, 0].item() == pytest.approx(0.91468, abs=1e-4)
    # the registered wrapper gives the same
    assert torch.allclose(estimate("empg", ro).token, c.token)


def test_empg_degenerate_cases():
    # all-equal entropies: H~ = 0, g = 1, f = 1: A + 0.1 on a non-last turn, minus the mean
    ro = _two([[0.5, 0.5], [0.5, 0.5]])
    c = empg(ro)
    mod = [[A + 0.1, A], [-A + 0.1, -A]]
    mean = 0.05
    assert _close(turn_credit(c, ro), [[m - mean for m in r] for r in mod], 1e-6)
    # k = 0, zeta = 0: the base credit minus its batch mean over turns (here 0)
    ro2 = _two([[0.1, 0.9], [0.4, 0.3]])
    assert torch.allclose(empg(ro2, k_g=0.0, zeta=0.0).token, grpo(ro2).token)
    # one-turn trajectories: no bonus
    ro1 = _two([[0.3], [0.7]], rewards=((1,), (0,)))
    assert empg(ro1).info["bonus"].abs().sum().item() == 0.0
    # a base that varies inside a turn gives token credit
    ro3 = _two([[0.1, 0.9], [0.4, 0.3]], turn_len=2)
    tok = empg(ro3, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    assert tok.level == "token"
    base = reinforce_pp(ro3, gamma=0.9)
    turn_mean, present = base.at(ro3, "turn", "mean")
    flat = empg(ro3, k_g=0.0, zeta=0.0, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    assert torch.allclose(flat.token, torch.where(ro3.mask, base.token - turn_mean[present].mean(), 0.0))


def test_empg_bad_input():
    ro = _two([[0.2, 0.6], [1.0, 0.2]])
    with pytest.raises(ValueError, match="^entropies"):
        empg(dataclasses.replace(ro, entropies=None))
    with pytest.raises(ValueError, match="^k_g:"):
        empg(ro, k_g=-1.0)
    with pytest.raises(ValueError, match="^zeta:"):
        empg(ro, zeta=-0.1)
    with pytest.raises(ValueError, match="^base:"):
        empg(ro, base="empg")
    with pytest.raises(TypeError, match="^base_kwargs:"):
        empg(ro, base_kwargs=[1])


# ------------------------------------------------------------------ AEM
def test_aem_hand_case():
    # per turn: surprisal -log pi and entropy H; r = surprisal - H
    #   (0,0): 1.2 - 0.2 = 1.0  -> w = 1 + 0.5 tanh(1)    = 1.38080
    #   (0,1): 0.5 - 0.5 = 0    -> w = 1
    #   (1,0): 0.1 - 0.6 = -0.5 -> w = 1 - 0.5 tanh(0.5)  = 0.76894
    #   (1,1): 0.9 - 0.4 = 0.5  -> w = 1 + 0.5 tanh(0.5)  = 1.23106
    ro = _two([[0.2, 0.5], [0.6, 0.4]], turn_len=2, tool=True, logprobs=[[-1.2, -0.5], [-0.1, -0.9]])
    c = aem(ro)
    w = [[1 + 0.5 * math.tanh(1.0), 1.0], [1 - 0.5 * math.tanh(0.5), 1 + 0.5 * math.tanh(0.5)]]
    assert w[0][0] == pytest.approx(1.38080, abs=1e-5) and w[1][0] == pytest.approx(0.76894, abs=1e-5)
    expected = [[w[0][0] * A, w[0][1] * A], [-w[1][0] * A, -w[1][1] * A]]
    assert _close(turn_credit(c, ro), expected, 1e-6)
    assert _close(c.info["relative_surprisal"], [[1.0, 0.0], [-0.5, 0.5]], 1e-9)
    # entropy drift A r: a success on a surprising response raises the entropy, a failure on one lowers it
    assert _close(c.info["entropy_drift"], [[A, 0.0], [0.5 * A, -0.5 * A]], 1e-6)
    assert c.level == "turn"
    assert torch.allclose(estimate("aem", ro).token, c.token)


def test_aem_degenerate_and_bad_input():
    ro = _two([[0.2, 0.5], [0.6, 0.4]], logprobs=[[-1.2, -0.5], [-0.1, -0.9]])
    assert torch.allclose(aem(ro, beta=0.0).token, grpo(ro).token)
    # surprisal equal to the entropy everywhere: the base credit
    same = _two([[0.2, 0.5], [0.6, 0.4]], logprobs=[[-0.2, -0.5], [-0.6, -0.4]])
    assert torch.allclose(aem(same).token, grpo(same).token)
    # an all-equal group: zero base credit stays 0
    flat = _two([[0.2, 0.5], [0.6, 0.4]], rewards=((0, 1), (0, 1)), logprobs=[[-1.2, -0.5], [-0.1, -0.9]])
    assert aem(flat).token.abs().max().item() == 0.0
    with pytest.raises(ValueError, match="^logprobs"):
        aem(dataclasses.replace(ro, logprobs=None))
    with pytest.raises(ValueError, match="^entropies"):
        aem(dataclasses.replace(ro, entropies=None))
    with pytest.raises(ValueError, match="^beta:"):
        aem(ro, beta=1.5)
    with pytest.raises(ValueError, match="^tau:"):
        aem(ro, tau=0.0)
    with pytest.raises(ValueError, match="^base:"):
        aem(ro, base="aem")


# ------------------------------------------------------------------ T2PO
def test_t2po_hand_case():
    # entropies [[0.9, 0.5, 0.7], [0.3, 0.3]]; progress = H_k - H_{k+1}:
    #   (0,0): 0.4 > 0 kept; (0,1): -0.2 dropped; (0,2) last turn, kept
    #   (1,0): 0.0, not > 0, dropped; (1,1) last turn, kept
    ro = _two([[0.9, 0.5, 0.7], [0.3, 0.3]], rewards=((0, 0, 1), (0, 0)), turn_len=2, tool=True)
    c = t2po(ro)
    assert c.info["kept"].tolist() == [[True, False, True], [False, True, False]]
    assert _close(turn_credit(c, ro), [[A, 0.0, A], [0.0, -A, 0.0]], 1e-6)
    assert c.info["share_updated"] == pytest.approx(3 / 5)
    prog = c.info["progress"]
    assert prog[0, :2].tolist() == pytest.approx([0.4, -0.2]) and prog[1, 0].item() == pytest.approx(0.0)
    assert math.isnan(prog[0, 2].item()) and math.isnan(prog[1, 1].item())
    # a negative min_drop also keeps the no-change turn; a large one drops all but the last turns
    assert t2po(ro, min_drop=-0.1).info["kept"].tolist() == [[True, False, True], [True, True, False]]
    assert t2po(ro, min_drop=1.0).info["kept"].tolist() == [[False, False, True], [False, True, False]]
    assert torch.allclose(estimate("t2po", ro).token, c.token)


def test_t2po_degenerate_and_bad_input():
    ro = _two([[0.9, 0.5], [0.3, 0.3]])
    assert torch.allclose(t2po(ro, min_drop=-10.0).token, grpo(ro).token)
    one = _two([[0.3], [0.7]], rewards=((1,), (0,)))
    assert torch.allclose(t2po(one).token, grpo(one).token)  # one-turn trajectories keep everything
    with pytest.raises(ValueError, match="^entropies"):
        t2po(dataclasses.replace(ro, entropies=None))
    with pytest.raises((TypeError, ValueError), match="^min_drop:"):
        t2po(ro, min_drop="x")
    with pytest.raises(ValueError, match="^base:"):
        t2po(ro, base="t2po")
