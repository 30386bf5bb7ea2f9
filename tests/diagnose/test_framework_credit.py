"""The framework's own credit, checked (labkit.diagnose.framework_credit): TRL's advantages
reproduced on its real run, and each misconfiguration named on a run TRL made with that setting.

The runs are ``data/framework_runs/trl_*`` (scripts/build_trl_run.py --all; in TRL's side
environment ``make test-trl`` writes them again and points ``LABKIT_FRAMEWORK_RUNS`` at the new
ones). verl's (B, T) advantages are made here the way ``compute_grpo_outcome_advantage`` makes
them (float32, ``torch.std``, eps 1e-6, one value painted over each response)."""
from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from labkit.core.paths import data_path
from labkit.diagnose.framework_credit import (CAUSES, CONVENTIONS, AdvantageCheck, check_framework_advantages,
                                              logged_advantages, recompute_advantages)
from labkit.io import read_rollouts, to_verl_batch

COMMITTED = Path(data_path("framework_runs"))
RUNS = Path(os.environ.get("LABKIT_FRAMEWORK_RUNS") or COMMITTED)
TRL = RUNS / "trl_grpo"
# TRL's side environment writes TRL's runs only: verl's dump is then the committed one
VERL_DUMP = next(p for p in (RUNS / "verl_dump", COMMITTED / "verl_dump") if p.is_dir())
REWARDS = ["correct_reward", "format_reward"]


def meta(name: str) -> dict:
    return json.loads((RUNS / name / "meta.json").read_text())


