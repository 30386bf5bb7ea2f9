"""Notebook 08's runners (labkit.course.nb08_hindsight_counterfactual) at small sizes: credits and
their costs, critics ranked, the judge-error curve, the cached schedule results.
"""
from __future__ import annotations

import pytest
import torch

from labkit.core.credit import Credit
from labkit.course import nb08_hindsight_counterfactual as lesson
from labkit.course import presets
from labkit.course.nb08_hindsight_counterfactual import judge_error_curve
from labkit.course.presets import scripted_agent_setup
from labkit.envs import ToolWorld
from labkit.learn.critics import BTCritic
from labkit.scoring import luck_regression, rank_correlation, sign_agreement

from panel_checks import assert_same_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def small():
    env, policy = scripted_agent_setup(0.3, n_files=3, max_turns=10)
    truth = env.truth(policy)
    models = lesson.fit_models(env, policy, n_tasks=24, group_size=4, seed=9)
    ro = env.sample(policy, 6, group_size=4, seed=0)
    credits = lesson.all_credits(env, policy, ro, models, truth, n_continuations=2)
    return env, policy, truth, models, ro, credits


def test_all_credits_and_costs(small):
    env, policy, truth, models, ro, credits = small
    assert list(credits) == list(lesson.METHODS)
    for c in credits.values():
        assert isinstance(c, Credit) and c.token.shape == ro.mask.shape
    costs = lesson.cost_table(credits, ro).set_index("method")
    assert costs.loc["GRPO", "env_steps"] == 0
    assert costs.loc["CCPO, re-execution", "env_resets"] > costs.loc["C3, fixed continuation", "env_resets"] > 0
    # the default replays M - 1 = 3 continuations of the taken action and 4 of one sibling; the
    # ablation the n_continuations = 2 fresh replays asked for
    turns = int(ro.mask.sum())
    assert costs.loc["C3, fixed continuation", "env_resets"] == 7 * turns
    assert costs.loc["C3, re-sampled (ablation)", "env_resets"] == 2 * turns
    with pytest.raises(ValueError, match="methods"):
        lesson.all_credits(env, policy, ro, models, truth, methods=["nope"])


def test_sign_agreement_is_the_course_definition_and_splits_by_outcome(small):
    env, policy, truth, models, ro, credits = small
    skill, _ = truth.skill_luck(ro)
    picked = {k: credits[k] for k in ("GRPO", "HCA, exact h", "CCPO, re-execution")}
    reg = luck_regression(ro, truth, picked).set_index("method")
    split = lesson.sign_by_outcome(ro, truth, picked).set_index("method")
    for name, credit in picked.items():   # one definition: labkit.scoring's, at its default threshold
        want = sign_agreement(credit, skill, ro.mask)
        assert reg.loc[name, "sign_agree"] == pytest.approx(want) and split.loc[name, "sign_agree"] == pytest.approx(want)
    won = ro.truth["success"].bool()
    assert won.any() and not won.all()
    hca = split.loc["HCA, exact h"]
    # (1 - pi/h) * Z with the exact h is A/Q on a won episode (Q > 0 there): always A's sign; on a lost one Z = 0
    assert hca.sign_agree_won == 1.0 and hca.zero_on_lost == 1.0 and hca.sign_agree_lost == 0.0
    assert split.loc["GRPO", "zero_on_lost"] < 1.0
    with pytest.raises(ValueError, match="credits"):
        lesson.sign_by_outcome(ro, truth, {})


def test_critic_ranking_and_transcript(small):
    env, policy, truth, models, ro, credits = small
    df = lesson.critic_ranking(ro, truth, {"p": models["critic_privileged"], "o": models["critic_observation"]})
    assert set(df.columns) >= {"pairwise_acc", "pref_correct", "top1"}
    assert df.pairwise_acc.between(0, 1).all()
    row = int(ro.truth["success"].nonzero()[0])
    t = lesson.transcript_table(ro, truth, credits, row)
    assert len(t) == int(ro.mask[row].sum()) and "GRPO" in t.columns and "CCPO" in t.columns
    fails = env.sample(policy, 2, group_size=2, seed=1)
    fails.truth["success"] = torch.zeros(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="rollouts"):
        lesson.lucky_row(fails, truth)


