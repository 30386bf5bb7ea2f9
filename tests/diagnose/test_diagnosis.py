"""diagnose() (labkit.diagnose.diagnosis): batches and files get notebook 00's recommendation, a file
streamed in chunks is diagnosed exactly as the batch read whole, errors name their argument.
"""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from labkit import survey
from labkit.core.rollouts import Rollouts
from labkit.diagnose import (diagnose, measure_groups, measure_lengths, measure_positions, measure_rewards,
                             measure_stochasticity, sample_groups)
from labkit.io import read_rollouts

from diagnose_cases import reasoning_like


def test_a_streamed_file_diagnoses_exactly_as_the_batch_read_whole(sample_file):
    whole = read_rollouts(sample_file)
    batch_rows = 48  # several chunks, and groups cut across chunk boundaries
    assert whole.batch_size > 3 * batch_rows
    streamed = diagnose(sample_file, batch_rows=batch_rows, sample=100, progress=False)
    memory = diagnose(whole, sample=100, progress=False)
    assert set(streamed.seconds) >= {"read", "measure", "stochasticity", "sample", "estimators"}
    for name in ("n_trajectories", "horizon", "lengths", "rewards", "groups", "positions", "stochasticity",
                 "features", "inputs", "evidence", "answers", "recommendation", "seed"):
        assert getattr(streamed, name) == getattr(memory, name), name
    # ... and those are the measure_* functions' numbers on the whole batch
    assert streamed.lengths == measure_lengths(whole) and streamed.rewards == measure_rewards(whole)
    assert streamed.groups == measure_groups(whole) and streamed.positions == measure_positions(whole)
    assert streamed.stochasticity == measure_stochasticity(whole)
    a, b = streamed.comparison, memory.comparison
    assert torch.equal(a.rows, b.rows) and torch.equal(a.rows, sample_groups(whole, 100, 0))
    assert 100 <= a.rows.numel() < whole.batch_size  # a sample of whole groups, not everything
    assert (a.ran, a.skipped, a.not_supported) == (b.ran, b.skipped, b.not_supported)
    assert len(a.ran) >= 3
    for name in a.ran:
        assert torch.equal(a.credit[name], b.credit[name]), name
    pd.testing.assert_frame_equal(a.agreement, b.agreement, check_exact=True)
    pd.testing.assert_frame_equal(a.disagreement, b.disagreement, check_exact=True)
    for name in ("tokens", "mask", "rewards", "group_ids", "turn_ids", "step_ids"):
        assert torch.equal(getattr(a.sample_rollouts, name), getattr(b.sample_rollouts, name)), name
    assert a.sample_rollouts.info.get("group_names") == b.sample_rollouts.info.get("group_names")


def test_a_small_sample_read_back_is_padded_to_the_files_horizon(sample_file):
    whole = read_rollouts(sample_file)
    # a seed whose sample misses every longest record, so the rows read back are narrower
    seed = next(s for s in range(200)
                if read_rollouts(sample_file, rows=sample_groups(whole, 10, s).numpy()).horizon < whole.horizon)
    kw = dict(sample=10, seed=seed, estimators=["grpo", "reinforce", "dr_grpo"], progress=False)
    a = diagnose(sample_file, batch_rows=64, **kw).comparison
    b = diagnose(whole, **kw).comparison
    assert torch.equal(a.rows, b.rows) and a.rows.numel() < 20
    assert a.sample_rollouts.horizon == whole.horizon
    assert torch.equal(a.sample_rollouts.tokens, b.sample_rollouts.tokens)
    for name in b.ran:
        assert torch.equal(a.credit[name], b.credit[name]), name
    pd.testing.assert_frame_equal(a.agreement, b.agreement, check_exact=True)


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
    ro = reasoning_like()
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
    # nothing stated: the tree walks on False and says it assumed so
    assert [a.source for a in d.answers] == ["measured", "assumed", "assumed"]
    assert "not stated" in d.answers[1].evidence and len(d.unstated) == 2
    stated = diagnose(ro, estimators=[], can_replay=False, privileged_info=False)
    assert [a.source for a in stated.answers] == ["measured", "given", "given"] and stated.unstated == ()
    replay = diagnose(ro, estimators=[], can_replay=True)
    assert replay.recommendation.leaf == "agentic/replay"
    assert "can_replay=True" in replay.answers[1].evidence


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
    kwargs = {"source": reasoning_like(n_groups=2, size=2), **kwargs}
    with pytest.raises((TypeError, ValueError, FileNotFoundError), match=match):
        diagnose(kwargs.pop("source"), **kwargs)


def test_progress_bars_can_be_forced(capsys):
    d = diagnose(reasoning_like(n_groups=2, size=4), estimators=["grpo", "rloo"], progress=True)
    assert d.comparison.ran == ["grpo", "rloo"]
    assert "estimators" in capsys.readouterr().err  # tqdm writes its bar to stderr


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


def test_caveats_rest_on_what_was_measured_or_stated():
    from labkit.core.paths import data_path

    run = data_path("framework_runs", "trl_grpo")
    quiet = diagnose(run, estimators=[], progress=False)
    said = diagnose(run, estimators=[], can_replay=False, progress=False)
    # SPO forks from prefixes: its replay caveat only once the user said they cannot replay
    assert not any("cannot replay" in c for c in quiet.caveats)
    assert any("cannot replay" in c for c in said.caveats)
    assert "you said" not in quiet.to_markdown() and "not stated: can_replay was not stated" in quiet.to_markdown()
