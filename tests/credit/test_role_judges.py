"""TRIAGE and Rubric-Grounded RL (labkit.credit.role_judges): hand-computed cases on tiny hand-built
Rollouts, the degenerate inputs each docstring promises, and bad arguments raising errors that name
the argument.
"""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit import estimate
from labkit.credit.episode import grpo
from labkit.credit.role_judges import rubric_rl, triage

from turn_batches import scored_turns, turn_values

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- TRIAGE
def test_triage_hand_computed():
    # rows: 2 turns (success), 3 turns (failure) in group 0; 1 turn (success) alone in group 1
    ro = scored_turns([2, 3, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    roles = torch.tensor([[3., 1, 0], [2, 0, 2], [2, 0, 0]])   # labels past a row's end are ignored
    c = triage(ro, roles=roles, cap=0.5, eps=0.0)
    o = 0.5 / math.sqrt(0.5)   # GRPO: (1 - 0.5) / unbiased std of {1, 0}
    # lookup (-0.5, 0, 0.25, 0.5):
    # row 0: rho = [0.5, 0], |sum| 0.5 <= cap 0.5 -> scale 1
    # row 1: rho = [0.25, -0.5, 0.25], |sum| 1.0 > 0.5 -> scale 0.5 -> [0.125, -0.25, 0.125]
    # row 2: a group of one keeps its raw outcome 1, rho = [0.25]
    want = torch.tensor([[o + 0.5, o, 0], [-o + 0.125, -o - 0.25, -o + 0.125], [1.25, 0, 0]], dtype=torch.float64)
    assert c.level == "turn" and c.method == "triage"
    assert torch.allclose(turn_values(c), want)
    assert torch.allclose(c.info["scale"], torch.tensor([1.0, 0.5, 1.0], dtype=torch.float64))
    assert c.cost == Cost()
    # the failed run's exploration turns rank above its regression; the successful run's decisive turn on top
    assert turn_values(c)[1, 0] > turn_values(c)[1, 1] and turn_values(c)[0, 0] > turn_values(c)[0, 1]
    # a callable judge costs one call per trajectory
    assert triage(ro, roles=lambda r: roles).cost.aux_calls == 3
    # another lookup, no cap in reach
    c2 = triage(ro, roles=roles, role_rewards=(-1.0, 0.0, 0.0, 1.0), cap=10.0, eps=0.0)
    assert torch.allclose(turn_values(c2)[1], torch.tensor([-o, -o - 1.0, -o], dtype=torch.float64))
    assert torch.equal(triage(ro, roles=roles).token, estimate("triage", ro, roles=roles).token)


def test_triage_degenerate():
    ro = scored_turns([2, 3, 1], [1.0, 0.0, 0.0], [0, 0, 1])
    plumbing = torch.ones(3, 3)
    any_roles = torch.tensor([[3., 0, 0], [2, 2, 0], [3, 0, 0]])
    grpo_token = grpo(ro).token.to(torch.float64)
    # all-plumbing roles or a zero cap: plain GRPO on every turn
    assert torch.allclose(triage(ro, roles=plumbing).token, grpo_token)
    assert torch.allclose(triage(ro, roles=any_roles, cap=0.0).token, grpo_token)
    # equal outcomes: the roles alone rank the turns
    same = scored_turns([2, 2], [1.0, 1.0], [0, 0])
    c = triage(same, roles=torch.tensor([[3., 1], [0, 2]]))
    assert torch.allclose(turn_values(c), torch.tensor([[0.5, 0.0], [-0.5, 0.25]], dtype=torch.float64))


def test_triage_bad_arguments():
    ro = scored_turns([2, 1], [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="^roles"):
        triage(ro)
    with pytest.raises(ValueError, match="^roles"):
        triage(ro, roles=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="^roles"):
        triage(ro, roles=torch.full((2, 2), 4.0))
    with pytest.raises(ValueError, match="^roles"):
        triage(ro, roles=torch.full((2, 2), 1.5))
    with pytest.raises(ValueError, match="^roles"):
        triage(ro, roles=torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="^role_rewards"):
        triage(ro, roles=torch.ones(2, 2), role_rewards=(0.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="^role_rewards"):
        triage(ro, roles=torch.ones(2, 2), role_rewards=(0.0, 1.0, 2.0, float("inf")))
    with pytest.raises(TypeError, match="^role_rewards"):
        triage(ro, roles=torch.ones(2, 2), role_rewards="abcd")
    with pytest.raises(ValueError, match="^cap"):
        triage(ro, roles=torch.ones(2, 2), cap=-1.0)
    with pytest.raises(TypeError, match="^cap"):
        triage(ro, roles=torch.ones(2, 2), cap="big")


# --------------------------------------------------------------------------- Rubric-Grounded RL
def test_rubric_rl_hand_computed():
    ro = scored_turns([2, 1, 3, 2], [1.0, 0.0, 0.0, 1.0], [0, 0, 0, 1])
    v = torch.tensor([[1., 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]])
    w = torch.tensor([0.5, 0.25, 0.25])
    # graded rewards g = [0.75, 0.5, 0, 1]; group 0 mean 5/12, deviations [1/3, 1/12, -5/12]
    c = rubric_rl(ro, rubric_verdicts=v, rubric_weights=w, normalize_std=False)
    assert c.level == "episode" and c.method == "rubric_rl"
    assert torch.allclose(c.info["graded_reward"], torch.tensor([0.75, 0.5, 0.0, 1.0], dtype=torch.float64))
    assert torch.allclose(c.values[:, 0], torch.tensor([1 / 3, 1 / 12, -5 / 12, 1.0], dtype=torch.float64))
    # with the std: unbiased variance of {0.75, 0.5, 0} = (1/9 + 1/144 + 25/144) / 2 = 7/48
    s = rubric_rl(ro, rubric_verdicts=v, rubric_weights=w, eps=0.0)
    sd = math.sqrt(7 / 48)
    assert torch.allclose(s.values[:, 0], torch.tensor([1 / 3 / sd, 1 / 12 / sd, -5 / 12 / sd, 1.0],
                                                       dtype=torch.float64))
    # every turn of a trajectory takes its value
    assert torch.allclose(s.token[2, :3], torch.full((3,), -5 / 12 / sd, dtype=torch.float64))
    # weights are normalised to sum 1: (2, 1, 1) is the same rubric
    assert torch.allclose(rubric_rl(ro, rubric_verdicts=v, rubric_weights=[2.0, 1.0, 1.0]).token, s.token, atol=1e-5)
    # default: equal weights, g = [2/3, 1/3, 0, 1]
    eq = rubric_rl(ro, rubric_verdicts=v, normalize_std=False)
    assert torch.allclose(eq.values[:, 0], torch.tensor([1 / 3, 0.0, -1 / 3, 1.0], dtype=torch.float64))
    assert eq.cost == Cost() and rubric_rl(ro, rubric_verdicts=lambda r: v).cost.aux_calls == 4


def test_rubric_rl_partial_credit_separates_runs_pass_fail_does_not():
    # two failed runs of one task: pass / fail gives both 0, the rubric ranks the one that got further
    ro = scored_turns([3, 3, 2], [0.0, 0.0, 1.0], [0, 0, 0])
    v = torch.tensor([[1., 1, 0], [0, 0, 0], [1, 1, 1]])   # last item = the outcome
    c = rubric_rl(ro, rubric_verdicts=v)
    g = grpo(ro)
    assert math.isclose(float(g.values[0, 0]), float(g.values[1, 0]))
    assert float(c.values[0, 0]) > float(c.values[1, 0])


def test_rubric_rl_degenerate():
    ro = scored_turns([2, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    v = torch.tensor([[1., 0], [1, 0], [1, 1]])
    c = rubric_rl(ro, rubric_verdicts=v)
    # equal graded rewards in group 0 give 0 (0 / eps); the group of one keeps its raw graded reward / (1 + eps)
    assert torch.allclose(c.values[:, 0], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64), atol=1e-5)
    one = rubric_rl(ro, rubric_verdicts=v[:, :1])   # a one-item rubric
    assert torch.allclose(one.info["graded_reward"], torch.ones(3, dtype=torch.float64))


def test_rubric_rl_bad_arguments():
    ro = scored_turns([2, 1], [1.0, 0.0], [0, 0])
    good = torch.ones(2, 3)
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro)
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro, rubric_verdicts=torch.ones(3, 3))
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro, rubric_verdicts=torch.ones(2))
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro, rubric_verdicts=torch.ones(2, 0))
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro, rubric_verdicts=torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="^rubric_verdicts"):
        rubric_rl(ro, rubric_verdicts=torch.full((2, 3), float("nan")))
    with pytest.raises(ValueError, match="^rubric_weights"):
        rubric_rl(ro, rubric_verdicts=good, rubric_weights=[0.5, 0.5])
    with pytest.raises(ValueError, match="^rubric_weights"):
        rubric_rl(ro, rubric_verdicts=good, rubric_weights=[1.0, -0.5, 0.5])
    with pytest.raises(ValueError, match="^rubric_weights"):
        rubric_rl(ro, rubric_verdicts=good, rubric_weights=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="^rubric_weights"):
        rubric_rl(ro, rubric_verdicts=good, rubric_weights=[1.0, float("nan"), 0.0])
    with pytest.raises(ValueError, match="^eps"):
        rubric_rl(ro, rubric_verdicts=good, eps=-1.0)
