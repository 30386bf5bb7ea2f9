"""Agentic judges and turn rewards: TARL, LaRe, Turn-Level Reward Design, their stand-ins and the judge-error curve.

Small rollouts are built by hand so the expected numbers can be worked out on paper; the
ToolWorld features are checked on one hand-written transcript.
"""
import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.credit.episode import grpo
from labkit.credit.judge import lare, tarl
from labkit.credit.process import turn_reward_design
from labkit.envs.toolworld import RUN_TESTS, SEARCH, START, SUBMIT, TESTS_PASS, ToolWorld
from labkit.envs.toolworld.features import FEATURE_NAMES, turn_features, verifiable_turn_rewards
from labkit.course.nb08_hindsight_counterfactual import judge_error_curve
from labkit.learn.judges import LatentRewardRegressor, corrupt_features, stand_in_turn_grades
from labkit.scoring import rank_correlation

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make(n_turns, scores, groups):
    """One position per turn; trajectory b has n_turns[b] turns and its score on the last one."""
    B, T = len(n_turns), max(n_turns)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    for b, (n, s) in enumerate(zip(n_turns, scores)):
        mask[b, :n] = True
        tid[b, :n] = torch.arange(n)
        rew[b, n - 1] = s
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=torch.tensor(groups), step_ids=tid.clone(), turn_ids=tid)


def turns(credit):
    return torch.where(credit.present.bool(), credit.values, 0.0)


def test_registered():
    assert {"tarl", "lare", "turn_reward_design"} <= set(ESTIMATORS)


