"""ToolWorld's stand-ins for the self-distillation methods (labkit.envs.toolworld.teacher): the
privileged teacher from the exact Q, the hindsight skill writer and the skill-conditioned policy,
on hand-computed cases, and bad arguments.
"""

import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.env import SEARCH, START, SUBMIT
from labkit.envs.toolworld.teacher import (NO_SKILL, hindsight_skills, skill_conditioned_logprobs, student_logprobs,
                                           teacher_logprobs)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def exact_world():
    """Two files, two turns, tools without error: 8 actions, 12 observations."""
    return ToolWorld(2, max_turns=2, mislead=0.0, noise=0.0, flaky=0.0)


def hand_rollouts(env, rows, groups, scores):
    """Rollouts from hand-written episodes: ``rows`` is a list of [(observation, action), ...];
    the hidden states assume bug 1, not fixed before an edit of file 1."""
    T = max(len(r) for r in rows)
    B = len(rows)
    tokens = torch.zeros(B, T, dtype=torch.long)
    states = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    hidden = torch.full((B, T), -1, dtype=torch.long)
    rewards = torch.zeros(B, T, dtype=torch.float64)
    for b, row in enumerate(rows):
        fixed = 0
        for t, (o, a) in enumerate(row):
            tokens[b, t], states[b, t], mask[b, t] = a, o, True
            hidden[b, t] = env.hidden_index(1, fixed, o)
            fixed = max(fixed, int(a == env.edit_action(1)))
        rewards[b, len(row) - 1] = scores[b]
    turn_ids = torch.where(mask, torch.arange(T).expand(B, T), -1)
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, group_ids=torch.tensor(groups), step_ids=turn_ids,
                    turn_ids=turn_ids.clone(), states=states,
                    truth={"hidden_states": hidden, "success": torch.tensor(scores) > 0})


def test_teacher_hand_computed():
    env = exact_world()
    policy = env.make_policy()   # uniform over the 8 actions
    truth = env.truth(policy)
    # bug 1. Turn 0: only "edit 1" can still win, if turn 1 submits (1/8): Q_0 = 1/8 there, 0 elsewhere.
    # Turn 1 after the fix: Q_1(submit) = 1, 0 elsewhere.
    e1 = env.edit_action(1)
    ro = hand_rollouts(env, [[(START, e1), (env.edited_obs(1), SUBMIT)], [(START, SEARCH), (env.hint_obs(1), SUBMIT)]],
                       [0, 0], [1.0, 0.0])
    # tau = 1/8, w = 1: logits log(1/8) + (0, ..., 1 at edit 1): log pi_T(edit 1) = 1 - ln(7 + e)
    lt = teacher_logprobs(env, policy, truth, ro, tau=0.125)
    assert float(lt[0, 0]) == pytest.approx(1 - math.log(7 + math.e))
    assert float(lt[1, 0]) == pytest.approx(-math.log(7 + math.e))   # search, turn 0
    # turn 1 with tau = 1/8: submit's Q/tau = 8 after the fix; without the fix every Q is 0 (uniform)
    assert float(lt[0, 1]) == pytest.approx(8 - math.log(7 + math.exp(8)))
    assert float(lt[1, 1]) == pytest.approx(math.log(1 / 8))
    # w = 0: softmax(Q / tau) alone; with a uniform student it is the same teacher
    assert torch.allclose(teacher_logprobs(env, policy, truth, ro, tau=0.125, student_weight=0.0), lt)
    assert bool((lt <= 0).all())
    assert student_logprobs(env, policy, ro)[ro.mask].tolist() == pytest.approx([math.log(1 / 8)] * 4)


def test_teacher_tilts_the_student_toward_the_exact_advantage():
    env = ToolWorld(3, max_turns=10, mislead=0.2, noise=0.2, flaky=0.2)
    policy = env.scripted_policy(2.0)
    ro = env.sample(policy, 4, group_size=4, seed=0)
    truth = env.truth(policy)
    gap = teacher_logprobs(env, policy, truth, ro, tau=50.0) - student_logprobs(env, policy, ro)
    adv = truth.advantage(ro)
    # a hot teacher: log pi_T - log pi_S = (Q - log E_pi exp(Q / tau) tau) / tau ~ A / tau
    assert torch.allclose(gap[ro.mask], adv[ro.mask] / 50.0, atol=1e-3)


