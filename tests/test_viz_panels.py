"""labkit.viz.panels: Credits (and the exact truth) to the panels the heatmaps draw.

Two parts: ``credit_panels`` on a hand-made batch (order, rows, levels, dtype, every refusal
naming its argument), and the six lessons' panel builders, which call it, against the
adapters they each used to write: the same titles in the same order and the same tensors.
"""
from __future__ import annotations

import re

import pytest
import torch

from labkit.course import presets
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.viz import credit_panels


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    yield


def batch(B: int = 4, T: int = 5) -> Rollouts:
    """B rows of T positions, two agents taking turns, every position generated."""
    agents = torch.arange(T).remainder(2).expand(B, T).clone()
    rewards = torch.zeros(B, T, dtype=torch.float64)
    rewards[:, -1] = torch.arange(B, dtype=torch.float64)
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=torch.ones(B, T, dtype=torch.bool),
                    rewards=rewards, agent_ids=agents)


def token_credit(ro: Rollouts, scale: float, method: str = "m") -> Credit:
    values = scale * torch.arange(ro.batch_size * ro.horizon, dtype=torch.float64).reshape(ro.mask.shape)
    return Credit.from_tokens(ro, values, method)


def agent_credit(ro: Rollouts) -> Credit:
    values = torch.tensor([[1.0, -1.0]], dtype=torch.float64).expand(ro.batch_size, 2)
    return Credit.from_level(ro, values, "agent", "split")


# ------------------------------------------------------------------------------ credit_panels itself
def test_truth_first_then_credits_in_order_and_unchanged():
    ro = batch()
    a, b = token_credit(ro, 1.0), token_credit(ro, -2.0)
    truth = torch.ones(ro.mask.shape, dtype=torch.float64)
    panels = credit_panels({"B": b, "A": a}, truth=truth, truth_title="exact A")
    assert list(panels) == ["exact A", "B", "A"]
    # without rows or dtype nothing is copied: a panel is the tensor the caller or estimator made
    assert panels["exact A"] is truth and panels["B"] is b.token and panels["A"] is a.token


def test_truth_is_optional_and_tensors_are_panels_too():
    ro = batch()
    extra = torch.full(ro.mask.shape, 0.5, dtype=torch.float64)
    panels = credit_panels({"credit": token_credit(ro, 1.0), "entropy": extra})
    assert list(panels) == ["credit", "entropy"] and panels["entropy"] is extra


def test_rows_pick_the_same_trajectories_from_every_panel():
    ro = batch()
    credit = token_credit(ro, 1.0)
    truth = -credit.token
    panels = credit_panels({"c": credit}, truth=truth, rows=[3, 1, 3])
    assert torch.equal(panels["c"], credit.token[[3, 1, 3]])
    assert torch.equal(panels["exact advantage"], truth[[3, 1, 3]])
    as_tensor = credit_panels({"c": credit}, rows=torch.tensor([0, 2]))
    assert torch.equal(as_tensor["c"], credit.token[[0, 2]])


def test_level_takes_the_values_a_credit_was_computed_at():
    ro = batch()
    split = agent_credit(ro)
    panels = credit_panels({"split": split}, level="agent", rows=[1])
    assert torch.equal(panels["split"], torch.tensor([[1.0, -1.0]], dtype=torch.float64))
    # per position (the default) the same credit is spread over each agent's positions
    assert torch.equal(credit_panels({"split": split})["split"], split.token)


def test_dtype_casts_every_panel():
    ro = batch()
    truth = torch.zeros(ro.mask.shape, dtype=torch.float32)
    panels = credit_panels({"c": token_credit(ro, 1.0)}, truth=truth, dtype=torch.float32)
    assert all(v.dtype == torch.float32 for v in panels.values())
    assert torch.equal(panels["c"], token_credit(ro, 1.0).token.float())


@pytest.mark.parametrize("rows, error", [
    ([4], ValueError), ([-1], ValueError), ([], ValueError), ([0.5], TypeError), ("0", TypeError), (2, TypeError),
])
def test_bad_rows_are_refused_naming_rows(rows, error):
    ro = batch()
    with pytest.raises(error, match="^rows"):
        credit_panels({"c": token_credit(ro, 1.0)}, rows=rows)


def test_bad_input_is_refused_naming_the_argument():
    ro = batch()
    credit = token_credit(ro, 1.0)
    with pytest.raises(TypeError, match="^credits"):
        credit_panels([credit])
    with pytest.raises(ValueError, match="^credits: nothing"):
        credit_panels({})
    with pytest.raises(ValueError, match=re.escape("credits['short']: has shape (4, 3)")):
        credit_panels({"c": credit, "short": credit.token[:, :3]})
    with pytest.raises(ValueError, match=re.escape("credits['c']: has shape (4, 5) but truth")):
        credit_panels({"c": credit}, truth=torch.zeros(4, 6))
    with pytest.raises(ValueError, match=re.escape("credits['flat']: expected a (rows, positions)")):
        credit_panels({"flat": torch.zeros(5)})
    with pytest.raises(TypeError, match=re.escape("credits['text']")):
        credit_panels({"text": "not numbers"})
    with pytest.raises(ValueError, match="^truth_title"):
        credit_panels({"exact advantage": credit}, truth=credit.token)
    with pytest.raises(ValueError, match="^level"):
        credit_panels({"c": credit}, level="agent")  # computed per token: no agent values
    with pytest.raises(ValueError, match="^level"):
        credit_panels({"c": credit}, level="paragraph")


