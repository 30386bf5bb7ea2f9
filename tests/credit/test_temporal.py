"""TP-Schedule (arXiv:2605.25381): one stage of the trajectory-percentile token window."""
import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.credit.temporal import percentile_window, prefix_ratio


def _batch():
    # two groups of two; row 1 has only 3 generated positions of 5
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    rewards = torch.zeros(4, 5, dtype=torch.float64)
    rewards[0, 4], rewards[1, 2], rewards[2, 4] = 1.0, 0.0, 1.0
    return Rollouts(tokens=torch.zeros(4, 5, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.tensor([0, 0, 1, 1]))


def test_hand_case_halfway():
    ro = _batch()
    # progress 0.5, linear, m = 0.99: rho = 0.495; L = 5 -> cut floor(2.475) = 2; L = 3 -> cut 1
    c = get_estimator("tp_schedule")(ro, progress=0.5)
    assert c.info["prefix_ratio"] == pytest.approx(0.495)
    # GRPO in each group: scores (1, 0), mean 0.5, unbiased std sqrt(0.5): +-0.5 / sqrt(0.5) = +-0.7071
    a = 0.5 / (0.5 ** 0.5 + 1e-6)
    expected = torch.tensor([[0, 0, a, a, a], [0, -a, -a, 0, 0], [0, 0, a, a, a], [0, 0, -a, -a, -a]],
                            dtype=torch.float64)
    assert torch.allclose(c.token, expected)
    assert c.info["share_kept"] == pytest.approx(11 / 18)


def test_start_keeps_last_token_and_end_is_base():
    ro = _batch()
    start = get_estimator("tp_schedule")(ro, progress=0.0)
    last = torch.zeros(4, 5, dtype=torch.bool)
    last[[0, 2, 3], 4] = True
    last[1, 2] = True
    assert torch.equal(start.info["kept"], last)
    end = get_estimator("tp_schedule")(ro, progress=1.0)
    assert torch.allclose(end.token, get_estimator("grpo")(ro).token)
    assert torch.allclose(get_estimator("tp_schedule")(ro, magnitude=0.0).token, end.token)


def test_curves():
    assert prefix_ratio(0.0) == pytest.approx(0.99) and prefix_ratio(1.0) == 0.0
    assert prefix_ratio(0.0, mode="sigmoid") == pytest.approx(0.99) and prefix_ratio(1.0, mode="sigmoid") == pytest.approx(0.0)
    assert prefix_ratio(0.5, mode="sigmoid") == pytest.approx(0.495)
    assert prefix_ratio(0.5, mode="gamma") == pytest.approx(0.495 ** 2)


def test_degenerate_one_token():
    ro = Rollouts(tokens=torch.zeros(2, 1, dtype=torch.long), mask=torch.ones(2, 1, dtype=torch.bool),
                  rewards=torch.tensor([[1.0], [0.0]], dtype=torch.float64), group_ids=torch.tensor([0, 0]))
    assert percentile_window(ro, 0.99).all()
    c = get_estimator("tp_schedule")(ro)
    assert torch.allclose(c.token, get_estimator("grpo")(ro).token)


@pytest.mark.parametrize("kwargs,arg", [({"progress": 1.5}, "progress"), ({"progress": -0.1}, "progress"),
                                        ({"magnitude": 2.0}, "magnitude"), ({"mode": "cosine"}, "mode"),
                                        ({"base": "tp_schedule"}, "base")])
def test_bad_input_names_argument(kwargs, arg):
    with pytest.raises(ValueError, match=f"^{arg}:"):
        get_estimator("tp_schedule")(_batch(), **kwargs)


def test_runs_in_bench():
    from labkit.bench.suite import chain_task, run_cell
    task = chain_task(6, n=16)
    rec = run_cell("tiny", task, "tp_schedule", 0)
    assert rec["status"] == "ok"
