"""Notebook 10's runners (labkit.course.nb10_benchmark) at small sizes: they measure what they say."""
import pytest

from labkit.bench.frontier import load_frontier
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
    table, _, _ = load_frontier()
    data = lesson.frontier_data(table)
    want = set(map(tuple, table[["world", "horizon", "estimator"]].drop_duplicates().values.tolist()))
    for metric in lesson.FRONTIER_METRICS:
        got = set(map(tuple, data[data.metric == metric][["world", "horizon", "estimator"]]
                      .drop_duplicates().values.tolist()))
        assert got == want, metric
    assert (data.seeds == 3).all() and (data["min"] <= data["mean"] + 1e-12).all()
    for world in ("chain", "toolworld"):
        hs = lesson.horizons(data, world)
        assert hs == sorted(set(table[table.world == world].horizon))
        for i in range(4):   # the notebook's slider runs 0..3; ToolWorld's 3 horizons clip at the last
            spec = lesson.frontier_chart(data, world, i, "credit_rank").to_dict()
            rows = next(iter(spec["datasets"].values()))
            h = hs[min(i, len(hs) - 1)]
            assert spec["title"]["text"].endswith(f"horizon {h}: mean and min-max over seeds")
            assert {r["estimator"] for r in rows} == set(table[table.world == world].estimator)
            at = data[(data.world == world) & (data.horizon == h) & (data.metric == "credit_rank")]
            assert sorted((r["estimator"], r["budget"], r["mean"]) for r in rows) == \
                sorted(zip(at.estimator, at.budget, at["mean"]))
            assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"
    with pytest.raises(ValueError, match="^metric"):
        lesson.frontier_chart(data, "chain", 0, "loss")
    with pytest.raises(ValueError, match="^world"):
        lesson.frontier_chart(data, "gridworld", 0)
    with pytest.raises(ValueError, match="^horizon_index"):
        lesson.frontier_chart(data, "chain", -1)
    c = lesson.crossover_table()
    assert set(c.estimator) == set(table.estimator) - {"grpo"}
    with pytest.raises(ValueError, match="^crossover"):
        lesson.crossover_table(c.drop(columns="wins"))


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
