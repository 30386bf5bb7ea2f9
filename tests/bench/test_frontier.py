"""labkit.bench.frontier: every unit of compute is counted (the sampled batch and the estimator's
own cost), a run stops within one iteration of its budget, the sweep resumes from its CSV, the
crossover is found on a hand-made table, and bad arguments are named.
"""

import pandas as pd
import pytest

from labkit.bench import frontier as fr
from labkit.core.credit import Cost
from labkit.credit import get_estimator
from repo_scripts import load_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _recording(learner, name):
    """The arm's estimator factory, wrapped to record every batch and every credit cost."""
    make = fr._estimator_for(learner, name)
    seen = []

    def wrapped(seed):
        est = make(seed)

        def run(ro):
            credit = est(ro)
            seen.append((ro, credit.cost))
            return credit
        return run
    return wrapped, seen


def test_cost_units_counts_each_policy_position_once_and_takes_weights():
    # sequences with their tokens (vines) and one-action forwards without tokens (C3) both count positions
    assert fr.cost_units(Cost(policy_forwards=3, policy_tokens=30, env_steps=30, env_resets=3)) == 63
    assert fr.cost_units(Cost(policy_forwards=12, env_steps=12, env_resets=2)) == 26
    assert fr.cost_units(Cost(aux_calls=5), {"aux_calls": 10.0}) == 50
    assert fr.cost_units(Cost(env_steps=4, policy_tokens=4), {"env_steps": 0.0}) == 4


@pytest.mark.parametrize("world,horizon,name", [("chain", 6, "vineppo"), ("toolworld", 6, "c3"),
                                                ("chain", 6, "grpo")])
def test_spent_is_every_batch_plus_every_credit_cost_and_stays_within_one_iteration(world, horizon, name):
    learner = fr.make_learner(world, horizon, name)
    make, seen = _recording(learner, name)
    budget = 150 * fr.episode_units(horizon)
    rec = fr.train_to_budget(learner, make, budget, seed=3)
    assert rec["iterations"] == len(seen) >= 2
    expected = sum(fr.cost_units(fr.rollout_cost(ro)) + fr.cost_units(c) for ro, c in seen)
    assert rec["spent"] == pytest.approx(expected)
    assert rec["estimator_units"] == pytest.approx(sum(fr.cost_units(c) for _, c in seen))
    assert (rec["estimator_units"] > 0) == (name != "grpo")
    assert rec["spent"] <= budget + rec["max_iteration_units"]
    assert rec["episodes"] == sum(ro.batch_size for ro, _ in seen)


def test_an_estimators_own_cost_buys_fewer_iterations():
    grpo = get_estimator("grpo")

    def priced(aux):
        def make(seed):
            def run(ro):
                credit = grpo(ro)
                credit.cost = Cost(aux_calls=aux)
                return credit
            return run
        return make
    runs = {aux: fr.train_to_budget(fr.make_learner("chain", 5, "grpo"), priced(aux), 3000, seed=0)
            for aux in (0, 400)}
    assert runs[400]["iterations"] < runs[0]["iterations"]
    # 32 episodes of 5 steps: 32 * (5 + 5 + 1) = 352 units a batch, plus the priced calls
    assert runs[0]["max_iteration_units"] == 352
    assert runs[400]["max_iteration_units"] == 752
    assert runs[400]["estimator_units"] == 400 * runs[400]["iterations"]


def test_a_budget_below_one_iteration_runs_one_iteration_and_reports_the_overshoot():
    row = fr.frontier_cell("chain", 5, "grpo", 1, seed=0)
    assert row["iterations"] == 1
    assert row["over_budget"] == pytest.approx(row["spent"] - row["budget_units"]) and row["over_budget"] > 0
    assert 0 <= row["success"] <= 1 and row["success_start"] == pytest.approx(0.25)


