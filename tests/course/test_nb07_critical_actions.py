"""Notebook 07's runners (labkit.course.nb07_critical_actions): CARL-style focused updates and IGPO's
DP stand-in, checked against exact truth.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.course import nb07_critical_actions as lesson
from labkit.course import presets
from labkit.course.presets import toolworld_setup
from labkit.credit import get_estimator
from labkit.credit.entropy import carl
from labkit.credit.information import igpo
from labkit.envs import ToolWorld
from labkit.envs.toolworld import ToolLearner
from labkit.learn.loop import curve_band, train
from labkit.scoring import first_error_positions

from panel_checks import assert_same_panels

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def setup():
    """A small ToolWorld, a warmed-up policy, its truth and a batch of 12 tasks x 8 episodes."""
    env, policy = toolworld_setup(3, max_turns=12, warmup_iterations=6, seed=1)
    truth = env.truth(policy)
    ro = env.sample(policy, 12, group_size=8, seed=2)
    return env, policy, truth, ro


def kept_positions(credit, ro):
    return ro.broadcast(credit.info["kept"].long(), "turn").bool() & ro.mask


@pytest.fixture(scope="module")
def small_runs(setup):
    env, policy, _, _ = setup
    before = policy.logits.detach().clone()
    curves = lesson.focus_training(env, policy, {"entropy": (0.3,), "exact_advantage": (0.3,), "random": (0.5,)},
                                   seeds=(0, 1), iterations=3, n_tasks=4, eval_every=3, progress=False)
    assert torch.equal(policy.logits, before)  # every run trains a copy; the start policy is untouched
    return env, policy, curves


def synthetic_curves():
    """Final J per (rule, fraction, seed) chosen by hand; two iterations per run."""
    finals = {("all", 1.0): [0.80, 0.82, 0.84], ("entropy", 0.1): [0.5, 0.6, 0.7],
              ("entropy", 0.5): [0.79, 0.81, 0.83], ("random", 0.3): [0.6, 0.6, 0.6]}
    rows = []
    for (rule, frac), js in finals.items():
        for seed, j in enumerate(js):
            for it, success, share in ((0, 0.4, float("nan")), (1, float("nan"), frac), (2, j, frac)):
                rows.append({"rule": rule, "rule_name": lesson.RULE_NAMES[rule], "top_fraction": frac, "seed": seed,
                             "iteration": it, "success": success, "share_updated": share,
                             "nonzero_share": share if share != share else share / 2, "env_steps": 10 * it,
                             "label": f"{rule} {frac}"})
    return pd.DataFrame(rows)


def test_entropy_rule_is_carl(setup):
    _, _, _, ro = setup
    a = lesson.focused_credit(ro, rule="entropy", top_fraction=0.3)
    b = carl(ro, top_fraction=0.3)
    assert torch.equal(a.token, b.token) and torch.equal(a.info["kept"], b.info["kept"])
    assert a.info["nonzero_share"] == pytest.approx(float((b.token[ro.mask] != 0).double().mean()))


@pytest.mark.parametrize("rule", lesson.RULES)
def test_every_rule_keeps_the_same_number_of_turns_with_grpo_credit(setup, rule):
    env, policy, truth, ro = setup
    n = int(ro.mask.sum())
    grpo = get_estimator("grpo")(ro).token
    for frac in (0.1, 0.3, 1.0):
        c = lesson.focused_credit(ro, rule=rule, top_fraction=frac, truth=truth, generator=torch.Generator().manual_seed(0))
        kept = kept_positions(c, ro)
        assert int(kept.sum()) == math.ceil(frac * n - 1e-9)
        assert c.info["share_updated"] == pytest.approx(int(kept.sum()) / n)
        assert torch.allclose(c.token, torch.where(kept, grpo, 0.0))
    assert torch.allclose(lesson.focused_credit(ro, rule=rule, top_fraction=1.0, truth=truth,
                                                generator=torch.Generator()).token, grpo)


def test_oracle_rule_keeps_the_turns_with_the_largest_exact_advantage(setup):
    _, _, truth, ro = setup
    c = lesson.focused_credit(ro, rule="exact_advantage", top_fraction=0.2, truth=truth)
    kept = kept_positions(c, ro)
    A = truth.advantage(ro).abs()
    assert float(A[kept].min()) >= float(A[ro.mask & ~kept].max())


def test_random_rule_is_seeded_and_needs_its_inputs(setup):
    _, _, truth, ro = setup

    def draw(seed):
        return lesson.focused_credit(ro, rule="random", top_fraction=0.3, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(draw(4).info["kept"], draw(4).info["kept"])
    assert not torch.equal(draw(4).info["kept"], draw(5).info["kept"])
    with pytest.raises(ValueError, match="^generator"):
        lesson.focused_credit(ro, rule="random")
    with pytest.raises(ValueError, match="^truth"):
        lesson.focused_credit(ro, rule="exact_advantage")
    with pytest.raises(ValueError, match="^rule"):
        lesson.focused_credit(ro, rule="loudest")
    with pytest.raises(ValueError, match="^top_fraction"):
        lesson.focused_credit(ro, top_fraction=0.0)


def test_entropy_vs_truth_counts_agree_with_the_batch(setup):
    _, _, truth, ro = setup
    s = lesson.entropy_vs_truth(ro, truth, top_fraction=0.3)
    dec = ro.truth["decisive"] & ro.mask
    kept = kept_positions(carl(ro, top_fraction=0.3), ro)
    hits = int((kept & dec).sum())
    assert s["turns"] == int(ro.mask.sum()) and s["decisive"] == int(dec.sum())
    assert s["carl_precision"] == pytest.approx(hits / int(kept.sum()))
    assert s["carl_recall"] == pytest.approx(hits / int(dec.sum()))
    A = truth.advantage(ro).abs()
    assert s["abs_A_decisive"] == pytest.approx(float(A[dec].mean()))
    assert s["entropy_routine"] == pytest.approx(float(ro.entropies[ro.mask & ~dec].mean()))
    # in this world the decisive turns are where the value jumps
    assert s["abs_A_decisive"] > 3 * s["abs_A_routine"]


def test_entropy_vs_truth_scores_a_perfect_and_a_flat_signal(setup):
    env, _, truth, ro = setup
    dec = ro.truth["decisive"] & ro.mask
    n, k = int(ro.mask.sum()), int(dec.sum())
    # an entropy that is high exactly on the decisive turns: CARL at the decisive rate finds all of them
    perfect = ro.with_(entropies=torch.where(dec, 2.0, 1.0).to(torch.float64))
    s = lesson.entropy_vs_truth(perfect, truth, top_fraction=k / n)
    assert s["carl_precision"] == pytest.approx(1.0) and s["carl_recall"] == pytest.approx(1.0)
    # the uniform policy: one entropy everywhere, no difference between decisive and routine turns
    uniform = env.make_policy()
    ro_u = env.sample(uniform, 8, group_size=8, seed=3)
    s = lesson.entropy_vs_truth(ro_u, env.truth(uniform))
    assert s["entropy_decisive"] == pytest.approx(math.log(env.n_actions))
    assert s["entropy_routine"] == pytest.approx(math.log(env.n_actions))
    with pytest.raises(ValueError, match="^rollouts"):
        lesson.entropy_vs_truth(ro.with_(truth={}), truth)


def test_where_carl_looks_partitions_the_batch(setup):
    env, _, truth, ro = setup
    table = lesson.where_carl_looks(env, ro, truth, top_fraction=0.3)
    share = carl(ro, top_fraction=0.3).info["share_updated"]
    assert table.turns.sum() == pytest.approx(1.0) and table.decisive.sum() == pytest.approx(1.0)
    assert (table.turns * table.carl_keeps).sum() == pytest.approx(share)
    assert list(table.entropy) == sorted(table.entropy, reverse=True)
    assert set(table.observation) <= {"start", "thought", "tests pass", "tests fail", "hint: file j",
                                      "file j looks buggy", "file j looks fine", "edited file j"}


def test_entropy_panel_is_positive_on_kept_turns(setup):
    _, _, truth, ro = setup
    panels = lesson.entropy_panels(ro, truth, top_fraction=0.3, rows=[0, 3])
    (h_title, h), (a_title, a) = panels.items()
    assert a_title == "exact advantage A" and h.shape == (2, ro.horizon)
    kept = kept_positions(carl(ro, top_fraction=0.3), ro)[[0, 3]]
    m = ro.mask[[0, 3]]
    assert bool((h[kept] >= 0).all()) and bool((h[m & ~kept] <= 0).all())
    assert torch.equal(a, truth.advantage(ro)[[0, 3]])
    with pytest.raises(ValueError, match="^rows"):
        lesson.entropy_panels(ro, truth, rows=[len(ro)])


def test_entropy_proxy_over_training_starts_flat_and_matches_the_setup():
    df = lesson.entropy_proxy_over_training(3, max_turns=10, stages=(0, 4), n_tasks=6, seed=2, progress=False)
    assert list(df.iteration) == [0, 4]
    assert df.entropy_decisive[0] == pytest.approx(df.entropy_routine[0])
    env, policy = toolworld_setup(3, max_turns=10, warmup_iterations=4, seed=2)
    assert df.J[1] == pytest.approx(env.truth(policy).J)
    with pytest.raises(ValueError, match="^stages"):
        lesson.entropy_proxy_over_training(3, stages=(5, 5), progress=False)


def test_focus_training_runs_every_setting_from_the_same_start(small_runs):
    env, policy, curves = small_runs
    assert set(zip(curves.rule, curves.top_fraction)) == {("all", 1.0), ("entropy", 0.3), ("exact_advantage", 0.3),
                                                          ("random", 0.5)}
    start = curves[curves.iteration == 0]
    assert start.success.nunique() == 1 and start.success.iloc[0] == pytest.approx(env.truth(policy).J)
    first = curves[curves.iteration == 1]
    for s in (0, 1):  # the same seed samples the same first batch, whatever the credit
        assert first[first.seed == s].train_reward.nunique() == 1
    trained = curves[curves.iteration > 0]
    for (rule, frac), part in trained.groupby(["rule", "top_fraction"]):
        assert part.share_updated.between(frac - 0.02, frac + 0.02).all()
        assert (part.nonzero_share <= part.share_updated + 1e-12).all()


def test_focus_training_grpo_run_is_plain_grpo_training(small_runs):
    env, policy, curves = small_runs
    import copy
    plain = train(ToolLearner(env, copy.deepcopy(policy), n_tasks=4), "grpo", kind="grpo", iterations=3,
                  eval_every=3, seed=1, progress=False)
    ours = curves[(curves.rule == "all") & (curves.seed == 1)]
    assert ours.success.dropna().tolist() == pytest.approx(plain.success.dropna().tolist())
    again = lesson.focus_training(env, policy, {"entropy": (0.3,)}, seeds=(1,), iterations=3, n_tasks=4,
                                  eval_every=3, include_grpo=False, progress=False)
    mine = curves[(curves.rule == "entropy") & (curves.seed == 1)]
    assert again.success.dropna().tolist() == pytest.approx(mine.success.dropna().tolist())


def test_focus_training_rejects_bad_settings(setup):
    env, policy, _, _ = setup
    with pytest.raises(ValueError, match="^settings"):
        lesson.focus_training(env, policy, {"loudest": (0.3,)}, progress=False)
    with pytest.raises(ValueError, match="^settings"):
        lesson.focus_training(env, policy, {"entropy": (1.5,)}, progress=False)
    with pytest.raises(ValueError, match="^settings"):
        lesson.focus_training(env, policy, {}, include_grpo=False, progress=False)
    with pytest.raises(ValueError, match="^policy"):
        lesson.focus_training(env, ToolWorld(4).make_policy(), progress=False)


def test_summary_and_fewer_updates_by_hand():
    summary = lesson.focus_summary(synthetic_curves())
    row = summary.set_index(["rule", "top_fraction"])
    assert row.loc[("entropy", 0.5), "J_final_mean"] == pytest.approx(0.81)
    assert row.loc[("all", 1.0), "J_final_std"] == pytest.approx(0.02)
    assert row.loc[("entropy", 0.1), "nonzero_share"] == pytest.approx(0.05)
    assert row.loc[("entropy", 0.1), "J_start"] == pytest.approx(0.4)
    assert row.matches_grpo.to_dict() == {("all", 1.0): True, ("entropy", 0.1): False, ("entropy", 0.5): True,
                                          ("random", 0.3): False}
    fig = lesson.fewer_updates(summary).set_index("rule")
    assert fig.loc["entropy", "smallest_matching_share"] == pytest.approx(0.5)
    assert fig.loc["entropy", "fewer_updates"] == pytest.approx(0.5)
    assert math.isnan(fig.loc["random", "smallest_matching_share"])
    line = lesson.share_vs_performance(summary)
    entropy_line = line[line.rule_name == lesson.RULE_NAMES["entropy"]]
    assert entropy_line.share_updated.tolist() == pytest.approx([0.1, 0.5, 1.0])  # GRPO closes every rule's line
    assert entropy_line.J.iloc[-1] == pytest.approx(0.82)
    band = curve_band(synthetic_curves())
    end = band[(band.label == "entropy 0.1") & (band.iteration == 2)].iloc[0]
    assert (end["mean"], end["min"], end["max"]) == pytest.approx((0.6, 0.5, 0.7))
    with pytest.raises(ValueError, match="^curves"):
        lesson.focus_summary(synthetic_curves().drop(columns="share_updated"))
    with pytest.raises(ValueError, match="^summary"):
        lesson.fewer_updates(summary.drop(columns="matches_grpo"))


def test_dp_success_prob_reads_the_exact_values(setup):
    env, _, truth, ro = setup
    p = lesson.dp_success_prob(env, truth, ro)
    n = ro.mask.sum(1)
    assert p.shape == (len(ro), int(n.max()) + 1)
    assert bool(((p >= -1e-12) & (p <= 1 + 1e-12)).all())
    assert torch.allclose(p[:, 0], truth.task_values[ro.truth["bug"]])  # V at the start = the task's J
    assert torch.equal(p[torch.arange(len(ro)), n], ro.truth["success"].double())
    v = truth.value(ro)
    for b in range(0, len(ro), 7):
        k = int(n[b])
        assert torch.allclose(p[b, 1:k], v[b, 1:k])  # after turn k = before turn k + 1
    # with p exact, IGPO's unnormalised gains telescope to outcome minus value before the turn
    c = igpo(ro, success_prob=p, final="ig", normalize=False)
    want = torch.where(ro.mask, ro.truth["success"].double()[:, None] - v, 0.0)
    assert torch.allclose(c.token, want)


def test_dp_success_prob_refuses_values_that_are_not_probabilities(setup):
    env, policy, truth, ro = setup
    for kw in ({"step_cost": 0.01}, {"wrong_submit": 0.5}, {"success_reward": 2.0}):
        other = ToolWorld(3, max_turns=12, **kw)
        with pytest.raises(ValueError, match="^env"):
            lesson.dp_success_prob(other, other.truth(policy), ro)
    with pytest.raises(ValueError, match="^rollouts"):
        lesson.dp_success_prob(env, truth, ro.with_(truth={k: v for k, v in ro.truth.items() if k != "success"}))


def test_information_gain_is_skill_plus_luck(setup):
    env, _, truth, ro = setup
    p = lesson.dp_success_prob(env, truth, ro)
    d = lesson.ig_decomposition(ro, truth, p)
    assert d["max_abs_gap"] < 1e-12
    assert 0 < d["skill_var_share"] and 0 < d["luck_var_share"]


def test_with_reliable_tools_information_gain_is_the_exact_advantage():
    # no misleading search, no noisy reads, no flaky tests: the tool's answer carries no luck
    env = ToolWorld(3, max_turns=10, mislead=0.0, noise=0.0, flaky=0.0)
    policy = env.make_policy(init_std=0.5, seed=3)
    truth = env.truth(policy)
    ro = env.sample(policy, 8, group_size=8, seed=4)
    p = lesson.dp_success_prob(env, truth, ro)
    ig = lesson.information_gain(ro, p)
    assert torch.allclose(ig, truth.advantage(ro), atol=1e-12)
    table = lesson.turn_credit_agreement(ro, truth, p).set_index("method")
    assert table.loc["information gain p_k - p_(k-1) alone", "pearson"] == pytest.approx(1.0)
    assert table.loc["information gain p_k - p_(k-1) alone", "spearman"] == pytest.approx(1.0)


def test_credit_agreement_scores_grpo_at_chance_on_decisive_turns(setup):
    env, _, truth, ro = setup
    p = lesson.dp_success_prob(env, truth, ro)
    table = lesson.turn_credit_agreement(ro, truth, p, gamma=0.5).set_index("method")
    assert list(table.index) == ["GRPO", "CARL (top 30% entropy)", "IGPO, γ = 0.5 (stand-in p from DP)",
                                 "information gain p_k - p_(k-1) alone"]
    # GRPO credit is constant along an episode: recall of the decisive turns is k / length
    dec = ro.truth["decisive"] & ro.mask
    rows = dec.any(1)
    chance = (dec.sum(1)[rows] / ro.mask.sum(1)[rows]).double().mean()
    assert table.loc["GRPO", "decisive_recall"] == pytest.approx(float(chance))
    sweep = lesson.igpo_gamma_sweep(ro, truth, p, gammas=(0.5, 0.0)).set_index("gamma")
    assert sweep.loc[0.5, "pearson"] == pytest.approx(table.iloc[2].pearson)
    assert sweep.loc[0.0, "pearson"] > sweep.loc[0.5, "pearson"]
    with pytest.raises(ValueError, match="^gammas"):
        lesson.igpo_gamma_sweep(ro, truth, p, gammas=(1.5,))


def test_credit_panels_pick_methods_and_rows(setup):
    env, _, truth, ro = setup
    p = lesson.dp_success_prob(env, truth, ro)
    panels = lesson.turn_credit_panels(ro, truth, p, methods=("igpo", "ig"), gamma=0.0, rows=[2, 9])
    assert list(panels) == ["exact advantage A", "IGPO, γ = 0 (stand-in p from DP)",
                            "information gain p_k - p_(k-1) alone"]
    assert all(v.shape == (2, ro.horizon) for v in panels.values())
    full = igpo(ro, success_prob=p, gamma=0.0).token  # computed on the whole batch, then sliced
    assert torch.equal(panels["IGPO, γ = 0 (stand-in p from DP)"], full[[2, 9]])
    with pytest.raises(ValueError, match="^methods"):
        lesson.turn_credit_panels(ro, truth, p, methods=("vineppo",))


def test_focus_run_reuses_a_trained_run_and_it_is_the_same_run(setup):
    """Notebook 07's share slider answers from the curves already trained: a run does not depend on
    which other runs were trained with it, so the stored rows equal training that run alone."""
    env, policy, _, _ = setup
    done = lesson.focus_training(env, policy, {"entropy": (0.3,), "random": (0.5,)}, seeds=(0, 1), iterations=3,
                                 eval_every=1, progress=False)
    for rule, share, seed in (("random", 0.5, 1), ("entropy", 0.3, 0)):
        alone = lesson.focus_training(env, policy, {rule: (share,)}, seeds=(seed,), iterations=3, eval_every=1,
                                      include_grpo=False, progress=False)
        reused = lesson.focus_run(env, policy, rule, share, seed=seed, iterations=3, done=done)
        cols = [c for c in alone.columns if c != "seconds"]  # wall time: the one column that differs
        pd.testing.assert_frame_equal(reused[cols], alone[cols], check_exact=True)
    # not in ``done`` (another share, or another length): trained now
    fresh = lesson.focus_run(env, policy, "random", 0.2, seed=0, iterations=3, done=done)
    assert set(fresh.top_fraction) == {0.2} and fresh.iteration.max() == 3
    # evaluating less often changes which iterations carry an exact J, not the run
    sparse = lesson.focus_run(env, policy, "random", 0.2, seed=0, iterations=3, eval_every=2)
    assert sparse.dropna(subset=["success"]).iteration.tolist() == [0, 2, 3]
    assert sparse.success.iloc[-1] == fresh.success.iloc[-1]
    assert lesson.focus_run(env, policy, "entropy", 0.3, seed=0, iterations=2, done=done).iteration.max() == 2
    with pytest.raises(ValueError, match="^rule"):
        lesson.focus_run(env, policy, "loudest", 0.3)
    with pytest.raises(ValueError, match="^share"):
        lesson.focus_run(env, policy, "entropy", 0.0)


def test_final_j_reads_trained_runs_and_carl_at_every_turn_is_grpo(setup):
    """The prompt of notebook 07's share slider: CARL at share 1 keeps every turn, so its run is
    GRPO's run and is read from it (trained alone it is the same, to the last bit)."""
    env, policy, _, _ = setup
    done = lesson.focus_training(env, policy, {"entropy": (0.3,)}, seeds=(0,), iterations=3, eval_every=3,
                                 progress=False)
    table = lesson.final_j(env, policy, done, [("all", 1.0), ("entropy", 1.0), ("entropy", 0.3), ("random", 0.2)],
                           iterations=3, eval_every=3)
    assert table[["rule", "share"]].values.tolist() == [["all", 1.0], ["entropy", 1.0], ["entropy", 0.3],
                                                        ["random", 0.2]]
    grpo = done[done.rule == "all"].success.iloc[-1]
    assert table.J[0] == table.J[1] == grpo
    carl_alone = lesson.focus_run(env, policy, "entropy", 1.0, seed=0, iterations=3, eval_every=3)
    assert carl_alone.success.iloc[-1] == grpo
    assert table.J[2] == done[done.rule == "entropy"].success.iloc[-1]
    assert table.J[3] == lesson.focus_run(env, policy, "random", 0.2, seed=0, iterations=3, eval_every=3).success.iloc[-1]
    with pytest.raises(ValueError, match="^curves: "):
        lesson.final_j(env, policy, done, [("all", 1.0)], iterations=5)
    with pytest.raises(ValueError, match="^settings: "):
        lesson.final_j(env, policy, done, [])
    with pytest.raises(ValueError, match="^settings: "):
        lesson.final_j(env, policy, done, [("entropy", 0.0)])


