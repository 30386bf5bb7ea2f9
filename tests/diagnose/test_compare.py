"""Estimators compared on a file (labkit.diagnose.compare): what each needs (its spec), the sample,
the agreement matrix and the disagreement.
"""
from __future__ import annotations

import pytest
import torch

from labkit.credit import ESTIMATORS, register, spec, specs
from labkit.credit.registry import FEATURES as FEATURE_VOCABULARY
from labkit.diagnose import (agreement_matrix, compare_estimators, disagreement, measure_positions,
                             sample_groups, sample_rows, supported_estimators)
from labkit.diagnose.compare import FEATURES, not_supported_reason
from labkit.envs.toolworld import ToolWorld
from labkit.io import read_rollouts
from labkit.scoring import rank_correlation

from diagnose_cases import reasoning_like


def test_the_sample_depends_on_group_sizes_not_on_order():
    gid = torch.tensor([5, 5, 2, 2, 2, 9, 9, 7, 7, 7, 7, 1])
    rows = sample_rows(gid, 5, seed=3)
    chosen = set(gid[rows].tolist())
    assert sum(int((gid == g).sum()) for g in chosen) == rows.numel() >= 5  # whole groups only
    perm = torch.randperm(gid.numel(), generator=torch.Generator().manual_seed(0))
    assert set(gid[perm][sample_rows(gid[perm], 5, seed=3)].tolist()) == chosen
    assert sample_rows(gid, None).tolist() == list(range(12))
    with pytest.raises(ValueError, match="^sample:"):
        sample_rows(gid, 0)


# --------------------------------------------------------------------------- estimators
def test_every_registered_estimator_says_what_it_needs_in_the_features_diagnose_can_test():
    # the registry's vocabulary and diagnose's tests are one list, and every spec uses it
    assert list(FEATURES) == list(FEATURE_VOCABULARY)
    assert [s.name for s in specs()] == list(ESTIMATORS)
    for s in specs():
        assert all(f in FEATURES for f in s.needs)


def test_needs_filter_follows_the_data():
    plain = reasoning_like()
    run, not_run = supported_estimators(plain)
    assert {"reinforce", "grpo", "rloo", "dr_grpo", "reinforce_pp", "reinforce_baseline", "tempo"} <= set(run)
    assert "carl" in not_run and "entropies" in not_run["carl"]
    assert "gigpo" in not_run and "anchor_keys" in not_run["gigpo"]
    assert "vineppo" in not_run and "value_fn" in not_run["vineppo"]
    rich = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)  # entropies, anchors
    run, not_run = supported_estimators(rich)
    assert {"carl", "gigpo"} <= set(run) and "dr_mas" in not_run  # one agent only
    # a one-trajectory-per-group batch lacks groups: tempo is not run
    singles = reasoning_like(n_groups=8, size=1)
    assert "tempo" in supported_estimators(singles)[1]


def test_specs_decide_and_an_estimator_that_raises_is_skipped_with_its_message():
    from dataclasses import replace
    # what-if specs: gigpo claims to need nothing, grpo stays as registered
    what_if = {"gigpo": replace(spec("gigpo"), needs=()), "carl": spec("carl")}
    c = compare_estimators(reasoning_like(), ["grpo", "gigpo", "carl"], specs=what_if)
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
        supported_estimators(reasoning_like(), specs=[spec("grpo")])
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
    ro = reasoning_like(n_groups=10, size=8)
    rows = sample_groups(ro, 20, seed=3)
    kept = ro.group_ids[rows]
    assert rows.numel() == 24  # whole groups of 8 until at least 20 rows
    assert all(int((kept == g).sum()) == 8 for g in kept.unique())
    assert torch.equal(sample_groups(ro, None), torch.arange(80))


def test_compare_on_a_sample_maps_rows_back():
    ro = reasoning_like(n_groups=10, size=4)
    c = compare_estimators(ro, ["grpo", "reinforce", "tempo"], sample=8, seed=1)
    assert c.ran == ["grpo", "reinforce", "tempo"] and c.rows.numel() == 8
    top = c.disagreement.iloc[0]
    assert int(c.rows[int(top.sample_row)]) == int(top.row)
    assert c.credit["grpo"].shape == (8, ro.horizon)


def test_the_toolworld_sample_has_tool_output_and_supports_the_agent_estimators():
    from labkit.core.paths import data_path

    ro = read_rollouts(data_path("sample_rollouts", "toolworld.jsonl"))
    assert 0.3 < measure_positions(ro).tool_share < 0.7  # one tool answer per action but the last
    run, _ = supported_estimators(ro)
    assert {"gigpo", "carl", "grpo"} <= set(run)
