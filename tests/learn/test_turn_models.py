"""The agents' turn models (labkit.learn.turn_models): iStar's implicit step rewards and SPA-RL's
progress table, on hand-built rollouts.
"""

import math

import pytest
import torch

from labkit.learn.turn_models import ImplicitStepRewardModel, ProgressEstimator, preference_pairs

from turn_batches import outcome_turns


def test_implicit_step_reward_model_prefers_the_winning_action():
    # one task, two trajectories: (obs 0, action 1) then success; (obs 0, action 0) then failure
    ro = outcome_turns([1, 1], [1.0, 0.0], states=[[0], [0]], actions=[[1], [0]])
    w, l = preference_pairs(ro)
    assert w.tolist() == [0] and l.tolist() == [1]
    prm = ImplicitStepRewardModel(torch.zeros(2, 3), beta=0.5)
    assert float(prm(ro).abs().sum()) == 0.0  # starts at the reference: every reward 0
    prm.fit(ro, steps=50)
    r = prm(ro)
    assert r[0, 0] > 0 > r[1, 0]
    assert prm.fit_info["pairs"] == 1 and prm.fit_info["loss"] < math.log(2)
    with pytest.raises(ValueError, match="ref_logits"):
        ImplicitStepRewardModel(torch.zeros(3))
    with pytest.raises(ValueError, match="rollouts.states"):
        prm(outcome_turns([1], [1.0], states=[[7]]))


def test_progress_estimator_sums_to_outcome():
    # (o0, a0) always precedes the outcome-deciding (o1, a1): the table gives (o1, a1) all of it
    ro = outcome_turns([2, 1, 1], [1.0, 0.0, 1.0], states=[[0, 1], [0, 0], [1, 0]], actions=[[0, 1], [0, 0], [1, 0]])
    pe = ProgressEstimator(2, 2, ridge=1e-9).fit(ro)
    assert abs(float(pe.table[0, 0])) < 1e-6 and abs(float(pe.table[1, 1]) - 1.0) < 1e-6
    assert torch.allclose(pe(ro).sum(1), ro.scores.to(torch.float64), atol=1e-6)
    assert pe.fit_info["mse"] < 1e-10
    mlp = ProgressEstimator(2, 2, kind="mlp", max_turns=2, hidden=8).fit(ro, steps=300, lr=0.05)
    assert mlp.fit_info["mse"] < 0.05
    with pytest.raises(ValueError, match="kind"):
        ProgressEstimator(2, 2, kind="tree")