def test_hindsight_skills_and_the_conditioned_policy():
    env = exact_world()
    e0, e1, o1 = env.edit_action(0), env.edit_action(1), env.open_action(1)
    rows = [[(START, o1), (env.buggy_obs(1), e1), (env.edited_obs(1), SUBMIT)],   # group 0: success, edits 1
            [(START, e0), (env.edited_obs(0), SUBMIT)],                          # group 0: failure, edits 0
            [(START, SEARCH)],                                                   # group 1: failure
            [(START, e0), (env.edited_obs(0), e1), (env.edited_obs(1), SUBMIT)]]  # group 2: success, edits 0 then 1
    ro = hand_rollouts(env, rows, [0, 0, 1, 2], [1.0, 0.0, 0.0, 1.0])
    skills = hindsight_skills(env, ro)
    assert skills == {0: 1, 1: NO_SKILL, 2: 1}   # group 2: a tie in edits, broken by the last edit
    policy = env.make_policy()
    lc = skill_conditioned_logprobs(env, policy, ro, bonus=2.0)
    e2 = math.exp(2.0)
    # skill "file 1": open 1 and edit 1 get +2 everywhere: log p = 2 - ln(6 + 2 e^2), others -ln(6 + 2 e^2)
    assert float(lc[0, 0]) == pytest.approx(2 - math.log(6 + 2 * e2))
    assert float(lc[0, 1]) == pytest.approx(2 - math.log(6 + 2 * e2))
    # after "edited file 1" submit is boosted too: 2 - ln(5 + 3 e^2)
    assert float(lc[0, 2]) == pytest.approx(2 - math.log(5 + 3 * e2))
    assert float(lc[1, 0]) == pytest.approx(-math.log(6 + 2 * e2))   # edit 0 is not in the skill
    assert float(lc[2, 0]) == pytest.approx(math.log(1 / 8))         # no skill: the student's own
    assert float(lc[1, 1]) == pytest.approx(-math.log(6 + 2 * e2))   # submit after "edited file 0"
    assert lc[~ro.mask].abs().sum() == 0
    none = skill_conditioned_logprobs(env, policy, ro, skills={})
    assert torch.allclose(none, student_logprobs(env, policy, ro))


def test_bad_arguments():
    env = exact_world()
    policy = env.make_policy()
    truth = env.truth(policy)
    ro = env.sample(policy, 1, group_size=2, seed=0)
    with pytest.raises(ValueError, match="^tau"):
        teacher_logprobs(env, policy, truth, ro, tau=0.0)
    with pytest.raises(ValueError, match="^student_weight"):
        teacher_logprobs(env, policy, truth, ro, student_weight=-1.0)
    with pytest.raises(TypeError, match="^truth"):
        teacher_logprobs(env, policy, "truth", ro)
    with pytest.raises(ValueError, match="^policy"):
        teacher_logprobs(env, ToolWorld(3).make_policy(), truth, ro)
    other = ToolWorld(3, max_turns=2)
    with pytest.raises(ValueError, match="^truth"):
        teacher_logprobs(env, policy, other.truth(other.make_policy()), ro)
    with pytest.raises(ValueError, match="^bonus"):
        skill_conditioned_logprobs(env, policy, ro, bonus=-1.0)
    with pytest.raises(ValueError, match="^skills"):
        skill_conditioned_logprobs(env, policy, ro, skills={0: 5})
    with pytest.raises(TypeError, match="^skills"):
        skill_conditioned_logprobs(env, policy, ro, skills=[1])
    with pytest.raises(TypeError, match="^rollouts"):
        hindsight_skills(env, "rollouts")


def test_bench_inputs_feed_the_three_estimators():
    from labkit.bench.later_inputs import toolworld_teacher_inputs
    from labkit.credit import estimate
    env = ToolWorld(3, max_turns=8, mislead=0.2, noise=0.2, flaky=0.2)
    policy = env.scripted_policy(3.0)
    ro = env.sample(policy, 2, group_size=4, seed=0)
    inputs, overrides, provenance, costs = toolworld_teacher_inputs(env, policy, env.truth(policy), ro, seed=0)
    assert set(inputs) == {"teacher_logprobs"} and set(overrides) == {"opid"}
    assert all(v.startswith("STAND-IN") for v in provenance.values())
    assert {n: c.policy_forwards for n, c in costs.items()} == {"sdar": 8, "craft": 8, "opid": 8}
    for name in ("sdar", "craft"):
        assert bool(torch.isfinite(estimate(name, ro, **inputs).token).all())
    c = estimate("opid", ro, **overrides["opid"])
    assert bool(torch.isfinite(c.token).all()) and c.token[~ro.mask].abs().sum() == 0
