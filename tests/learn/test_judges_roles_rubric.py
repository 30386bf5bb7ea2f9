"""The ToolWorld judge stand-ins (labkit.learn.judges): TRIAGE's role judge with the belief's movement
it reads, and the rubric grader with the exact rubric checks; each errs as often as it says.
"""

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.envs.toolworld import ToolWorld
from labkit.learn.judges import (RUBRIC_CRITERIA, RUBRIC_WEIGHTS, TURN_ROLES, belief_movement, rubric_checks,
                                 stand_in_rubric_verdicts, stand_in_turn_roles)

from turn_batches import scored_turns

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_role_judge_labels_by_hand():
    ro = scored_turns([3, 2], [1.0, 0.0], [0, 0])
    adv = torch.tensor([[0.3, 0.0, -0.2], [0.05, -0.05, 0.0]], dtype=torch.float64)
    info = torch.tensor([[0.0, 0.4, 0.9], [0.2, 0.01, 0.0]], dtype=torch.float64)
    roles = stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=0.0)
    # A > 0.1: decisive (3); A < -0.1: regression (0) whatever the information;
    # |A| <= 0.1 and moved > 0.05: exploration (2); else plumbing (1); the absent turn: 0
    assert torch.equal(roles, torch.tensor([[3.0, 2.0, 0.0], [2.0, 1.0, 0.0]], dtype=torch.float64))
    tight = stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=0.0, threshold=0.01,
                                info_threshold=0.5)
    assert torch.equal(tight, torch.tensor([[3.0, 1.0, 0.0], [3.0, 0.0, 0.0]], dtype=torch.float64))
    assert TURN_ROLES[3] == "decisive" and TURN_ROLES[0] == "regression"


def test_role_judge_error_rate_is_what_it_says():
    ro = scored_turns([200] * 4, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1])
    adv = torch.linspace(-1, 1, 800).reshape(4, 200).double()
    info = torch.rand(4, 200, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1
    exact = stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=0.0)
    noisy = stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=0.3, seed=3)
    wrong = noisy != exact
    assert abs(float(wrong.double().mean()) - 0.3) < 0.05
    assert set(noisy.unique().tolist()) <= {0.0, 1.0, 2.0, 3.0}
    # a wrong label is one of the three others, drawn uniformly
    shares = torch.bincount(torch.remainder(noisy[wrong] - exact[wrong], 4).long(), minlength=4)[1:].double()
    assert float(shares.min()) > 0.25 * float(shares.sum())
    assert torch.equal(noisy, stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=0.3, seed=3))
    everything = stand_in_turn_roles(ro, advantage=adv, information=info, error_rate=1.0)
    assert bool((everything != exact).all())


def test_role_judge_bad_arguments():
    ro = scored_turns([2, 1], [1.0, 0.0], [0, 0])
    z = torch.zeros(2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="^error_rate"):
        stand_in_turn_roles(ro, advantage=z, information=z, error_rate=1.5)
    with pytest.raises(ValueError, match="^advantage"):
        stand_in_turn_roles(ro, advantage=torch.zeros(2, 3), information=z)
    with pytest.raises(ValueError, match="^information"):
        stand_in_turn_roles(ro, advantage=z, information=torch.zeros(3, 2))
    with pytest.raises(ValueError, match="^information"):
        stand_in_turn_roles(ro, advantage=z, information=torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="^threshold"):
        stand_in_turn_roles(ro, advantage=z, information=z, threshold=-0.1)
    with pytest.raises(ValueError, match="^info_threshold"):
        stand_in_turn_roles(ro, advantage=z, information=z, info_threshold=-0.1)


def test_belief_movement_on_a_toolworld():
    env = ToolWorld(3, max_turns=8, mislead=0.2, noise=0.2, flaky=0.2)
    pol = env.scripted_policy(3.0)
    ro = env.sample(pol, 4, group_size=4, seed=0)
    moved = belief_movement(env, env.truth(pol), ro)
    assert moved.shape == ro.mask.shape
    assert bool((moved >= 0).all() & (moved <= 1 + 1e-12).all())
    assert bool((moved[~ro.mask] == 0).all())
    last = ro.mask.sum(1) - 1
    assert bool((moved[torch.arange(ro.batch_size), last] == 0).all())
    # a search answers with a hint about the bug's location: some search moved the belief
    assert bool((moved[(ro.tokens == 1) & ro.mask] > 0).any())
    # "think" answers "thought", which says nothing about the bug
    think = (ro.tokens == 0) & ro.mask
    assert bool((moved[think] < 1e-12).all())


