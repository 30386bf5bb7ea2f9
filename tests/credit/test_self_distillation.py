"""Self-distillation credit (labkit.credit.self_distillation): SDAR, CRAFT and OPID on hand-computed
cases, degenerate input and bad arguments.
"""

import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, spec
from labkit.credit.episode import grpo
from labkit.credit.self_distillation import craft, opid, sdar

from credit_cases import empty

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LN2 = math.log(2.0)
HALF = math.log(0.5)
QUARTER = math.log(0.25)
A = 0.5 / math.sqrt(0.5)  # GRPO on scores (1, 0): mean 0.5, unbiased std sqrt(0.5)


def pair(scores=(1.0, 0.0), logprob=HALF):
    """One group of two rows, two generated tokens each, the outcome on the last token; the
    student's log-probability of every token is ``logprob``."""
    rewards = torch.zeros(2, 2, dtype=torch.float64)
    rewards[:, 1] = torch.tensor(scores, dtype=torch.float64)
    return Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.ones(2, 2, dtype=torch.bool),
                    rewards=rewards, group_ids=torch.zeros(2, dtype=torch.long),
                    logprobs=torch.full((2, 2), logprob, dtype=torch.float64))


# the teacher: row 0 gaps (+ln 2, -ln 2), row 1 gaps (0, -ln 2) against the student's ln 0.5
TEACHER = torch.tensor([[0.0, QUARTER], [HALF, QUARTER]], dtype=torch.float64)


def test_registered_with_their_inputs():
    assert {"sdar", "craft", "opid"} <= set(ESTIMATORS)
    assert dict(spec("sdar").inputs) == {"teacher_logprobs": "teacher_logprobs"}
    assert dict(spec("craft").inputs) == {"teacher_logprobs": "teacher_logprobs"}
    assert dict(spec("opid").inputs) == {"conditioned_logprobs": "conditioned_logprobs"}
    assert {spec(n).status for n in ("sdar", "craft", "opid")} == {"stand-in"}


# --------------------------------------------------------------------------- SDAR
def test_sdar_hand_computed():
    ro = pair()
    c = sdar(ro, teacher_logprobs=TEACHER, eps=0.0)
    # gate sigmoid(ln 2) = 2/3, sigmoid(-ln 2) = 1/3, sigmoid(0) = 1/2
    # row 0: A + 2/3 ln 2, A - 1/3 ln 2 ; row 1: -A + 0, -A - 1/3 ln 2
    assert c.token[0].tolist() == pytest.approx([A + 2 / 3 * LN2, A - LN2 / 3])
    assert c.token[1].tolist() == pytest.approx([-A, -A - LN2 / 3])
    assert c.info["gate"][0].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert c.info["gap"][1].tolist() == pytest.approx([0.0, -LN2])
    assert c.level == "token"
    # coef 2 and a gate temperature ln 2 / ln 3: gate sigmoid(ln 3) = 3/4 on the +ln 2 token
    t = sdar(ro, teacher_logprobs=TEACHER, eps=0.0, coef=2.0, gate_temperature=LN2 / math.log(3.0))
    assert float(t.token[0, 0]) == pytest.approx(A + 2 * 0.75 * LN2)
    # the student's log-probabilities may be passed instead of read off the rollouts
    same = sdar(pair(logprob=-3.0), teacher_logprobs=TEACHER, logprobs=ro.logprobs, eps=0.0)
    assert torch.allclose(same.token, c.token)


def test_sdar_degenerate_input():
    ro = pair()
    g = grpo(ro).token
    assert torch.allclose(sdar(ro, teacher_logprobs=ro.logprobs).token, g)   # teacher = student
    assert torch.allclose(sdar(ro, teacher_logprobs=TEACHER, coef=0.0).token, g)
    flat = sdar(pair(scores=(1.0, 1.0)), teacher_logprobs=TEACHER)  # equal scores: the gap alone
    assert flat.token[1].tolist() == pytest.approx([0.0, -LN2 / 3])
    e = empty()
    z = torch.zeros(2, 3, dtype=torch.float64)
    assert sdar(e, teacher_logprobs=z, logprobs=z).token.abs().sum() == 0


