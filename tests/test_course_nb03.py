"""Notebook 03's runners (labkit.course.nb03_vineppo): token-level truth, vine value error and the RL
runs on the tiny LM."""
import numpy as np
import pandas as pd
import pytest
import torch

from labkit.course import nb03_vineppo as lesson
from labkit.envs.arithmetic.truth import load_reference
from labkit.learn.loop import compare


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


@pytest.mark.usefixtures("one_torch_thread")
def test_truth_token_advantage_telescopes(reference):
    adv = lesson.truth_token_advantage(reference)
    R = reference.truth["token_values"].shape[0]
    assert adv.shape == (R, reference.horizon)
    assert torch.allclose(adv.sum(1).double(), reference.scores[:R].double() - reference.truth["token_values"][:, 0], atol=1e-6)


@pytest.mark.usefixtures("one_torch_thread")
def test_vine_value_error_reports_error_and_cost(lm_env, reference):
    rows = list(range(6))
    small = reference.select(rows)  # per-row truth and info (problems, prompt ids) follow the rows
    assert torch.equal(small.truth["step_values"], reference.truth["step_values"][:6])
    df = lesson.vine_value_error(lm_env, small, ks=(1, 4), progress=False)
    steps = int(small.view(small.rewards, "step", "sum")[1].sum())
    assert list(df.k) == [1, 4]
    assert list(df.vines) == [steps, 4 * steps]
    assert (df.value_mae >= 0).all() and (df.value_mae <= 1).all()
    with pytest.raises(ValueError, match="ks"):
        lesson.vine_value_error(lm_env, small, ks=(), progress=False)


@pytest.mark.usefixtures("one_torch_thread")
def test_rl_runs_train_each_method_and_count_vine_cost():
    make = lesson.lm_rl_setup(train_pool=16, eval_problems=8, prompts_per_batch=2, n_per_prompt=4)
    curves = compare(make, lesson.lm_rl_runs(k=2), seeds=(0,), iterations=1, lr=1e-5, progress=False)
    last = curves[curves.iteration == 1].set_index("label")
    assert set(last.index) == {"GRPO", "PPO", "VinePPO"}
    assert last.loss.notna().all()
    assert (last.env_steps > 0).all()
    assert last.loc["VinePPO", "policy_tokens"] > 2 * last.loc["GRPO", "policy_tokens"]
    with pytest.raises(ValueError, match="methods"):
        lesson.lm_rl_runs(methods=("DPO",))


@pytest.mark.usefixtures("one_torch_thread")
def test_vine_credit_depends_on_its_seed_only(lm_env, reference):
    """The notebook precomputes its K slider (seed 100 + K) at build time; that shows the same
    numbers as computing on the move only if a call does not depend on what ran before."""
    from labkit.credit import get_estimator

    small = reference.select(list(range(4)))
    vine = get_estimator("vineppo")
    first = vine(small, value_fn=lm_env.value_fn(seed=102), k=2)
    torch.manual_seed(7)
    vine(small, value_fn=lm_env.value_fn(seed=101), k=1)
    again = vine(small, value_fn=lm_env.value_fn(seed=102), k=2)
    assert torch.equal(first.token, again.token)
    assert torch.equal(first.info["step_values"], again.info["step_values"])


@pytest.mark.usefixtures("one_torch_thread")
def test_vine_credits_feed_the_slider_and_the_sweep_with_the_same_numbers(lm_env, reference):
    """Notebook 03 samples every K of its slider once (vine_credits, seed s: vines seeded s + K,
    what a move would sample); vine_value_error(credits=) scores such credits instead of sampling
    them again, with the numbers sampling them inside gives (the notebook's sweep reuses the
    slider's seed-0 vines)."""
    from labkit.credit import get_estimator

    small = reference.select(list(range(4)))
    slider = lesson.vine_credits(lm_env, small, [2], seed=100, progress=False)
    on_move = get_estimator("vineppo")(small, value_fn=lm_env.value_fn(seed=102), k=2)
    assert torch.equal(slider[2].token, on_move.token)
    vines = lesson.vine_credits(lm_env, small, [1, 2], seed=0, progress=False)
    assert sorted(vines) == [1, 2] and all(c.info["seconds"] >= 0 for c in vines.values())
    reused = lesson.vine_value_error(lm_env, small, ks=(1, 2), seed=0, progress=False, credits=vines)
    fresh = lesson.vine_value_error(lm_env, small, ks=(1, 2), seed=0, progress=False)
    cols = [c for c in fresh.columns if c != "seconds"]
    pd.testing.assert_frame_equal(reused[cols], fresh[cols], check_exact=True)
    with pytest.raises(ValueError, match="^ks"):
        lesson.vine_credits(lm_env, small, [], progress=False)


