"""ToolWorld's verifiable turn features and template grades (labkit.envs.toolworld.features), on a
hand-written transcript.
"""

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.envs.toolworld import RUN_TESTS, SEARCH, START, SUBMIT, TESTS_PASS, ToolWorld
from labkit.envs.toolworld.features import FEATURE_NAMES, reward_split, turn_features, verifiable_turn_rewards

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- ToolWorld features
def _transcript():
    """search -> hint 1; open 1 -> looks buggy; edit 1; run tests -> pass; submit (3 files)."""
    env = ToolWorld(3, max_turns=6)
    acts = [SEARCH, env.open_action(1), env.edit_action(1), RUN_TESTS, SUBMIT]
    obs = [START, env.hint_obs(1), env.buggy_obs(1), env.edited_obs(1), TESTS_PASS]
    after = [env.hint_obs(1), env.buggy_obs(1), env.edited_obs(1), TESTS_PASS, -1]
    T = env.max_turns
    pad = lambda x, v: torch.tensor([x + [v] * (T - len(x))])  # noqa: E731
    mask = pad([True] * 5, False)
    tid = torch.where(mask, torch.arange(T), -1)
    ro = Rollouts(tokens=pad(acts, 0), mask=mask, rewards=pad([0.0] * 4 + [1.0], 0.0), group_ids=torch.tensor([0]),
                  step_ids=tid.clone(), turn_ids=tid, states=pad(obs, 0),
                  truth={"observations_after": pad(after, -1)})
    return env, ro


def test_turn_features_on_a_hand_written_transcript():
    env, ro = _transcript()
    x = turn_features(env, ro)
    on = {n: x[0, :, i].tolist()[:5] for i, n in enumerate(FEATURE_NAMES)}
    assert on["search"] == [1, 0, 0, 0, 0] and on["open_hinted"] == [0, 1, 0, 0, 0]
    assert on["edit_flagged"] == [0, 0, 1, 0, 0] and on["submit_after_pass"] == [0, 0, 0, 0, 1]
    assert on["tests_passed_after"] == [0, 0, 0, 1, 0] and on["looked_buggy_after"] == [0, 1, 0, 0, 0]
    assert x.shape == (1, 5, len(FEATURE_NAMES)) and float(x[0].sum(-1).min()) >= 1  # N = turns played
    v = verifiable_turn_rewards(env, ro)
    assert v[0].tolist() == [0, 1, 1, 1, 0]
    only = verifiable_turn_rewards(env, ro, weights={"tests_pass": 2.0})
    assert only[0].tolist() == [0, 0, 0, 2, 0]
    with pytest.raises(ValueError, match="^weights"):
        verifiable_turn_rewards(env, ro, weights={"lucky": 1.0})
    with pytest.raises(ValueError, match="observations_after"):
        turn_features(env, ro.with_(truth={}))
    with pytest.raises(ValueError, match="^env"):
        turn_features(object(), ro)


def test_template_grades_follow_the_scripted_agent():
    from labkit.envs.toolworld.features import template_grades
    env, ro = _transcript()
    assert template_grades(env, ro)[0].tolist() == [1, 1, 1, 1, 1]
    wrong = ro.with_(tokens=torch.where(torch.arange(ro.horizon) == 1, env.edit_action(0), ro.tokens))
    assert template_grades(env, wrong)[0].tolist() == [1, -1, 1, 1, 1]
    # the scripted agent's own choices are exactly the templates
    pol = env.scripted_policy(50.0)
    sampled = env.sample(pol, 2, group_size=2, seed=0)
    g = template_grades(env, sampled)
    present = sampled.view(sampled.mask, "turn", "first")[1]
    assert bool((g[present] == 1).all())


def test_reward_split_adds_up_to_the_return():
    env = ToolWorld(3, max_turns=8, step_cost=0.05, find_reward=0.2, wrong_submit=0.5)
    r = env.sample(env.scripted_policy(1.0), 20, group_size=4, seed=0)
    turn, outcome = reward_split(env, r)
    assert torch.allclose(turn.sum(1) + outcome, r.scores.double(), atol=1e-12)
    success, submitted = r.truth["success"], ((r.tokens == SUBMIT) & r.mask).any(1)
    assert torch.equal(outcome, torch.where(success, 1.0, torch.where(submitted, -0.5, 0.0)).double())
    assert set(outcome.tolist()) == {1.0, -0.5, 0.0}
    # per turn: the cost, plus the find reward on an open of the buggy file before the fix
    found = (r.tokens == env.open_action(r.truth["bug"])[:, None]) & ~r.truth["fixed"] & r.mask
    assert torch.allclose(turn, torch.where(r.mask, -0.05 + 0.2 * found, 0.0).double())
    with pytest.raises(ValueError, match="^env"):
        reward_split(object(), r)