def test_sweep_writes_resumes_and_skips_finished_cells(tmp_path, monkeypatch):
    out = tmp_path / "f.csv"
    grid, est = {"chain": [4]}, {"chain": ["grpo", "vineppo"]}
    first = fr.sweep(grid, est, [20], [0], out=out, progress=False)
    assert len(first) == 2 and set(first.estimator) == {"grpo", "vineppo"}
    assert len(pd.read_csv(out)) == 2

    calls = []
    real = fr.frontier_cell
    monkeypatch.setattr(fr, "frontier_cell", lambda *a, **k: calls.append(a) or real(*a, **k))
    again = fr.sweep(grid, est, [20], [0], out=out, progress=False)
    assert calls == [] and len(again) == 2
    pd.testing.assert_frame_equal(again.sort_values("estimator").reset_index(drop=True),
                                  first.sort_values("estimator").reset_index(drop=True), check_dtype=False)
    more = fr.sweep(grid, est, [20], [0, 1], out=out, progress=False)
    assert [c[4] for c in calls] == [1, 1] and len(more) == 4 and len(pd.read_csv(out)) == 4


def _table(rows):
    return pd.DataFrame([dict(world="chain", horizon=h, estimator=e, budget=b, seed=s, success=v)
                         for h, e, b, s, v in rows])


def test_crossover_is_the_first_budget_where_the_fine_mean_is_ahead_or_none():
    rows = []
    for s, (lo, hi) in enumerate([(0.2, 0.9), (0.3, 0.7), (0.1, 0.8)]):
        # horizon 10: GRPO ahead at budget 1, behind at budgets 2 and 4
        rows += [(10, "grpo", 1, s, 0.5), (10, "vineppo", 1, s, lo),
                 (10, "grpo", 2, s, 0.5), (10, "vineppo", 2, s, hi),
                 (10, "grpo", 4, s, 0.6), (10, "vineppo", 4, s, 0.9),
                 # horizon 40: never ahead
                 (40, "grpo", 1, s, 0.5), (40, "vineppo", 1, s, 0.4),
                 (40, "grpo", 2, s, 0.9), (40, "vineppo", 2, s, 0.9)]
    table = fr.crossover(_table(rows))
    h10 = table[table.horizon == 10].iloc[0]
    assert h10.crossover == 2 and h10.stays_ahead_from == 2 and h10.wins == 2 and h10.budgets == 3
    assert h10.fine_mean == pytest.approx(0.8) and h10.base_mean == pytest.approx(0.5)
    assert h10.fine_std == pytest.approx(0.1) and h10.base_std == 0
    assert (h10.gap_min, h10.gap_max) == pytest.approx((0.2, 0.4))
    h40 = table[table.horizon == 40].iloc[0]
    # equal means are not "exceeding"; with no crossover the row shows the largest budget
    assert h40.crossover == "none" and h40.stays_ahead_from == "none"
    assert h40.wins == 0 and h40.fine_mean == pytest.approx(0.9)


def test_gaps_compare_each_budget_with_an_interval_over_independent_seeds():
    rows = []
    for s, (g, v) in enumerate([(0.9, 0.5), (0.95, 0.6), (1.0, 0.7)]):
        rows += [(10, "grpo", 1, s, g), (10, "vineppo", 1, s, v), (10, "grpo", 2, s, 0.99), (10, "vineppo", 2, s, 0.99)]
    rows.append((10, "vineppo", 1, 3, 0.6))   # a seed GRPO did not run: in the means, not in the per-seed range
    g = fr.gaps(_table(rows)).set_index("budget")
    one = g.loc[1]
    assert one.gap == pytest.approx(0.6 - 0.95) and one.seeds == 4
    assert one.gap_low < one.gap < one.gap_high < 0            # clearly behind: the interval excludes 0
    assert (one.gap_min, one.gap_max) == pytest.approx((-0.4, -0.3))
    assert g.loc[2].gap == pytest.approx(0.0) and g.loc[2].gap_low == g.loc[2].gap_high == pytest.approx(0.0)
    # crossover reports the gap's interval at the budget it names (here the largest: no win)
    row = fr.crossover(_table(rows)).iloc[0]
    assert row.crossover == "none" and (row.gap_low, row.gap_high) == pytest.approx((0.0, 0.0))
    with pytest.raises(ValueError, match="^fine"):
        fr.gaps(_table(rows), "c3")