@pytest.fixture(scope="module")
def toolworld():
    from labkit.course import nb07_critical_actions as lesson

    env, policy = presets.toolworld_setup(3, max_turns=12, warmup_iterations=6, seed=1)
    truth = env.truth(policy)
    ro = env.sample(policy, 6, group_size=4, seed=2)
    return lesson, env, truth, ro


@pytest.mark.parametrize("rows", [None, [0, 3]])
def test_nb07_entropy_panels_unchanged(toolworld, rows):
    from labkit.credit.entropy import carl

    lesson, _, truth, ro = toolworld
    picked = list(range(ro.batch_size)) if rows is None else rows
    credit = carl(ro, top_fraction=0.3)
    H = torch.where(ro.mask, ro.entropies.to(torch.float64) - credit.info["entropy_threshold"], 0.0)
    old = {"entropy minus CARL's cut (> 0: in the top 30%, updated)": H[picked],
           "exact advantage A": truth.advantage(ro)[picked]}
    assert_same_panels(lesson.entropy_panels(ro, truth, top_fraction=0.3, rows=rows), old)


@pytest.mark.parametrize("rows", [None, [2, 9]])
def test_nb07_turn_credit_panels_unchanged(toolworld, rows):
    from labkit.credit import get_estimator
    from labkit.credit.entropy import carl
    from labkit.credit.information import igpo

    lesson, env, truth, ro = toolworld
    picked = list(range(ro.batch_size)) if rows is None else rows
    p = lesson.dp_success_prob(env, truth, ro)
    ig = igpo(ro, success_prob=p, final="ig", normalize=False).info["ig"]
    old = {"exact advantage A": truth.advantage(ro)[picked],
           "GRPO": get_estimator("grpo")(ro).token[picked],
           "CARL (top 30% entropy)": carl(ro, top_fraction=0.3).token[picked],
           "IGPO, γ = 0.5 (stand-in p from DP)": igpo(ro, success_prob=p, gamma=0.5).token[picked],
           "information gain p_k - p_(k-1) alone": torch.where(ro.mask, ro.broadcast(ig, "turn"), 0.0)[picked]}
    assert_same_panels(lesson.turn_credit_panels(ro, truth, p, gamma=0.5, rows=rows), old)