def _hand_episodes():
    """Two ToolWorld(3) episodes written by hand: bug in file 1, fixed, tested, submitted; bug in file 0,
    the agent thinks three times (a loop) and times out."""
    # actions: think 0, search 1, run tests 2, submit 3, open j 4 + j, edit j 7 + j
    # observations: start 0, thought 1, tests pass 2, file j looks buggy 7 + j, edited file j 13 + j
    tokens = torch.tensor([[5, 8, 2, 3], [0, 0, 0, 0]])
    states = torch.tensor([[0, 8, 14, 2], [0, 1, 1, 0]])
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    fixed = torch.tensor([[False, False, True, True], [False] * 4])
    return Rollouts(tokens=torch.where(mask, tokens, 0), mask=mask, rewards=torch.zeros(2, 4, dtype=torch.float64),
                    states=torch.where(mask, states, 0),
                    truth={"bug": torch.tensor([1, 0]), "fixed": fixed, "success": torch.tensor([True, False])})


def test_rubric_checks_by_hand():
    env = ToolWorld(3, max_turns=4)
    checks = rubric_checks(env, _hand_episodes())
    assert len(RUBRIC_CRITERIA) == checks.shape[1] == len(RUBRIC_WEIGHTS)
    # row 0: opened file 1, edited it, ran the tests after the fix, submitted fixed, no loop
    # row 1: nothing of it, and the third "think" repeats the second on the same "thought"
    assert torch.equal(checks, torch.tensor([[1.0] * 5, [0.0] * 5], dtype=torch.float64))
    assert abs(sum(RUBRIC_WEIGHTS) - 1.0) < 1e-12


def test_rubric_checks_agree_with_the_world_on_samples():
    env = ToolWorld(3, max_turns=10, mislead=0.2, noise=0.2, flaky=0.2)
    ro = env.sample(env.scripted_policy(3.0), 8, group_size=4, seed=1)
    checks = rubric_checks(env, ro)
    assert torch.equal(checks[:, 3], ro.truth["success"].double())
    # whoever submitted with the bug fixed edited the buggy file
    assert bool((checks[:, 1] >= checks[:, 3]).all())
    fixed_ever = (ro.truth["fixed"] & ro.mask).any(1) | ro.truth["success"]
    assert bool((checks[:, 1].bool() | ~fixed_ever).all())


def test_rubric_grader_error_rate_is_what_it_says():
    env = ToolWorld(3, max_turns=10, mislead=0.2, noise=0.2, flaky=0.2)
    ro = env.sample(env.scripted_policy(3.0), 100, group_size=4, seed=2)
    exact = rubric_checks(env, ro)
    assert torch.equal(stand_in_rubric_verdicts(env, ro, error_rate=0.0), exact)
    noisy = stand_in_rubric_verdicts(env, ro, error_rate=0.2, seed=5)
    assert abs(float((noisy != exact).double().mean()) - 0.2) < 0.03
    assert set(noisy.unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(noisy, stand_in_rubric_verdicts(env, ro, error_rate=0.2, seed=5))
    assert torch.equal(stand_in_rubric_verdicts(env, ro, error_rate=1.0), 1 - exact)


def test_rubric_grader_bad_arguments():
    env = ToolWorld(3, max_turns=4)
    ro = _hand_episodes()
    with pytest.raises(ValueError, match="^error_rate"):
        stand_in_rubric_verdicts(env, ro, error_rate=-0.1)
    with pytest.raises(TypeError, match="^env"):
        rubric_checks("not a world", ro)
    with pytest.raises(ValueError, match="^rollouts.truth"):
        rubric_checks(env, ro.with_(truth={}))
