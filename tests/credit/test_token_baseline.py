"""The optimal token baseline (labkit.credit.token_baseline): its weighting, its two alignments, bad input."""
import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit.episode import dr_grpo
from labkit.credit.token_baseline import optimal_token_baseline, tir_optimal_token_baseline


def _batch(scores, groups, lengths, *, p=0.5, holes=None):
    B, T = len(scores), max(lengths) + (1 if holes else 0)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    if holes:
        for row, col in holes:   # a tool output: the rest of the row moves one column right
            mask[row, col + 1:] = mask[row, col:-1].clone()
            mask[row, col] = False
    last = (mask * torch.arange(1, T + 1)).argmax(1)
    rewards = torch.zeros(B, T, dtype=torch.float64)
    rewards[torch.arange(B), last] = torch.tensor(scores, dtype=torch.float64)
    logp = torch.where(mask, torch.tensor(p, dtype=torch.float64).log(), torch.zeros((), dtype=torch.float64))
    return Rollouts(tokens=torch.ones(B, T, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.tensor(groups), logprobs=logp)


def test_equal_lengths_and_equal_uncertainty_give_the_group_mean_baseline():
    ro = _batch([1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0], [3] * 4)
    s2 = torch.full(ro.mask.shape, 0.5, dtype=torch.float64)   # pi = 0.5 of two tokens: w = 0.5 everywhere
    c = optimal_token_baseline(ro, sum_pi_squared=s2)
    assert torch.allclose(c.token, dr_grpo(ro).token)


def test_the_baseline_leans_towards_the_uncertain_paths_returns():
    ro = _batch([1.0, 0.0], [0, 0], [2, 2])
    s2 = torch.tensor([[0.5, 0.5], [1.0, 1.0]], dtype=torch.float64)
    ro = ro.with_(logprobs=torch.tensor([[0.5, 0.5], [1.0, 1.0]], dtype=torch.float64).log())
    c = optimal_token_baseline(ro, sum_pi_squared=s2)
    # the second path is deterministic (pi = 1, w = 0): the baseline is the first path's return
    assert torch.allclose(c.info["baseline"][0], torch.ones(2, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(c.token[1], -torch.ones(2, dtype=torch.float64), atol=1e-6)


def test_zero_tail_leaves_the_longest_trajectory_its_return_past_the_others():
    ro = _batch([1.0, 0.0, 0.5], [0, 0, 0], [2, 3, 5])
    s2 = torch.full(ro.mask.shape, 0.5, dtype=torch.float64)
    tail = optimal_token_baseline(ro, sum_pi_squared=s2).token
    kept = optimal_token_baseline(ro, sum_pi_squared=s2, handle_zero_tail=False).token
    assert torch.allclose(tail[2, 3:], torch.full((2,), 0.5, dtype=torch.float64))   # its return, no baseline
    assert torch.allclose(kept[2, 3:], torch.zeros(2, dtype=torch.float64))         # its own return as baseline
    assert torch.equal(tail[:2], kept[:2])


def test_the_multi_turn_variant_compares_the_kth_generated_tokens():
    plain = _batch([1.0, 0.0, 0.5], [0, 0, 0], [3, 3, 4])
    holed = _batch([1.0, 0.0, 0.5], [0, 0, 0], [3, 3, 4], holes=[(0, 1)])
    s2p = torch.full(plain.mask.shape, 0.5, dtype=torch.float64)
    s2h = torch.full(holed.mask.shape, 0.5, dtype=torch.float64)
    want = tir_optimal_token_baseline(plain, sum_pi_squared=s2p).token
    got = tir_optimal_token_baseline(holed, sum_pi_squared=s2h).token
    for row in range(3):   # the same credit on each trajectory's generated tokens, wherever they sit
        assert torch.allclose(got[row][holed.mask[row]], want[row][plain.mask[row]])
    assert torch.allclose(tir_optimal_token_baseline(plain, sum_pi_squared=s2p).token,
                          optimal_token_baseline(plain, sum_pi_squared=s2p).token)
    lone = _batch([1.0, 0.0], [0, 1], [2, 1])   # groups of one: baseline 0
    assert torch.isfinite(tir_optimal_token_baseline(lone, sum_pi_squared=torch.full(lone.mask.shape, .5,
                                                     dtype=torch.float64)).token).all()


@pytest.mark.parametrize("fn", [optimal_token_baseline, tir_optimal_token_baseline])
def test_bad_input_names_the_argument(fn):
    ro = _batch([1.0, 0.0], [0, 0], [2, 2])
    s2 = torch.full(ro.mask.shape, 0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="^sum_pi_squared:"):
        fn(ro, sum_pi_squared=s2 * 3)
    with pytest.raises(ValueError, match="^sum_pi_squared:"):
        fn(ro, sum_pi_squared=s2[:1])
    with pytest.raises(ValueError, match="^rollout_is_weights:"):
        fn(ro, sum_pi_squared=s2, rollout_is_weights=-s2)
    with pytest.raises(ValueError, match="^rollouts:"):
        fn(ro.with_(logprobs=None), sum_pi_squared=s2)
    with pytest.raises(ValueError, match="logprobs:"):
        fn(ro.with_(logprobs=torch.ones(ro.mask.shape, dtype=torch.float64)), sum_pi_squared=s2)
    with pytest.raises(TypeError, match="^handle_zero_tail:"):
        fn(ro, sum_pi_squared=s2, handle_zero_tail=1)
