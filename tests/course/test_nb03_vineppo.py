"""Notebook 03's runners (labkit.course.nb03_vineppo): vine credits and their value error, the
caches the notebook reads (and the script that builds the hit sample). The heatmaps that outline
the first wrong step are tested in course/test_step_heatmaps.py. The token-level truth is tested
in envs/test_arithmetic_truth.py, hits and intervals in scoring/test_steps.py and
scoring/test_intervals.py, the RL runs in learn/test_lm_runs.py."""
import numpy as np
import pandas as pd
import pytest
import torch

from labkit.course import nb03_vineppo as lesson
from labkit.envs.arithmetic.truth import load_reference
from repo_scripts import load_script


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


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


# ---------------------------------------------------------------- hit rates on a larger sample
def _vine_hits_script():
    """scripts/build_vine_hits.py as a module (its sampler is the cache's builder, used nowhere else)."""
    return load_script("build_vine_hits")


@pytest.mark.usefixtures("one_torch_thread")
def test_vine_hit_sample_scores_every_method_on_the_same_wrong_rollouts(lm_env):
    vine_hit_sample = _vine_hits_script().vine_hit_sample
    hits, meta = vine_hit_sample(lm_env, n_problems=12, ks=(1,), truth_k=2, progress=False)
    assert set(hits.method) == {"GRPO", "VinePPO K=1", "truth K=2"}
    rows = {m: g.row.tolist() for m, g in hits.groupby("method")}
    assert len({tuple(r) for r in rows.values()}) == 1 and len(rows["GRPO"]) == meta["with_wrong_step"]
    assert (hits.first_error_step >= 0).all()
    grpo = hits[hits.method == "GRPO"]
    assert grpo.hit.tolist() == pytest.approx(grpo.chance.tolist())  # equal credit on every step: a chance hit
    assert meta["cost"]["truth K=2"]["vines"] == 2 * meta["cost"]["VinePPO K=1"]["vines"] > 0
    with pytest.raises(ValueError, match="^truth_k"):
        vine_hit_sample(lm_env, n_problems=4, ks=(2,), truth_k=2, progress=False)


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


# --------------------------------------------------------------------------- the capstone's helpers (exercise 03c)
def test_token_grid_and_the_change_table_read_the_long_form_tokens(reference):
    b, t = reference.mask.nonzero(as_tuple=True)
    tokens = pd.DataFrame({"row": b.tolist(), "position": t.tolist(), "before": -1.0, "after": -0.5})
    before, after = (lesson.token_grid(tokens, c, reference) for c in ("before", "after"))
    assert before.shape == reference.mask.shape and bool((before[~reference.mask] == 0).all())
    assert torch.equal(after - before, 0.5 * reference.mask.double())
    table = lesson.logprob_change_table(reference, before, after).set_index("tokens")
    assert int(table["count"].sum()) == int(reference.mask.sum())
    assert np.allclose(table.mean_change, 0.5) and np.allclose(table.mean_abs_change, 0.5)
    with pytest.raises(ValueError, match="column"):
        lesson.token_grid(tokens, "middle", reference)
    with pytest.raises(ValueError, match="tokens"):
        lesson.token_grid(tokens.assign(position=tokens.position + 100), "before", reference)


def test_capstone_curves_put_batch_reward_and_held_out_success_on_one_chart():
    curve = pd.DataFrame({"iteration": [0, 1, 2], "train_reward": [np.nan, 0.5, 0.75],
                          "success": [0.6, np.nan, 0.7]})
    long = lesson.capstone_curves(curve)
    assert len(long) == 4 and long.series.nunique() == 2
    with pytest.raises(ValueError, match="curve"):
        lesson.capstone_curves(curve.drop(columns="success"))


@pytest.mark.usefixtures("one_torch_thread")
def test_live_capstone_trains_with_the_readers_loop_and_reports_what_moved(reference):
    small = reference.select(list(range(3)))

    def one_step(learner, optimizer, iterations, seed):
        rewards = []
        for i in range(1, iterations + 1):
            batch = learner.collect(i, seed=seed * 1_000_003 + i)
            loss = -(learner.logprobs(batch, torch.arange(len(batch))) * batch.mask).sum() / batch.mask.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rewards.append(float(batch.scores.mean()))
        return rewards

    live = lesson.live_capstone(one_step, small, iterations=1, prompts_per_batch=1, n_per_prompt=2, lr=1e-3)
    assert len(live["rewards"]) == 1 and live["seconds"] > 0
    assert live["before"].shape == small.mask.shape
    assert float((live["after"] - live["before"]).abs().max()) > 0   # the step moved the policy
    with pytest.raises(TypeError, match="loop"):
        lesson.live_capstone("not a loop", small)


def test_the_cached_capstone_run_is_the_lab_loop_on_the_reference_rollouts(reference):
    curve, tokens, meta = lesson.load_capstone_run()
    settings = meta["settings"]
    assert curve.iteration.max() == settings["iterations"] and settings["epochs"] == 1
    assert len(tokens) == int(reference.mask.sum())
    before = lesson.token_grid(tokens, "before", reference)
    assert bool((before[reference.mask] <= 1e-6).all())