# --------------------------------------------------------------------------- C3 over several batches
def test_c3_luck_by_batch_and_its_intervals():
    env, policy = scripted_agent_setup(0.3, n_files=3, max_turns=10)
    truth = env.truth(policy)
    per = lesson.c3_luck_by_batch(env, policy, truth, seeds=(1, 2, 3), n_tasks=16, group_size=8)
    assert list(per.method.unique()) == ["GRPO", *lesson.C3_ARMS] and sorted(per.seed.unique()) == [1, 2, 3]
    summary = lesson.c3_luck_summary(per).set_index("method")
    for col in ("luck_per_skill", "luck_removed", "corr_exact"):
        assert (summary[f"{col}_low"] <= summary[col] + 1e-12).all() and (summary[col] <= summary[f"{col}_high"] + 1e-12).all()
    assert summary.loc["GRPO", "luck_removed"] == 0.0 and (summary.seeds == 3).all()
    fixed, resampled = "C3, fixed continuation (M = 4, default)", "C3, re-sampled (ablation, 8 replays)"
    assert summary.loc[fixed, "resets_per_turn"] == 7.0 and summary.loc[resampled, "resets_per_turn"] == 8.0
    assert summary.loc["C3, fixed continuation (M = 1)", "resets_per_turn"] == 1.0
    # holding the continuation fixed removes the luck that re-sampling keeps, batch by batch
    gap = lesson.c3_paired_difference(per, fixed, resampled)
    assert gap["seeds"] == 3 and gap["low"] > 0.3 and gap["low"] <= gap["diff"] <= gap["high"]
    text = lesson.interval_text(lesson.c3_luck_summary(per))
    assert text.loc[fixed, "luck_removed"].count("[") == 1 and list(text.columns)[-1] == "resets_per_turn"


def test_seed_interval_and_bad_arguments():
    m, lo, hi = lesson.seed_interval([1.0, 2.0, 3.0, float("nan")], n_boot=500)
    assert m == 2.0 and 1.0 <= lo <= m <= hi <= 3.0
    assert lesson.seed_interval([5.0]) == (5.0, 5.0, 5.0)
    assert all(x != x for x in lesson.seed_interval([float("nan")]))
    env, policy = scripted_agent_setup(0.3, n_files=3, max_turns=6)
    truth = env.truth(policy)
    per = lesson.c3_luck_by_batch(env, policy, truth, seeds=(1,), n_tasks=2, group_size=4)
    for name, fn in [("seeds", lambda: lesson.c3_luck_by_batch(env, policy, truth, seeds=())),
                     ("n_tasks", lambda: lesson.c3_luck_by_batch(env, policy, truth, seeds=(1,), n_tasks=0)),
                     ("level", lambda: lesson.seed_interval([1.0], level=1.5)),
                     ("per_seed", lambda: lesson.c3_luck_summary(per.drop(columns="seed"))),
                     ("a", lambda: lesson.c3_paired_difference(per, "GRPO", "nope")),
                     ("columns", lambda: lesson.interval_text(lesson.c3_luck_summary(per), ["nope"]))]:
        with pytest.raises(ValueError, match=f"^{name}"):
            fn()


@pytest.mark.parametrize("noise", [0.0, 0.5, 1.0])
def test_noise_view_extremes(noise):
    v = lesson.noise_view(noise, methods=["GRPO", "HCA, exact h", "CCPO, re-execution"], n_tasks=2, group_size=3,
                          history_tasks=4, show=4, n_continuations=1, n_files=3, max_turns=6)
    assert len(v["rows"]) == 4 and list(v["panels"])[0].startswith("exact advantage")
    for p in v["panels"].values():
        assert p.shape == (4, 6)
    assert len(v["stats"]) == 3


