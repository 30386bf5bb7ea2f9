"""What diagnose measures (labkit.diagnose.measure), against hand-built batches with known answers."""
from __future__ import annotations

import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.diagnose import (STOCHASTIC_THRESHOLD, measure_groups, measure_lengths, measure_positions,
                             measure_rewards, measure_stochasticity, position_kinds)
from labkit.envs.toolworld import ToolWorld

from diagnose_cases import reasoning_like, tool_toy


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


def test_stochasticity_on_a_known_repeat_pattern():
    # the first action is seen 4 times, followed by 7, 7, 7, 8: 12 ordered pairs of visits, 6 differ;
    # the second action after (5, 7) is seen 3 times, always ending with reward 1: 6 pairs, 0 differ
    s = measure_stochasticity(tool_toy([7, 7, 7, 8]))
    assert (s.n_actions, s.repeated_keys, s.repeated_visits, s.varying_keys) == (8, 2, 7, 1)
    assert s.rate == pytest.approx(6 / 18)
    assert s.stochastic and s.unit == "turn"


def test_stochasticity_is_zero_when_repeats_agree_and_unmeasurable_without_repeats():
    same = measure_stochasticity(tool_toy([7, 7, 7, 7]))
    assert same.rate == 0.0 and same.stochastic is False
    # different groups are different tasks: nothing repeats
    apart = measure_stochasticity(tool_toy([7, 7, 8, 8], groups=[0, 1, 2, 3]))
    assert apart.rate is None and not apart.measurable and apart.stochastic is None
    assert "not measurable" in apart.summary()


def test_a_different_reward_for_the_same_history_counts_as_stochastic():
    s = measure_stochasticity(tool_toy([7, 7], final_rewards=[1.0, 0.0]))
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


def test_only_singleton_groups_have_no_zero_variance_share():
    G = measure_groups(reasoning_like(n_groups=5, size=1))
    assert G.n_singletons == 5 and G.n_zero_variance == 0 and math.isnan(G.share_zero_variance)