# ---------------------------------------------------------------- hit rates with intervals
def test_first_error_hits_average_to_nb02s_hit_rate(reference):
    """Row by row, the hits average to first_error_hit_rate over the same rollouts, for credit
    that ties (GRPO: every step equal, a hit of 1/steps) and credit that does not (the truth)."""
    truth = lesson.truth_step_advantage(reference)
    flat = torch.where(reference.mask, reference.scores[:, None] - 0.5, 0.0)
    for credit in (truth, flat):
        rate = lesson.first_error_hit_rate(credit, reference)
        hits = lesson.first_error_hits(credit, reference)
        assert len(hits) == rate["rollouts"] > 0
        assert hits.hit.mean() == pytest.approx(rate["hit_rate"])
        assert hits.chance.mean() == pytest.approx(rate["chance"])
        assert (reference.truth["first_error_step"][hits.row.tolist()] >= 0).all()
    assert lesson.first_error_hits(flat, reference).hit.tolist() == pytest.approx(
        lesson.first_error_hits(flat, reference).chance.tolist())
    with pytest.raises(ValueError, match="^credit"):
        lesson.first_error_hits(truth[:, :3], reference)


def test_wilson_interval_brackets_the_rate_and_narrows_with_n():
    lo, hi = lesson.wilson_interval(0, 10)
    assert lo == 0 and hi == pytest.approx(1.96 ** 2 / (10 + 1.96 ** 2), abs=1e-3)  # the closed form at p = 0
    lo, hi = lesson.wilson_interval(10, 10)
    assert hi == 1 and lo < 1
    small, big = lesson.wilson_interval(4, 8), lesson.wilson_interval(40, 80)
    assert small[0] < 0.5 < small[1] and small[0] < big[0] < 0.5 < big[1] < small[1]
    assert lesson.wilson_interval(40, 80, level=0.5)[1] < big[1]
    with pytest.raises(ValueError, match="^successes"):
        lesson.wilson_interval(9, 8)
    with pytest.raises(ValueError, match="^n"):
        lesson.wilson_interval(0, 0)
    with pytest.raises(ValueError, match="^level"):
        lesson.wilson_interval(1, 8, level=1.0)


def test_hit_rate_intervals_and_paired_difference():
    a = pd.DataFrame({"row": range(40), "hit": [1.0, 0.0, 1.0, 0.5] * 10, "chance": 0.25})
    b = a.assign(hit=[0.25] * 40)
    table = lesson.hit_rate_intervals({"a": a, "b": b}).set_index("method")
    assert table.loc["a", "hit_rate"] == pytest.approx(0.625) and table.loc["a", "rollouts"] == 40
    assert table.loc["a", "low"] < 0.625 < table.loc["a", "high"]
    d = lesson.paired_difference(a, b, n_boot=2000, seed=1)
    assert d["diff"] == pytest.approx(0.375) and d["low"] < 0.375 < d["high"] and d["rollouts"] == 40
    assert d == lesson.paired_difference(a, b, n_boot=2000, seed=1)  # seeded
    same = lesson.paired_difference(a, a)
    assert same["diff"] == same["low"] == same["high"] == 0
    shifted = lesson.paired_difference(a.assign(hit=a.hit + 0.1), a)  # paired: a constant shift has no spread
    assert shifted["low"] == pytest.approx(0.1) and shifted["high"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="^b"):
        lesson.paired_difference(a, b.iloc[::-1])
    with pytest.raises(ValueError, match="^hits"):
        lesson.hit_rate_intervals({})


