"""Notebook 04's runners (labkit.course.nb04_process_rewards): scoring credit against the Monte
Carlo truth of the reference rollouts, and the cross-family table."""
import dataclasses
import math

import pytest
import torch

from labkit.core.credit import Cost, Credit
from labkit.course import nb04_process_rewards as lesson
from labkit.envs.arithmetic.truth import load_reference, truth_step_advantage


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def test_the_truth_itself_scores_perfectly(reference):
    truth = truth_step_advantage(reference)
    q = lesson.credit_quality(Credit.from_tokens(reference, truth, "truth"), reference)
    assert q["rank_corr"] == pytest.approx(1.0)
    assert q["rank_corr_within"] == pytest.approx(1.0)
    assert q["hit_rate"] == pytest.approx(1.0)
    assert q["policy_forwards"] == 0 and q["aux_calls"] == 0


def test_outcome_credit_has_no_within_rollout_signal(reference):
    outcome = reference.scores.double()[:, None].expand(-1, reference.horizon) * reference.mask
    # equal credit on every step of a rollout: nothing to rank inside it, and the hit rate is chance
    q = lesson.credit_quality(Credit.from_tokens(reference, outcome.float(), "outcome"), reference)
    assert q["hit_rate"] == pytest.approx(q["chance"]) and q["rank_corr_within"] == 0.0
    # pooled over rollouts it does rank: failed rollouts hold the negative true advantages
    assert q["rank_corr"] > 0.2


def test_cross_family_table_runs_each_method_and_keeps_its_cost(reference):
    def costly(ro):
        return Credit.from_tokens(ro, truth_step_advantage(ro), "costly", cost=Cost(policy_forwards=7, aux_calls=2))

    methods = [lesson.Method("truth", "mc", "03_vineppo.ipynb", "vineppo", costly, setup="256 vines per prefix"),
               lesson.Method("zero", "judge", "04_process_rewards.ipynb", "capo",
                             lambda ro: Credit.from_tokens(ro, torch.zeros(ro.mask.shape), "zero"))]
    df = lesson.cross_family_table(methods, reference, progress=False)
    assert list(df.method) == ["truth", "zero"]
    assert list(df.policy_forwards) == [7, 0] and list(df.aux_calls) == [2, 0]
    assert df.rank_corr.iloc[0] == pytest.approx(1.0) and df.rank_corr.iloc[1] == 0.0
    # the status is the registry's, never restated by the table
    assert list(df.status) == ["implemented", "stand-in"] and df.setup.iloc[0] == "256 vines per prefix"
    assert (df.seconds >= 0).all()


def test_cross_family_table_scores_a_timed_credit_instead_of_running_again(reference):
    runs = []

    def counted(ro):
        runs.append(1)
        return Credit.from_tokens(ro, truth_step_advantage(ro), "counted", cost=Cost(policy_forwards=3))

    method = lesson.Method("counted", "mc", "03", "vineppo", counted)
    ahead = lesson.timed_run(method, reference)
    assert len(runs) == 1 and ahead.info["seconds"] >= 0
    fresh = lesson.cross_family_table([method], reference, progress=False)
    reused = lesson.cross_family_table([method], reference, credits={"counted": ahead}, progress=False)
    assert len(runs) == 2  # the second table ran nothing
    cols = [c for c in fresh.columns if c != "seconds"]
    assert fresh[cols].equals(reused[cols]) and reused.seconds.iloc[0] == ahead.info["seconds"]
    with pytest.raises(ValueError, match="^credits: 'other'"):
        lesson.cross_family_table([method], reference, credits={"other": ahead}, progress=False)
    untimed = Credit.from_tokens(reference, truth_step_advantage(reference), "untimed")
    with pytest.raises(ValueError, match="^credits: 'counted' needs a Credit from timed_run"):
        lesson.cross_family_table([method], reference, credits={"counted": untimed}, progress=False)
    with pytest.raises(ValueError, match="^credits: 'counted' was computed on other rollouts"):
        lesson.cross_family_table([method], reference.select([0, 1]), credits={"counted": ahead}, progress=False)
    with pytest.raises(TypeError, match="^method:"):
        lesson.timed_run(counted, reference)


