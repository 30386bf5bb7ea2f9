"""Training schedules (labkit.learn.schedules): stage switching, reward shaping, the loop hook, the cache."""

from pathlib import Path

import pandas as pd
import pytest
import torch

from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.learner import ToolLearner
from labkit.learn.loop import train
from labkit.learn.schedules import (PRS_STAGES, Schedule, ShapedReward, pilotrl_schedule, prs_schedule,
                                    shaped_constant, turn_to_positions)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


DATA = Path(__file__).resolve().parents[2] / "data" / "schedules"


def hand_batch():
    """Two tasks x two episodes of three one-position turns; the second episode of each task ends
    after two turns. Outcome 1 on the last turn of episodes 0 and 2."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    rewards = torch.zeros(4, 3, dtype=torch.float64)
    rewards[0, 2] = rewards[2, 2] = 1.0
    tid = torch.where(mask, torch.arange(3).expand(4, 3), -1)
    return Rollouts(tokens=torch.zeros(4, 3, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.tensor([0, 0, 1, 1]), step_ids=tid.clone(), turn_ids=tid)


DENSE = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 5.0], [0.0, 0.0, 0.0], [3.0, 1.0, 0.0]], dtype=torch.float64)


def test_schedule_switches_at_the_right_iterations():
    fine = get_estimator("gigpo")
    s = Schedule([(1, "grpo"), (3, fine), (6, "rloo")], name="three")
    assert [s.stage_of(i) for i in (1, 2, 3, 5, 6, 100)] == [1, 1, 2, 2, 3, 3]
    assert s.for_iteration(2) is get_estimator("grpo") and s.for_iteration(4) is fine
    assert s.for_iteration(7) is get_estimator("rloo")
    assert s.names == ("grpo", "gigpo", "rloo") and s.stage_name(3) == "gigpo" and s.__name__ == "three"
    assert pilotrl_schedule(4).starts == (1, 4) and len(pilotrl_schedule(1)) == 1


@pytest.mark.parametrize("stages", [[], [(0, "grpo")], [(2, "grpo")], [(1, "grpo"), (1, "gigpo")],
                                    [(1, "grpo"), (5, "gigpo"), (3, "rloo")], [(1,)], "grpo"])
def test_bad_stages_raise_naming_stages(stages):
    with pytest.raises(ValueError, match=r"^stages"):
        Schedule(stages)


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match=r"^stages\[0\] estimator"):
        Schedule([(1, 42)])
    with pytest.raises(ValueError, match=r"^iteration"):
        Schedule([(1, "grpo")]).stage_of(0)
    with pytest.raises(ValueError, match=r"^switch_at"):
        pilotrl_schedule(0)
    with pytest.raises(ValueError, match=r"^weight"):
        ShapedReward("grpo", DENSE, -0.5)
    with pytest.raises(ValueError, match=r"^dense"):
        ShapedReward("grpo", DENSE[:, :2], 1.0)(hand_batch())
    with pytest.raises(TypeError, match=r"^dense"):
        ShapedReward("grpo", None)
    env = ToolWorld(3, max_turns=4)
    with pytest.raises(ValueError, match=r"^stages\[0\] weight"):
        prs_schedule(env, stages=[(1, {"tests_pass": -1.0})])
    with pytest.raises(ValueError, match=r"^weights"):
        prs_schedule(env, stages=[(1, {"format": 1.0})])
    with pytest.raises(ValueError, match=r"^stages"):
        prs_schedule(env, stages=[(1, {"tests_pass": 1.0}), (1, {})])


def test_shaped_rewards_are_outcome_plus_weight_times_dense():
    ro, seen = hand_batch(), {}

    def capture(r):
        seen["rewards"] = r.rewards.clone()
        return get_estimator("grpo")(r)

    credit = ShapedReward(capture, DENSE, 0.5)(ro)
    want = ro.rewards + 0.5 * torch.where(ro.mask, DENSE, 0.0)   # one position per turn: in place
    assert torch.equal(seen["rewards"], want)
    assert torch.equal(seen["rewards"][~ro.mask], torch.zeros(2, dtype=torch.float64))  # the absent turn's 5.0 is dropped
    # hand GRPO on the shaped scores: task 0 = (1 + 1.5, 0.5), task 1 = (1, 2): +-1/sqrt(2) each
    s = 2 ** -0.5
    assert torch.allclose(credit.values[:, 0], torch.tensor([s, -s, -s, s], dtype=torch.float64), atol=1e-5)
    assert credit.info["shaping_weight"] == 0.5 and credit.cost.aux_calls == 0      # a tensor costs nothing
    assert ShapedReward("grpo", lambda r: DENSE, 0.5)(ro).cost.aux_calls == 4          # a callable: one per trajectory


def test_weight_zero_is_exactly_the_base_estimator():
    ro = hand_batch()
    for base in (get_estimator("grpo"), lambda r: get_estimator("rloo")(r)):
        a, b = ShapedReward(base, DENSE, 0.0)(ro), base(ro)
        assert torch.equal(a.token, b.token)


def test_turn_rewards_land_on_each_turns_last_position():
    mask = torch.tensor([[1, 1, 0, 1, 1]], dtype=torch.bool)  # turn 0 = positions 0-1, turn 1 = 3-4
    tid = torch.tensor([[0, 0, -1, 1, 1]])
    ro = Rollouts(tokens=torch.zeros(1, 5, dtype=torch.long), mask=mask, rewards=torch.zeros(1, 5), turn_ids=tid)
    out = turn_to_positions(ro, torch.tensor([[2.0, 3.0]], dtype=torch.float64))
    assert out.tolist() == [[0.0, 2.0, 0.0, 0.0, 3.0]]


def test_train_with_a_two_stage_schedule_records_the_stage():
    env = ToolWorld(3, max_turns=6)
    sched = Schedule([(1, "grpo"), (3, "gigpo")], name="two")
    curve = train(ToolLearner(env, env.make_policy(), n_tasks=2, group_size=4), sched, iterations=4,
                  eval_every=2, progress=False)
    assert curve.label.iloc[0] == "two"
    assert curve.stage.isna().iloc[0] and curve.stage.iloc[1:].tolist() == [1, 1, 2, 2]
    plain = train(ToolLearner(env, env.make_policy(), n_tasks=2, group_size=4), "grpo", iterations=2, progress=False)
    assert "stage" not in plain.columns                       # existing curves are unchanged


def test_prs_schedule_on_toolworld_runs_its_stages():
    env = ToolWorld(3, max_turns=8)
    prs = prs_schedule(env)
    assert prs.starts == tuple(s for s, _ in PRS_STAGES)
    assert prs.names == ("edit_flagged+open_hinted+tests_pass", "tests_pass", "outcome")
    ro = env.sample(env.scripted_policy(2.0), 2, group_size=4, seed=0)
    last = prs.for_iteration(50)(ro)
    assert torch.equal(last.token, get_estimator("grpo")(ro).token) and last.cost.aux_calls == 0
    first = prs.for_iteration(1)(ro)
    assert first.cost.aux_calls == ro.batch_size and "dense_total" in first.info
    assert len(shaped_constant(env)) == 1
    assert isinstance(first, Credit)


def test_cached_results_have_what_the_notebook_reads():
    curves = pd.read_csv(DATA / "curves.csv")
    assert {"label", "seed", "iteration", "stage", "success"} <= set(curves.columns)
    summary = pd.read_csv(DATA / "summary.csv")
    assert {"arm", "final_mean", "final_std", "final_min", "final_max", "auc_mean", "final_effect", "final_se",
            "final_measurable", "verdict"} <= set(summary.columns)
    assert summary.seeds.min() >= 5
    hacking = pd.read_csv(DATA / "hacking.csv")
    assert {"label", "p_rerun_after_pass", "checks_per_episode", "timeout_share"} <= set(hacking.columns)
    scores = pd.read_csv(DATA / "credit_scores.csv")
    assert {"method", "rank_corr", "luck_per_skill", "aux_calls"} <= set(scores.columns)
    assert (DATA / "meta.json").is_file() and (DATA / "check_summary.csv").is_file()
