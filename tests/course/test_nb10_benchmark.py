"""Notebook 10's runners (labkit.course.nb10_benchmark) at small sizes: they measure what they say."""
import pytest

from labkit.core.credit import Credit
from labkit.core.stats import group_normalize
from labkit.course import nb10_benchmark as lesson
from labkit.credit import ESTIMATORS


def _record(family, estimator, task, seed, value, inputs=None, status="ok"):
    metrics = {k: None for k in ("rank_correlation", "sign_agreement", "recall_at_k", "gradient_cosine",
                                 "gradient_variance", "luck_weight")}
    metrics["rank_correlation"] = value
    return {"family": family, "estimator": estimator, "task": task, "seed": seed, "status": status,
            "metrics": metrics, "inputs": inputs or {}}


@pytest.fixture
def own_names():
    """Names a test registers through add_your_own; removed afterwards so no other test sees them."""
    names = []
    yield names
    for n in names:
        ESTIMATORS.pop(n, None)
        lesson._OWN.discard(n)


def test_leaderboard_table_ranks_by_mean_and_keeps_the_input_flag():
    recs = [_record("agentic", "a", "t1", 0, 0.2), _record("agentic", "a", "t2", 0, 0.4),   # mean 0.3, std 0.1
            _record("agentic", "b", "t1", 0, 0.9, {"value_fn": "exact DP (ORACLE)"}),
            _record("agentic", "c", "t1", 0, 0.5), _record("agentic", "d", "t1", 0, None),
            _record("agentic", "e", "t1", 0, 0.99, status="skipped"),
            _record("reasoning", "a", "t3", 0, -0.1), _record("reasoning", "c", "t3", 0, 0.1)]
    t = lesson.leaderboard_table(recs)
    ag = t[t.family == "agentic"]
    assert list(ag.estimator) == ["b", "c", "a"] and list(ag["rank"]) == [1, 2, 3]   # skipped and null left out
    a = ag.set_index("estimator").loc["a"]
    assert a["mean"] == pytest.approx(0.3) and a["std"] == pytest.approx(0.1) and a["n"] == 2 and a["tasks"] == 2
    assert ag.set_index("estimator").fed.to_dict() == {"b": "oracle", "c": "", "a": ""}
    assert list(t[t.family == "reasoning"].estimator) == ["c", "a"]
    tb = lesson.top_bottom(t).set_index(["family", "end"]).estimator
    assert tb[("agentic", "top")] == "c" and tb[("agentic", "bottom")] == "a"   # the oracle-fed b is left out
    assert lesson.top_bottom(t, own_inputs=False).set_index(["family", "end"]).estimator[("agentic", "top")] == "b"
    assert tb[("reasoning", "top")] == "c" and tb[("reasoning", "bottom")] == "a"
    with pytest.raises(ValueError, match="^metric"):
        lesson.leaderboard_table(recs, metric="accuracy")
    with pytest.raises(ValueError, match="^k"):
        lesson.top_bottom(t, k=0)
    with pytest.raises(ValueError, match="^table"):
        lesson.top_bottom(t.drop(columns="fed"))
    with pytest.raises(ValueError, match="^by"):
        lesson.leaderboard_table(recs, by="task")
    # by world: the group column is the task's env, and top_bottom follows it
    for r in recs:
        r["task_params"] = {"env": "LM" if r["task"] == "t3" else "Chain"}
    w = lesson.leaderboard_table(recs, by="world")
    assert list(w.columns[:2]) == ["world", "rank"] and set(w.world) == {"LM", "Chain"}
    assert lesson.top_bottom(w).set_index(["world", "end"]).estimator[("LM", "top")] == "c"


def test_the_cached_full_run_is_summarised_per_family():
    recs, meta = lesson.load_full_run()
    s = lesson.run_summary(recs)
    assert set(s.family) == {"reasoning", "agentic", "multi-agent"}
    assert int(s[["ok", "skipped", "error"]].sum().sum()) == len(recs) == meta["records"]
    assert int(s.ok.sum()) == meta["counts"]["ok"] and meta["wall_seconds"] > 0
    with pytest.raises(ValueError, match="^records"):
        lesson.run_summary([])