@pytest.mark.usefixtures("one_torch_thread")
def test_vine_hit_sample_scores_every_method_on_the_same_wrong_rollouts(lm_env):
    hits, meta = lesson.vine_hit_sample(lm_env, n_problems=12, ks=(1,), truth_k=2, progress=False)
    assert set(hits.method) == {"GRPO", "VinePPO K=1", "truth K=2"}
    rows = {m: g.row.tolist() for m, g in hits.groupby("method")}
    assert len({tuple(r) for r in rows.values()}) == 1 and len(rows["GRPO"]) == meta["with_wrong_step"]
    assert (hits.first_error_step >= 0).all()
    grpo = hits[hits.method == "GRPO"]
    assert grpo.hit.tolist() == pytest.approx(grpo.chance.tolist())  # equal credit on every step: a chance hit
    assert meta["cost"]["truth K=2"]["vines"] == 2 * meta["cost"]["VinePPO K=1"]["vines"] > 0
    with pytest.raises(ValueError, match="^truth_k"):
        lesson.vine_hit_sample(lm_env, n_problems=4, ks=(2,), truth_k=2, progress=False)


def test_cached_hits_and_sweep_load_and_are_consistent():
    hits, meta = lesson.load_vine_hits()
    per = hits.groupby("method").row.apply(tuple)
    assert per.nunique() == 1 and len(per.iloc[0]) == meta["with_wrong_step"]
    assert {f"VinePPO K={k}" for k in meta["ks"]} | {"GRPO", f"truth K={meta['truth_k']}"} == set(hits.method)
    sweep, sweep_meta = lesson.load_lr_sweep()
    assert {"lr", "iterations", "label", "seed", "success"} <= set(sweep.columns)
    runs = sweep.groupby(["lr", "iterations", "label", "seed"])
    assert (runs.iteration.max() == runs.iterations.first()).all()  # every run finished
    assert (runs.iteration.min() == 0).all() and sweep.groupby("seed").success.apply(
        lambda s: s.iloc[0]).notna().all()
    with pytest.raises(FileNotFoundError, match="^path"):
        lesson.load_vine_hits("/nonexistent")
    with pytest.raises(FileNotFoundError, match="^path"):
        lesson.load_lr_sweep("/nonexistent")


def test_summarise_lr_sweep_pairs_each_run_with_grpo_at_its_lr_and_seed():
    def run(label, lr, seed, before, after):
        return pd.DataFrame({"label": label, "lr": lr, "iterations": 2, "seed": seed, "iteration": [0, 1, 2],
                             "success": [before, float("nan"), after], "env_steps": 1, "policy_tokens": 1,
                             "aux_calls": 0, "seconds": 1.0})
    curves = pd.concat([run("GRPO", 1e-5, 0, 0.5, 0.6), run("GRPO", 1e-5, 1, 0.5, 0.4),
                        run("VinePPO", 1e-5, 0, 0.5, 0.7), run("VinePPO", 1e-5, 1, 0.5, 0.5),
                        run("VinePPO", 1e-4, 0, 0.5, 0.1)])
    table = lesson.summarise_lr_sweep(curves).set_index(["lr", "label"])
    assert table.loc[(1e-5, "GRPO"), "change_mean"] == pytest.approx(0.0)
    assert table.loc[(1e-5, "VinePPO"), "change_mean"] == pytest.approx(0.1)
    assert table.loc[(1e-5, "VinePPO"), "vs_grpo"] == pytest.approx(0.1)  # +0.1 on both seeds
    assert table.loc[(1e-5, "GRPO"), "vs_grpo"] == 0
    assert table.loc[(1e-4, "VinePPO"), "change_mean"] == pytest.approx(-0.4)
    assert np.isnan(table.loc[(1e-4, "VinePPO"), "vs_grpo"]) and table.loc[(1e-4, "VinePPO"), "seeds"] == 1
    with pytest.raises(ValueError, match="^curves"):
        lesson.summarise_lr_sweep(curves.drop(columns="lr"))