def test_noise_sweep_small():
    df = lesson.noise_sweep((0.0, 0.3), n_tasks=2, group_size=3, history_tasks=4, n_continuations=1,
                            methods=["GRPO", "CCPO, re-execution"], n_files=3, max_turns=6)
    assert list(df.noise) == [0.0, 0.0, 0.3, 0.3] and "luck_share" in df.columns
    with pytest.raises(ValueError, match="noises"):
        lesson.noise_sweep(())


def test_noise_view_depends_on_its_arguments_only():
    """The notebook precomputes the noise slider's eleven levels at build time; that shows the same
    numbers as computing on the move only if a level's result does not depend on what ran before."""
    import pandas as pd

    kw = dict(methods=["GRPO", "HCA, exact h", "C3, fixed continuation"], n_tasks=2, group_size=3, history_tasks=4,
              show=4, n_continuations=1, n_files=3, max_turns=6)
    first = lesson.noise_view(0.3, **kw)
    torch.manual_seed(123)  # disturb the global generator too
    lesson.noise_view(0.1, **kw)
    again = lesson.noise_view(0.3, **kw)
    assert list(first["panels"]) == list(again["panels"])
    for k in first["panels"]:
        assert torch.equal(first["panels"][k], again["panels"][k])
    pd.testing.assert_frame_equal(first["stats"], again["stats"])


def test_noise_prompt_answers_read_the_slider_views():
    import pandas as pd

    kw = dict(methods=["GRPO", "HCA, exact h", "CCPO, re-execution"], n_tasks=2, group_size=3, history_tasks=4,
              show=2, n_continuations=1, n_files=3, max_turns=6)
    stats = {x: lesson.noise_view(x, **kw)["stats"] for x in (0.0, 0.3, 0.5)}
    ans = lesson.noise_prompt_answers(stats, start=0.3)
    assert list(ans["corr"].columns) == [0.0, 0.3, 0.5] and list(ans["corr"].index) == kw["methods"]
    for x, table in stats.items():
        torch.testing.assert_close(torch.tensor(ans["corr"][x].to_numpy()), torch.tensor(table["corr_exact"].to_numpy()),
                                   rtol=0, atol=0, equal_nan=True)
    # on so small a world a method's credit can be constant (NaN correlation): it ranks last
    defined = ans["ranking"].dropna()
    assert defined.is_monotonic_decreasing and list(ans["ranking"].index[:len(defined)]) == list(defined.index)
    assert ans["best"] == ans["ranking"].index[0]
    assert ans["corr"].loc[ans["best"], 0.3] == ans["corr"][0.3].max()
    assert (ans["low"], ans["high"]) == (0.0, 0.5) and ans["leader_at_high"] == ans["corr"][0.5].idxmax()
    # a hand-made table: the best and the leader are read off it, not computed again
    fake = {0.1: pd.DataFrame({"method": ["a", "b"], "corr_exact": [0.2, 0.4]}),
            0.4: pd.DataFrame({"method": ["a", "b"], "corr_exact": [0.9, 0.1]})}
    out = lesson.noise_prompt_answers(fake, start=0.1)
    assert out["best"] == "b" and out["leader_at_high"] == "a"
    with pytest.raises(ValueError, match="start"):
        lesson.noise_prompt_answers(fake, start=0.3)
    nan = {0.1: pd.DataFrame({"method": ["a", "b"], "corr_exact": [float("nan"), 0.4]}),
           0.4: pd.DataFrame({"method": ["a", "b"], "corr_exact": [0.9, float("nan")]})}
    out = lesson.noise_prompt_answers(nan, start=0.1)
    assert out["best"] == "b" and list(out["ranking"].index) == ["b", "a"] and out["leader_at_high"] == "a"
    with pytest.raises(ValueError, match="no method has a correlation"):
        lesson.noise_prompt_answers({0.1: pd.DataFrame({"method": ["a"], "corr_exact": [float("nan")]})}, start=0.1)
    with pytest.raises(ValueError, match="stats_by_noise"):
        lesson.noise_prompt_answers({})
    with pytest.raises(ValueError, match="stats_by_noise"):
        lesson.noise_prompt_answers({0.1: pd.DataFrame({"method": ["a"]})}, start=0.1)