def test_frontier_chart_data_covers_every_estimator_and_horizon():
    table = lesson.frontier_runs()
    assert set(table.world) == {"chain", "toolworld", "chain_shared"}   # both caches, one table
    data = lesson.frontier_data(table)
    want = set(map(tuple, table[["world", "horizon", "estimator"]].drop_duplicates().values.tolist()))
    for metric in lesson.FRONTIER_METRICS:
        got = set(map(tuple, data[data.metric == metric][["world", "horizon", "estimator"]]
                      .drop_duplicates().values.tolist()))
        assert got == want, metric
    assert set(data[data.world == "chain_shared"].seeds) == {5} and set(data[data.world != "chain_shared"].seeds) == {3}
    assert (data["min"] <= data["mean"] + 1e-12).all()
    for world in ("chain_shared", "chain", "toolworld"):
        hs = lesson.horizons(data, world)
        assert hs == sorted(set(table[table.world == world].horizon))
        for i in range(4):   # the notebook's slider runs 0..3; ToolWorld's 3 horizons clip at the last
            spec = lesson.frontier_chart(data, world, i, "credit_rank").to_dict()
            rows = next(iter(spec["datasets"].values()))
            h = hs[min(i, len(hs) - 1)]
            assert spec["title"]["text"] == f"{lesson.WORLD_NAMES[world]}, horizon {h}: mean and min-max over seeds"
            assert {r["estimator"] for r in rows} == set(table[table.world == world].estimator)
            at = data[(data.world == world) & (data.horizon == h) & (data.metric == "credit_rank")]
            assert sorted((r["estimator"], r["budget"], r["mean"]) for r in rows) == \
                sorted(zip(at.estimator, at.budget, at["mean"]))
            assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"
    # the step filter keeps GRPO and the vine arms of one step length, on the shared chain only
    spec = lesson.frontier_chart(data, "chain_shared", 3, "success", step_len=20).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {r["estimator"] for r in rows} == {"grpo", "vineppo_m20_k2", "vineppo_m20_k8"}
    assert lesson.vine_arms(20) == ["vineppo_m20_k2", "vineppo_m20_k8"] and len(lesson.vine_arms()) == 6
    spec = lesson.frontier_chart(data, "chain", 0, "success", step_len=20).to_dict()
    assert {r["estimator"] for r in next(iter(spec["datasets"].values()))} == {"grpo", "vineppo"}
    with pytest.raises(ValueError, match="^metric"):
        lesson.frontier_chart(data, "chain", 0, "loss")
    with pytest.raises(ValueError, match="^world"):
        lesson.frontier_chart(data, "gridworld", 0)
    with pytest.raises(ValueError, match="^horizon_index"):
        lesson.frontier_chart(data, "chain", -1)
    with pytest.raises(ValueError, match="^step_len"):
        lesson.frontier_chart(data, "chain_shared", 0, step_len=3)
    c = lesson.crossover_table(table)
    assert set(c.estimator) == set(table.estimator) - {"grpo"}
    assert (c.gap_low <= c.gap + 1e-12).all() and (c.gap <= c.gap_high + 1e-12).all()
    assert set(lesson.crossover_table(table, worlds=["chain"]).world) == {"chain"}
    with pytest.raises(ValueError, match="^worlds"):
        lesson.crossover_table(table, worlds=["gridworld"])


def _runs(rows):
    """A hand-made frontier: (world, horizon, estimator, budget, seed, success)."""
    import pandas as pd

    return pd.DataFrame([dict(world=w, horizon=h, estimator=e, budget=b, seed=s, success=v, credit_rank_start=0.1 * s)
                         for w, h, e, b, s, v in rows])


