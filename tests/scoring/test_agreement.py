"""Credit against truth (labkit.scoring.agreement): rank correlation, sign agreement, recall@k, cosine, Pearson."""

import math

import pytest
import torch

from labkit.scoring import (advantage_error, cosine, pearson, rank_correlation, recall_at_k, score_credit,
                            sign_agreement)


MASK = torch.ones(2, 4, dtype=torch.bool)


def test_rank_correlation_known_values():
    truth = torch.tensor([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])
    assert rank_correlation(truth * 10 - 3, truth, MASK) == pytest.approx(1.0)
    assert rank_correlation(-truth, truth, MASK) == pytest.approx(-1.0)
    assert rank_correlation(torch.ones(2, 4), truth, MASK) == 0.0  # constant credit: no ranking
    # ties take average ranks: matches the textbook value for this small case
    est = torch.tensor([[1.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])
    assert rank_correlation(est, truth, MASK) == pytest.approx((41.5 / 42) ** 0.5, abs=1e-9)


def test_masked_positions_are_ignored():
    truth = torch.tensor([[1.0, -1.0, 0.0, 0.0], [1.0, -1.0, 0.0, 0.0]])
    est = torch.tensor([[2.0, -2.0, 99.0, -99.0], [2.0, -2.0, 5.0, 5.0]])
    mask = torch.tensor([[True, True, False, False], [True, True, False, False]])
    assert advantage_error(est, truth, mask)["mae"] == pytest.approx(1.0)
    assert sign_agreement(est, truth, mask) == 1.0


def test_sign_agreement_counts_zero_credit_as_wrong():
    truth = torch.tensor([[1.0, -1.0, 0.0, 0.01], [1.0, -1.0, 0.0, 0.0]])
    est = torch.tensor([[1.0, 0.0, -5.0, -5.0], [1.0, 1.0, 0.0, 0.0]])
    assert sign_agreement(est, truth, MASK, threshold=0.05) == pytest.approx(2 / 4)
    assert sign_agreement(est, torch.zeros(2, 4), MASK) == 0.0


def test_recall_handles_ties_in_expectation():
    flat = torch.ones(2, 4)
    assert recall_at_k(flat, MASK, [1]) == pytest.approx(1 / 4)  # chance level k / T
    assert recall_at_k(flat, MASK, [1, 3]) == pytest.approx(2 / 4)
    peaked = torch.tensor([[0.1, -3.0, 0.2, 0.0], [0.1, 0.5, 0.2, 0.0]])
    assert recall_at_k(peaked, MASK, [1]) == pytest.approx(1.0)
    tie = torch.tensor([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    assert recall_at_k(tie, MASK, [1]) == pytest.approx(0.5)
    per_row = torch.tensor([[False, True, False, False], [False, False, False, False]])
    assert recall_at_k(peaked, MASK, per_row) == pytest.approx(1.0)  # row 1 has no target: skipped
    with pytest.raises(ValueError, match="targets"):
        recall_at_k(flat, MASK, [4])
    with pytest.raises(ValueError, match="targets"):
        recall_at_k(flat, MASK, [])
    with pytest.raises(ValueError, match="targets"):
        recall_at_k(flat, MASK, torch.zeros(2, 4, dtype=torch.bool))


def test_cosine_and_shape_errors():
    assert cosine(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 0.0])) == pytest.approx(1.0)
    assert cosine(torch.zeros(2), torch.tensor([1.0, 0.0])) == 0.0
    with pytest.raises(ValueError, match="^b: expected as many values"):
        cosine(torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError, match="credit"):
        rank_correlation(torch.zeros(2, 3), torch.zeros(2, 4), MASK)


def test_score_credit_collects_everything():
    from labkit.credit import estimate
    from labkit.envs import BifurcationChain
    from labkit.policies import TabularSoftmaxPolicy
    from labkit.core.credit import Credit
    from labkit.envs.tabular import exact_truth
    env = BifurcationChain(horizon=12, n_bifurcations=2, seed=1)
    pol = TabularSoftmaxPolicy(env.n_states, 2, init_std=0.3)
    ro = env.sample(pol, 64, group_size=8, seed=0)
    truth = exact_truth(env.mdp(), pol).advantage(ro)
    exact = score_credit(Credit.from_tokens(ro, truth, "exact"), ro, truth, targets=ro.truth["decisive"])
    assert exact["rank_corr"] == pytest.approx(1.0) and exact["recall_at_k"] == pytest.approx(1.0)
    grpo = score_credit(estimate("grpo", ro), ro, truth, targets=env.bifurcations)
    assert grpo["recall_at_k"] == pytest.approx(2 / 12)  # episode credit: chance level
    assert set(grpo) == {"rank_corr", "sign_agree", "mse", "mae", "recall_at_k"}


def test_pearson_flattens_and_reports_the_undefined_case():
    a = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    b = torch.tensor([2.0, 4.0, 5.0, 11.0])
    expected = float(torch.corrcoef(torch.stack([a.flatten(), b]))[0, 1])
    assert pearson(a, b) == pytest.approx(expected)
    assert pearson(a, -b) == pytest.approx(-expected)
    assert math.isnan(pearson(torch.ones(4), b))                 # a constant side: undefined
    assert pearson(torch.ones(4), b, constant=0.0) == 0.0
    assert math.isnan(pearson(torch.tensor([1.0]), torch.tensor([2.0])))
    with pytest.raises(ValueError, match="^b: expected as many values"):
        pearson(a, b[:3])


def test_recall_at_k_refuses_a_fractional_k_however_it_comes():
    import numpy as np
    credit = torch.tensor([[0.0, 2.0, 1.0, 0.5], [1.0, 0.0, 3.0, 2.0]])
    for bad in (1.5, np.float64(2.5), torch.tensor(1.5)):
        with pytest.raises(TypeError, match="^k: expected an integer"):
            recall_at_k(credit, MASK, [1], k=bad)
    assert recall_at_k(credit, MASK, [1], k=2.0) == recall_at_k(credit, MASK, [1], k=2)