def test_cross_family_table_rejects_bad_methods(reference):
    with pytest.raises(ValueError, match="methods"):
        lesson.cross_family_table([], reference, progress=False)
    with pytest.raises(TypeError, match="methods"):
        lesson.cross_family_table([lambda ro: None], reference, progress=False)
    with pytest.raises(TypeError, match="credit"):
        lesson.credit_quality(torch.zeros(3), reference)


def test_the_roster_names_every_reasoning_estimator_once(lm_env):
    from types import SimpleNamespace

    methods = lesson.reasoning_methods(lm_env, SimpleNamespace())  # models are only read when a method runs
    names = [m.name for m in methods]
    assert len(names) == len(set(names)) == 16
    assert {"GRPO", "VinePPO", "SPO", "TEMPO", "PURE min-form", "PURE sum-form", "SPRO", "CAPO", "From r to Q*",
            "T-REG", "RED", "ACPO attribution", "HICRA", "InT"} <= set(names)
    from labkit.credit import spec
    assert {m.name: m.status for m in methods} == {m.name: spec(m.estimator).status for m in methods}
    assert sorted(m.name for m in methods if m.status == "stand-in") == ["CAPO", "T-REG"]
    for users in lesson.KNOB_USE.values():  # every knob is read by a method that exists
        assert all(any(n.startswith(u) for n in names) for u in users)
    with pytest.raises(ValueError, match="name"):
        lesson.method_by_name(methods, "PPO")


@pytest.mark.usefixtures("one_torch_thread")
def test_capo_sweep_loses_the_wrong_step_as_its_verifier_errs(lm_env, reference):
    from types import SimpleNamespace

    df = lesson.capo_error_sweep(lm_env, SimpleNamespace(), reference, error_rates=(0.0, 0.5), seeds=(0, 1))
    assert list(df.error_rate) == [0.0, 0.5] and (df.seeds == 2).all()
    perfect, coin = df.hit_rate
    assert perfect > coin + 0.1   # exact verdicts find the wrong steps; coin-flip verdicts do not
    with pytest.raises(ValueError, match="error_rates"):
        lesson.capo_error_sweep(lm_env, SimpleNamespace(), reference, error_rates=())


def test_first_error_roles_split_operand_from_result_mistakes(reference):
    roles = lesson.first_error_roles(reference)
    assert sum(roles.values()) == int((reference.truth["first_error_step"] >= 0).sum())
    assert roles["result"] >= 1


def test_bonus_landing_accounts_for_the_whole_bonus(reference):
    base = torch.zeros(reference.mask.shape)
    boosted = base + 0.5 * reference.mask  # a bonus on every generated token
    out = lesson.bonus_landing(base, boosted, reference)
    assert out["tokens_with_bonus"] == pytest.approx(1.0)
    parts = out["on_positive_truth"] + out["on_negative_truth"] + out["on_near_zero_truth"]
    assert parts == pytest.approx(1.0)
    assert lesson.bonus_landing(base, base, reference)["on_first_wrong_step"] == 0.0


def test_bonus_landing_counts_only_real_first_wrong_steps(reference):
    """A bonus on exactly the first wrong steps lands there in full; one on every position of the
    rollouts whose steps are all right (padding included, whose step id -1 equals their
    first_error_step -1) lands there not at all."""
    from labkit.scoring import first_error_positions

    base = torch.zeros(reference.mask.shape)
    on_wrong = lesson.bonus_landing(base, base + first_error_positions(reference).float(), reference)
    assert on_wrong["on_first_wrong_step"] == pytest.approx(1.0)
    all_right = (reference.truth["first_error_step"] < 0)[:, None].expand_as(base)
    on_right = lesson.bonus_landing(base, base + all_right.float(), reference)
    assert on_right["tokens_with_bonus"] > 0 and on_right["on_first_wrong_step"] == 0.0