# --------------------------------------------------------------------------- the tiny LM: where entropy is natural
def arithmetic_rollouts(completions, operands, *, entropies=None):
    """Hand-written tiny-LM rollouts: one row per completion (a list of tokens, "<eos>" last),
    steps closed by ";", graded by the task's verifier, one group per row."""
    from labkit.envs.arithmetic.env import ArithmeticTask, verify

    task = ArithmeticTask(seed=0)
    problems = [task.problem(ops) for ops in operands]
    T = max(len(c) for c in completions)
    B = len(completions)
    mask = torch.zeros(B, T, dtype=torch.bool)
    step_ids = torch.full((B, T), -1, dtype=torch.long)
    rewards = torch.zeros(B, T)
    text, first = [], []
    for b, (toks, p) in enumerate(zip(completions, problems)):
        mask[b, :len(toks)] = True
        step = 0
        for t, ch in enumerate(toks):
            step_ids[b, t] = step
            step += ch == ";"
        verdict = verify(p, "".join(c for c in toks if c != "<eos>"))
        rewards[b, len(toks) - 1] = verdict.reward
        text.append(list(toks) + [""] * (T - len(toks)))
        first.append(-1 if verdict.first_error is None else verdict.first_error)
    ent = torch.where(mask, torch.full((B, T), 0.01), 0.0) if entropies is None else entropies
    return Rollouts(tokens=torch.where(mask, 1, 0), mask=mask, rewards=rewards, step_ids=step_ids,
                    group_ids=torch.arange(B), entropies=ent, logprobs=torch.where(mask, -ent, 0.0), text=text,
                    truth={"first_error_step": torch.tensor(first)}, info={"problems": problems})


