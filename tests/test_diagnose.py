"""labkit.diagnose: measured quantities against hand-built batches with known answers, the tree
walked from them, what each estimator needs (its spec), the reports, the errors."""
from __future__ import annotations

import math
import re

import pytest
import torch

from labkit import survey
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.diagnose import (STOCHASTIC_THRESHOLD, agreement_matrix, compare_estimators, decision_inputs,
                             diagnose, disagreement, measure_groups, measure_lengths,
                             measure_positions, measure_rewards, measure_stochasticity, position_kinds, sample_groups,
                             supported_estimators)
from labkit.credit import register, spec, specs
from labkit.credit.registry import FEATURES as FEATURE_VOCABULARY
from labkit.diagnose.compare import FEATURES, not_supported_reason
from labkit.envs.toolworld import ToolWorld
from labkit.io import read_rollouts, write_rollouts
from labkit.scoring import rank_correlation
from labkit.survey.decision_tree import QUESTIONS


def _batch(mask_rows, rewards=None, **kw) -> Rollouts:
    mask = torch.tensor(mask_rows, dtype=torch.bool)
    B, T = mask.shape
    tokens = kw.pop("tokens", torch.arange(B * T).reshape(B, T) % 50)
    if rewards is None:
        rewards = torch.zeros(B, T)
        last = torch.where(mask, torch.arange(T), -1).amax(1)
        for b in range(B):
            rewards[b, last[b]] = float(b % 2)
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, **kw)


# --------------------------------------------------------------------------- measured quantities
def test_lengths_and_position_kinds_on_a_hand_built_batch():
    # row 0: 3 generated then padding; row 1: 2 generated, 2 tool output, 1 generated, padding;
    # row 2: 1 generated then padding
    ro = _batch([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]],
                turn_ids=torch.tensor([[0, 0, 0, -1, -1, -1], [0, 0, -1, -1, 1, -1], [0, -1, -1, -1, -1, -1]]))
    L = measure_lengths(ro)
    assert (L.generated_min, L.generated_median, L.generated_max) == (1, 3.0, 3)
    assert (L.episode_min, L.episode_median, L.episode_max) == (1, 3.0, 5)
    assert (L.turns_min, L.turns_median, L.turns_max) == (1, 1.0, 2)
    assert sum(L.generated_hist.counts) == 3 and L.generated_hist.discrete
    P = measure_positions(ro)
    assert (P.generated, P.environment, P.padding) == (7, 2, 9)
    assert P.tool_share == pytest.approx(2 / 9)
    assert P.padding_share == pytest.approx(9 / 18)
    env, pad = position_kinds(ro)
    assert env.nonzero().tolist() == [[1, 2], [1, 3]]
    assert pad.sum(1).tolist() == [3, 1, 5]


def test_no_turn_structure_reports_no_turns():
    L = measure_lengths(_batch([[1, 1, 0], [1, 1, 1]]))
    assert L.turns_hist is None and L.turns_median is None
    assert L.generated_median == 2.5  # the midpoint of the two middle values


def test_zero_variance_groups_and_singletons():
    mask = [[1, 1]] * 5
    rewards = torch.zeros(5, 2)
    rewards[:, 1] = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5])
    ro = _batch(mask, rewards, group_ids=torch.tensor([0, 0, 1, 1, 2]))
    G = measure_groups(ro)
    assert (G.n_groups, G.n_singletons, G.n_zero_variance) == (3, 1, 1)
    assert G.share_zero_variance == 0.5            # group 0 of the two groups with two members
    assert G.share_rows_zero_variance == pytest.approx(2 / 5)
    assert (G.size_min, G.size_max) == (1, 2)
    # GRPO indeed gives the zero-variance group nothing
    credit = ESTIMATORS["grpo"](ro).token
    assert bool((credit[:2] == 0).all()) and bool((credit[2:4] != 0).any())


def test_reward_sparsity_and_intermediate_rewards():
    rewards = torch.zeros(4, 3)
    rewards[0, 2] = 1.0       # outcome only
    rewards[1, 0] = 0.5       # intermediate: before the last generated position
    rewards[1, 2] = 1.0
    ro = _batch([[1, 1, 1]] * 4, rewards)
    R = measure_rewards(ro)
    assert R.share_nonzero == 0.5
    assert R.share_intermediate == 0.25 and R.intermediate
    assert (R.total_min, R.total_max, R.n_distinct) == (0.0, 1.5, 3)
    assert dict(R.hist.rows()) == {"0": 2, "1": 1, "1.5": 1}
    assert not measure_rewards(_batch([[1, 1, 1]] * 4)).intermediate


