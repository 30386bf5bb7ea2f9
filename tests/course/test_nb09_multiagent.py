"""Notebook 09's runners (labkit.course.nb09_multiagent) at small sizes: they measure what they say."""
from __future__ import annotations

import math

import pytest
import torch

from labkit.course import nb09_multiagent as lesson
from labkit.envs import TeamTask
from labkit.envs.arithmetic.truth import load_reference
from labkit.scoring import sign_agreement

from panel_checks import assert_same_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


@pytest.mark.usefixtures("one_torch_thread")
def test_segment_shapley_study_is_efficient_and_reports_both_games(lm_env, reference):
    few = reference.select(list(range(4)) + list(range(28, 32)))  # 4- and 3-segment completions
    out = lesson.segment_shapley_study(lm_env, few, k=2, seed=0)
    summary = out["summary"]
    assert set(summary["game"]) == {"resample", "delete"} and set(summary["method"]) == {"shapley", "leave-one-out"}
    # Shapley splits exactly reward - v(empty); leave-one-out does not have to
    assert (summary.loc[summary["method"] == "shapley", "efficiency_gap"] < 1e-9).all()
    table = out["values"]["delete"]
    assert torch.equal(table[:, -1], few.scores.double())
    # the delete game grades a kept answer as is: with every computation step cut out it is wrong
    assert bool((table[torch.arange(8), 2 ** (few.n_steps - 1)] == 0).all())
    for name, credit in out["credits"].items():
        assert credit.shape == few.mask.shape, name
        assert bool((credit[~few.mask] == 0).all()), name
    assert list(out["by_role"].columns[2:]) == list(lesson.SEGMENT_ROLE_NAMES)
    assert summary["sequences"].min() > 0 and summary["corr_with_truth"].between(-1, 1).all()


def test_designed_games_reproduce_the_textbook_games():
    df = lesson.designed_games()
    d = df.set_index(["case", "agent"])
    assert d.loc[("redundancy", "planner"), "shapley"] == pytest.approx(2 / 3, abs=1e-3)
    assert d.loc[("redundancy", "solver 1"), "loo"] == pytest.approx(0.0, abs=1e-3)
    assert d.loc[("free_riding", "free rider"), "shapley"] == pytest.approx(0.0, abs=1e-12)
    assert d.loc[("sabotage", "saboteur"), "shapley"] < 0
    eff = lesson.efficiency_table(df).set_index("case")
    assert torch.allclose(torch.tensor(eff.sum_shapley.values), torch.tensor(eff.v_full.values), atol=1e-9)
    assert eff.loc["complementarity", "sum_loo"] == pytest.approx(3.0, abs=1e-3)
    long = lesson.credit_long(df)
    assert len(long) == 2 * len(df) and set(long.method) == {"Shapley", "leave-one-out"}
    with pytest.raises(ValueError, match="cases"):
        lesson.designed_games(("nope",))


def test_coalition_table_names_every_coalition():
    env = TeamTask.preset("free_riding")
    t = lesson.coalition_table(env, env.truth(env.scripted_policies(12.0)).values)
    assert list(t.coalition[:3]) == ["{}", "{planner}", "{solver}"] and t.v.iloc[3] == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValueError, match="values"):
        lesson.coalition_table(env, torch.zeros(4))


@pytest.mark.parametrize("knobs", [dict(sabotage=0.0, catch=0.0, p_plan=0.0, unchecked_pass=0.0),
                                   dict(sabotage=1.0, catch=1.0, p_plan=1.0, unchecked_pass=1.0),
                                   dict(sabotage=1.0, catch=0.0, p_plan=1.0, unchecked_pass=0.0)])
def test_mixed_team_credit_survives_the_slider_extremes(knobs):
    df = lesson.mixed_team_credit(**knobs)
    assert len(df) == 6 and df[["shapley", "loo"]].notna().all().all()
    assert df.shapley.sum() == pytest.approx(df.v_full.iloc[0], abs=1e-9)
    assert df.set_index("agent").loc["free rider", "shapley"] == pytest.approx(0.0, abs=1e-12)


