"""Notebook 03's runners (labkit.course.nb03_vineppo): token-level truth, vine value error and the RL
runs on the tiny LM."""
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