def _tool_toy(observations, groups=None, final_rewards=None) -> Rollouts:
    """Each row: action token 5, one tool-output token (the observation), action token 6."""
    B = len(observations)
    tokens = torch.tensor([[5, o, 6] for o in observations])
    mask = torch.tensor([[True, False, True]] * B)
    rewards = torch.zeros(B, 3)
    rewards[:, 2] = torch.tensor(final_rewards if final_rewards is not None else [1.0] * B)
    turns = torch.tensor([[0, -1, 1]] * B)
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, turn_ids=turns, step_ids=turns.clone(),
                    group_ids=torch.tensor(groups if groups is not None else [0] * B))


def test_stochasticity_on_a_known_repeat_pattern():
    # the first action is seen 4 times, followed by 7, 7, 7, 8: 12 ordered pairs of visits, 6 differ;
    # the second action after (5, 7) is seen 3 times, always ending with reward 1: 6 pairs, 0 differ
    s = measure_stochasticity(_tool_toy([7, 7, 7, 8]))
    assert (s.n_actions, s.repeated_keys, s.repeated_visits, s.varying_keys) == (8, 2, 7, 1)
    assert s.rate == pytest.approx(6 / 18)
    assert s.stochastic and s.unit == "turn"


def test_stochasticity_is_zero_when_repeats_agree_and_unmeasurable_without_repeats():
    same = measure_stochasticity(_tool_toy([7, 7, 7, 7]))
    assert same.rate == 0.0 and same.stochastic is False
    # different groups are different tasks: nothing repeats
    apart = measure_stochasticity(_tool_toy([7, 7, 8, 8], groups=[0, 1, 2, 3]))
    assert apart.rate is None and not apart.measurable and apart.stochastic is None
    assert "not measurable" in apart.summary()


def test_a_different_reward_for_the_same_history_counts_as_stochastic():
    s = measure_stochasticity(_tool_toy([7, 7], final_rewards=[1.0, 0.0]))
    # first action: 2 visits, same tool output (0 of 2 pairs differ); second action: 2 visits,
    # different rewards (2 of 2 pairs differ)
    assert s.rate == pytest.approx(0.5)


def test_stochasticity_separates_a_noisy_toolworld_from_a_deterministic_one():
    policy = ToolWorld().scripted_policy(2.0)
    noisy = measure_stochasticity(ToolWorld().sample(policy, 8, group_size=8, seed=0))
    exact = measure_stochasticity(ToolWorld(mislead=0.0, noise=0.0, flaky=0.0).sample(policy, 8, group_size=8, seed=0))
    assert exact.measurable and exact.rate == 0.0
    assert noisy.rate > 10 * STOCHASTIC_THRESHOLD


def test_chunking_does_not_change_the_estimate():
    ro = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 8, group_size=8, seed=1)
    assert measure_stochasticity(ro, chunk_rows=5) == measure_stochasticity(ro)


# --------------------------------------------------------------------------- the tree
def _reasoning_like(n_groups=6, size=8, T=60, seed=0) -> Rollouts:
    g = torch.Generator().manual_seed(seed)
    B = n_groups * size
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lengths - 1] = torch.randint(0, 2, (B,), generator=g).float()
    return Rollouts(tokens=torch.randint(0, 30, (B, T), generator=g), mask=mask, rewards=rewards,
                    group_ids=torch.arange(n_groups).repeat_interleave(size))


