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


def test_check_probability_table_refuses_what_is_not_a_distribution_per_row():
    from labkit.core.checks import PROBABILITY_ROW_TOL, check_probability_table
    good = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    out = check_probability_table("pi", good)
    assert out.dtype == torch.float64 and torch.equal(out, good.double())
    check_probability_table("pi", good * (1 + PROBABILITY_ROW_TOL / 2))
    for bad, match in ((good * 2, "summing to 1"), (good * (1 - 3 * PROBABILITY_ROW_TOL), "summing to 1"),
                       (torch.tensor([[1.5, -0.5]]), "lie in"), (torch.tensor([[float("nan"), 1.0]]), "non-finite"),
                       (good[0], "2-D"), (good.to(torch.complex64), "real"), ("x", "tensor")):
        with pytest.raises((ValueError, TypeError), match=rf"^pi: .*{match}"):
            check_probability_table("pi", bad)
    with pytest.raises(ValueError, match=r"^pi: expected shape \(3, 2\)"):
        check_probability_table("pi", good, shape=(3, 2))


def test_check_pairing_and_ids_name_the_argument():
    from labkit.core.checks import check_ids_in_range, check_pairing
    check_pairing("truth", {"n": 3, "t": torch.ones(2)}, {"n": 3, "t": torch.ones(2), "other": 1})
    with pytest.raises(ValueError, match=r"^truth: .*n 3 against 4"):
        check_pairing("truth", {"n": 3}, {"n": 4})
    with pytest.raises(ValueError, match=r"^truth: .*t differing by up to 0.5"):
        check_pairing("truth", {"t": torch.ones(2)}, {"t": torch.tensor([1.0, 1.5])})

    class Env:
        n = 4
    with pytest.raises(ValueError, match=r"^truth: .*n 3 against 4\); hint"):
        check_pairing("truth", {"n": 3, "absent": 1}, Env(), hint="hint")
    check_ids_in_range("rollouts", torch.tensor([0, 9]), 3, where=torch.tensor([True, False]))
    with pytest.raises(ValueError, match=r"^rollouts: state ids out of range .*got 9"):
        check_ids_in_range("rollouts", torch.tensor([0, 9]), 3, what="state ids")
    with pytest.raises(ValueError, match=r"^rollouts: .*got -1"):
        check_ids_in_range("rollouts", torch.tensor([-1]), 3)


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
