"""Skill against luck (labkit.scoring.luck): the one least-squares fit, the variance share of luck,
and the regression notebook 08 reads, at the reference points whose answer is known exactly."""
import math

import pytest
import torch

from labkit.core.credit import Credit
from labkit.course.presets import scripted_agent_setup
from labkit.credit import get_estimator
from labkit.scoring import luck_after, luck_per_skill, luck_regression, luck_share, skill_luck_fit


@pytest.fixture(scope="module")
def small():
    env, policy = scripted_agent_setup(0.3, n_files=3, max_turns=10)
    truth = env.truth(policy)
    ro = env.sample(policy, 6, group_size=4, seed=0)
    return env, policy, truth, ro


def test_the_fit_is_plain_least_squares_with_an_intercept():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(50, generator=g, dtype=torch.float64), torch.randn(50, generator=g, dtype=torch.float64)
    y = 0.3 + 2.0 * x1 - 0.5 * x2 + 0.01 * torch.randn(50, generator=g, dtype=torch.float64)
    fit = skill_luck_fit(y, {"skill": x1, "luck_after": x2})
    Z = torch.stack([torch.ones_like(y), x1, x2], 1)
    beta = torch.linalg.lstsq(Z, y[:, None]).solution[:, 0]
    # the same least squares: torch's default lstsq driver (gelsy) can differ in the last bit from one
    # call to the next on the same input, so the comparison allows a few ulps
    assert set(fit) == {"skill", "luck_after"}
    assert fit["skill"] == pytest.approx(float(beta[1]), rel=1e-12)
    assert fit["luck_after"] == pytest.approx(float(beta[2]), rel=1e-12)
    assert luck_per_skill(fit) == fit["luck_after"] / fit["skill"]


def test_a_regressor_without_spread_is_dropped_with_a_nan_coefficient():
    x = torch.linspace(-1, 1, 20, dtype=torch.float64)
    fit = skill_luck_fit(3 * x, {"skill": x, "luck_after": torch.zeros_like(x)})
    assert fit["skill"] == pytest.approx(3.0) and math.isnan(fit["luck_after"])
    assert math.isnan(luck_per_skill(fit))
    assert math.isnan(luck_per_skill({"skill": 0.0, "luck_after": 1.0}))  # no skill signal to compare with
    assert math.isnan(luck_per_skill({"skill": float("nan"), "luck_after": 1.0}))


def test_the_fit_refuses_bad_input_naming_the_argument():
    x = torch.ones(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="^credit"):
        skill_luck_fit(torch.ones(2, 2), {"skill": x})
    with pytest.raises(ValueError, match="^regressors"):
        skill_luck_fit(x, {})
    with pytest.raises(ValueError, match="^regressors"):
        skill_luck_fit(x, {"skill": torch.ones(3)})
    with pytest.raises(ValueError, match="^credit"):
        skill_luck_fit(torch.tensor([1.0, float("nan")]), {"skill": torch.ones(2)})


def test_luck_share_is_the_variance_share_of_summed_luck():
    skill = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert luck_share(skill, torch.zeros_like(skill)) == 0.0
    assert luck_share(torch.zeros_like(skill), skill) == 1.0
    assert luck_share(skill, skill) == pytest.approx(0.5)
    assert math.isnan(luck_share(torch.zeros_like(skill), torch.zeros_like(skill)))


def test_luck_after_sums_from_each_position_to_the_end():
    luck = torch.tensor([[1.0, 2.0, 3.0]])
    assert torch.equal(luck_after(luck), torch.tensor([[6.0, 5.0, 3.0]]))


def test_luck_regression_reference_points(small):
    env, policy, truth, ro = small
    exact = Credit.from_tokens(ro, truth.advantage(ro), "exact")
    outcome = Credit.from_tokens(ro, ro.returns().double() - truth.value(ro), "return minus value")
    credits = {"GRPO": get_estimator("grpo")(ro), "exact": exact, "G - V": outcome}
    df = luck_regression(ro, truth, credits).set_index("method")
    assert df.loc["GRPO", "luck_removed"] == pytest.approx(0.0)
    assert df.loc["exact", "luck_removed"] == pytest.approx(1.0, abs=1e-9)
    assert df.loc["exact", "corr_exact"] == pytest.approx(1.0) and df.loc["exact", "sign_agree"] == 1.0
    # G_t - V(s_t) = skill_t + later skill + luck from t on: every coefficient 1, luck_per_skill 1
    assert df.loc["G - V", "b_skill"] == pytest.approx(1.0, abs=1e-9)
    assert df.loc["G - V", "b_luck_after"] == pytest.approx(1.0, abs=1e-9)
    assert df.loc["G - V", "luck_per_skill"] == pytest.approx(1.0, abs=1e-9)


