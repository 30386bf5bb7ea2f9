"""The argument checks (labkit.core.checks)."""

import pytest
import torch


def test_check_finite_sum_shortcut_still_finds_bad_entries_and_forgives_overflow():
    from labkit.core.checks import check_finite
    big = torch.full((4,), 3e38)  # finite entries whose sum overflows to inf: not an error
    check_finite("x", big)
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.zeros(3, 4)
        x[1, 2] = bad
        with pytest.raises(ValueError, match=r"^x: contains a non-finite value .* at index \(1, 2\)"):
            check_finite("x", x)