def _small_frontier():
    rows = []
    for s in range(3):
        # GRPO reaches 0.9 at budget 2 at T = 10 and at budget 4 at T = 40
        rows += [("chain_shared", 10, "grpo", 1, s, 0.5), ("chain_shared", 10, "grpo", 2, s, 0.95),
                 ("chain_shared", 10, "grpo", 4, s, 1.0),
                 ("chain_shared", 40, "grpo", 1, s, 0.3), ("chain_shared", 40, "grpo", 2, s, 0.6),
                 ("chain_shared", 40, "grpo", 4, s, 0.95)]
        # a vine arm one budget slower at T = 10; at T = 40 one seed collapses and the mean never gets there
        rows += [("chain_shared", 10, "vineppo_m5_k2", 1, s, 0.3), ("chain_shared", 10, "vineppo_m5_k2", 2, s, 0.8),
                 ("chain_shared", 10, "vineppo_m5_k2", 4, s, 0.95),
                 ("chain_shared", 40, "vineppo_m5_k2", 1, s, 0.3), ("chain_shared", 40, "vineppo_m5_k2", 2, s, 0.4),
                 ("chain_shared", 40, "vineppo_m5_k2", 4, s, 0.02 if s == 2 else 0.97)]
        rows += [("chain", 10, "grpo", b, s, v) for b, v in ((1, 0.7), (2, 0.92), (4, 1.0))]
    return _runs(rows)


def test_frontier_prompt_answers_read_the_slider_data():
    data = lesson.frontier_data()
    ans = lesson.frontier_prompt_answers(data)
    success = data[data.metric == "success"]
    assert ans["budget"] == success[success.world == "chain_shared"].budget.max()
    assert list(ans["shared"].columns) == lesson.horizons(data, "chain_shared")
    assert set(ans["shared"].index) == {"grpo", *lesson.vine_arms()}
    at = success[(success.world == "chain_shared") & (success.budget == ans["budget"])
                 & (success.estimator == "vineppo_m1_k2") & (success.horizon == 200)]
    assert ans["shared"].loc["vineppo_m1_k2", 200] == at["mean"].item()
    tab = ans["tabular_grpo"]
    assert list(tab.index) == sorted(set(success[success.world == "chain"].budget))
    assert ans["tabular_spread"] == max(tab.loc[b].max() - tab.loc[b].min() for b in tab.index) >= 0
    with pytest.raises(ValueError, match="^data"):
        lesson.frontier_prompt_answers(data.drop(columns="metric"))
    with pytest.raises(ValueError, match="^data"):
        lesson.frontier_prompt_answers(data[data.world != "chain"])


def test_time_to_success_table_gives_each_arm_and_horizon_its_first_budget_and_spread():
    t = lesson.time_to_success_table(_small_frontier())
    assert list(t.columns) == [10, 40] and list(t.index) == [("chain_shared", "grpo"), ("chain_shared", "vineppo_m5_k2"),
                                                           ("chain", "grpo")]
    assert t.loc[("chain_shared", "grpo"), 10] == "2 (2–2)" and t.loc[("chain_shared", "grpo"), 40] == "4 (4–4)"
    assert t.loc[("chain_shared", "vineppo_m5_k2"), 10] == "4 (4–4)"
    assert t.loc[("chain_shared", "vineppo_m5_k2"), 40] == "none (2/3 seeds)"
    with pytest.raises(ValueError, match="^worlds"):
        lesson.time_to_success_table(_small_frontier(), worlds=["toolworld"])


def test_closest_to_grpo_reads_the_gap_where_grpo_first_succeeds():
    c = lesson.closest_to_grpo(_small_frontier()).set_index("horizon")
    assert c.loc[10, "budget"] == 2 and c.loc[10, "arm"] == "vineppo_m5_k2"
    assert c.loc[10, "gap"] == pytest.approx(-0.15) and c.loc[10, "gap_low"] == pytest.approx(-0.15)
    assert c.loc[10, "fastest_arm"] == "vineppo_m5_k2" and c.loc[10, "fastest_time"] == 4
    # at T = 40 GRPO reaches 0.9 at budget 4; the vine arm trails there by the collapsed seed's share
    assert c.loc[40, "budget"] == 4 and c.loc[40, "gap"] == pytest.approx((0.97 * 2 + 0.02) / 3 - 0.95)
    assert c.loc[40, "gap_low"] < c.loc[40, "gap"] < c.loc[40, "gap_high"] and c.loc[40, "fastest_arm"] == "none"
    with pytest.raises(ValueError, match="^world"):
        lesson.closest_to_grpo(_small_frontier(), world="toolworld")