def _agent_like(T=120_000, B=4) -> Rollouts:
    """Long episodes, mostly tool output: 40 generated tokens then 2,960 tool tokens per turn;
    two trajectories per task whose first tool answer differs (a stochastic tool)."""
    turn_len, act = 3000, 40
    t = torch.arange(T)
    mask = ((t % turn_len) < act).expand(B, T).clone()
    turns = torch.where(mask, (t // turn_len).expand(B, T), -1)
    tokens = (t % 97).expand(B, T).clone()
    tokens[1, act] = 98  # the same first action answered differently
    rewards = torch.zeros(B, T)
    last = int(torch.where(mask[0], t, -1).max())
    rewards[:, last] = torch.tensor([1.0, 0.0, 1.0, 0.0])[:B]
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, turn_ids=turns, step_ids=turns.clone(),
                    group_ids=torch.tensor([0, 0, 1, 1])[:B])


def test_reasoning_like_batch_gets_notebook_00s_recommendation():
    ro = _reasoning_like()
    d = diagnose(ro, estimators=[])
    median = int(round(float(ro.lengths.to(torch.float64).quantile(0.5))))
    assert d.inputs.trajectory_tokens == median
    expected = survey.recommend(median, "outcome", False, False, False)
    assert d.recommendation.leaf == expected.leaf == "reasoning/outcome"
    assert d.recommendation.candidates == expected.candidates
    assert [a.answer for a in d.answers] == [answer for _, answer in expected.path]
    assert d.answers[0].source == "measured" and "median episode length" in d.answers[0].evidence


def test_agent_like_batch_gets_the_agentic_branch_and_given_answers_are_marked():
    ro = _agent_like()
    d = diagnose(ro, estimators=[])
    assert d.positions.tool_share > 0.9
    assert d.lengths.generated_median < 30_000 < 100_000 < d.lengths.episode_median
    assert d.stochasticity.stochastic
    expected = survey.recommend(d.inputs.trajectory_tokens, "outcome", True, False, False)
    assert d.recommendation.leaf == expected.leaf == "agentic/online"
    assert [a.source for a in d.answers] == ["measured", "given", "given"]
    replay = diagnose(ro, estimators=[], can_replay=True)
    assert replay.recommendation.leaf == "agentic/replay"
    assert "can_replay=True" in replay.answers[1].evidence


def test_unmeasurable_stochasticity_is_assumed_deterministic_unless_given():
    s = measure_stochasticity(_tool_toy([7, 8], groups=[0, 1]))
    lengths, rewards = measure_lengths(_tool_toy([7, 8])), measure_rewards(_tool_toy([7, 8]))
    inputs, evidence = decision_inputs(lengths, rewards, s)
    assert inputs.stochastic_env is False and evidence["stochastic"][1] == "assumed"
    inputs, evidence = decision_inputs(lengths, rewards, s, stochastic_env=True)
    assert inputs.stochastic_env is True and evidence["stochastic"][1] == "given"


def test_every_question_of_the_tree_has_a_source_of_evidence():
    s = measure_stochasticity(_tool_toy([7, 7]))
    _, evidence = decision_inputs(measure_lengths(_tool_toy([7, 7])), measure_rewards(_tool_toy([7, 7])), s)
    assert set(evidence) == set(QUESTIONS)


# --------------------------------------------------------------------------- estimators
def test_every_registered_estimator_says_what_it_needs_in_the_features_diagnose_can_test():
    # the registry's vocabulary and diagnose's tests are one list, and every spec uses it
    assert list(FEATURES) == list(FEATURE_VOCABULARY)
    assert [s.name for s in specs()] == list(ESTIMATORS)
    for s in specs():
        assert all(f in FEATURES for f in s.needs)


def test_needs_filter_follows_the_data():
    plain = _reasoning_like()
    run, not_run = supported_estimators(plain)
    assert {"reinforce", "grpo", "rloo", "dr_grpo", "reinforce_pp", "reinforce_baseline", "tempo"} <= set(run)
    assert "carl" in not_run and "entropies" in not_run["carl"]
    assert "gigpo" in not_run and "anchor_keys" in not_run["gigpo"]
    assert "vineppo" in not_run and "value_fn" in not_run["vineppo"]
    rich = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)  # entropies, anchors
    run, not_run = supported_estimators(rich)
    assert {"carl", "gigpo"} <= set(run) and "dr_mas" in not_run  # one agent only
    # a one-trajectory-per-group batch lacks groups: tempo is not run
    singles = _reasoning_like(n_groups=8, size=1)
    assert "tempo" in supported_estimators(singles)[1]


