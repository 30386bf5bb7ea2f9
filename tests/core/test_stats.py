"""The shared statistics in labkit.core.stats, including their degenerate cases."""

import pytest
import torch

from labkit.core.stats import (discounted_returns, group_normalize, group_stats, masked_moments, next_masked,
                               top_fraction, whiten)


def test_group_stats_mean_unbiased_std_and_size():
    v = torch.tensor([1.0, 3.0, 5.0, 7.0])
    g = torch.tensor([0, 0, 1, 2])
    mean, std, size = group_stats(v, g)
    assert mean.tolist() == [2.0, 2.0, 5.0, 7.0]
    assert std[0].item() == pytest.approx(2 ** 0.5)
    assert std[2].item() == 0.0 and size.tolist() == [2.0, 2.0, 1.0, 1.0]
    e_mean, e_std, e_size = group_stats(torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert e_mean.numel() == e_std.numel() == e_size.numel() == 0
    with pytest.raises(ValueError, match="group_ids"):
        group_stats(v, g[:3])


def test_group_of_one_gets_mean_zero_std_one():
    v = torch.tensor([4.0, 1.0, 3.0])
    g = torch.tensor([7, 0, 0])
    out = group_normalize(v, g, eps=1e-6)
    assert out.mean[0].item() == 0.0 and out.std[0].item() == 1.0
    assert out.normalized[0].item() == pytest.approx(4.0 / (1 + 1e-6))
    assert out.normalized[1:].sum().item() == pytest.approx(0.0)
    zero = group_normalize(v, g, singleton="zero")
    assert zero.normalized[0].item() == 0.0 and zero.std[0].item() == 1.0
    assert group_normalize(v, g, normalize_std=False).normalized.tolist() == [4.0, -1.0, 1.0]
    with pytest.raises(ValueError, match="singleton"):
        group_normalize(v, g, singleton="drop")
    with pytest.raises(ValueError, match="eps"):
        group_normalize(v, g, eps=-1.0)


def test_zero_variance_group_gets_zero():
    v = torch.tensor([2.0, 2.0, 2.0])
    out = group_normalize(v, torch.zeros(3, dtype=torch.long), eps=1e-6)
    assert torch.equal(out.normalized, torch.zeros(3))
    w = whiten(v[None, :], torch.ones(1, 3, dtype=torch.bool))
    assert torch.equal(w, torch.zeros(1, 3))


def test_weighted_group_normalize_repeats_entries_in_the_statistics():
    v = torch.tensor([0.0, 1.0])
    g = torch.zeros(2, dtype=torch.long)
    out = group_normalize(v, g, weight=torch.tensor([3, 1]), normalize_std=False)
    assert out.mean.tolist() == [0.25, 0.25] and out.size.tolist() == [4.0, 4.0]
    with pytest.raises(ValueError, match="weight"):
        group_normalize(v, g, weight=torch.tensor([1, 1, 1]))


def test_whiten_uses_the_population_variance_and_handles_an_empty_mask():
    x = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    m = torch.tensor([[True, True, True, False]])
    w = whiten(x, m)
    assert w[0, 3].item() == 0.0
    assert w[m].mean().item() == pytest.approx(0.0, abs=1e-7)
    assert w[m].std(unbiased=False).item() == pytest.approx(1.0, abs=1e-6)
    empty = torch.zeros_like(m)
    assert torch.equal(whiten(x, empty), torch.zeros_like(x))
    assert [t.item() for t in masked_moments(x, empty)] == [0.0, 0.0]
    one = torch.tensor([[True, False, False, False]])
    assert torch.equal(whiten(x, one), torch.zeros_like(x))
    with pytest.raises(ValueError, match="eps"):
        whiten(x, m, eps=0.0)


def test_discounted_returns_skip_masked_columns():
    r = torch.tensor([[1.0, 0.0, 2.0, 0.0]])
    m = torch.tensor([[True, False, True, False]])
    G = discounted_returns(r, m, 0.5)
    assert G.tolist() == [[2.0, 0.0, 2.0, 0.0]]
    assert torch.equal(discounted_returns(r, torch.zeros_like(m), 0.9), torch.zeros_like(r))
    with pytest.raises(ValueError, match="mask"):
        discounted_returns(r, m[:, :2], 1.0)


def test_next_masked_value_looks_strictly_ahead():
    v = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    m = torch.tensor([[True, False, True, False]])
    assert next_masked(v, m).tolist() == [[3.0, 3.0, 0.0, 0.0]]


def test_top_fraction_keeps_ceil_and_breaks_ties_by_position():
    s = torch.tensor([[0.5, 0.9, 0.5], [0.1, 0.5, 0.0]])
    p = torch.tensor([[True, True, True], [True, True, False]])
    kept = top_fraction(s, p, 0.5)   # 5 present -> ceil(2.5) = 3 kept
    assert kept.tolist() == [[True, True, True], [False, False, False]]
    assert int(top_fraction(s, p, 0.3).sum()) == 2   # 0.3 * 5 = 1.5 -> 2
    assert int(top_fraction(s, p, 0.01).sum()) == 1  # at least one
    empty = torch.zeros_like(p)
    assert not top_fraction(s, empty, 0.5).any()     # an empty mask keeps nothing
    assert int(top_fraction(torch.ones(1, 10), torch.ones(1, 10, dtype=torch.bool), 0.3).sum()) == 3
    with pytest.raises(ValueError, match="fraction"):
        top_fraction(s, p, 0.0)


def test_whiten_with_given_moments_is_whiten():
    g = torch.Generator().manual_seed(3)
    x, mask = torch.randn(6, 9, generator=g), torch.rand(6, 9, generator=g) < 0.6
    assert torch.equal(whiten(x, mask, moments=masked_moments(x, mask)), whiten(x, mask))


def test_discounted_returns_equal_the_column_by_column_definition():
    # the definition, one column at a time on the (B, T) layout (what the transposed loop must equal)
    g = torch.Generator().manual_seed(4)
    r, mask = torch.randn(5, 13, generator=g), torch.rand(5, 13, generator=g) < 0.7
    r = r * mask
    for gamma in (1.0, 0.9, torch.rand(5, 13, generator=g)):
        d = gamma if isinstance(gamma, torch.Tensor) else torch.full_like(r, gamma)
        want, running = torch.zeros_like(r), torch.zeros(5)
        for t in range(12, -1, -1):
            running = torch.where(mask[:, t], r[:, t] + d[:, t] * running, running)
            want[:, t] = torch.where(mask[:, t], running, 0)
        assert torch.equal(discounted_returns(r, mask, gamma), want)


def test_discounted_returns_without_discount_equals_the_backward_loop_bit_for_bit():
    """gamma = 1 in float64 takes a cumsum path (notebook 01's slider speed); it must add the same
    numbers in the same order as the per-column loop that every other gamma runs through."""
    import torch

    from labkit.core.stats import discounted_returns

    def loop(rewards, mask):
        out, running = torch.zeros_like(rewards), torch.zeros(rewards.shape[0], dtype=rewards.dtype)
        for t in range(rewards.shape[1] - 1, -1, -1):
            running = torch.where(mask[:, t], rewards[:, t] + running, running)
            out[:, t] = torch.where(mask[:, t], running, 0)
        return out

    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        B, T = torch.randint(1, 30, (2,), generator=g).tolist()
        r = torch.randn(B, T, generator=g, dtype=torch.float64) * 10.0 ** (trial % 7 - 3)
        r = torch.where(torch.rand(B, T, generator=g) < 0.5, 0.0, r) if trial % 2 else r
        m = torch.rand(B, T, generator=g) < 0.7
        r = torch.where(m, r, float("inf"))  # off-mask rewards are never read
        assert torch.equal(discounted_returns(r, m, 1.0), loop(r, m))
    # float32 keeps the loop (torch's cumsum would accumulate in double)
    r32 = torch.randn(4, 9, generator=g)
    m = torch.rand(4, 9, generator=g) < 0.7
    assert torch.equal(discounted_returns(r32, m, 1.0), loop(r32, m))


def test_discounted_returns_per_position_discounts():
    r = torch.tensor([[0.0, 0.5, 1.0]], dtype=torch.float64)
    m = torch.ones(1, 3, dtype=torch.bool)
    d = torch.tensor([[1.0, 0.9, 0.9]], dtype=torch.float64)
    # G2 = 1; G1 = 0.5 + 0.9 * 1 = 1.4; G0 = 0 + 1.0 * 1.4
    assert torch.allclose(discounted_returns(r, m, d), torch.tensor([[1.4, 1.4, 1.0]], dtype=torch.float64))
    assert torch.equal(discounted_returns(r, m, 0.9), discounted_returns(r, m, torch.full_like(r, 0.9)))
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns(r, m, torch.ones(1, 2))


@pytest.mark.parametrize("singleton", ["raw", "zero"])
def test_group_normalize_with_eps_zero_gives_equal_groups_zero(singleton):
    v = torch.tensor([1.0, 1.0, 2.0, 4.0, 3.0], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1, 2])
    out = group_normalize(v, g, eps=0.0, singleton=singleton).normalized
    assert out[:2].tolist() == [0.0, 0.0]                       # all equal: 0, not 0 / 0
    assert out[2:4].tolist() == ((v[2:4] - 3.0) / 2 ** 0.5).tolist()  # others as without the rule
    assert out[4].item() == (3.0 if singleton == "raw" else 0.0)
    # with eps > 0 nothing changes: the same bits as the plain division
    mean, std, _ = group_normalize(v, g, eps=1e-6, normalize_std=False, singleton=singleton)[1:]
    assert torch.equal(group_normalize(v, g, eps=1e-6, singleton=singleton).normalized, (v - mean) / (std + 1e-6))