def test_collapses_count_runs_that_ended_below_the_floor():
    c = lesson.collapses(_small_frontier())
    assert c.to_dict("records") == [{"world": "chain_shared", "horizon": 40, "estimator": "vineppo_m5_k2",
                                     "collapsed": 1, "runs": 9, "seeds": "2", "budgets": "4"}]
    assert len(lesson.collapses(_small_frontier(), below=0.01)) == 0
    assert lesson.collapses(_small_frontier(), below=0.35).collapsed.sum() == 1 + 9   # the 0.02 and nine runs at 0.3
    with pytest.raises(ValueError, match="^below"):
        lesson.collapses(_small_frontier(), below=2)


def test_start_credit_quality_and_the_build_table_read_the_caches():
    q = lesson.start_credit_quality(_small_frontier())
    assert q.loc[("chain_shared", "grpo"), 10] == pytest.approx(0.1)   # seeds 0, 1, 2 -> 0, 0.1, 0.2
    assert q.loc[("chain", "grpo")].isna()[40]
    builds = lesson.frontier_builds().set_index("cache")
    assert builds.loc["data/bench/frontier_shared", "runs"] == len(lesson.frontier_runs().query("world == 'chain_shared'"))
    assert builds.loc["data/bench/frontier_shared", "command"].startswith("python scripts/build_frontier.py --suite shared")
    assert (builds.seconds > 0).all()


def _ramp(rollouts):
    """Reward minus the group mean, times position / length."""
    dev = group_normalize(rollouts.scores, rollouts.group_ids, normalize_std=False)[0]
    pos = rollouts.mask.cumsum(1).double()
    return Credit.from_tokens(rollouts, dev[:, None].double() * pos / rollouts.mask.sum(1, keepdim=True), "ramp")


def _flat(rollouts):
    """The same deviation on every position (what GRPO without the std does)."""
    dev = group_normalize(rollouts.scores, rollouts.group_ids, normalize_std=False)[0]
    return Credit.from_tokens(rollouts, dev[:, None].double().expand_as(rollouts.mask).clone(), "flat")


def test_add_your_own_registers_benchmarks_and_can_be_run_again(own_names):
    own_names.append("nb10_test_ramp")
    against = lesson.live_run(("grpo", "shapley"), suite="tiny")
    out = lesson.add_your_own(_ramp, "nb10_test_ramp", against=against, suite="tiny")
    assert "nb10_test_ramp" in ESTIMATORS
    recs = out["records"]
    assert recs and {r["estimator"] for r in recs} == {"nb10_test_ramp"} and all(r["status"] == "ok" for r in recs)
    board = out["leaderboard"]
    assert set(board.estimator) == {"grpo", "shapley", "nb10_test_ramp"}
    rank = out["rank"].set_index("family")
    assert set(rank.index) == {r["family"] for r in recs}
    for fam, row in rank.iterrows():   # its rank is its place by mean among its family's rows
        part = board[board.family == fam]
        assert row["out_of"] == len(part)
        assert row["rank"] == 1 + int((part["mean"] > row["mean"]).sum()) + \
            int(((part["mean"] == row["mean"]) & (part.estimator < "nb10_test_ramp")).sum())
    assert "nb10_test_ramp" in out["card"] and set(out["items"].status) <= {"filled", "partial", "missing"}
    # the reader edits the function and runs the cell again: the name is replaced, not refused
    again = lesson.add_your_own(_flat, "nb10_test_ramp", against=against, suite="tiny")
    assert ESTIMATORS["nb10_test_ramp"].__wrapped__ is _flat
    chain = [r for r in again["records"] if r["task"].startswith("chain")][0]
    grpo_like = [r for r in against if r["task"] == chain["task"] and r["estimator"] == "grpo"][0]
    # flat deviation ranks positions exactly as GRPO does (same sign and order within a batch)
    assert chain["metrics"]["rank_correlation"] == pytest.approx(grpo_like["metrics"]["rank_correlation"])
    with pytest.raises(ValueError, match="^name"):
        lesson.add_your_own(_ramp, "grpo", suite="tiny")
    with pytest.raises(ValueError, match="^name"):
        lesson.register_own(_ramp, "not a name")
    with pytest.raises(TypeError, match="^fn"):
        lesson.register_own(3, "nb10_test_ramp")
    with pytest.raises(ValueError, match="^against"):
        lesson.add_your_own(_ramp, "nb10_test_ramp", against=against, suite="quick")