def test_specs_decide_and_an_estimator_that_raises_is_skipped_with_its_message():
    from dataclasses import replace
    # what-if specs: gigpo claims to need nothing, grpo stays as registered
    what_if = {"gigpo": replace(spec("gigpo"), needs=()), "carl": spec("carl")}
    c = compare_estimators(_reasoning_like(), ["grpo", "gigpo", "carl"], specs=what_if)
    assert c.ran == ["grpo"]
    assert "anchor_keys" in c.skipped["gigpo"]             # the estimator's own error message
    assert "entropies" in c.not_supported["carl"]
    # a reason names the inputs no file holds with their kinds' descriptions, else what the data lacks
    assert not_supported_reason(spec("gae"), {}) == "needs values: a critic's value of every position"
    assert not_supported_reason(spec("carl"), {"entropies": False}) == "the data lacks the sampling policy's entropies"
    assert not_supported_reason(spec("carl"), {"entropies": True}) is None
    with pytest.raises(TypeError, match="^estimator"):
        not_supported_reason("carl", {"entropies": True})
    with pytest.raises(TypeError, match="^specs"):
        supported_estimators(_reasoning_like(), specs=[spec("grpo")])
    # an estimator is never run blind: registering one without saying what it needs is refused
    with pytest.raises(ValueError, match="^needs: estimator 'toy_wings'.*unknown feature 'wings'"):
        register("toy_wings", level="episode", needs=("wings",), status="implemented", paper="2401.00001",
                 equation="A_i = s_i", symbols="s_i: score")
    with pytest.raises(TypeError, match="^level: estimator 'toy_blind'"):
        register("toy_blind", status="implemented", paper="2401.00001", equation="A_i = s_i", symbols="s_i: score")


def test_agreement_matrix_is_scorings_rank_correlation():
    ro = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)
    credits = {n: ESTIMATORS[n](ro).token for n in ("grpo", "reinforce", "gigpo", "carl")}
    m = agreement_matrix(credits, ro.mask)
    for a in credits:
        for b in credits:
            if a != b:
                assert m.loc[a, b] == pytest.approx(rank_correlation(credits[a], credits[b], ro.mask), abs=1e-12)
    assert (m.values.diagonal() == 1).all()


def test_disagreement_ignores_scale_and_sees_opposite_signs():
    mask = torch.tensor([[True, True, False], [True, True, True]])
    a = torch.tensor([[1.0, 2.0, 0.0], [-1.0, 0.5, 1.0]])
    same = disagreement({"a": a, "a10": 10 * a}, mask)
    assert same.disagreement.abs().max() < 1e-12 and (same.sign_conflict == 0).all()
    flip = torch.tensor([[1.0, 2.0, 0.0], [1.0, -0.5, -1.0]])  # row 1 reversed
    d = disagreement({"a": a, "b": flip}, mask)
    assert d.row.tolist() == [1, 0] and d.disagreement[1] == pytest.approx(0.0)
    assert d.sign_conflict.tolist() == [1.0, 0.0]


def test_sample_groups_keeps_whole_groups():
    ro = _reasoning_like(n_groups=10, size=8)
    rows = sample_groups(ro, 20, seed=3)
    kept = ro.group_ids[rows]
    assert rows.numel() == 24  # whole groups of 8 until at least 20 rows
    assert all(int((kept == g).sum()) == 8 for g in kept.unique())
    assert torch.equal(sample_groups(ro, None), torch.arange(80))


def test_compare_on_a_sample_maps_rows_back():
    ro = _reasoning_like(n_groups=10, size=4)
    c = compare_estimators(ro, ["grpo", "reinforce", "tempo"], sample=8, seed=1)
    assert c.ran == ["grpo", "reinforce", "tempo"] and c.rows.numel() == 8
    top = c.disagreement.iloc[0]
    assert int(c.rows[int(top.sample_row)]) == int(top.row)
    assert c.credit["grpo"].shape == (8, ro.horizon)


