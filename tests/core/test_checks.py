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


def test_check_choice_refuses_a_number_where_a_setting_name_is_expected():
    from labkit.core.checks import check_choice
    assert check_choice("kind", "a", ("a", "b")) == "a"
    for bad in (3, 1.5, ["a"], None, torch.tensor(1)):
        with pytest.raises(TypeError, match=r"^kind: expected one of \('a', 'b'\) \(a name\), got"):
            check_choice("kind", bad, ("a", "b"))
    with pytest.raises(ValueError, match=r"^kind: must be one of \('a', 'b'\), got 'c'"):
        check_choice("kind", "c", ("a", "b"))
    # choices that are not all names keep the plain membership rule
    assert check_choice("renorm", None, (None, "sorl")) is None
    assert check_choice("n", 2, (1, 2)) == 2


def test_check_policy_and_check_learner_name_the_argument():
    from labkit.core.checks import check_has, check_learner, check_policy
    from labkit.policies import TabularSoftmaxPolicy
    pol = TabularSoftmaxPolicy(2, 2)
    assert check_policy("policy", pol) is pol
    with pytest.raises(TypeError, match=r"^policy: expected a policy with probs\(\) \(e.g. TabularSoftmaxPolicy\), got None$"):
        check_policy("policy", None)
    with pytest.raises(TypeError, match=r"^policy: .*got str \(it has no probs\)"):
        check_policy("policy", "x")
    with pytest.raises(TypeError, match=r"^learner: expected a learner with parameters\(\).*got None"):
        check_learner("learner", None)
    with pytest.raises(TypeError, match=r"^env: expected a thing, got int \(it has no sample\)"):
        check_has("env", 3, ("sample",), "a thing")