def test_card_widget_follows_its_dropdown():
    recs = lesson.live_run(("grpo", "rloo"), suite="tiny")
    box = lesson.card_widget(recs, ["grpo", "rloo"], "grpo")
    assert "Reporting checklist: grpo" in box.card
    box.dropdown.value = "rloo"
    assert "Reporting checklist: rloo" in box.card
    assert box.children[1].outputs[0]["data"]["text/markdown"] == box.card
    md, items = lesson.card(recs, "rloo")
    assert md == box.card and list(lesson.card_status(items).columns) == ["key", "status", "reason"]
    with pytest.raises(ValueError, match="^estimator"):
        lesson.card(recs, "vineppo")


def test_paired_gaps_pair_each_task_and_seed_with_the_baseline():
    # b beats the baseline by exactly 0.1 on every pair while the tasks differ a lot: the gap's
    # interval is a point; c loses once and wins once
    recs = [_record("agentic", "grpo", "t1", 0, 0.1), _record("agentic", "grpo", "t2", 0, 0.8),
            _record("agentic", "b", "t1", 0, 0.2, {"teacher": "STAND-IN teacher"}), _record("agentic", "b", "t2", 0, 0.9),
            _record("agentic", "c", "t1", 0, 0.0), _record("agentic", "c", "t2", 0, 1.0),
            _record("agentic", "d", "t1", 0, 0.5, status="skipped"), _record("reasoning", "grpo", "t3", 0, 0.3)]
    g = lesson.paired_gaps(recs, estimators=["c", "b"], n_boot=200)
    assert list(g.estimator) == ["b", "c"]                     # largest gap first
    b, c = g.set_index("estimator").loc["b"], g.set_index("estimator").loc["c"]
    assert b.gap == pytest.approx(0.1) and b.low == pytest.approx(0.1) and b.high == pytest.approx(0.1)
    assert b.fed == "stand-in" and b.ahead == "2/2" and b["mean"] == pytest.approx(0.55)
    assert c.gap == pytest.approx(0.05) and c.low < 0 < c.high and c.ahead == "1/2" and c.fed == ""
    assert g.equals(lesson.paired_gaps(recs, estimators=["c", "b"], n_boot=200))   # seeded
    with pytest.raises(ValueError, match="^estimators:"):
        lesson.paired_gaps(recs, estimators=["d"])
    with pytest.raises(ValueError, match="^baseline:"):
        lesson.paired_gaps(recs, baseline="nobody")
    with pytest.raises(ValueError, match="^family:"):
        lesson.paired_gaps(recs, family="robots")
    with pytest.raises(ValueError, match="^n_boot:"):
        lesson.paired_gaps(recs, n_boot=5)


def test_paired_gaps_on_the_full_run_cover_the_later_agentic_methods():
    from labkit.survey import after_survey_estimators
    full, _ = lesson.load_full_run()
    g = lesson.paired_gaps(full)
    ran = {r["estimator"] for r in full if r["family"] == "agentic" and r["status"] == "ok"}
    assert set(g.estimator) == set(after_survey_estimators()) & ran
    assert (g.low <= g.gap).all() and (g.gap <= g.high).all() and g.gap.is_monotonic_decreasing