def test_sdar_bad_input():
    ro = pair()
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        sdar(ro, teacher_logprobs=torch.full((2, 2), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        sdar(ro, teacher_logprobs=torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        sdar(ro, teacher_logprobs=torch.tensor([[float("nan"), 0.0], [0.0, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        sdar(ro, teacher_logprobs=None)
    with pytest.raises(ValueError, match="^gate_temperature"):
        sdar(ro, teacher_logprobs=TEACHER, gate_temperature=0.0)
    with pytest.raises(ValueError, match="^coef"):
        sdar(ro, teacher_logprobs=TEACHER, coef=-1.0)
    with pytest.raises(ValueError, match="^logprobs"):
        no_lp = Rollouts(tokens=ro.tokens, mask=ro.mask, rewards=ro.rewards, group_ids=ro.group_ids)
        sdar(no_lp, teacher_logprobs=TEACHER)
    with pytest.raises(TypeError, match="^tau"):
        sdar(ro, teacher_logprobs=TEACHER, tau=1.0)


# --------------------------------------------------------------------------- CRAFT
def test_craft_hand_computed():
    ro = pair()
    c = craft(ro, teacher_logprobs=TEACHER, eps=0.0)
    # sibling log-ratios L = (0, -ln 2): weights (1, 1/2) / 1.5 = (2/3, 1/3)
    # teacher-tilted mean 2/3 * 1 + 1/3 * 0 = 2/3; plain mean 1/2; delta = 1/6
    # in std units: (1/6) / sqrt(0.5) = 0.23570; linear gate = 0.23570
    d = (1 / 6) / math.sqrt(0.5)
    assert c.info["weights"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert c.info["delta"].tolist() == pytest.approx([d, d])
    assert c.token[0].tolist() == pytest.approx([A + d * LN2, A - d * LN2])
    assert c.token[1].tolist() == pytest.approx([-A, -A - d * LN2])
    # the hard gate distils with weight 1
    h = craft(ro, teacher_logprobs=TEACHER, eps=0.0, gate="hard")
    assert h.token[0].tolist() == pytest.approx([A + LN2, A - LN2])
    # kappa = 2: weights (1, 2^-1/2) / (1 + 2^-1/2): w_0 = 0.585786
    w0 = 1 / (1 + 2 ** -0.5)
    k = craft(ro, teacher_logprobs=TEACHER, eps=0.0, temperature=2.0)
    assert float(k.info["delta"][0]) == pytest.approx((w0 - 0.5) / math.sqrt(0.5))
    # the teacher prefers the failed sibling: delta = 1/3 - 1/2 < 0, nothing is distilled
    flipped = pair(scores=(0.0, 1.0))
    f = craft(flipped, teacher_logprobs=TEACHER, eps=0.0)
    assert float(f.info["delta"][0]) == pytest.approx(-d)
    assert torch.allclose(f.token, grpo(flipped, eps=0.0).token)


def test_craft_degenerate_input():
    ro = pair()
    assert torch.allclose(craft(ro, teacher_logprobs=ro.logprobs).token, grpo(ro).token)  # equal weights
    same = craft(pair(scores=(1.0, 1.0)), teacher_logprobs=TEACHER)  # equal scores: delta 0, A 0
    assert same.token.abs().sum() == 0 and same.info["delta"].abs().sum() == 0
    # a group of one: no sibling, delta 0, GRPO's singleton advantage
    one = Rollouts(tokens=ro.tokens, mask=ro.mask, rewards=ro.rewards, group_ids=torch.tensor([0, 1]),
                   logprobs=ro.logprobs)
    c = craft(one, teacher_logprobs=TEACHER)
    assert c.info["delta"].abs().sum() == 0
    assert torch.allclose(c.token, grpo(one).token)
    z = torch.zeros(2, 3, dtype=torch.float64)
    assert craft(empty(), teacher_logprobs=z, logprobs=z).token.abs().sum() == 0


def test_craft_bad_input():
    ro = pair()
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        craft(ro, teacher_logprobs=torch.full((2, 2), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="^teacher_logprobs"):
        craft(ro, teacher_logprobs=torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="^gate"):
        craft(ro, teacher_logprobs=TEACHER, gate="soft")
    with pytest.raises(ValueError, match="^temperature"):
        craft(ro, teacher_logprobs=TEACHER, temperature=0)
    with pytest.raises(ValueError, match="^eps"):
        craft(ro, teacher_logprobs=TEACHER, eps=-1.0)
    with pytest.raises(ValueError, match="^logprobs"):
        craft(ro, teacher_logprobs=TEACHER, logprobs=torch.ones(2, 2, dtype=torch.float64))


# --------------------------------------------------------------------------- OPID
def test_opid_hand_computed():
    ro = pair()
    # the skill moves row 0's tokens from 0.5 to 0.8 and 0.2: shifts ln 1.6, ln 0.4; row 1 has none
    lc = torch.tensor([[math.log(0.8), math.log(0.2)], [HALF, HALF]], dtype=torch.float64)
    c = opid(ro, conditioned_logprobs=lc, eps=0.0)
    assert c.token[0].tolist() == pytest.approx([A + math.log(1.6), A + math.log(0.4)])
    assert c.token[1].tolist() == pytest.approx([-A, -A])
    assert c.info["shift"][0].tolist() == pytest.approx([math.log(1.6), math.log(0.4)])
    half = opid(ro, conditioned_logprobs=lc, eps=0.0, coef=0.5)
    assert float(half.token[0, 0]) == pytest.approx(A + 0.5 * math.log(1.6))


def test_opid_degenerate_input():
    ro = pair()
    assert torch.allclose(opid(ro, conditioned_logprobs=ro.logprobs).token, grpo(ro).token)  # no skill
    lc = torch.tensor([[math.log(0.8), HALF], [HALF, HALF]], dtype=torch.float64)
    assert torch.allclose(opid(ro, conditioned_logprobs=lc, coef=0.0).token, grpo(ro).token)
    z = torch.zeros(2, 3, dtype=torch.float64)
    assert opid(empty(), conditioned_logprobs=z, logprobs=z).token.abs().sum() == 0


def test_opid_bad_input():
    ro = pair()
    with pytest.raises(ValueError, match="^conditioned_logprobs"):
        opid(ro, conditioned_logprobs=torch.full((2, 2), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="^conditioned_logprobs"):
        opid(ro, conditioned_logprobs=torch.zeros(2, 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="^conditioned_logprobs"):
        opid(ro, conditioned_logprobs=torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="^coef"):
        opid(ro, conditioned_logprobs=ro.logprobs, coef="1")