def frame(name: str = "trl_grpo") -> pd.DataFrame:
    files = sorted((RUNS / name / "completions").glob("completions_*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def trl_style(df: pd.DataFrame, keys, *, weights=(1.0, 1.0), scale: str = "group") -> np.ndarray:
    """Advantages computed as TRL's GRPOTrainer does (float32; nanmean / Bessel-corrected std,
    eps 1e-4; a completion whose every reward is None gets 0 and stays out of the mean), over the
    groups ``keys`` (column names, or one label per row)."""
    parts = df[REWARDS].to_numpy(np.float32)
    unscorable = np.isnan(parts).all(1)
    r = np.nansum(parts * np.asarray(weights, np.float32), 1).astype(np.float32)
    r[unscorable] = np.nan
    s = pd.Series(r)
    by = df[keys] if isinstance(keys, list) else pd.Series(keys)
    groups = s.groupby([by[k] for k in by] if isinstance(keys, list) else by)
    mean = groups.transform("mean").to_numpy(np.float32)
    std = groups.transform(lambda x: np.float32(np.nanstd(x.to_numpy(np.float32), ddof=1))).to_numpy(np.float32)
    adv = r - mean if scale == "none" else (r - mean) / (std + np.float32(1e-4))
    return np.nan_to_num(adv.astype(np.float32), nan=0.0)


def with_advantages(df: pd.DataFrame, adv: np.ndarray) -> pd.DataFrame:
    out = df.copy()
    out["advantage"] = adv.astype(np.float32).astype(np.float64)
    return out


# --------------------------------------------------------------------------- TRL's real runs
def test_trls_own_advantages_are_reproduced_on_its_real_run():
    ro = read_rollouts(TRL)
    c = check_framework_advantages(ro)
    assert isinstance(c, AdvantageCheck)
    assert c.matches and c.cause == "default" and c.framework == "TRL" and c.precision == "float32"
    assert c.rows == c.rows_compared == ro.batch_size
    assert c.default_max_diff == c.max_diff and c.max_diff <= c.tolerance < 1e-4
    assert "scale_rewards='group'" in c.explanation and "labkit's grpo is the matching estimator" in c.explanation
    # labkit's grpo (eps 1e-6) differs only through eps: more than round-off, far less than any other cause
    assert c.max_diff < 1e-6 < c.labkit_max_diff < 1e-3
    h = dict(c.hypotheses)
    assert list(h) == [k for k in CAUSES if k in h] and h["default"] == c.max_diff
    assert min(v for k, v in h.items() if k not in ("default", "reward_weights") + c.also_consistent) > 1e-4
    assert any("1e-4" in n and "1e-6" in n for n in c.notes)
    assert c.lines()[0].startswith(f"TRL's advantages, {ro.batch_size} of {ro.batch_size} rows compared: match")


#: fixture -> (the cause its setting must be found as, the setting meta.json must record)
FIXTURES = {
    "trl_scale_none": ("std_off", {"scale_rewards": "none"}),
    "trl_scale_batch": ("batch_std", {"scale_rewards": "batch"}),
    "trl_reward_weights": ("reward_weights", {"reward_weights": [1.0, 0.5]}),
    "trl_normalize_then_sum": ("normalize_then_sum", {"multi_objective_aggregation": "normalize_then_sum"}),
    "trl_duplicate_prompts": ("group_size", {}),
    "trl_rloo": ("rloo", {"beta": 0.0}),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_setting_is_named_on_the_run_trl_made_with_it(name):
    cause, settings = FIXTURES[name]
    m = meta(name)
    assert m["settings"] == settings and m["built_by"].endswith(f"--variant {m['variant']}")
    assert m["trainer"] == ("RLOOTrainer" if name == "trl_rloo" else "GRPOTrainer")
    ro = read_rollouts(RUNS / name)
    c = check_framework_advantages(ro)
    assert not c.matches and c.cause == cause, c.lines()
    assert c.max_diff <= c.tolerance and c.default_max_diff > 100 * c.tolerance
    assert "default" not in c.also_consistent and c.residual is None
    if cause == "std_off":
        assert "scale_rewards='none'" in c.explanation and "dr_grpo" in c.explanation
    if cause == "batch_std":
        assert "scale_rewards='batch'" in c.explanation
    if cause == "rloo":
        assert "RLOOTrainer" in c.explanation and "labkit's rloo" in c.explanation
    if cause == "reward_weights":
        assert c.weights == (1.0, 0.5) and c.weight_names == tuple(REWARDS) and c.scaling == "group"
        assert "reward_weights=[1, 0.5]" in c.explanation
    if cause == "group_size":
        # one prompt twice in a step's batch: labkit's (step, prompt) group of 8 holds two of TRL's groups of 4
        sizes = frame(name).groupby(["step", "prompt"]).size()
        assert sizes.max() == 2 * m["num_generations"] and c.group_size == m["num_generations"]
        assert c.scaling == "group" and "4 consecutive rows" in c.explanation


def test_the_step_column_lost_pools_steps_and_the_groups_of_four_are_found():
    df = frame()
    ro = read_rollouts(df.drop(columns=["step"]))
    assert ro.info["grouping"] == "prompt"
    c = check_framework_advantages(ro)
    assert c.cause == "group_size" and c.group_size == meta("trl_grpo")["num_generations"] and not c.matches


def test_a_trainer_that_pooled_steps_is_found():
    df = frame()
    ro = read_rollouts(with_advantages(df, trl_style(df, ["prompt"])))
    c = check_framework_advantages(ro)
    assert c.cause == "pooled_steps" and c.scaling == "group", c.lines()


def test_weights_outside_the_grid_are_fitted_without_std_scaling():
    df = frame("trl_reward_weights")
    ro = read_rollouts(with_advantages(df, trl_style(df, ["step", "prompt"], weights=(1.0, 0.3), scale="none")))
    c = check_framework_advantages(ro)
    assert c.cause == "reward_weights" and c.weights == (1.0, 0.3) and c.scaling == "none", c.lines()
    assert "weights (1, 0.3)" in c.explanation


def test_an_unscorable_completion_gets_zero_and_stays_out_of_its_groups_mean_as_in_trl():
    df = frame()
    df.loc[5, REWARDS] = np.nan
    ro = read_rollouts(with_advantages(df, trl_style(df, ["step", "prompt"])))
    c = check_framework_advantages(ro)
    assert c.matches and c.rows_compared == len(df) - 1


def test_advantages_nothing_explains_are_unexplained_with_the_residual():
    df = frame()
    adv = trl_style(df, ["step", "prompt"])
    adv[:4] = adv[:4][::-1] + 0.1  # a custom change no hypothesis makes
    c = check_framework_advantages(read_rollouts(with_advantages(df, adv)))
    assert c.cause == "unexplained" and not c.matches and c.residual == c.max_diff > c.tolerance
    assert c.residual == min(v for _, v in c.hypotheses) and "no hypothesis reproduces" in c.explanation


# --------------------------------------------------------------------------- verl's (B, T) advantages
def verl_grpo(batch: dict, *, eps: float = 1e-6, norm: bool = True, population: bool = False) -> torch.Tensor:
    """verl's compute_grpo_outcome_advantage, step for step (float32; a group of one: mean 0, std 1)."""
    scores = batch["token_level_rewards"].to(torch.float32).sum(-1)
    by = defaultdict(list)
    for i, u in enumerate(batch["uid"]):
        by[u].append(scores[i])
    mean, std = {}, {}
    for u, v in by.items():
        v = torch.stack(v)
        mean[u], std[u] = (torch.tensor(0.0), torch.tensor(1.0)) if len(v) == 1 else (v.mean(), v.std(unbiased=not population))
    out = scores.clone()
    for i, u in enumerate(batch["uid"]):
        out[i] = (scores[i] - mean[u]) / (std[u] + eps) if norm else scores[i] - mean[u]
    return out[:, None] * batch["response_mask"]


def verl_rloo(batch: dict) -> torch.Tensor:
    """verl's compute_rloo_outcome_advantage (a group of one keeps its score)."""
    scores = batch["token_level_rewards"].to(torch.float32).sum(-1)
    uid = list(batch["uid"])
    out = scores.clone()
    for i, u in enumerate(uid):
        n = uid.count(u)
        if n > 1:
            mean = torch.stack([scores[j] for j, v in enumerate(uid) if v == u]).mean()
            out[i] = scores[i] * n / (n - 1) - mean * n / (n - 1)
    return out[:, None] * batch["response_mask"]


@pytest.fixture(scope="module")
def verl_batch():
    ro = read_rollouts(TRL)
    batch = to_verl_batch(ro)
    batch["uid"][:3] = ["alone", "pair", "pair"]  # a group of one (verl: its raw score) and a group of two
    return batch


@pytest.mark.parametrize("case,cause", [("grpo", "default"), ("dr_grpo", "std_off"), ("eps", "epsilon"),
                                        ("population", "population_std"), ("rloo", "rloo")])
def test_verls_outcome_advantages_read_per_response(verl_batch, case, cause):
    adv = {"grpo": lambda b: verl_grpo(b), "dr_grpo": lambda b: verl_grpo(b, norm=False),
           "eps": lambda b: verl_grpo(b, eps=1e-4), "population": lambda b: verl_grpo(b, population=True),
           "rloo": verl_rloo}[case](verl_batch)
    ro = read_rollouts(dict(verl_batch, advantages=adv))
    assert ro.info["advantages"].shape == (ro.batch_size, ro.horizon)
    values, present, spread = logged_advantages(ro)
    assert bool(present.all()) and float(spread.max()) == 0.0
    c = check_framework_advantages(ro)
    assert c.framework == "verl" and c.cause == cause and c.within_response_spread == 0.0, c.lines()
    assert c.matches == (cause == "default")
    if cause == "default":  # labkit's grpo is verl's: only float32 round-off apart
        assert c.labkit_max_diff < 1e-5 and "verl" in c.explanation
    if cause == "std_off":
        assert "norm_adv_by_std_in_grpo=False" in c.explanation


def test_verl_advantages_that_vary_inside_a_response_are_not_outcome_level(verl_batch):
    adv = verl_grpo(verl_batch)
    adv = adv * torch.linspace(0.5, 1.0, adv.shape[1])  # a token-level estimator's shape
    c = check_framework_advantages(read_rollouts(dict(verl_batch, advantages=adv)))
    assert c.cause == "token_level" and not c.matches and c.within_response_spread > 0 and c.hypotheses == ()
    assert "not an outcome-level estimator" in c.explanation


def test_no_advantages_no_check():
    verl_dump = read_rollouts(VERL_DUMP)
    assert "advantages" not in verl_dump.info and check_framework_advantages(verl_dump) is None
    assert logged_advantages(verl_dump) is None


# --------------------------------------------------------------------------- helpers and bad input
def test_recompute_matches_labkits_estimators():
    from labkit.credit.episode import dr_grpo, grpo, rloo
    ro = read_rollouts(TRL)
    s, g = ro.scores, ro.group_ids
    assert torch.allclose(recompute_advantages(s, g), grpo(ro).values[:, 0], atol=1e-12)
    assert torch.allclose(recompute_advantages(s, g, scaling="none"), dr_grpo(ro).values[:, 0], atol=1e-12)
    assert torch.allclose(recompute_advantages(s, g, baseline="loo", singleton="zero"), rloo(ro).values[:, 0],
                          atol=1e-12)
    assert set(CONVENTIONS) == {"trl", "verl", "other"}


def test_bad_input_names_the_argument():
    ro = read_rollouts(TRL)
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        check_framework_advantages(frame())
    with pytest.raises(ValueError, match=r"^framework: must be one of"):
        check_framework_advantages(ro, framework="openrlhf")
    with pytest.raises(ValueError, match=r"^precision: must be one of"):
        check_framework_advantages(ro, precision="float8")
    with pytest.raises(ValueError, match=r"^ulps: must be > 0"):
        check_framework_advantages(ro, ulps=0)
    with pytest.raises(ValueError, match=r"^rollouts: info\['advantages'\] must be a float tensor of shape"):
        check_framework_advantages(ro.with_(info=dict(ro.info, advantages=torch.zeros(3))))
    with pytest.raises(ValueError, match=r"^rollouts: info\['advantages'\] must be finite"):
        check_framework_advantages(ro.with_(info=dict(ro.info, advantages=torch.full((ro.batch_size,), np.nan))))
    with pytest.raises(ValueError, match=r"^scaling: must be one of"):
        recompute_advantages(ro.scores, ro.group_ids, scaling="max")
    with pytest.raises(ValueError, match=r"^group_ids: expected a tensor shaped like scores"):
        recompute_advantages(ro.scores, ro.group_ids[:3])
    with pytest.raises(TypeError, match=r"^scores: expected a 1-D float tensor"):
        recompute_advantages([1.0, 2.0], ro.group_ids)