def test_a_win_followed_by_a_loss_is_a_crossover_but_not_staying_ahead():
    rows = [(10, "grpo", 1, 0, 0.3), (10, "gigpo", 1, 0, 0.4), (10, "grpo", 2, 0, 0.8), (10, "gigpo", 2, 0, 0.7),
            (10, "grpo", 4, 0, 0.8), (10, "gigpo", 4, 0, 0.9)]
    row = fr.crossover(_table(rows)).iloc[0]
    assert row.crossover == 1 and row.stays_ahead_from == 4 and row.wins == 2


@pytest.mark.parametrize("call,name", [
    (lambda: fr.frontier_cell("chess", 10, "grpo", 10, 0), "world"),
    (lambda: fr.frontier_cell("chain", 10, "nope", 10, 0), "estimator"),
    (lambda: fr.frontier_cell("chain", 10, "c3", 10, 0), "estimator"),
    (lambda: fr.frontier_cell("chain", 10, "grpo", 0, 0), "budget"),
    (lambda: fr.frontier_cell("chain", 1, "grpo", 10, 0), "horizon"),
    (lambda: fr.train_to_budget(fr.make_learner("chain", 4, "grpo"), "grpo", 10), "make_estimator"),
    (lambda: fr.cost_units(Cost(), {"gpu_hours": 1.0}), "weights"),
    (lambda: fr.cost_units({"env_steps": 1}), "cost"),
    (lambda: fr.sweep({"chain": [4]}, {"chain": ["grpo"]}, [], [0], progress=False), "budgets"),
    (lambda: fr.sweep({"chain": [4]}, {}, [10], [0], progress=False), "estimators"),
    (lambda: fr.sweep({}, {"chain": ["grpo"]}, [10], [0], progress=False), "grid"),
    (lambda: fr.crossover(pd.DataFrame({"world": ["chain"]})), "table"),
    (lambda: fr.crossover(_table([(10, "vineppo", 1, 0, 0.5)])), "base"),
    (lambda: fr.crossover(_table([(10, "grpo", 1, 0, 0.5)]), fine="c3"), "fine"),
])
def test_bad_arguments_are_named(call, name):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert str(err.value).startswith(name + ":")


def test_sweep_refuses_a_folder_as_out(tmp_path):
    with pytest.raises(ValueError, match="^out:"):
        fr.sweep({"chain": [4]}, {"chain": ["grpo"]}, [10], [0], out=tmp_path, progress=False)


def test_frontier_band_summarises_seeds_per_budget():
    t = _table([(10, "grpo", 1, 0, 0.2), (10, "grpo", 1, 1, 0.4), (10, "grpo", 2, 0, 0.9)])
    t["spent"] = [10.0, 30.0, 50.0]
    band = fr.frontier_band(t)
    one = band[band.budget == 1].iloc[0]
    assert (one["mean"], one["min"], one["max"], one["seeds"], one["spent"]) == pytest.approx((0.3, 0.2, 0.4, 2, 20.0))
    assert band[band.budget == 2].iloc[0]["std"] == 0.0
    with pytest.raises(ValueError, match="^table:"):
        fr.frontier_band(t.drop(columns="spent"))


def test_the_shipped_frontier_loads_and_matches_its_crossover_table(tmp_path):
    rows, cross, meta = fr.load_frontier()
    assert len(rows) == meta["cells"] and set(fr.KEY) <= set(rows.columns)
    again = fr.crossover(rows)
    assert list(again.crossover.astype(str)) == list(cross.crossover.astype(str))
    # every cell ends within one iteration of its budget
    assert (rows.spent <= rows.budget_units + rows.max_iteration_units).all()
    with pytest.raises(FileNotFoundError, match="^path:"):
        fr.load_frontier(tmp_path)