# --------------------------------------------------------------------------- SWEET-RL and CriticSearch
def test_privileged_critic_ranks_better_than_observation_critic():
    from labkit.course.nb08_hindsight_counterfactual import critic_ranking

    env = ToolWorld(4, max_turns=15, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(2.0)
    truth = env.truth(policy)
    hist = env.sample(policy, 96, group_size=8, seed=7)
    priv = BTCritic.for_env(env, privileged=True).fit(hist, hist.truth["hidden_states"])
    obs = BTCritic.for_env(env, privileged=False).fit(hist)
    test = env.sample(policy, 16, group_size=8, seed=8)
    df = critic_ranking(test, truth, {"priv": priv, "obs": obs}).set_index("critic")
    assert df.loc["priv", "pairwise_acc"] > df.loc["obs", "pairwise_acc"] + 0.05
    assert df.loc["priv", "pref_correct"] > df.loc["obs", "pref_correct"]


# --------------------------------------------------------------------------- the judge-error curve
def test_judge_error_curve_falls_with_the_error_rate():
    env = ToolWorld(3, max_turns=12, mislead=0.3, noise=0.3, flaky=0.3)
    pol = env.scripted_policy(2.0)
    ro = env.sample(pol, 8, group_size=4, seed=0)
    truth = env.truth(pol)
    df = judge_error_curve(env, pol, ro, truth, score=rank_correlation, error_rates=(0.0, 0.6), seeds=(0, 1))
    assert set(df.columns) == {"method", "error_rate", "seed", "score"} and len(df) == 8
    mean = df.groupby(["method", "error_rate"]).score.mean()
    assert mean[("tarl", 0.0)] > mean[("tarl", 0.6)] + 0.1
    with pytest.raises(TypeError, match="^score"):
        judge_error_curve(env, pol, ro, truth, score="spearman")


def test_notebook_lesson_reads_the_cache_and_computes_verdicts():
    from labkit.course import nb08_hindsight_counterfactual as lesson

    res = lesson.load_schedule_results()
    table = lesson.schedule_table(res)
    assert len(table) == len(res["summary"]) and table.final_mean.between(0, 1).all()
    lines = lesson.schedule_verdicts(res)
    assert len(lines) == len(res["summary"]) - 1                       # every arm but the control
    for line, (_, r) in zip(lines, res["summary"].iloc[1:].iterrows()):
        measurable = abs(r.final_effect) > 2 * r.final_se
        assert ("no measurable effect" not in line.split(";")[0]) == measurable
    spec = lesson.schedule_chart(res).to_dict()
    assert "vconcat" in spec
    with pytest.raises(ValueError, match=r"^z"):
        lesson.schedule_verdicts(res, z=0)


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


def test_information_luck_splits_the_exact_advantage_and_the_outcome_luck():
    from labkit.core.credit import Credit
    from labkit.course.presets import scripted_agent_setup

    env, policy = scripted_agent_setup(0.3, n_files=5, max_turns=20, strength=2.0)
    truth = env.truth(policy)
    ro = env.sample(policy, 8, group_size=8, seed=1)
    out = lesson.information_luck(env, truth, ro, {"exact": Credit.from_tokens(ro, truth.advantage(ro), "exact")})
    assert 0.1 < out["share"] < 0.6            # measured 0.30-0.36 on 32-task batches
    assert out["luck_share_agent"] > 3 * out["luck_share_hidden"]   # the hidden file is luck to the agent
    assert out["table"].set_index("method").info_luck_per_skill["exact"] == pytest.approx(1.0, abs=1e-9)
    by = lesson.information_luck_by_batch(env, policy, truth, seeds=[1, 2], n_tasks=8)
    assert list(by.seed) == [1, 2] and by.share.iloc[0] == pytest.approx(out["share"])
    with pytest.raises(ValueError, match="^seeds"):
        lesson.information_luck_by_batch(env, policy, truth, seeds=[])
