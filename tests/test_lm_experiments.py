"""Experiment runners of notebooks 02-03 on the tiny LM: truth-derived credit, vine value error, RL runs."""
import pytest
import torch

from labkit import experiments as ex
from labkit.credit import get_estimator
from labkit.envs.arithmetic.truth import load_reference
from labkit.learn.loop import compare

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def test_truth_step_advantage_is_the_vineppo_formula_on_cached_values(reference):
    adv = ex.truth_step_advantage(reference)
    v = reference.truth["step_values"]
    step_adv, present = reference.view(adv, "step", "mean")
    b = 0
    n = int(present[b].sum())
    for i in range(n):
        after = v[b, i + 1] if i + 1 < n else reference.scores[b]  # the last step is followed by the outcome
        assert step_adv[b, i] == pytest.approx(float(after - v[b, i]), abs=1e-6)
    # telescoping: a row's step advantages sum to its outcome minus V before the first step
    sums = step_adv.where(present, 0).sum(1)
    assert torch.allclose(sums.double(), reference.scores.double() - v[:, 0], atol=1e-6)


def test_truth_token_advantage_telescopes(reference):
    adv = ex.truth_token_advantage(reference)
    R = reference.truth["token_values"].shape[0]
    assert adv.shape == (R, reference.horizon)
    assert torch.allclose(adv.sum(1).double(), reference.scores[:R].double() - reference.truth["token_values"][:, 0], atol=1e-6)


def test_first_error_hit_rate_counts_ties_in_expectation(reference):
    truth_rate = ex.first_error_hit_rate(ex.truth_step_advantage(reference), reference)
    assert truth_rate["rollouts"] >= 3
    assert truth_rate["hit_rate"] > truth_rate["chance"]  # the true advantage points at the wrong step
    flat = ex.first_error_hit_rate(torch.where(reference.mask, -1.0, 0.0).double(), reference)
    assert flat["hit_rate"] == pytest.approx(flat["chance"])  # all steps tied: a random pick
    grpo = get_estimator("grpo")(reference.with_(group_ids=torch.zeros(len(reference), dtype=torch.long)))
    assert ex.first_error_hit_rate(grpo.token, reference)["hit_rate"] == pytest.approx(flat["chance"])


def test_vine_value_error_reports_error_and_cost(lm_env, reference):
    rows = list(range(6))
    small = reference.select(rows)  # per-row truth and info (problems, prompt ids) follow the rows
    assert torch.equal(small.truth["step_values"], reference.truth["step_values"][:6])
    df = ex.vine_value_error(lm_env, small, ks=(1, 4), progress=False)
    steps = int(small.view(small.rewards, "step", "sum")[1].sum())
    assert list(df.k) == [1, 4]
    assert list(df.vines) == [steps, 4 * steps]
    assert (df.value_mae >= 0).all() and (df.value_mae <= 1).all()
    with pytest.raises(ValueError, match="ks"):
        ex.vine_value_error(lm_env, small, ks=(), progress=False)


def test_rl_runs_train_each_method_and_count_vine_cost():
    make = ex.lm_rl_setup(train_pool=16, eval_problems=8, prompts_per_batch=2, n_per_prompt=4)
    curves = compare(make, ex.lm_rl_runs(k=2), seeds=(0,), iterations=1, lr=1e-5, progress=False)
    last = curves[curves.iteration == 1].set_index("label")
    assert set(last.index) == {"GRPO", "PPO", "VinePPO"}
    assert last.loss.notna().all()
    assert (last.env_steps > 0).all()
    assert last.loc["VinePPO", "policy_tokens"] > 2 * last.loc["GRPO", "policy_tokens"]
    with pytest.raises(ValueError, match="methods"):
        ex.lm_rl_runs(methods=("DPO",))


def test_lm_value_scores_rank_an_oracle_perfectly_and_a_constant_at_chance(lm_env, reference):
    from types import SimpleNamespace

    from labkit.envs.arithmetic.truth import load_step_alternatives

    alt = load_step_alternatives(lm_env)
    keep = (alt["groups"] < 12).nonzero().flatten().tolist()
    small = {k: (v[keep] if isinstance(v, torch.Tensor) and k.startswith(("groups", "mc_", "ends", "counts"))
                 else [v[i] for i in keep] if k in ("prefixes", "problems", "texts") else v) for k, v in alt.items()}
    prefixes, _, present = lm_env.step_prefixes(reference)
    # an oracle critic: asked first about the reference step starts, then about the candidates
    answers = iter([(prefixes, reference.truth["step_values"][present]), (small["prefixes"], small["mc_values"])])

    def prefix_values(rows):
        expected, values = next(answers)
        assert rows == expected
        return values

    oracle = SimpleNamespace(prefix_values=prefix_values)
    df = ex.lm_value_scores(lm_env, oracle, reference, small, ks=(1, 4), progress=False).set_index("estimate")
    assert list(df.index) == ["constant", "LM critic", "Monte Carlo, k=1", "Monte Carlo, k=4"]
    assert df.loc["LM critic", "value_mae"] == 0 and df.loc["LM critic", "value_corr"] == pytest.approx(1.0)
    assert df.loc["LM critic", "pairwise"] == 1.0 and df.loc["LM critic", "top1"] == 1.0
    assert df.loc["constant", "pairwise"] == 0.5 and df.loc["constant", "top1"] == pytest.approx(df.loc["constant", "top1_chance"])
    assert df.loc["constant", "value_mae"] > 0.05  # the reference values vary: a constant is off
    assert df.loc["LM critic", "tokens"] == sum(len(p) for p in small["prefixes"])
    assert 0 < df.loc["Monte Carlo, k=1", "tokens"] < df.loc["Monte Carlo, k=4", "tokens"]
    assert df.loc["Monte Carlo, k=4", "pairwise"] > 0.7  # a few vines already order clearly different steps


def test_fit_lm_critic_reports_its_data(lm_env):
    critic, history = ex.fit_lm_critic(lm_env, n_rollouts=16, steps=2, seed=0, progress=False)
    assert len(history) == 2 and history.attrs["rollouts"] == 16 and 0 <= history.attrs["rollout_success"] <= 1
    assert critic.train_steps == 2
    with pytest.raises(ValueError, match="n_rollouts"):
        ex.fit_lm_critic(lm_env, n_rollouts=0, progress=False)


def test_segment_shapley_study_is_efficient_and_reports_both_games(lm_env, reference):
    few = reference.select(list(range(4)) + list(range(28, 32)))  # 4- and 3-segment completions
    out = ex.segment_shapley_study(lm_env, few, k=2, seed=0)
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
    assert list(out["by_role"].columns[2:]) == list(ex.SEGMENT_ROLE_NAMES)
    assert summary["sequences"].min() > 0 and summary["corr_with_truth"].between(-1, 1).all()