def test_cached_padding_results_load_and_summarise():
    static, meta = lesson.load_padding()
    assert set(static.form) == {"min", "sum"} and "example" in meta
    # the exploit the notebook reports: with the PRM as the only reward, two repeated steps pay under
    # sum-form and never under min-form
    two = static[(static.padding == "repeat") & (static.extra_steps == 2) & (static.verifiable_weight == 0)]
    assert two.set_index("form").mean_gain["sum"] > 0 > two.set_index("form").mean_gain["min"]
    curves, rl_meta = lesson.load_padding_rl()
    summary = lesson.padding_rl_summary(curves)
    assert list(summary.form) == ["PURE min", "PURE sum"]
    assert ((summary.over_long >= 0) & (summary.over_long <= 1)).all()
    with pytest.raises(ValueError, match="curves"):
        lesson.padding_rl_summary(curves.drop(columns=["over_long"]))
    with pytest.raises(FileNotFoundError, match="pure_padding"):
        lesson.load_padding_rl("no_such_run")


@pytest.fixture(scope="module")
def light_models(lm_env):
    """The shipped models notebook 04 loads, without the critic (fitting it takes seconds)."""
    from types import SimpleNamespace

    from labkit.learn.reward_models import OutcomeRewardModel, ProcessRewardModel

    return SimpleNamespace(prm=ProcessRewardModel.load(), orm=OutcomeRewardModel.load(), dpo=lm_env.tuned("dpo"),
                           treg=lm_env.tuned("treg"))


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("name, knobs", [
    ("SPO", lesson.Knobs(k=1, threshold=0.5)), ("SPO", lesson.Knobs(k=1, threshold=0.99)),
    ("TEMPO", lesson.Knobs(k=1)), ("InT", lesson.Knobs(k=1)), ("VinePPO", lesson.Knobs(k=1)),
    ("PURE min-form", lesson.Knobs(temperature=0.01)), ("PURE min-form", lesson.Knobs(temperature=3.0)),
    ("From r to Q*", lesson.Knobs(beta=0.01)), ("SPRO", lesson.Knobs(beta=1.0)),
    ("CAPO", lesson.Knobs(error_rate=0.0)), ("CAPO", lesson.Knobs(error_rate=0.5)),
    ("T-REG", lesson.Knobs()), ("RED", lesson.Knobs()), ("ACPO attribution", lesson.Knobs()), ("HICRA", lesson.Knobs()),
])
def test_explorer_runs_every_method_with_its_knobs_at_their_ends(lm_env, reference, light_models, name, knobs):
    rows = reference.select([0, 7, 30, 1])  # two rollouts with a wrong step, one failed, one right
    credit = lesson.explore(lm_env, light_models, rows, name, knobs)
    assert credit.token.shape == rows.mask.shape
    assert bool(torch.isfinite(credit.token).all())
    assert bool((credit.token[~rows.mask] == 0).all())
    q = lesson.credit_quality(credit, rows)
    assert 0.0 <= q["hit_rate"] <= 1.0


@pytest.mark.usefixtures("one_torch_thread")
def test_beta_scales_implicit_credit_without_reordering_it(lm_env, reference, light_models):
    small, large = (lesson.explore(lm_env, light_models, reference, "From r to Q*", lesson.Knobs(beta=b)) for b in (0.1, 1.0))
    assert torch.allclose(large.token.double(), 10 * small.token.double(), atol=1e-9)
    assert lesson.credit_quality(small, reference)["hit_rate"] == lesson.credit_quality(large, reference)["hit_rate"]


