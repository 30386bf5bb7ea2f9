"""labkit.bench breadth: trajectory lengths in every record, the inputs a task gives (with where
they came from), gradient cosine / variance and luck share."""
import pytest
import torch

from labkit.bench import run_cell, suite_tasks, validate_record
from labkit.bench.metrics import gradient_metrics, luck_share, trajectory_lengths
from labkit.core.rollouts import Credit


SEED = suite_tasks("tiny")[1][0]


@pytest.fixture(scope="module")
def tiny():
    tasks, _ = suite_tasks("tiny")
    return {t.family: (t, t.build(SEED)) for t in tasks}


def test_trajectory_lengths_summary():
    assert trajectory_lengths(torch.tensor([4, 1, 3, 2])) == {"min": 1.0, "median": 2.5, "max": 4.0, "mean": 2.5}
    assert trajectory_lengths(torch.tensor([5, 1, 3]))["median"] == 3.0
    with pytest.raises(ValueError, match="^lengths: "):
        trajectory_lengths(torch.tensor([]))
    with pytest.raises(ValueError, match="^lengths: "):
        trajectory_lengths(torch.ones(2, 2))


@pytest.mark.parametrize("family,unit", [("reasoning", "tokens"), ("agentic", "turns"), ("multi-agent", "agents")])
def test_every_record_has_the_batch_lengths_in_its_unit(tiny, family, unit):
    (task, inst), seed = tiny[family], SEED
    for name in ("grpo", "gae"):  # an ok record and (on the team task) a skipped one
        rec = validate_record(run_cell("tiny", task, name, seed, inst))
        assert rec["unit"] == unit
        ro = inst.rollouts
        if unit == "turns":
            n = ro.view(ro.rewards, "turn", "first")[1].sum(1).double()
        else:
            n = ro.mask.sum(1).double()
        assert rec["trajectory_lengths"] == pytest.approx(
            {"min": float(n.min()), "median": float(n.median()) if len(n) % 2 else float(n.sort().values[len(n) // 2 - 1:len(n) // 2 + 1].mean()),
             "max": float(n.max()), "mean": float(n.mean())})


def test_a_record_without_the_median_length_is_refused(tiny):
    (task, inst), seed = tiny["reasoning"], SEED
    rec = run_cell("tiny", task, "grpo", seed, inst)
    rec["trajectory_lengths"].pop("median")
    with pytest.raises(ValueError, match="^record.trajectory_lengths: "):
        validate_record(rec)


def test_the_chain_feeds_critics_and_spo_and_says_where_from(tiny):
    (task, inst), seed = tiny["reasoning"], SEED
    gae = run_cell("tiny", task, "gae", seed, inst)
    assert gae["status"] == "ok" and "ORACLE" in gae["inputs"]["values"]
    # GAE with lambda = 1 and the exact V is return - V: unbiased, so its gradient points along
    # the exact one better than chance
    assert gae["metrics"]["gradient_cosine"] > 0
    spo = run_cell("tiny", task, "spo", seed, inst)
    assert spo["status"] == "ok", spo["reason"]
    assert "Monte Carlo" in spo["inputs"]["value_fn"] and spo["cost"]["env_steps"] > 0
    # the chain cannot restore a hidden state: re-execution is a skip, not an error
    c3 = run_cell("tiny", task, "c3", seed, inst)
    assert c3["status"] == "skipped" and c3["reason"].startswith("needs env")
    gigpo = run_cell("tiny", task, "gigpo", seed, inst)
    assert gigpo["status"] == "ok" and "state index" in gigpo["inputs"]["anchor_keys"]


def test_toolworld_feeds_hindsight_and_labelled_stand_in_judges(tiny):
    (task, inst), seed = tiny["agentic"], SEED
    for name, option, word in [("hca", "hindsight", "ORACLE"), ("critic_search", "verdicts", "STAND-IN"),
                               ("tarl", "grades", "STAND-IN"), ("mappa", "judge_scores", "STAND-IN"),
                               ("archer", "q_values", "ORACLE")]:
        rec = validate_record(run_cell("tiny", task, name, seed, inst))
        assert rec["status"] == "ok", (name, rec["reason"])
        assert word in rec["inputs"][option]
        assert rec["metrics"]["luck_share"] is None or 0 <= rec["metrics"]["luck_share"] <= 1


def test_team_gigpo_is_skipped_for_missing_anchor_keys(tiny):
    (task, inst), seed = tiny["multi-agent"], SEED
    rec = run_cell("tiny", task, "gigpo", seed, inst)
    assert rec["status"] == "skipped" and "rollouts.anchor_keys" in rec["reason"]
    rec = run_cell("tiny", task, "llm_mca", seed, inst)
    assert rec["status"] == "ok" and "STAND-IN" in rec["inputs"]["judge_credit"]
    assert rec["metrics"]["gradient_cosine"] is None  # no tabular policy on the team task


def test_gradient_metrics_of_zero_and_of_exact_credit():
    tasks, _ = suite_tasks("quick")
    inst = tasks[0].build(0)  # chain T=10, 64 trajectories
    ro = inst.rollouts
    zero = gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, torch.zeros_like(inst.truth), "zero"), inst.exact_grad)
    assert zero == {"gradient_cosine": 0.0, "gradient_variance": 0.0}
    exact = gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, inst.truth, "exact"), inst.exact_grad)
    assert exact["gradient_cosine"] > 0.5 and exact["gradient_variance"] > 0
    with pytest.raises(ValueError, match="^n_batches: "):
        gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, inst.truth, "exact"), inst.exact_grad, n_batches=7)


def test_luck_share_is_zero_for_skill_and_one_for_luck(tiny):
    task, inst = tiny["agentic"]
    ro = inst.rollouts
    skill, luck = inst.skill_luck
    luck_after = luck.flip(1).cumsum(1).flip(1)
    assert luck_share(ro, Credit.from_tokens(ro, skill, "skill"), skill, luck) == pytest.approx(0.0, abs=1e-9)
    assert luck_share(ro, Credit.from_tokens(ro, luck_after, "luck"), skill, luck) == pytest.approx(1.0, abs=1e-9)
    mixed = luck_share(ro, Credit.from_tokens(ro, skill + luck_after, "both"), skill, luck)
    assert mixed == pytest.approx(0.5, abs=1e-6)