def test_mixed_team_moves_are_the_slider_ends():
    moves = lesson.mixed_team_moves()
    assert list(zip(moves.knob, moves.value)) == [(k, v) for k, a, b in lesson.MIXED_TEAM_MOVES for v in (a, b)]
    for row in moves.itertuples():
        df = lesson.mixed_team_credit(**{row.knob: row.value}).set_index("agent")
        assert row.v_full == df.v_full.iloc[0] and row.sum_loo == pytest.approx(df.loo.sum(), abs=1e-15)
        assert row.checker_shapley == df.loc["checker", "shapley"] and row.saboteur_loo == df.loc["saboteur", "loo"]
    # Shapley is efficient at every setting; a harmless saboteur gets nothing
    assert (moves.sum_shapley - moves.v_full).abs().max() < 1e-12
    off = moves[(moves.knob == "sabotage") & (moves.value == 0.0)].iloc[0]
    assert off.saboteur_shapley == pytest.approx(0.0, abs=1e-12) and off.saboteur_loo == pytest.approx(0.0, abs=1e-12)
    # the other knobs can start elsewhere
    shifted = lesson.mixed_team_moves([("catch", 1.0, 1.0)], sabotage=1.0)
    assert shifted.v_full.iloc[0] == pytest.approx(lesson.mixed_team_credit(sabotage=1.0, catch=1.0).v_full.iloc[0])
    with pytest.raises(ValueError, match="moves"):
        lesson.mixed_team_moves([("strength", 0.0, 1.0)])
    with pytest.raises(ValueError, match="moves"):
        lesson.mixed_team_moves([("catch", 0.0)])
    with pytest.raises(ValueError, match="start"):
        lesson.mixed_team_moves(moves=[], saboteur=1.0)


def test_sampled_shapley_error_shrinks_with_the_budget():
    env = TeamTask()
    values = env.truth(env.scripted_policies(2.0)).values
    err = lesson.sampled_shapley_error(values, budgets=(1, 4, 64), seeds=range(6))
    s = lesson.error_summary(err).set_index("budget")
    assert s.mae_mean[64] < s.mae_mean[4] < s.mae_mean[1]
    assert err.efficiency_gap.max() < 1e-12
    assert (s.n_evaluations <= 64).all() and s.n_evaluations.is_monotonic_increasing


def test_credit_agreement_scores_estimators_against_exact_shapley():
    env = TeamTask()
    pols = env.scripted_policies(2.0)
    res = lesson.agent_credit_agreement(env, pols, n_tasks=8, group_size=4, seed=1)
    st = res["stats"].set_index("method")
    assert st.loc["Shapley (exact)", "corr_pooled"] == pytest.approx(1.0)
    assert st.loc["leave-one-out", "mean_free rider"] == 0.0
    # with a shared team reward, Dr. MAS and M-GRPO reduce to GRPO on the team reward
    for m in ("Dr. MAS", "M-GRPO"):
        assert torch.allclose(res["credit"][m], res["credit"]["GRPO (team reward)"], atol=1e-9)
    # sign agreement is the course's one definition (labkit.scoring, |phi| > 0.05 counted)
    every = torch.ones_like(res["phi"], dtype=torch.bool)
    for m, credit in res["credit"].items():
        assert st.loc[m, "sign_agree"] == pytest.approx(sign_agreement(credit, res["phi"], every))
    assert st.loc["Shapley (exact)", "sign_agree"] == 1.0
    sweep = lesson.judge_noise_sweep(env, pols, noises=(0.0, 1.0), n_tasks=8, group_size=4).set_index(["noise", "method"])
    assert sweep.loc[(0.0, "LLM-MCA (stand-in critic)"), "corr_pooled"] == pytest.approx(1.0)
    assert sweep.loc[(1.0, "LLM-MCA (stand-in critic)"), "corr_pooled"] < 0.6


def test_agentwise_normalisation_calibrates_the_per_agent_gradient():
    env = TeamTask(reward="heterogeneous")
    scales = lesson.gradient_scales(env, env.make_policies(), n_batches=12, seed=0)
    s = lesson.scale_summary(scales).set_index("normalize")
    assert s.scale_spread["agent"] < s.scale_spread["global"]
    assert s.batch_cosine_mean["agent"] > s.batch_cosine_mean["global"] + 0.1
    g = scales.set_index(["normalize", "agent"])
    # global normalisation: the big-reward solvers take larger steps than the planner, although
    # their true gradient is smaller
    assert g.loc[("global", "solver 1"), "grad_norm"] > 2 * g.loc[("global", "planner"), "grad_norm"]
    assert g.loc[("global", "solver 1"), "exact_norm"] < g.loc[("global", "planner"), "exact_norm"]