def test_knobs_read_lists_the_knobs_each_method_reads():
    kn = lesson.Knobs(k=2, threshold=0.7, temperature=0.3, beta=0.5, error_rate=0.2, seed=3)
    assert lesson.knobs_read("SPO", kn) == (("k", 2), ("threshold", 0.7), ("seed", 3))
    assert lesson.knobs_read("PURE min-form", kn) == (("temperature", 0.3), ("seed", 3))
    assert lesson.knobs_read("GRPO", kn) == (("seed", 3),)
    with pytest.raises(TypeError, match="^knobs: "):
        lesson.knobs_read("SPO", {"k": 2})


@pytest.mark.usefixtures("one_torch_thread")
def test_explorer_reuses_credit_when_only_unread_knobs_move(lm_env, reference, light_models):
    rows = reference.select([0, 7, 30, 1])
    ex = lesson.Explorer(lm_env, light_models, rows, size=2)
    base = lesson.Knobs(temperature=0.1, error_rate=0.1)
    for name, unread, read in [("PURE min-form", dict(error_rate=0.4, k=1, beta=0.9), dict(temperature=3.0)),
                               ("CAPO", dict(temperature=3.0, k=1, beta=0.9), dict(error_rate=0.4))]:
        n = ex.n_runs
        first = ex(name, base)
        assert ex.n_runs == n + 1
        # the credit a fresh run gives, with the unread knobs moved: the same, and not run again
        moved = dataclasses.replace(base, **unread)
        assert torch.equal(lesson.explore(lm_env, light_models, rows, name, moved).token, first.token)
        assert ex(name, moved) is first and ex.n_runs == n + 1
        other = ex(name, dataclasses.replace(base, **read))  # a knob it reads: run again
        assert ex.n_runs == n + 2
        assert torch.equal(other.token, lesson.explore(lm_env, light_models, rows, name,
                                                        dataclasses.replace(base, **read)).token)
    assert len(ex._kept) == 2  # size: the least recently used credits dropped out


# ---------------------------------------------------------------- the table on a larger sample
def _family_hits_script():
    """scripts/build_family_hits.py as a module (its sampler is the cache's builder, used nowhere else)."""
    from repo_scripts import load_script

    return load_script("build_family_hits")


@pytest.mark.usefixtures("one_torch_thread")
def test_family_hit_sample_scores_every_method_on_the_same_wrong_rollouts(lm_env, light_models):
    from types import SimpleNamespace

    sample = _family_hits_script().family_hit_sample
    # a critic that knows nothing: the roster only needs something GAE can call
    models = SimpleNamespace(**vars(light_models), critic=lambda ro: torch.zeros(ro.mask.shape))
    hits, meta = sample(lm_env, models, seed=5, n_problems=6, truth_k=2, capo_errors=(0.1, 0.5), progress=False)
    names = [m.name for m in lesson.reasoning_methods(lm_env, models)]
    assert list(dict.fromkeys(hits.method)) == names + ["CAPO, verifier error 0.1", "CAPO, verifier error 0.5"]
    rows = {m: tuple(g.row) for m, g in hits.groupby("method")}
    assert len(set(rows.values())) == 1 and len(rows["GRPO"]) == meta["with_wrong_step"] == meta["scored"] > 0
    assert (hits.seed == 5).all() and (hits.first_error_step >= 0).all() and (hits.steps >= 1).all()
    grpo = hits[hits.method == "GRPO"]
    assert grpo.hit.tolist() == pytest.approx(grpo.chance.tolist())  # equal credit on every step: a chance hit
    assert (grpo.rank_corr_within.dropna() == 0).all()  # and nothing to rank inside a rollout
    assert hits.rank_corr_within.dropna().abs().max() <= 1 + 1e-9
    # CAPO at the roster's error rate and seed is the roster's CAPO: the same verifier draws
    assert (hits[hits.method == "CAPO, verifier error 0.1"].hit.tolist()
            == hits[hits.method == "CAPO"].hit.tolist())
    assert meta["cost"]["VinePPO"]["policy_forwards"] > 0 and meta["n_problems"] == 6
    with pytest.raises(ValueError, match="^capo_errors"):
        sample(lm_env, models, seed=5, n_problems=2, capo_errors=(1.5,), progress=False)