# --------------------------------------------------------------------------- TARL
def test_tarl_hand_computed():
    ro = make([2, 3, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    g = torch.tensor([[1., -1, 0], [0, 1, -1], [1, 0, 0]])
    c = tarl(ro, grades=g, grade_weight=0.5, eps=0.0)
    o = 0.5 / math.sqrt(0.5)  # (1 - 0.5) / unbiased std of {1, 0}
    want = torch.tensor([[o + 0.5, o - 0.5, 0], [-o, -o + 0.5, -o - 0.5], [1.5, 0, 0]], dtype=torch.float64)
    assert c.level == "turn" and torch.allclose(turns(c), want)
    assert c.cost == Cost()
    called = tarl(ro, grades=lambda r: g)
    assert called.cost.aux_calls == 3


def test_tarl_degenerate():
    ro = make([2, 3, 1], [1.0, 1.0, 0.0], [0, 0, 1])
    zero = torch.zeros(3, 3)
    # all-neutral grades: plain GRPO on every turn
    assert torch.allclose(tarl(ro, grades=zero).token, grpo(ro).token.to(torch.float64))
    # equal outcomes in group 0: only the grades move its turns; the singleton keeps its raw outcome 0
    g = torch.tensor([[1., 0, 0], [-1, 1, 0], [1, 0, 0]])
    c = tarl(ro, grades=g)
    assert torch.allclose(turns(c), torch.where(c.present.bool(), g.double(), 0.0))


def test_tarl_bad_arguments():
    ro = make([2, 1], [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro)
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro, grades=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro, grades=torch.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="^grade_weight"):
        tarl(ro, grades=torch.zeros(2, 2), grade_weight=float("nan"))


def test_stand_in_turn_grades_error_rate():
    ro = make([200] * 4, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1])
    adv = torch.linspace(-1, 1, 800).reshape(4, 200).double()
    exact = stand_in_turn_grades(ro, advantage=adv, error_rate=0.0, tolerance=0.1)
    want = torch.where(adv > 0.1, 1.0, torch.where(adv < -0.1, -1.0, 0.0))
    assert torch.equal(exact, want)
    noisy = stand_in_turn_grades(ro, advantage=adv, error_rate=0.3, tolerance=0.1, seed=3)
    wrong = float((noisy != exact).double().mean())
    assert abs(wrong - 0.3) < 0.05 and set(noisy.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert torch.equal(noisy, stand_in_turn_grades(ro, advantage=adv, error_rate=0.3, tolerance=0.1, seed=3))
    with pytest.raises(ValueError, match="^error_rate"):
        stand_in_turn_grades(ro, advantage=adv, error_rate=1.5)
    with pytest.raises(ValueError, match="^advantage"):
        stand_in_turn_grades(ro, advantage=adv[:, :3])


# --------------------------------------------------------------------------- LaRe
def test_lare_hand_computed():
    ro = make([2, 3, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    r = torch.tensor([[0.5, 0.25, 0], [0.0, -0.5, 1.0], [2.0, 0, 0]])
    c = lare(ro, step_rewards=r)
    # G: [0.75, 0.25], [0.5, 0.5, 1.0], [2.0]; baseline group 0 = (0.75 + 0.5) / 2, group 1 = 2.0 (itself)
    want = torch.tensor([[0.125, -0.375, 0], [-0.125, -0.125, 0.375], [0, 0, 0]], dtype=torch.float64)
    assert torch.allclose(turns(c), want)
    half = lare(ro, step_rewards=r, gamma=0.5)
    assert math.isclose(float(half.info["returns"][1, 0]), 0.0 + 0.5 * (-0.5 + 0.5 * 1.0))
    per_step = lare(ro, step_rewards=r, target="reward")
    mean0 = (0.5 + 0.25 + 0.0 - 0.5 + 1.0) / 5
    assert math.isclose(float(turns(per_step)[1, 2]), 1.0 - mean0)
    assert math.isclose(float(turns(per_step)[2, 0]), 0.0)  # a group of one compares with itself
    assert lare(ro, step_rewards=lambda x: r).cost.aux_calls == 3


def test_lare_degenerate_and_bad_arguments():
    ro = make([1], [1.0], [0])
    assert torch.allclose(lare(ro, step_rewards=torch.tensor([[0.7]])).token, torch.zeros(1, 1, dtype=torch.float64))
    ro2 = make([2, 2], [1.0, 0.0], [0, 1])
    assert torch.allclose(lare(ro2, step_rewards=torch.zeros(2, 2)).token, torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="^step_rewards"):
        lare(ro2)
    with pytest.raises(ValueError, match="^step_rewards"):
        lare(ro2, step_rewards=torch.tensor([[float("nan"), 0], [0, 0]]))
    with pytest.raises(ValueError, match="^target"):
        lare(ro2, step_rewards=torch.zeros(2, 2), target="q")


def test_latent_reward_regressor_recovers_a_decomposable_return():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(40, 6, 3, generator=g) < 0.4).double()
    present = torch.ones(40, 6, dtype=torch.bool)
    present[:10, 4:] = False
    x = torch.where(present[..., None], x, 0.0)
    w = torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)
    R = (x @ w).sum(1)
    reg = LatentRewardRegressor(ridge=0.0, feature_names=("a", "b", "c")).fit(x, R, present)
    assert torch.allclose(reg.weights, w, atol=1e-8) and reg.r2 > 1 - 1e-9
    assert torch.allclose(reg.step_rewards(x, present).sum(1), R)
    assert set(reg.table()) == {"a", "b", "c"}
    with pytest.raises(ValueError, match="^returns"):
        reg.fit(x, R[:5])
    with pytest.raises(ValueError, match="^features"):
        reg.fit(x[0], R)
    with pytest.raises(ValueError, match="fit"):
        LatentRewardRegressor().step_rewards(x)
    flipped = corrupt_features(x, error_rate=1.0, present=present)
    assert torch.equal(flipped[present], 1 - x[present]) and bool((flipped[~present] == 0).all())


# --------------------------------------------------------------------------- Turn-Level Reward Design
def test_turn_reward_design_hand_computed():
    ro = make([3, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    v = torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 0, 0]])
    c = turn_reward_design(ro, turn_rewards=v, turn_weight=0.5, eps=0.0)
    s = 0.5 / math.sqrt(0.5)  # (x - mean) / std for a pair {1, 0}
    # index 0: {1, 0} -> +s, -s; index 1: {0, 1} -> -s, +s; index 2: only row 0 (raw 1); row 2 alone (raw 1)
    T = torch.tensor([[s, -s, 1.0], [-s, s, 0], [1.0, 0, 0]], dtype=torch.float64)
    assert torch.allclose(c.info["turn_term"], T)
    later = torch.tensor([[s - s + 1, -s + 1, 1], [-s + s, s, 0], [1, 0, 0]], dtype=torch.float64)
    O = torch.tensor([s, -s, 1.0], dtype=torch.float64)
    want = torch.where(c.present.bool(), 0.5 * later + O[:, None], 0.0)
    assert torch.allclose(turns(c), want)


def test_turn_reward_design_degenerate_and_bad_arguments():
    ro = make([3, 2, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    c = turn_reward_design(ro, turn_rewards=torch.zeros(3, 3))
    assert torch.allclose(c.token, grpo(ro).token.to(torch.float64))
    assert turn_reward_design(ro, turn_rewards=lambda r: torch.zeros(3, 3)).cost.aux_calls == 3
    with pytest.raises(ValueError, match="^turn_rewards"):
        turn_reward_design(ro)
    with pytest.raises(ValueError, match="^turn_rewards"):
        turn_reward_design(ro, turn_rewards=torch.zeros(3, 2))
    with pytest.raises(TypeError, match="^turn_weight"):
        turn_reward_design(ro, turn_rewards=torch.zeros(3, 3), turn_weight="big")


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


# --------------------------------------------------------------------------- the judge-error curve
def test_judge_error_curve_falls_with_the_error_rate():
    env = ToolWorld(3, max_turns=12, mislead=0.3, noise=0.3, flaky=0.3)
    pol = env.scripted_policy(2.0)
    ro = env.sample(pol, 8, group_size=4, seed=0)
    truth = env.truth(pol)
    df = judge_error_curve(env, pol, ro, truth, score=rank_correlation, error_rates=(0.0, 0.6), seeds=(0, 1))
    assert set(df.columns) == {"method", "error_rate", "seed", "score"} and len(df) == 8
    mean = df.groupby(["method", "error_rate"]).score.mean()
    assert mean[("tarl", 0.0)] > mean[("tarl", 0.6)] + 0.1
    with pytest.raises(TypeError, match="^score"):
        judge_error_curve(env, pol, ro, truth, score="spearman")


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