def chars(s):
    return [*s, "<eos>"]


OPS = (23, 48, 19)   # 23+48=71;71+19=90;#90


def test_first_wrong_token_is_where_the_answer_leaves_every_right_one():
    ro = arithmetic_rollouts([chars("23+48=71;71+19=90;#90"),    # all right
                              chars("23+48=61;61+19=80;#80"),    # a wrong result digit in step 0
                              chars("23+48=71;#71"),             # answers one step early
                              chars("23+48=71;71+19=90;#91"),    # a wrong answer digit
                              chars("23+48=71;71+19=900;#900"),  # a result one digit too long
                              chars("23+48=71;71+18=89;#89")],   # a wrong operand
                             [OPS] * 6)
    table = lesson.first_wrong_token_table(ro).set_index("row")
    assert 0 not in table.index and list(table.index) == [1, 2, 3, 4, 5]
    got = {b: (r.position, r.step, r.written, r.right) for b, r in table.iterrows()}
    assert got == {1: (6, 0, "6", "7"), 2: (9, 1, "#", "7"), 3: (20, 2, "1", "0"), 4: (17, 1, "0", ";"),
                   5: (13, 1, "8", "9")}
    assert table.loc[1, "step_text"] == "23+48=61;"
    mask = lesson.first_wrong_tokens(ro)
    assert int(mask.sum()) == 5 and not bool(mask[0].any())
    assert bool((mask & ~first_error_positions(ro)).sum() == 0)  # always inside the first wrong step