def _synthetic_hits():
    """Three methods on two seeds' rollouts: "always" hits every wrong step, "never" none, "coin"
    hits every other one; chance is 1/4 everywhere."""
    import pandas as pd

    rows = []
    for seed in (1, 2):
        for r in range(40):
            for method, hit in (("always", 1.0), ("never", 0.0), ("coin", float(r % 2))):
                rows.append({"seed": seed, "method": method, "row": r, "hit": hit, "chance": 0.25,
                             "rank_corr_within": float("nan") if r == 0 else hit - 0.5})
    return pd.DataFrame(rows)


def test_family_intervals_are_wilson_and_paired_bootstrap():
    import pandas as pd

    from labkit.scoring import paired_difference, wilson_interval

    hits = _synthetic_hits()
    table = lesson.family_intervals(hits, reference="coin").set_index("method")
    assert list(table.index) == ["always", "never", "coin"] and (table.rollouts == 80).all()
    assert table.loc["coin", "mean"] == 0.5
    assert (table.loc["coin", "low"], table.loc["coin", "high"]) == pytest.approx(wilson_interval(40, 80))
    assert table.loc["coin", ["seed_low", "seed_high"]].tolist() == [0.5, 0.5]

    def frame(method, column="hit"):
        one = hits[hits.method == method].reset_index(drop=True)
        return pd.DataFrame({"row": range(len(one)), "hit": one[column]})

    # the shared draw gives paired_difference's numbers exactly
    want = paired_difference(frame("always"), frame("coin"))
    assert table.loc["always", ["vs_ref", "vs_ref_low", "vs_ref_high"]].tolist() == [want["diff"], want["low"],
                                                                                    want["high"]]
    chance = paired_difference(frame("coin"), frame("coin", "chance"))
    assert table.loc["coin", ["vs_chance", "vs_chance_low", "vs_chance_high"]].tolist() == [
        chance["diff"], chance["low"], chance["high"]]
    assert table.loc["coin", "vs_ref"] == 0 and table.loc["never", "vs_chance_high"] < 0
    # correlations: the rollout with nothing to rank is left out, and chance is a correlation of 0
    rank = lesson.family_intervals(hits, score="rank_corr_within", reference="coin").set_index("method")
    assert (rank.rollouts == 78).all() and rank.loc["always", "mean"] == 0.5
    assert rank.loc["always", ["low", "high"]].tolist() == rank.loc["always", ["vs_chance_low", "vs_chance_high"]].tolist()
    text = lesson.interval_text(lesson.family_intervals(hits, reference="coin"))
    assert list(text.columns) == ["method", "rollouts", "mean [95 % interval]", "per sample", "minus chance",
                                  "minus coin"]
    assert text.iloc[2]["minus coin"] == "+0.000 [+0.000, +0.000]"


def test_family_intervals_name_the_bad_argument():
    hits = _synthetic_hits()
    with pytest.raises(ValueError, match="^score"):
        lesson.family_intervals(hits, score="auc")
    with pytest.raises(ValueError, match="^reference"):
        lesson.family_intervals(hits, reference="VinePPO")
    with pytest.raises(ValueError, match="^methods"):
        lesson.family_intervals(hits, methods=["always", "sometimes"], reference="coin")
    with pytest.raises(ValueError, match="^hits"):
        lesson.family_intervals(hits.drop(columns="chance"), reference="coin")
    with pytest.raises(ValueError, match="^n_boot"):
        lesson.family_intervals(hits, reference="coin", n_boot=0)
    with pytest.raises(ValueError, match="^table"):
        lesson.interval_text(hits)


