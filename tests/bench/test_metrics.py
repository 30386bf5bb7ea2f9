"""The benchmark's metrics (labkit.bench.metrics): trajectory lengths, gradient cosine / variance, luck weight."""

import pytest
import torch

from labkit.bench import suite_tasks
from labkit.bench.metrics import gradient_metrics, luck_weight, trajectory_lengths
from labkit.core.credit import Credit


SEED = suite_tasks("tiny")[1][0]


def test_trajectory_lengths_summary():
    assert trajectory_lengths(torch.tensor([4, 1, 3, 2])) == {"min": 1.0, "median": 2.5, "max": 4.0, "mean": 2.5}
    assert trajectory_lengths(torch.tensor([5, 1, 3]))["median"] == 3.0
    with pytest.raises(ValueError, match="^lengths: "):
        trajectory_lengths(torch.tensor([]))
    with pytest.raises(ValueError, match="^lengths: "):
        trajectory_lengths(torch.ones(2, 2))


def test_gradient_metrics_of_zero_and_of_exact_credit():
    tasks, _ = suite_tasks("quick")
    inst = tasks[0].build(0)  # chain T=10, 64 trajectories
    ro = inst.rollouts
    zero = gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, torch.zeros_like(inst.truth), "zero"), inst.exact_grad)
    assert zero == {"gradient_cosine": 0.0, "gradient_variance": 0.0}
    exact = gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, inst.truth, "exact"), inst.exact_grad)
    assert exact["gradient_cosine"] > 0.5 and exact["gradient_variance"] > 0
    with pytest.raises(ValueError, match="^n_batches: "):
        gradient_metrics(inst.policy, ro, Credit.from_tokens(ro, inst.truth, "exact"), inst.exact_grad, n_batches=7)


def test_luck_weight_is_zero_for_skill_and_one_for_luck(tiny):
    task, inst = tiny["agentic"]
    ro = inst.rollouts
    skill, luck = inst.skill_luck
    luck_after = luck.flip(1).cumsum(1).flip(1)
    assert luck_weight(ro, Credit.from_tokens(ro, skill, "skill"), skill, luck) == pytest.approx(0.0, abs=1e-9)
    assert luck_weight(ro, Credit.from_tokens(ro, luck_after, "luck"), skill, luck) == pytest.approx(1.0, abs=1e-9)
    mixed = luck_weight(ro, Credit.from_tokens(ro, skill + luck_after, "both"), skill, luck)
    assert mixed == pytest.approx(0.5, abs=1e-6)