def test_first_wrong_tokens_of_the_reference_rollouts(lm_env):
    from labkit.envs.arithmetic.truth import load_reference

    ref, _ = load_reference(lm_env)
    table = lesson.first_wrong_token_table(ref)
    assert table.row.tolist() == (ref.truth["first_error_step"] >= 0).nonzero().flatten().tolist()
    row0 = table.set_index("row").loc[0]   # 89+60=149;149+71=210;...: the 1 of 210, where 2 was right
    assert (row0.step_text, row0.written, row0.right) == ("149+71=210;", "1", "2")
    u = lesson.wrong_token_uncertainty(ref)
    assert ((u.entropy_rank >= 1) & (u.entropy_rank <= u.tokens)).all() and ((u.p > 0) & (u.p < 1)).all()


def test_uncertainty_hits_look_at_the_top_position():
    comps, ops = [chars("23+48=61;61+19=80;#80")] * 3, [OPS] * 3
    H = torch.full((3, len(comps[0])), 0.01)
    H[0, 6] = 2.0             # the wrong digit itself
    H[1, 7] = 2.0             # the ; closing the wrong step
    H[2, 6] = H[2, 12] = 2.0  # a tie: the wrong digit and a digit of the next step
    ro = arithmetic_rollouts(comps, ops, entropies=H)
    h = lesson.uncertainty_hits(ro, "entropy").set_index("row")
    assert h.token_hit.tolist() == [1.0, 0.0, 0.5] and h.step_hit.tolist() == [1.0, 1.0, 0.5]
    assert h.token_chance.tolist() == pytest.approx([1 / 22] * 3) and h.step_chance.tolist() == [1 / 3] * 3
    # surprise = -log p; the builder sets log p = -entropy, so it ranks the same positions
    assert lesson.uncertainty_hits(ro, "surprise").equals(lesson.uncertainty_hits(ro, "entropy"))
    tables = lesson.uncertainty_hit_tables(ro)
    assert tables["highest entropy -> first wrong token"].hit.tolist() == [1.0, 0.0, 0.5]
    assert list(tables["lowest p(chosen token) -> first wrong step"].columns) == ["row", "hit", "chance"]


