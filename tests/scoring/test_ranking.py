"""Ordering a state's alternatives (labkit.scoring.ranking): ranking accuracy, ties and degenerate groups."""

import pytest
import torch

from labkit.scoring import ranking_accuracy


# ---- ranking alternatives within a group (VinePPO's step-ranking question)
RANK_TRUTH = torch.tensor([0.1, 0.5, 0.9, 0.2, 0.8, 0.3, 0.3, 0.7])
RANK_GROUPS = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])  # group 2 has a tie in truth


def test_ranking_accuracy_perfect_and_reversed():
    perfect = ranking_accuracy(RANK_TRUTH * 3 + 1, RANK_TRUTH, RANK_GROUPS)
    assert perfect["pairwise"] == 1.0 and perfect["top1"] == 1.0
    # 3 pairs in group 0, 1 in group 1, 2 in group 2 (the tied pair is not scored)
    assert perfect["pairs"] == 6 and perfect["groups"] == 3
    reversed_ = ranking_accuracy(-RANK_TRUTH, RANK_TRUTH, RANK_GROUPS)
    assert reversed_["pairwise"] == 0.0 and reversed_["top1"] == 0.0


def test_ranking_accuracy_constant_predictor_scores_chance_exactly():
    out = ranking_accuracy(torch.zeros(8), RANK_TRUTH, RANK_GROUPS)
    assert out["pairwise"] == out["pairwise_chance"] == 0.5
    assert out["top1"] == pytest.approx(out["top1_chance"])
    assert out["top1_chance"] == pytest.approx((1 / 3 + 1 / 2 + 1 / 3) / 3)


def test_ranking_accuracy_ties():
    # truth ties: both tied alternatives count as best, so a pick of either is a hit
    truth = torch.tensor([0.5, 0.5, 0.1])
    one = torch.zeros(3, dtype=torch.long)
    assert ranking_accuracy(torch.tensor([0.0, 1.0, -1.0]), truth, one)["top1"] == 1.0
    assert ranking_accuracy(torch.zeros(3), truth, one)["top1_chance"] == pytest.approx(2 / 3)
    # a tie in the prediction between a best and a worse alternative: half a hit, half a pair
    out = ranking_accuracy(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0.9, 0.5, 0.1]), one)
    assert out["top1"] == pytest.approx(0.5)
    assert out["pairwise"] == pytest.approx((1 + 0.5 + 0) / 3)
    # min_gap: differences below it do not count as order
    out = ranking_accuracy(torch.tensor([0.0, 2.0, 1.0]), torch.tensor([0.52, 0.50, 0.1]), one, min_gap=0.05)
    assert out["pairs"] == 2 and out["top1"] == 1.0  # 0.50 is within 0.05 of the best


def test_ranking_accuracy_degenerate_groups_are_skipped():
    # singletons and all-tied groups carry no ranking: NaN when nothing is left
    out = ranking_accuracy(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.4, 0.7, 0.7]),
                           torch.tensor([0, 1, 1]))
    assert out["pairs"] == 0 and out["groups"] == 0
    assert out["pairwise"] != out["pairwise"] and out["top1"] != out["top1"]  # NaN


def test_ranking_accuracy_bad_input():
    with pytest.raises(ValueError, match="truth"):
        ranking_accuracy(torch.zeros(3), torch.zeros(4), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="groups"):
        ranking_accuracy(torch.zeros(3), torch.zeros(3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(TypeError, match="groups"):
        ranking_accuracy(torch.zeros(3), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="predicted"):
        ranking_accuracy(torch.zeros(0), torch.zeros(0), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match="predicted"):
        ranking_accuracy(torch.tensor([0.0, float("nan")]), torch.zeros(2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="min_gap"):
        ranking_accuracy(torch.zeros(2), torch.zeros(2), torch.zeros(2, dtype=torch.long), min_gap=-0.1)
