"""Judge credit (labkit.credit.judge): CAPO, TARL, LaRe, MAPPA, LLM-MCA and the written credit function.

Hand-computed cases on tiny hand-built Rollouts and teams, the degenerate inputs each docstring
promises, and bad arguments raising errors that name the argument.
"""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.games import exact_shapley
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, estimate
from labkit.credit.episode import grpo
from labkit.credit.judge import lare, tarl
from labkit.learn.judges import noisy_oracle, stand_in_step_verifier

from step_batches import close_to, two_rows
from team_games import (COMPLEMENTARY, GLOVE, REDUNDANT, agent_values, game_from, glove_rollouts, shapley_rule,
                        team)
from turn_batches import scored_turns, turn_values

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- CAPO
def test_capo_with_an_exact_verifier_by_hand():
    ro = two_rows()
    v = stand_in_step_verifier(ro, error_rate=0.0)
    assert close_to(v, [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])  # exactly the step correctness (row 0 has 2 steps)
    c = estimate("capo", ro, verdicts=v, normalize_std=False)
    # outcome term 2 * (r - mean) = [1, -1]; flagged steps lose 1
    assert close_to(c.info["flags"], [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert close_to(c.values, [[1.0, 0.0, 0.0], [-1.0, -1.0, -2.0]])
    assert close_to(c.token, [[1.0, 1.0, 0.0], [-1.0, -1.0, -2.0]])
    s = estimate("capo", ro, verdicts=v)  # GRPO scale: (1 - 0.5) / std([1, 0]) = 1 / sqrt(2)
    assert close_to(s.info["outcome_advantage"], [0.5 / (math.sqrt(0.5) + 1e-6), -0.5 / (math.sqrt(0.5) + 1e-6)])


def test_capo_votes():
    ro = Rollouts(tokens=torch.zeros(1, 1, dtype=torch.long), mask=torch.ones(1, 1, dtype=torch.bool),
                  rewards=torch.zeros(1, 1))
    v = torch.tensor([[[0.0]], [[0.0]], [[1.0]]])  # two of three critiques call the step wrong
    flags = {vote: float(estimate("capo", ro, verdicts=v, vote=vote).info["flags"][0, 0])
             for vote in ("majority", "intersection", "average")}
    assert flags == pytest.approx({"majority": 1.0, "intersection": 0.0, "average": 2 / 3})


def test_capo_degenerate_group_of_one_and_callable_cost():
    ro = two_rows(group=(0, 1))
    c = estimate("capo", ro, verdicts=lambda r: stand_in_step_verifier(r, error_rate=0.0, n_critiques=3))
    assert close_to(c.info["outcome_advantage"], [1 / (1 + 1e-6), 0.0])  # raw outcomes
    assert c.cost.aux_calls == 6 and c.info["n_critiques"] == 3


@pytest.mark.parametrize("kw,name", [
    ({}, "verdicts"),
    ({"verdicts": torch.full((2, 3), 1.5)}, "verdicts"),
    ({"verdicts": torch.ones(2, 2)}, "verdicts"),
    ({"verdicts": torch.ones(2, 3), "vote": "sometimes"}, "vote"),
])
def test_capo_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        estimate("capo", two_rows(), **kw)


def test_registered():
    assert {"tarl", "lare", "turn_reward_design"} <= set(ESTIMATORS)


# --------------------------------------------------------------------------- TARL
def test_tarl_hand_computed():
    ro = scored_turns([2, 3, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    g = torch.tensor([[1., -1, 0], [0, 1, -1], [1, 0, 0]])
    c = tarl(ro, grades=g, grade_weight=0.5, eps=0.0)
    o = 0.5 / math.sqrt(0.5)  # (1 - 0.5) / unbiased std of {1, 0}
    want = torch.tensor([[o + 0.5, o - 0.5, 0], [-o, -o + 0.5, -o - 0.5], [1.5, 0, 0]], dtype=torch.float64)
    assert c.level == "turn" and torch.allclose(turn_values(c), want)
    assert c.cost == Cost()
    called = tarl(ro, grades=lambda r: g)
    assert called.cost.aux_calls == 3


def test_tarl_degenerate():
    ro = scored_turns([2, 3, 1], [1.0, 1.0, 0.0], [0, 0, 1])
    zero = torch.zeros(3, 3)
    # all-neutral grades: plain GRPO on every turn
    assert torch.allclose(tarl(ro, grades=zero).token, grpo(ro).token.to(torch.float64))
    # equal outcomes in group 0: only the grades move its turns; the singleton keeps its raw outcome 0
    g = torch.tensor([[1., 0, 0], [-1, 1, 0], [1, 0, 0]])
    c = tarl(ro, grades=g)
    assert torch.allclose(turn_values(c), torch.where(c.present.bool(), g.double(), 0.0))


def test_tarl_bad_arguments():
    ro = scored_turns([2, 1], [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro)
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro, grades=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="^grades"):
        tarl(ro, grades=torch.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="^grade_weight"):
        tarl(ro, grades=torch.zeros(2, 2), grade_weight=float("nan"))


# --------------------------------------------------------------------------- LaRe
def test_lare_hand_computed():
    ro = scored_turns([2, 3, 1], [1.0, 0.0, 1.0], [0, 0, 1])
    r = torch.tensor([[0.5, 0.25, 0], [0.0, -0.5, 1.0], [2.0, 0, 0]])
    c = lare(ro, step_rewards=r)
    # G: [0.75, 0.25], [0.5, 0.5, 1.0], [2.0]; baseline group 0 = (0.75 + 0.5) / 2, group 1 = 2.0 (itself)
    want = torch.tensor([[0.125, -0.375, 0], [-0.125, -0.125, 0.375], [0, 0, 0]], dtype=torch.float64)
    assert torch.allclose(turn_values(c), want)
    half = lare(ro, step_rewards=r, gamma=0.5)
    assert math.isclose(float(half.info["returns"][1, 0]), 0.0 + 0.5 * (-0.5 + 0.5 * 1.0))
    per_step = lare(ro, step_rewards=r, target="reward")
    mean0 = (0.5 + 0.25 + 0.0 - 0.5 + 1.0) / 5
    assert math.isclose(float(turn_values(per_step)[1, 2]), 1.0 - mean0)
    assert math.isclose(float(turn_values(per_step)[2, 0]), 0.0)  # a group of one compares with itself
    assert lare(ro, step_rewards=lambda x: r).cost.aux_calls == 3


def test_lare_degenerate_and_bad_arguments():
    ro = scored_turns([1], [1.0], [0])
    assert torch.allclose(lare(ro, step_rewards=torch.tensor([[0.7]])).token, torch.zeros(1, 1, dtype=torch.float64))
    ro2 = scored_turns([2, 2], [1.0, 0.0], [0, 1])
    assert torch.allclose(lare(ro2, step_rewards=torch.zeros(2, 2)).token, torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="^step_rewards"):
        lare(ro2)
    with pytest.raises(ValueError, match="^step_rewards"):
        lare(ro2, step_rewards=torch.tensor([[float("nan"), 0], [0, 0]]))
    with pytest.raises(ValueError, match="^target"):
        lare(ro2, step_rewards=torch.zeros(2, 2), target="q")


def test_mappa_with_exact_judge_reproduces_reference_and_whitens():
    ro = glove_rollouts()
    quality = torch.arange(ro.batch_size * ro.horizon, dtype=torch.float64).reshape(ro.batch_size, -1)
    judge = noisy_oracle(quality, noise=0.0)
    raw = estimate("mappa", ro, judge_scores=judge, normalize="none")
    assert raw.level == "token"
    assert torch.equal(raw.token, torch.where(ro.mask, quality, 0.0))
    c = estimate("mappa", ro, judge_scores=lambda r: judge)
    vals = c.token[ro.mask]
    # REINFORCE++'s whitening: population (biased) variance, as reinforce_pp
    assert abs(float(vals.mean())) < 1e-12 and abs(float(vals.std(unbiased=False)) - 1) < 1e-5
    assert c.cost.aux_calls == int(ro.mask.sum())
    mixed = estimate("mappa", ro, judge_scores=judge, normalize="none", outcome_weight=2.0)
    assert torch.allclose(mixed.token, torch.where(ro.mask, quality + 2 * ro.scores[:, None], 0.0))
    with pytest.raises(ValueError, match="judge_scores"):
        estimate("mappa", ro, judge_scores=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="judge_scores"):
        estimate("mappa", ro)


def test_llm_mca_reports_the_judge_and_can_rescale_to_the_team_reward():
    ro = glove_rollouts()
    phi = exact_shapley(torch.stack([GLOVE, REDUNDANT, COMPLEMENTARY, GLOVE]))
    c = estimate("llm_mca", ro, judge_credit=noisy_oracle(phi, noise=0.0))
    assert c.level == "agent" and torch.allclose(agent_values(c, ro), phi)
    team_r = torch.tensor([2.0, 3.0, 0.0, 1.0], dtype=torch.float64)
    r = estimate("llm_mca", ro, judge_credit=phi, rescale="team", team_reward=team_r)
    assert torch.allclose(r.values.sum(1), team_r)
    zero = estimate("llm_mca", ro, judge_credit=torch.zeros(4, 3), rescale="team")
    assert zero.info["unscaled_rows"] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="judge_credit"):
        estimate("llm_mca", ro, judge_credit=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="judge_credit"):
        estimate("llm_mca", ro, judge_credit=torch.full((4, 3), float("nan")))


# --------------------------------------------------------------------------- a written credit function (QLLM)
def test_credit_function_applies_the_written_rule_per_trajectory():
    ro = team([[0, 1, 2], [0, 1, 2]], [[1, 1, 1], [0, 0, 0]], n_agents=3)
    glove = game_from(lambda S: float(0 in S and bool(S & {1, 2})), 3)   # 1 left glove, 2 right gloves
    table = torch.stack([glove, 2 * glove])

    def loo(v, agents):
        full = frozenset(agents)
        return {a: v[full] - v[full - {a}] for a in agents}

    c = estimate("credit_function", ro, fn=loo, coalition_values=table)
    assert torch.allclose(c.values, torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]], dtype=torch.float64))
    assert c.cost.env_steps == 2 * 8
    assert agent_values(c, ro)[1, 0] == 2.0
    # the exact Shapley rule written as a function reproduces the shapley estimator
    assert torch.allclose(estimate("credit_function", ro, fn=shapley_rule, coalition_values=table).values,
                          estimate("shapley", ro, coalition_values=table).values)