def test_lm_carl_keeps_the_most_uncertain_actions_of_the_batch():
    comps = [chars("23+48=61;61+19=80;#80"), chars("23+48=71;71+19=90;#90")]
    H = torch.full((2, len(comps[0])), 0.01)
    H[0, 6] = 3.0   # the wrong digit: its step has the highest mean entropy
    ro = arithmetic_rollouts(comps, [OPS] * 2, entropies=H)
    grpo = lesson.lm_grpo(ro).token
    assert bool((grpo[0][ro.mask[0]] < 0).all()) and bool((grpo[1][ro.mask[1]] > 0).all())  # one group of two
    step = lesson.lm_carl(ro, action="step", top_fraction=1 / 6)   # 6 steps: keep one
    assert torch.equal(step.info["kept_positions"], first_error_positions(ro))
    assert torch.equal(step.token, torch.where(step.info["kept_positions"], grpo, 0.0))
    token = lesson.lm_carl(ro, action="token", top_fraction=0.3)
    assert int(token.info["kept_positions"].sum()) == math.ceil(0.3 * int(ro.mask.sum()))
    assert torch.equal(lesson.lm_carl(ro, top_fraction=1.0).token, grpo)   # keeping every action is GRPO
    with pytest.raises(ValueError, match="^action:"):
        lesson.lm_carl(ro, action="turn")
    with pytest.raises(ValueError, match="^top_fraction:"):
        lesson.lm_carl(ro, top_fraction=0.0)


