"""labkit.diagnose.advice: red flags from measured numbers, each with its threshold and actions."""
from __future__ import annotations

import pandas as pd
import torch

from labkit.core.rollouts import Rollouts
from labkit.diagnose import Tally
from labkit.diagnose.advice import (DOMINANCE_FLAG, ZERO_VARIANCE_FLAG, red_flags, reward_function_shares,
                                    zero_variance_split)
from labkit.diagnose.training_steps import run_steps


def batch(scores, groups, parts=None, steps=None) -> Tally:
    B = len(scores)
    rewards = torch.zeros(B, 3, dtype=torch.float64)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float64)
    info = {}
    if parts is not None:
        info.update(reward_parts=torch.tensor(parts, dtype=torch.float64), reward_part_names=("a", "b"))
    if steps is not None:
        info["training_steps"] = torch.tensor(steps)
    # every trajectory its own tokens: nothing repeats, so the environment reads as not measurable
    tokens = (torch.arange(B)[:, None] + 1).expand(B, 3).contiguous()
    ro = Rollouts(tokens=tokens, mask=torch.ones(B, 3, dtype=torch.bool),
                  rewards=rewards, group_ids=torch.tensor(groups), info=info)
    return Tally().add(ro)


def flags(t: Tally, **kw):
    rows = t.row_table()
    return {f.key: f for f in red_flags(t.groups(), t.rewards(), t.stochasticity(), rows, run_steps(rows), **kw)}


def test_zero_variance_is_flagged_at_the_threshold_with_easy_and_hard_groups_apart():
    # 4 groups of 2: one all-1 (easy), one all-0 (hard), two mixed -> exactly the threshold
    t = batch([1, 1, 0, 0, 1, 0, 0, 1], [0, 0, 1, 1, 2, 2, 3, 3])
    assert t.groups().share_rows_zero_variance == ZERO_VARIANCE_FLAG
    f = flags(t)["zero_variance"]
    assert zero_variance_split(t.row_table()) == (1, 1, 0)
    assert "1 of the 2 zero-variance groups have every completion at the run's highest reward" in f.measured
    assert f.actions and "Process reward model (step-level rewards)" in f.estimators
    below = batch([1, 1, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 2, 2, 3, 3])
    assert "zero_variance" not in flags(below)


def test_one_reward_function_dominating_within_groups():
    parts = [[1, 0.5], [0, 0.5], [1, 0.5], [0, 0.5]]  # b is the same for everyone: it cancels in GRPO
    t = batch([p[0] + p[1] for p in parts], [0, 0, 1, 1], parts=parts)
    assert reward_function_shares(t.row_table()) == {"a": 1.0, "b": 0.0}
    f = flags(t)["reward_dominance"]
    assert f.measured.startswith("a makes 100%") and str(int(DOMINANCE_FLAG * 100)) in f.threshold
    mixed = [[1, 0.5], [0, 0.0], [1, 0.0], [0, 0.5]]
    assert "reward_dominance" not in flags(batch([p[0] + p[1] for p in mixed], [0, 0, 1, 1], parts=mixed))


def test_sparse_reward_and_a_stated_noisy_environment():
    t = batch([0] * 19 + [1], [i // 4 for i in range(20)])
    got = flags(t)
    assert "sparse_reward" in got and "noisy_environment" not in got
    noisy = flags(t, stochastic_stated=True)["noisy_environment"]
    assert noisy.measured.startswith("stated") and noisy.estimators == ("PPO + trained value model",)


def test_reward_shares_need_two_functions():
    assert reward_function_shares(pd.DataFrame({"group": [0, 0], "reward:a": [1.0, 0.0]})) == {}


def test_a_framework_setting_that_is_not_its_default_is_flagged_first():
    from labkit.core.paths import data_path
    from labkit.diagnose import diagnose

    d = diagnose(data_path("framework_runs", "trl_scale_none"), estimators=[], progress=False)
    assert d.credit_check.cause == "std_off" and d.flags[0].key == "framework_credit"
    assert "scale_rewards='none'" in d.flags[0].measured
    assert "The framework's own credit" in d.to_markdown()
    ok = diagnose(data_path("framework_runs", "trl_grpo"), estimators=[], progress=False)
    assert ok.credit_check.matches and "framework_credit" not in {f.key for f in ok.flags}