# ------------------------------------------------------------------------------ the six lessons' panels
# Each reference below is the adapter a lesson wrote for itself before credit_panels: the lesson
# functions now call credit_panels and must return what these did, title for title, bit for bit.
def assert_same_panels(new: dict, old: dict) -> None:
    assert list(new) == list(old)
    for title in old:
        assert new[title].dtype == old[title].dtype, title
        assert torch.equal(new[title], old[title]), title


def test_nb01_episode_credit_panels_unchanged():
    from labkit.course import nb01_reinforce_variance as lesson
    from labkit.credit import get_estimator

    env, policy, truth = presets.chain_setup(10, init_std=0.5, policy_seed=1)
    ro = env.sample(policy, 16, group_size=4, seed=0)
    estimators = ["reinforce", "grpo"]
    old = {"exact advantage": truth.advantage(ro)}
    for name in estimators:
        old[name] = get_estimator(name)(ro).token
    assert_same_panels(lesson.episode_credit_panels(ro, truth, estimators), old)


def test_nb02_gae_panels_unchanged():
    from labkit.course import nb02_critics_gae as lesson
    from labkit.credit.td import gae

    env, policy, truth, critic = lesson.gae_chain_setup(32, horizon=8)
    ro = env.sample(policy, 6, seed=0)
    critics, lams = {"learned": critic, "exact": truth.value}, [0.0, 0.5, 1.0]
    old = {"exact advantage": truth.advantage(ro)}
    for name, c in critics.items():
        for lam in lams:
            old[f"GAE λ={lam:g}, {name} critic"] = gae(ro, values=c, lam=lam).token
    assert_same_panels(lesson.gae_panels(ro, truth, critics, lams), old)


@pytest.fixture(scope="module")
def toolworld():
    from labkit.course import nb07_critical_actions as lesson

    env, policy = presets.toolworld_setup(3, max_turns=12, warmup_iterations=6, seed=1)
    truth = env.truth(policy)
    ro = env.sample(policy, 6, group_size=4, seed=2)
    return lesson, env, truth, ro


@pytest.mark.parametrize("rows", [None, [0, 3]])
def test_nb07_entropy_panels_unchanged(toolworld, rows):
    from labkit.credit.entropy import carl

    lesson, _, truth, ro = toolworld
    picked = list(range(ro.batch_size)) if rows is None else rows
    credit = carl(ro, top_fraction=0.3)
    H = torch.where(ro.mask, ro.entropies.to(torch.float64) - credit.info["entropy_threshold"], 0.0)
    old = {"entropy minus CARL's cut (> 0: in the top 30%, updated)": H[picked],
           "exact advantage A": truth.advantage(ro)[picked]}
    assert_same_panels(lesson.entropy_panels(ro, truth, top_fraction=0.3, rows=rows), old)


@pytest.mark.parametrize("rows", [None, [2, 9]])
def test_nb07_turn_credit_panels_unchanged(toolworld, rows):
    from labkit.credit import get_estimator
    from labkit.credit.entropy import carl
    from labkit.credit.information import igpo

    lesson, env, truth, ro = toolworld
    picked = list(range(ro.batch_size)) if rows is None else rows
    p = lesson.dp_success_prob(env, truth, ro)
    ig = igpo(ro, success_prob=p, final="ig", normalize=False).info["ig"]
    old = {"exact advantage A": truth.advantage(ro)[picked],
           "GRPO": get_estimator("grpo")(ro).token[picked],
           "CARL (top 30% entropy)": carl(ro, top_fraction=0.3).token[picked],
           "IGPO, γ = 0.5 (stand-in p from DP)": igpo(ro, success_prob=p, gamma=0.5).token[picked],
           "information gain p_k - p_(k-1) alone": torch.where(ro.mask, ro.broadcast(ig, "turn"), 0.0)[picked]}
    assert_same_panels(lesson.turn_credit_panels(ro, truth, p, gamma=0.5, rows=rows), old)


def test_nb08_turn_panels_unchanged():
    from labkit.course import nb08_hindsight_counterfactual as lesson

    env, policy = presets.scripted_agent_setup(0.3, n_files=3, max_turns=10)
    truth = env.truth(policy)
    models = lesson.fit_models(env, policy, n_tasks=24, group_size=4, seed=9)
    ro = env.sample(policy, 4, group_size=4, seed=0)
    credits = lesson.all_credits(env, policy, ro, models, truth, n_continuations=2)
    rows = [0, 5, 11]
    old = {"exact advantage A (skill)": truth.advantage(ro)[rows]}
    for name, credit in credits.items():
        old[name] = credit.token[rows].to(torch.float64)
    assert_same_panels(lesson.turn_panels(ro, truth, credits, rows), old)
    with pytest.raises(ValueError, match="^rows"):
        lesson.turn_panels(ro, truth, credits, [])


def test_nb09_heatmap_panels_unchanged():
    from labkit.course import nb09_multiagent as lesson
    from labkit.envs.teamtask import TeamTask

    env = TeamTask()
    res = lesson.agent_credit_agreement(env, env.scripted_policies(2.0), n_tasks=8, group_size=4, seed=1)
    methods, rows = ["leave-one-out", "GRPO (team reward)", "MAPPA (stand-in judge)"], [0, 8, 16]
    old = {"exact Shapley": res["phi"][rows]}
    for m in methods:
        old[m] = res["credit"][m][rows]
    assert_same_panels(lesson.heatmap_panels(res, methods, rows), old)
    with pytest.raises(ValueError, match="^methods"):
        lesson.heatmap_panels(res, ["VinePPO"], rows)
    with pytest.raises(ValueError, match="^rows"):
        lesson.heatmap_panels(res, methods, [len(res["phi"])])
