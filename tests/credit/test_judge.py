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
from labkit.credit.judge import agent_utilities, effect_mixer, lare, tarl
from labkit.learn.judges import noisy_oracle, stand_in_step_verifier

from step_batches import close_to, two_rows
from team_games import COMPLEMENTARY, GLOVE, REDUNDANT, agent_values, glove_rollouts, team
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
def two_agent_batch():
    """Two agents acting once each in four episodes: agent 0 plays 0, 0, 1, 1, agent 1 plays
    0, 1, 0, 1, the team outcome is 1, 0, 1, 1 (every agent is paid it)."""
    team_r = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    ids = torch.tensor([[0, 1]] * 4)
    return Rollouts(tokens=torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]), mask=torch.ones(4, 2, dtype=torch.bool),
                    rewards=team_r[:, None].expand(4, 2).clone(), agent_ids=ids, turn_ids=ids.clone(),
                    states=torch.zeros(4, 2, dtype=torch.long), info={"n_agents": 2, "roles": ["maker", "tester"]})


def test_agent_utilities_average_the_outcome_over_the_same_own_action():
    ro = two_agent_batch()
    # agent 0: action 0 in episodes 0, 1 (outcomes 1, 0), action 1 in 2, 3 (1, 1); agent 1: 0 in 0, 2, 1 in 1, 3
    assert close_to(agent_utilities(ro), [[0.5, 1.0], [0.5, 0.5], [1.0, 1.0], [1.0, 0.5]])
    assert close_to(agent_utilities(ro, team_reward=torch.tensor([0.0, 0.0, 2.0, 0.0])),
                    [[0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])


def test_credit_function_reads_utilities_and_the_state_never_a_coalition_value():
    ro = two_agent_batch()
    seen = []

    def rule(q, state, agents):
        seen.append(state)
        # agent 1's action 1 is the useful one: it gets the outcome, agent 0 its utility minus 0.5
        return {"agent 0": q["agent 0"] - 0.5, "agent 1": state["team_reward"] * (state["actions"]["agent 1"] == 1)}

    c = estimate("credit_function", ro, fn=rule)
    assert close_to(c.values, [[0.0, 0.0], [0.0, 0.0], [0.5, 0.0], [0.5, 1.0]])
    assert close_to(c.info["q_tot"], c.values.sum(1)) and close_to(c.info["utilities"], agent_utilities(ro))
    assert seen[1] == {"observations": {"agent 0": 0, "agent 1": 0}, "actions": {"agent 0": 0, "agent 1": 1},
                       "team_reward": 0.0, "roles": {"agent 0": "maker", "agent 1": "tester"}}
    assert c.cost == Cost()
    # utilities and states the caller supplies replace the batch's
    mine = estimate("credit_function", ro, fn=lambda q, s, a: {x: q[x] * s["w"] for x in a},
                    utilities=torch.ones(4, 2), states=[{"w": float(b)} for b in range(4)])
    assert close_to(mine.values, [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    with pytest.raises(TypeError, match="coalition_values"):
        estimate("credit_function", ro, fn=rule, coalition_values=torch.zeros(4, 4))


def test_effect_mixer_by_hand():
    q = torch.tensor([0.9, 0.6, 0.3, 0.5], dtype=torch.float64)
    # two helpers share: 0.9 / 2, 0.6 / 2; the idle agent 0; the harmful one is charged 0.5 / 2
    assert close_to(effect_mixer(q, torch.tensor([1, 1, 0, -1])), [0.45, 0.3, 0.0, -0.25])
    assert close_to(effect_mixer(q, torch.tensor([0, 0, 0, -1])), [0.0, 0.0, 0.0, 0.0])   # nobody helped
    assert close_to(effect_mixer(q[None].expand(2, 4), torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])),
                    [[0.9, 0.0, 0.0, 0.0], [0.225, 0.15, 0.075, 0.125]])
    with pytest.raises(ValueError, match="effects"):
        effect_mixer(q, torch.tensor([1, 2, 0, 0]))
    with pytest.raises(ValueError, match="effects"):
        effect_mixer(q, torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="utilities"):
        effect_mixer(torch.tensor([float("nan"), 1.0]), torch.tensor([1, 0]))


def test_credit_function_names_the_function_when_it_misbehaves():
    ro = two_agent_batch()
    with pytest.raises(ValueError, match="fn: required"):
        estimate("credit_function", ro)
    with pytest.raises(ValueError, match=r"fn: raised ZeroDivisionError.*trajectory 0"):
        estimate("credit_function", ro, fn=lambda q, s, a: {x: 1 / 0 for x in a})
    with pytest.raises(ValueError, match="one credit per agent"):
        estimate("credit_function", ro, fn=lambda q, s, a: {"agent 0": 1.0})
    with pytest.raises(ValueError, match="non-finite"):
        estimate("credit_function", ro, fn=lambda q, s, a: dict.fromkeys(a, float("nan")))
    with pytest.raises(ValueError, match="numbers"):
        estimate("credit_function", ro, fn=lambda q, s, a: dict.fromkeys(a, "high"))
    with pytest.raises(TypeError, match="fn"):
        estimate("credit_function", ro, fn="shapley")
    with pytest.raises(ValueError, match="states"):
        estimate("credit_function", ro, fn=lambda q, s, a: q, states=[{}])
    with pytest.raises(TypeError, match=r"states.*trajectory 2"):
        estimate("credit_function", ro, fn=lambda q, s, a: q, states=[{}, {}, "x", {}])
    with pytest.raises(ValueError, match="utilities"):
        estimate("credit_function", ro, fn=lambda q, s, a: q, utilities=torch.zeros(4, 3))
    with pytest.raises(ValueError, match="utilities"):
        estimate("credit_function", ro, fn=lambda q, s, a: q, utilities=torch.full((4, 2), float("nan")))
    # a one-agent team: the function sees one utility; an agent that did not act gets 0
    solo = team([[0]], [[1]], n_agents=1)
    c = estimate("credit_function", solo, fn=lambda q, s, a: {a[0]: q[a[0]] + 0.5})
    assert float(c.values[0, 0]) == pytest.approx(1.5)
    absent = team([[0, 1], [0]], [[1, 1], [0, 0]], n_agents=2)
    c = estimate("credit_function", absent, fn=lambda q, s, a: dict.fromkeys(a, 1.0))
    assert close_to(c.values, [[1.0, 1.0], [1.0, 0.0]])


def test_the_written_teamtask_rule_reads_effects_off_the_state():
    from labkit.bench.suite import teamtask_credit_rule, teamtask_effects
    from labkit.envs import TeamTask

    env = TeamTask()
    agents = env.agent_names
    state = {"task": "B", "roles": dict(zip(agents, env.roles)),
             "actions": dict(zip(agents, ["plan B", "method B", "method A", "approve", "chat", "sabotage"]))}
    assert teamtask_effects(state, agents) == [1, 1, 0, 0, 0, -1]
    # no solver used the task's method: no draft can be right, so nothing helped
    wrong = dict(state, actions=dict(state["actions"], **{"solver 1": "method A"}))
    assert teamtask_effects(wrong, agents) == [0, 0, 0, 0, 0, -1]
    q = dict(zip(agents, [0.8, 0.6, 0.4, 0.5, 0.7, 0.3]))
    credit = teamtask_credit_rule(q, state, agents)
    assert credit == pytest.approx(dict(zip(agents, [0.4, 0.3, 0.0, 0.0, 0.0, -0.15])))
    assert all(v == 0 for v in teamtask_credit_rule(q, wrong, agents).values())