def test_carl_selection_counts_against_the_first_wrong_steps_and_tokens():
    comps = [chars("23+48=61;61+19=80;#80"), chars("23+48=71;71+19=90;#90")]
    H = torch.full((2, len(comps[0])), 0.01)
    H[0, 6] = 3.0
    ro = arithmetic_rollouts(comps, [OPS] * 2, entropies=H)
    sel = lesson.carl_selection(ro, top_fraction=1 / 6).set_index("action")
    assert sel.loc["step", "actions"] == 6 and sel.loc["step", "wrong"] == 1
    assert sel.loc["step", "precision"] == 1.0 and sel.loc["step", "recall"] == 1.0
    assert sel.loc["token", "actions"] == int(ro.mask.sum()) and sel.loc["token", "recall"] == 1.0
    assert sel.loc["token", "share_kept"] == pytest.approx(math.ceil(44 / 6) / 44)


def test_credit_vs_mc_truth_scores_the_truth_perfectly_and_grpo_at_zero_within(lm_env):
    from labkit.envs.arithmetic.truth import load_reference, truth_step_advantage
    from labkit.scoring import step_rank_correlation

    ref, _ = load_reference(lm_env)
    truth = truth_step_advantage(ref)
    carl_credit = lesson.lm_carl(ref).token
    per_row = lesson.within_rank_corr(carl_credit, truth, ref)
    assert per_row.rho.mean() == pytest.approx(step_rank_correlation(carl_credit, truth, ref, within=True))
    table = lesson.credit_vs_mc_truth({"truth": truth, "GRPO": lesson.lm_grpo(ref).token, "CARL": carl_credit},
                                      ref, truth, baseline="GRPO").set_index("method")
    assert table.loc["truth", "hit_rate"] == 1.0 and table.loc["truth", "rank_corr_within"] == pytest.approx(1.0)
    assert table.loc["GRPO", "rank_corr_within"] == 0.0 and table.loc["GRPO", "hit_rate"] == table.loc["GRPO", "chance"]
    c = table.loc["CARL"]   # GRPO's within-rollout rho is 0, so the paired difference is CARL's own rho
    assert c.within_vs_base == pytest.approx(c.rank_corr_within) and c.within_low <= c.within_vs_base <= c.within_high
    assert "within_vs_base" not in lesson.credit_vs_mc_truth({"GRPO": truth}, ref, truth).columns
    with pytest.raises(ValueError, match="^baseline:"):
        lesson.credit_vs_mc_truth({"GRPO": truth}, ref, truth, baseline="PPO")
    with pytest.raises(ValueError, match="^credits:"):
        lesson.credit_vs_mc_truth({}, ref, truth)