def test_cached_family_hits_load_and_are_consistent():
    hits, meta = lesson.load_family_hits()
    assert sorted(hits.seed.unique()) == sorted(meta["seeds"]) and len(meta["seeds"]) >= 3
    per = hits.groupby(["seed", "method"]).row.apply(tuple)
    for seed, sample in zip(meta["seeds"], meta["samples"]):
        assert per.loc[seed].nunique() == 1 and len(per.loc[seed].iloc[0]) == sample["with_wrong_step"]
    assert meta["with_wrong_step"] >= 119  # at least notebook 03's sample
    from types import SimpleNamespace

    roster = [m.name for m in lesson.reasoning_methods(None, SimpleNamespace())]
    assert set(roster) <= set(hits.method)  # every method of notebook 04's table was scored
    grpo = hits[hits.method == "GRPO"]
    assert grpo.hit.tolist() == pytest.approx(grpo.chance.tolist())
    with pytest.raises(FileNotFoundError, match="^path"):
        lesson.load_family_hits("/nonexistent")


@pytest.mark.usefixtures("one_torch_thread")
def test_prompt_answers_read_the_explorer_and_what_it_was_told(lm_env, reference, light_models):
    rows = reference.select([0, 7, 30, 1])
    ex = lesson.Explorer(lm_env, light_models, rows)
    hicra = lesson.explore(lm_env, light_models, rows, "HICRA", lesson.Knobs())
    ex.remember("HICRA", hicra)   # a credit computed before: read, not run again
    table = lesson.prompt_answers(ex, [("HICRA", lesson.Knobs(k=1)), ("CAPO", lesson.Knobs(error_rate=0.5)),
                                       ("SPO", lesson.Knobs(k=1, threshold=0.5))])
    assert ex.n_runs == 2
    assert table.setting.tolist() == ["HICRA", "CAPO error_rate=0.5", "SPO k=1 threshold=0.5"]
    assert math.isnan(table.k[0]) and table.error_rate[1] == 0.5 and table.k[2] == 1
    for row, (name, knobs) in zip(table.itertuples(), [("HICRA", lesson.Knobs()), ("CAPO", lesson.Knobs(error_rate=0.5)),
                                                       ("SPO", lesson.Knobs(k=1, threshold=0.5))]):
        q = lesson.credit_quality(lesson.explore(lm_env, light_models, rows, name, knobs), rows)
        assert (row.hit_rate, row.rank_corr_within, row.policy_forwards) == \
            (q["hit_rate"], q["rank_corr_within"], q["policy_forwards"])
    with pytest.raises(ValueError, match="^settings: "):
        lesson.prompt_answers(ex, [])
    with pytest.raises(TypeError, match="^settings: "):
        lesson.prompt_answers(ex, [("SPO", {"k": 1})])
    with pytest.raises(TypeError, match="^explorer: "):
        lesson.prompt_answers(object(), [("SPO", lesson.Knobs())])
    with pytest.raises(ValueError, match="^credit: "):
        ex.remember("HICRA", lesson.explore(lm_env, light_models, reference.select([0, 1]), "HICRA"))


def test_later_credits_round_trip_through_the_cache_files(tmp_path):
    import json

    from labkit.core.cache import write_meta
    from labkit.core.credit import Cost, Credit
    from labkit.course import reasoning_roster

    token = torch.tensor([[0.5, -1.0, 0.0]], dtype=torch.float64)
    credit = Credit(token=token, level="token", values=token, present=torch.tensor([[True, True, False]]),
                    method="stare", cost=Cost(policy_forwards=3), info={"seconds": 0.25})
    reasoning_roster.write_later_credits({"STARE": credit}, tmp_path)
    write_meta(tmp_path / "meta.json", {}, script="build_later_credits.py")
    back = reasoning_roster.load_later_credits(tmp_path)["STARE"]
    assert torch.equal(back.token, token) and torch.equal(back.present, credit.present)
    assert back.cost == credit.cost and back.info == {"seconds": 0.25} and back.method == "stare"
    assert set(json.loads((tmp_path / "credits.json").read_text())) == {"STARE"}
    with pytest.raises(FileNotFoundError, match="^path"):
        reasoning_roster.load_later_credits(tmp_path / "nowhere")