# --------------------------------------------------------------------------- reports and errors
def test_report_files_are_written_and_hold_the_numbers(tmp_path):
    ro = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)
    d = diagnose(ro, estimators=["grpo", "gigpo"])
    md, page = d.save(tmp_path / "out")
    text, html = md.read_text(), page.read_text()
    for number in (f"{d.lengths.generated_median:g}", f"{d.rewards.share_nonzero:.1%}",
                   f"{d.stochasticity.rate:.3f}", d.recommendation.method_class):
        assert number in text and number in html.replace("&amp;", "&")
    assert "data:image/png;base64," in html and "<script" not in html
    assert not re.search(r"(src|href)=\"(?!data:)", html) and "://" not in html  # nothing to fetch
    assert (tmp_path / "out" / "report_files" / "tree.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "report_files/tree.png" in text
    assert "gigpo" in text and "grpo" in d.summary()


@pytest.mark.parametrize("kwargs, match", [
    (dict(source=5), "^source:"),
    (dict(can_replay="yes"), "^can_replay:"),
    (dict(privileged_info=1), "^privileged_info:"),
    (dict(stochastic_env="no"), "^stochastic_env:"),
    (dict(sample=0), "^sample:"),
    (dict(estimators="grpo"), "^estimators:"),
    (dict(estimators=["no_such"]), "^estimators:"),
    (dict(fmt="jsonl"), "^fmt:"),
    (dict(seed=1.5), "^seed:"),
    (dict(source="/no/such/file.jsonl"), "^source:"),
])
def test_errors_name_the_argument(kwargs, match):
    kwargs = {"source": _reasoning_like(n_groups=2, size=2), **kwargs}
    with pytest.raises((TypeError, ValueError, FileNotFoundError), match=match):
        diagnose(kwargs.pop("source"), **kwargs)


def test_save_refuses_a_file_as_folder(tmp_path):
    d = diagnose(_reasoning_like(n_groups=2, size=2), estimators=[])
    f = tmp_path / "x"
    f.write_text("")
    with pytest.raises(ValueError, match="^out_dir:"):
        d.save(f)


def test_only_singleton_groups_have_no_zero_variance_share():
    G = measure_groups(_reasoning_like(n_groups=5, size=1))
    assert G.n_singletons == 5 and G.n_zero_variance == 0 and math.isnan(G.share_zero_variance)


def test_progress_bars_can_be_forced(capsys):
    d = diagnose(_reasoning_like(n_groups=2, size=4), estimators=["grpo", "rloo"], progress=True)
    assert d.comparison.ran == ["grpo", "rloo"]
    assert "estimators" in capsys.readouterr().err  # tqdm writes its bar to stderr


def test_command_line_writes_the_reports(tmp_path, monkeypatch, capsys):
    from labkit.diagnose.__main__ import main

    batch = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)
    dump = write_rollouts(batch, tmp_path / "run.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main([str(dump), "--can-replay", "--estimators", "grpo,gigpo", "--sample", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "run_diagnosis" / "report.html").is_file()
    text = (tmp_path / "run_diagnosis" / "report.md").read_text()
    assert str(dump) in text and "gigpo" in text
    assert f"{batch.batch_size} trajectories" in out and "recommended:" in out and "current directory" in out
    assert main([str(dump), "--out", str(tmp_path / "elsewhere"), "--format", "jsonl",
                 "--estimators", "none"]) == 0
    assert "Not run (estimators=[])." in (tmp_path / "elsewhere" / "report.md").read_text()
    with pytest.raises(SystemExit):
        main([str(dump), "--stochastic", "maybe"])


# The shipped samples (scripts/build_sample_rollouts.py) and what their settings are, known from
# how they were made: the tiny LM's arithmetic chains (under 64 tokens, a deterministic verifier's
# 0/1 outcome) and notebook 05's noisy ToolWorld (30 turns at most, tools wrong w.p. 0.2, outcome
# only). Notebook 00's tree is asked with those known answers; the diagnosis must reach the same
# leaf, candidates and caveats from what it measured.
SAMPLES = [("arithmetic_lm.jsonl", 64, False), ("toolworld.jsonl", 60, True)]


@pytest.mark.parametrize("name, tokens, stochastic", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_shipped_sample_gets_notebook_00s_recommendation(name, tokens, stochastic):
    from labkit.core.paths import data_path

    d = diagnose(data_path("sample_rollouts", name), estimators=[])
    expected = survey.recommend(tokens, "outcome", stochastic, False, False)
    assert d.inputs.reward_density == "outcome"
    assert d.stochasticity.measurable and d.stochasticity.stochastic is stochastic
    assert d.inputs.trajectory_tokens <= tokens
    rec = d.recommendation
    assert (rec.leaf, rec.candidates, rec.caveats) == (expected.leaf, expected.candidates, expected.caveats)
    # the stochasticity question is off this path, but the report still shows what was measured
    assert "Is the environment stochastic? " + ("yes" if stochastic else "no") in d.to_markdown()


def test_the_toolworld_sample_has_tool_output_and_supports_the_agent_estimators():
    from labkit.core.paths import data_path

    ro = read_rollouts(data_path("sample_rollouts", "toolworld.jsonl"))
    assert 0.3 < measure_positions(ro).tool_share < 0.7  # one tool answer per action but the last
    run, _ = supported_estimators(ro)
    assert {"gigpo", "carl", "grpo"} <= set(run)