def test_paired_differences_pair_on_the_rollouts_both_scored():
    a = pd.DataFrame({"row": [1, 2, 3], "hit": [1.0, 1.0, 0.0], "chance": [0.25] * 3})
    b = pd.DataFrame({"row": [2, 3, 4], "hit": [0.0, 0.0, 1.0], "chance": [0.25] * 3})
    d = lesson.paired_differences({"a": a, "b": b}, [("a", "b")]).iloc[0]
    assert (d.a, d.b, d.rollouts, d["diff"]) == ("a", "b", 2, pytest.approx(0.5))
    with pytest.raises(ValueError, match="^pairs:"):
        lesson.paired_differences({"a": a}, [("a", "c")])


def test_cached_hit_tables_drop_rollouts_drawn_differently():
    comps = [chars("23+48=61;61+19=80;#80"), chars("23+48=71;71+19=90;#90"), chars("23+48=71;71+19=80;#80")]
    ro = arithmetic_rollouts(comps, [OPS] * 3)   # first wrong steps: 0, none, 1
    hits = pd.DataFrame({"method": ["V"] * 3, "row": [0, 1, 2], "hit": [1.0, 0.0, 0.5], "chance": [1 / 3] * 3,
                         "first_error_step": [0, 1, 1]})   # row 1 was a different rollout in the cache
    got = lesson.cached_hit_tables(hits, ro, methods=("V",))["V"]
    assert got.row.tolist() == [0, 2] and got.hit.tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="^methods:"):
        lesson.cached_hit_tables(hits, ro, methods=("W",))


def test_the_redrawn_sample_is_notebook_03s(lm_env):
    hits, meta = lesson.load_vine_hits()
    sample = lesson.vine_hit_rollouts(lm_env, meta)
    grpo = hits[hits.method == "GRPO"]
    assert len(sample) == meta["n_problems"]
    paired = lesson.cached_hit_tables(hits, sample)["VinePPO K=9"]
    # the pairing keeps only rollouts drawn alike: every kept row has the cached first wrong step
    first = sample.truth["first_error_step"]
    kept = grpo.set_index("row").first_error_step
    assert all(int(first[r]) == int(kept[r]) for r in paired.row)
    if torch.__version__ != meta["torch"]:
        pytest.skip(f"torch {torch.__version__} samples otherwise than the cache's {meta['torch']}: "
                    f"{len(paired)} of {meta['with_wrong_step']} rollouts drawn alike")
    # with the cache's torch the sample is drawn again exactly
    assert grpo.row.tolist() == (first >= 0).nonzero().flatten().tolist()
    assert grpo.first_error_step.tolist() == first[grpo.row.tolist()].tolist()
    assert len(paired) == meta["with_wrong_step"]
    # CARL keeping every step is GRPO, whose hits the cache holds
    sweep = lesson.carl_share_sweep(sample, (1.0,))
    assert sweep.hit_rate.tolist() == pytest.approx([grpo.hit.mean()] * 2)
    with pytest.raises(ValueError, match="^meta:"):
        lesson.vine_hit_rollouts(lm_env, {"n_problems": 4})


def test_lm_inputs_are_checked():
    ro = arithmetic_rollouts([chars("23+48=61;61+19=80;#80")], [OPS])
    with pytest.raises(ValueError, match="^signal:"):
        lesson.uncertainty_hits(ro, "variance")
    with pytest.raises(ValueError, match="^rollouts:"):
        lesson.first_wrong_token_table(ro.with_(truth={}))
    with pytest.raises(TypeError, match="^rollouts:"):
        lesson.first_wrong_token_table("rollouts")
    with pytest.raises(ValueError, match="^fractions:"):
        lesson.carl_share_sweep(ro, ())