def test_drmas_training_runs_and_summarises():
    curves, grads = lesson.drmas_training(seeds=(0, 1), iterations=20, eval_every=10, progress=False)
    assert set(curves.label) == {"global", "agent"} and len(curves) == 2 * 2 * 21
    assert set(grads.columns) >= {"normalize", "seed", "agent", "grad_norm"} and len(grads) == 2 * 2 * 20 * 6
    summ = lesson.drmas_summary(curves, grads).set_index("normalize")
    assert summ.J_final_mean["agent"] > summ.J_final_mean["global"]
    assert (summ.seeds == 2).all() and math.isfinite(summ.grad_norm_max_over_median["global"])
    table = lesson.agent_grad_table(grads)
    assert list(table.index) == TeamTask().agent_names and set(table.columns) == {"global", "agent"}


def test_written_credit_functions_are_scored_against_shapley_without_coalition_values():
    fns = {"rule": lesson.PROVIDED_CREDIT_FUNCTION, **lesson.NAIVE_CREDIT_FUNCTIONS}
    scores = lesson.score_credit_functions(fns, cases=("free_riding", "complementarity", "mixed"), seeds=(0, 1),
                                           n_tasks=8, group_size=4)
    assert len(scores) == 3 * 3 * 2
    summ = lesson.credit_function_summary(scores).set_index(["case", "method"])
    assert (summ.seeds == 2).all()
    # all three needed and the outcome fixed by the actions: Shapley is the outcome split three ways
    assert summ.loc[("complementarity", "equal split of the outcome"), "mae_mean"] < 1e-12
    # the rule gives the free rider 0, as Shapley does; VDN pays it its utility
    assert summ.loc[("free_riding", "rule"), "corr_mean"] > 0.95
    assert summ.loc[("mixed", "rule"), "mae_mean"] < summ.loc[("mixed", "equal split of the outcome"), "mae_mean"]
    assert summ.loc[("mixed", "VDN (own utility)"), "efficiency_gap"] > 1.0
    diff = lesson.credit_function_difference(scores, "rule", "VDN (own utility)").set_index("case")
    assert (diff["diff"] < 0).all() and (diff.low <= diff["diff"]).all() and (diff["diff"] <= diff.high).all()
    with pytest.raises(ValueError, match=r"fn: raised KeyError.*credit function 'bad'"):
        lesson.score_credit_functions({"bad": lambda q, s, a: {x: s["coalitions"] for x in a}}, cases=("sabotage",),
                                      seeds=(0,), n_tasks=2, group_size=2)
    with pytest.raises(ValueError, match="b: 'nobody'"):
        lesson.credit_function_difference(scores, "rule", "nobody")
    with pytest.raises(TypeError, match="fns"):
        lesson.score_credit_functions({})


def test_the_textbook_games_are_far_from_additive_and_an_additive_one_is_not():
    table = lesson.designed_credit_table({"rule": lesson.PROVIDED_CREDIT_FUNCTION,
                                          "VDN": lesson.vdn_credit}, n_tasks=2, group_size=2).set_index(["case", "agent"])
    assert table.loc[("free_riding", "free rider"), "rule"] == 0.0
    assert table.loc[("complementarity", "checker"), "rule"] == pytest.approx(1 / 3, abs=1e-3)
    assert table.loc[("sabotage", "saboteur"), "rule"] < 0 < table.loc[("sabotage", "saboteur"), "VDN"]
    assert all(gap > 0.99 for gap in table.attrs["additivity_gap"].values())
    u = torch.tensor([0.3, -0.1, 0.5], dtype=torch.float64)
    additive = torch.tensor([float(sum(u[i] for i in range(3) if S >> i & 1)) for S in range(8)], dtype=torch.float64)
    assert lesson.additivity_gap(additive) < 1e-12
    with pytest.raises(ValueError, match="values"):
        lesson.additivity_gap(torch.zeros(6))


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