# --------------------------------------------------------------------------- the shared-weight chain, steps and vines
def test_the_shared_chain_world_trains_a_shared_weight_policy_on_the_same_chain():
    from labkit.policies import SharedFeaturePolicy, TabularSoftmaxPolicy
    shared, table = fr.make_learner("chain_shared", 12, "grpo"), fr.make_learner("chain", 12, "grpo")
    assert isinstance(shared.policy, SharedFeaturePolicy) and isinstance(table.policy, TabularSoftmaxPolicy)
    assert repr(shared.env) == repr(table.env) and shared.batch_size == table.batch_size == 32
    row = fr.frontier_cell("chain_shared", 12, "grpo", 200, seed=0)
    assert row["world"] == "chain_shared" and row["success_start"] == pytest.approx(0.25)
    assert row["success"] > row["success_start"] + 0.2


def test_vine_arms_are_named_by_step_length_and_vines_per_fork():
    for m in fr.VINE_STEP_LENS:
        for k in fr.VINE_KS:
            arm = fr.ARMS[fr.vine_arm_name(m, k)]
            assert (arm.estimator, arm.step_len, arm.options) == ("vineppo", m, {"k": k})
            assert set(arm.batch) == {"chain", "chain_shared"}
    assert fr.vine_arm_name(5, 2) == "vineppo_m5_k2"
    # the plain arm is one fork per token with two vines
    assert (fr.ARMS["vineppo"].step_len, fr.ARMS["vineppo"].options) == (1, {"k": 2})


@pytest.mark.parametrize("world", ["chain", "chain_shared"])
def test_a_vine_arm_forks_at_its_steps_and_pays_every_vine_token(world):
    T, name = 12, "vineppo_m5_k8"
    learner = fr.make_learner(world, T, name)
    assert learner.env.step_len == 5
    make, seen = _recording(learner, name)
    rec = fr.train_to_budget(learner, make, 6 * 8 * 8 * 25 * 2, seed=1)
    # 8 episodes a batch, forks at tokens 0, 5 and 10, 8 vines each, every vine runs to the end
    vine_tokens = 8 * 8 * ((T - 0) + (T - 5) + (T - 10))
    for ro, cost in seen:
        assert ro.step_ids[0].tolist() == [0] * 5 + [1] * 5 + [2] * 2
        assert cost.env_steps == cost.policy_tokens == vine_tokens and cost.env_resets == 8 * 3 * 8
    assert rec["estimator_units"] == len(seen) * (2 * vine_tokens + 8 * 3 * 8)


def test_a_step_longer_than_the_chain_is_the_whole_chain_and_a_mismatched_learner_is_refused():
    assert fr.make_learner("chain_shared", 10, "vineppo_m20_k2").env.step_len == 10
    with pytest.raises(ValueError, match="^estimator: 'vineppo_m5_k2' forks at steps of 5"):
        fr._estimator_for(fr.make_learner("chain", 10, "grpo"), "vineppo_m5_k2")


def test_every_world_has_one_learning_rate_and_a_cell_uses_it(monkeypatch):
    assert set(fr.LEARNING_RATES) == set(fr.WORLDS)
    seen = []
    real = fr.train_to_budget
    monkeypatch.setattr(fr, "train_to_budget", lambda *a, **k: seen.append(k["lr"]) or real(*a, **k))
    monkeypatch.setitem(fr.LEARNING_RATES, "chain_shared", 0.05)
    fr.frontier_cell("chain_shared", 6, "grpo", 10, 0)
    fr.frontier_cell("chain_shared", 6, "vineppo_m5_k2", 10, 0, lr=0.2)
    assert seen == [0.05, 0.2]