def test_without_tool_noise_the_luck_coefficients_are_nan():
    env, policy = scripted_agent_setup(0.0, n_files=3, max_turns=10)
    truth = env.truth(policy)
    ro = env.sample(policy, 4, group_size=4, seed=0)
    df = luck_regression(ro, truth, {"GRPO": get_estimator("grpo")(ro)})
    assert math.isnan(df.b_luck_after.iloc[0]) and math.isnan(df.luck_removed.iloc[0])


def test_information_luck_share_and_regression_tell_the_agent_side_from_the_hidden_side():
    from labkit.core.credit import Credit
    from labkit.envs.toolworld import ToolWorld
    from labkit.envs.toolworld.belief import belief_truth
    from labkit.scoring.luck import information_luck_regression, information_luck_share

    env = ToolWorld(5, max_turns=20, mislead=0.2, noise=0.2, flaky=0.2)
    policy = env.scripted_policy(2.0)
    truth = env.truth(policy)
    ro = env.sample(policy, 32, group_size=8, seed=0)
    bt = belief_truth(env, truth, ro)
    share = information_luck_share(bt.hidden_advantage, bt.advantage, ro.mask)
    assert 0.05 < share < 0.6   # measured 0.23 on 64 tasks: the hidden file decides much of the "skill"
    assert information_luck_share(bt.advantage, bt.advantage, ro.mask) == 0.0
    credits = {"hidden": Credit.from_tokens(ro, truth.advantage(ro), "hidden"),
               "info": Credit.from_tokens(ro, bt.advantage, "info")}
    table = information_luck_regression(ro, truth, bt, credits).set_index("method")
    assert table.loc["hidden", "info_luck_per_skill"] == pytest.approx(1.0, abs=1e-9)
    assert table.loc["info", "info_luck_per_skill"] == pytest.approx(0.0, abs=1e-9)
    assert table.loc["info", "corr_info"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^info_skill"):
        information_luck_share(bt.hidden_advantage, bt.advantage[:, :3], ro.mask)


def test_the_regressions_refuse_objects_of_another_world_or_batch(small):
    from labkit.envs import BifurcationChain
    from labkit.envs.tabular import exact_truth
    from labkit.envs.toolworld.belief import belief_truth
    from labkit.policies import TabularSoftmaxPolicy
    from labkit.scoring.luck import information_luck_regression, luck_terms
    env, policy, truth, ro = small
    other_ro = env.sample(policy, 6, group_size=4, seed=1)
    grpo = get_estimator("grpo")
    credits = {"GRPO": grpo(ro)}
    chain = BifurcationChain(horizon=4)
    tab = exact_truth(chain.mdp(), TabularSoftmaxPolicy(chain.n_states, chain.n_actions))
    with pytest.raises(TypeError, match="^truth: "):
        luck_terms(ro, tab)
    longer = type(env)(env.n_files, max_turns=env.max_turns + 1)
    with pytest.raises(ValueError, match=r"^rollouts: .*max_turns"):
        luck_regression(ro, longer.truth(longer.scripted_policy()), credits)
    with pytest.raises(ValueError, match=r"^credits: "):
        luck_regression(ro, truth, {"GRPO": grpo(ro.select(list(range(4))))})
    with pytest.raises(TypeError, match=r"^credits: "):
        luck_regression(ro, truth, {"GRPO": "not a credit"})
    belief = belief_truth(env, truth, ro)
    information_luck_regression(ro, truth, belief, credits)            # the valid call runs
    with pytest.raises(ValueError, match=r"^belief: "):
        information_luck_regression(ro, truth, belief_truth(env, truth, other_ro), credits)
    with pytest.raises(TypeError, match=r"^belief: "):
        information_luck_regression(ro, truth, None, credits)
