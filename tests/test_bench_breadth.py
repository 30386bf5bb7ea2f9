"""labkit.bench breadth: trajectory lengths in every record, the inputs a task gives (with where
they came from), gradient cosine / variance and luck weight."""
import pytest
import torch

from labkit.bench import (leaderboard, lm_task, make_record, run_cell, suite_tasks, team_task, toolworld_task,
                          validate_record)
from labkit.bench.metrics import gradient_metrics, luck_weight, trajectory_lengths
from labkit.core.credit import Credit
from labkit.envs.teamtask import PRESETS


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
        assert rec["metrics"]["luck_weight"] is None or 0 <= rec["metrics"]["luck_weight"] <= 1


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


def test_luck_weight_is_zero_for_skill_and_one_for_luck(tiny):
    task, inst = tiny["agentic"]
    ro = inst.rollouts
    skill, luck = inst.skill_luck
    luck_after = luck.flip(1).cumsum(1).flip(1)
    assert luck_weight(ro, Credit.from_tokens(ro, skill, "skill"), skill, luck) == pytest.approx(0.0, abs=1e-9)
    assert luck_weight(ro, Credit.from_tokens(ro, luck_after, "luck"), skill, luck) == pytest.approx(1.0, abs=1e-9)
    mixed = luck_weight(ro, Credit.from_tokens(ro, skill + luck_after, "both"), skill, luck)
    assert mixed == pytest.approx(0.5, abs=1e-6)


def test_the_full_suite_spans_the_issue_grid():
    tasks, seeds = suite_tasks("full")
    assert len(seeds) >= 3
    names = {t.name for t in tasks}
    assert {"lm_reference", "chain_T10", "chain_T40", "chain_T100", "chain_T200"} <= names
    assert {f"toolworld_T{T}_noise{z:g}" for T in (10, 20, 50) for z in (0.0, 0.2, 0.4)} <= names
    assert {t.params["case"] for t in tasks if t.family == "multi-agent"} == set(PRESETS)


def test_the_lm_task_step_truth_telescopes_to_the_outcome():
    task = lm_task()
    inst = task.build(0)
    ro = inst.rollouts
    # every token of a step carries its step's advantage: V_0 + sum over steps of A_s = outcome
    adv_step, present = ro.view(inst.truth, "step", "first")
    v0 = ro.truth["step_values"][:, 0]
    assert torch.allclose(v0 + torch.where(present, adv_step, 0.0).sum(1), ro.rewards.sum(1).double())
    assert bool(inst.targets.any()) and not bool((inst.targets & ~ro.mask).any())
    rec = validate_record(run_cell("full", task, "capo", 0, inst))
    assert rec["status"] == "ok" and "STAND-IN" in rec["inputs"]["verdicts"] and rec["unit"] == "tokens"
    assert rec["trajectory_lengths"]["max"] == float(ro.mask.sum(1).max())
    # the LM's rollouts carry no per-turn observation: turn-level re-execution is a skip
    assert run_cell("full", task, "c3", 0, inst)["status"] == "skipped"


def _rec(family, estimator, task, rc, inputs=None, status="ok"):
    r = make_record(suite="s", task=task, family=family, task_params={}, estimator=estimator, seed=0,
                    granularity="token", metrics={"rank_correlation": rc, "sign_agreement": 0.5},
                    inputs=inputs, reason=None if status == "ok" else "x")
    return r


def test_leaderboard_orders_by_mean_and_flags_oracle_inputs():
    recs = [_rec("reasoning", "a", "t1", 0.2), _rec("reasoning", "a", "t2", 0.4),
            _rec("reasoning", "b", "t1", 0.9, {"values": "exact V (ORACLE, ...)"}),
            _rec("reasoning", "c", "t1", None, status="skipped"),
            _rec("agentic", "d", "t3", -0.1, {"grades": "STAND-IN judge"})]
    board = leaderboard(recs)
    assert list(board) == ["agentic", "reasoning"]
    assert [r["estimator"] for r in board["reasoning"]] == ["b", "a"]
    a = board["reasoning"][1]
    assert a["mean"] == pytest.approx(0.3) and a["std"] == pytest.approx(0.1) and a["n"] == 2 and a["tasks"] == 2
    assert board["reasoning"][0]["fed"] == "oracle" and board["agentic"][0]["fed"] == "stand-in" and a["fed"] == ""
    with pytest.raises(ValueError, match="^metric: "):
        leaderboard(recs, metric="accuracy")
    with pytest.raises(ValueError, match="^by: "):
        leaderboard(recs, by="task")


def test_leaderboard_by_world_keeps_the_reasoning_worlds_apart():
    recs = [_rec("reasoning", "a", "chain_T10", 0.2), _rec("reasoning", "a", "lm_reference", 0.8),
            _rec("reasoning", "b", "lm_reference", 0.5)]
    recs[0]["task_params"] = {"env": "BifurcationChain"}
    recs[1]["task_params"] = recs[2]["task_params"] = {"env": "ArithmeticLM"}
    board = leaderboard(recs, by="world")
    assert list(board) == ["ArithmeticLM", "BifurcationChain"]
    assert [(r["estimator"], r["mean"]) for r in board["ArithmeticLM"]] == [("a", 0.8), ("b", 0.5)]
    assert [r["mean"] for r in leaderboard(recs)["reasoning"] if r["estimator"] == "a"] == [pytest.approx(0.5)]


def test_a_constant_truth_has_no_rank_correlation_but_the_record_is_ok():
    # A batch where every team succeeds gives every agent Shapley 1/3: made here rather than
    # hoped for from a seed (which batch a seed draws depends on the torch build)
    task = team_task("complementarity")
    inst = task.build(0)
    inst.truth = torch.full_like(inst.truth, 1 / 3)
    rec = validate_record(run_cell("full", task, "shapley", 0, inst))
    assert rec["status"] == "ok" and rec["metrics"]["rank_correlation"] is None
    assert rec["metrics"]["sign_agreement"] is not None


def test_istar_and_lare_get_rewards_sized_to_their_view_on_a_long_toolworld():
    task = toolworld_task(50, noise=0.4)
    # a batch in which no episode used every turn, so turn views are narrower than T (the first
    # such seed: which batch a seed draws depends on the torch build)
    inst = next((i for i in map(task.build, range(10)) if int(i.lengths.max()) < 50), None)
    assert inst is not None, "no seed in 0-9 drew a batch without a 50-turn episode"
    for name in ("istar", "lare", "turn_gae", "archer"):
        rec = run_cell("full", task, name, 0, inst)
        assert rec["status"] == "ok", (name, rec["reason"])


def test_the_shipped_full_run_is_complete_and_valid():
    import json

    from labkit.bench import estimator_names, read_records
    from labkit.core.paths import data_path

    folder = data_path("bench", "full")
    recs = read_records(folder)
    meta = json.loads((folder / "meta.json").read_text())
    tasks, seeds = suite_tasks("full")
    assert len(recs) == meta["records"] == len(tasks) * len(seeds) * len(estimator_names("all")), \
        "the cached full run is stale (an estimator or task was added): rerun scripts/build_bench_full.py"
    assert {s: sum(r["status"] == s for r in recs) for s in ("ok", "skipped", "error")} == meta["counts"]
    assert meta["wall_seconds"] > 0 and meta["torch_threads"] == 1
    for r in recs[::7]:  # a spread sample: validating all 2793 takes longer than a unit test should
        validate_record(r)
    assert {r["unit"] for r in recs} == {"tokens", "turns", "agents"}