def test_credit_function_names_the_function_when_it_misbehaves():
    ro = team([[0, 1]], [[1, 1]], n_agents=2)
    table = game_from(lambda S: float(len(S) == 2), 2)[None]
    with pytest.raises(ValueError, match="fn: required"):
        estimate("credit_function", ro, coalition_values=table)
    with pytest.raises(ValueError, match=r"fn: raised ZeroDivisionError.*trajectory 0"):
        estimate("credit_function", ro, fn=lambda v, a: {x: 1 / 0 for x in a}, coalition_values=table)
    with pytest.raises(ValueError, match="one credit per agent"):
        estimate("credit_function", ro, fn=lambda v, a: {"agent 0": 1.0}, coalition_values=table)
    with pytest.raises(ValueError, match="non-finite"):
        estimate("credit_function", ro, fn=lambda v, a: dict.fromkeys(a, float("nan")), coalition_values=table)
    with pytest.raises(TypeError, match="fn"):
        estimate("credit_function", ro, fn="shapley", coalition_values=table)
    # a one-agent team: the function sees the empty and the full coalition
    solo = team([[0]], [[1]], n_agents=1)
    seen = []
    c = estimate("credit_function", solo, fn=lambda v, a: seen.append(sorted(map(len, v))) or {a[0]: v[frozenset(a)]},
                 coalition_values=torch.tensor([[0.0, 0.7]]))
    assert seen == [[0, 1]] and float(c.values[0, 0]) == pytest.approx(0.7)