# --------------------------------------------------------------------------- time to success
def test_time_to_success_is_the_first_budget_the_mean_reaches_with_the_seeds_spread():
    rows = []
    for s, curve in enumerate([(0.5, 0.95, 0.99), (0.6, 0.85, 0.97), (0.92, 0.88, 0.99)]):
        rows += [(10, "grpo", b, s, v) for b, v in zip((1, 2, 4), curve)]
        rows += [(10, "vineppo_m5_k2", b, s, v) for b, v in zip((1, 2, 4), (0.3, 0.5, 0.95 if s else 0.6))]
    table = fr.time_to_success(_table(rows), 0.9)
    grpo = table[table.estimator == "grpo"].iloc[0]
    # means 0.673, 0.893, 0.983: first reached at 4; seeds reach it at 2, 4 and 1
    assert grpo.time_to_success == 4 and grpo.mean_at == pytest.approx(0.9833, abs=1e-4)
    assert (grpo.seeds, grpo.seeds_reached, grpo.seed_first, grpo.seed_last) == (3, 3, 1, 4)
    vine = table[table.estimator == "vineppo_m5_k2"].iloc[0]
    # mean at the largest budget 0.833: never; seed 0 never reaches it, so the slowest seed is "none"
    assert vine.time_to_success == "none" and vine.mean_at == pytest.approx(2.5 / 3)
    assert (vine.seeds_reached, vine.seed_first, vine.seed_last) == (2, 4, "none")
    per_seed = fr.time_to_success(_table(rows), 0.9, per_seed=True)
    assert per_seed[per_seed.estimator == "grpo"].time_to_success.tolist() == [2, 4, 1]
    assert per_seed[per_seed.estimator == "vineppo_m5_k2"].time_to_success.tolist() == ["none", 4, 4]
    # reaching is >=: a threshold equal to a mean counts
    assert fr.time_to_success(_table(rows), 0.3).set_index("estimator").time_to_success["vineppo_m5_k2"] == 1


@pytest.mark.parametrize("call,name", [
    (lambda: fr.time_to_success(pd.DataFrame({"world": ["chain"]})), "table"),
    (lambda: fr.time_to_success([1, 2]), "table"),
    (lambda: fr.time_to_success(_table([(10, "grpo", 1, 0, 0.5)]), "high"), "threshold"),
    (lambda: fr.time_to_success(_table([(10, "grpo", 1, 0, 0.5)]), per_seed="yes"), "per_seed"),
    (lambda: fr.frontier_cell("chain_shared", 10, "c3", 10, 0), "estimator"),
    (lambda: fr.vine_arm_name(0, 2), "step_len"),
])
def test_bad_time_to_success_and_arm_arguments_are_named(call, name):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert str(err.value).startswith(name + ":")


# --------------------------------------------------------------------------- the build script's shared suite
def _build_frontier_script():
    """scripts/build_frontier.py as a module."""
    return load_script("build_frontier")


def test_the_shared_suite_builds_a_stamped_frontier_that_load_frontier_reads(tmp_path, capsys):
    script = _build_frontier_script()
    # the tabular suite is still the shipped grid, and the shared one sweeps m and K
    assert script.SUITES["frontier"]["grid"] == {"chain": [10, 40, 100, 200], "toolworld": [10, 20, 50]}
    assert script.SUITES["shared"]["estimators"]["chain_shared"] == [
        "grpo", *(fr.vine_arm_name(m, k) for m in fr.VINE_STEP_LENS for k in fr.VINE_KS)]
    script.main(["--suite", "shared", "--horizons", "10", "--budgets", "4", "--seeds", "0", "--out", str(tmp_path)])
    rows, cross, meta = fr.load_frontier(tmp_path)
    assert set(rows.world) == {"chain_shared"} and set(rows.horizon) == {10} and len(rows) == 7
    assert meta["suite"] == "shared" and meta["learning_rates"] == {"chain_shared": 0.1}
    assert meta["provenance"]["args"][:2] == ["--suite", "shared"] and set(meta["arms"]) == set(rows.estimator)
    reach = pd.read_csv(tmp_path / "time_to_success.csv")
    assert len(reach) == 7 and len(cross) == 6
    with pytest.raises(SystemExit):
        script.main(["--suite", "shared", "--horizons", "7", "--out", str(tmp_path)])
    assert "--horizons: none of [7]" in capsys.readouterr().err
