"""Solutions to the exercises of notebook 10_benchmark: 10a, Spearman's rank correlation, the
benchmark's metric; 10b, recall@k of the deciding positions with its planted bug fixed.

Checked by ``check(rank_correlation, "10a")`` and ``check(recall_at_k, "10b")``; the exercises are in
``labkit.course.exercises.ex10_benchmark``.
"""
from __future__ import annotations

import torch

__all__ = ["rank_correlation", "recall_at_k"]


def rank_correlation(credit, truth, mask):
    """10a · The benchmark's rank correlation (Spearman 1904; the survey's benchmark, arXiv 2604.09459).

    Inputs:
        credit, truth: (B, T) estimated and exact credit.
        mask: (B, T) bool, the positions that are scored.

    Formula:
        rho = Pearson correlation of the ranks of credit[mask] and truth[mask]

    Defaults:
        tied values share their average rank.

    Degenerate input:
        a constant side (or a single position) ranks nothing: 0.0, not NaN.

    Deviations from the reference:
        none: equal to ``labkit.scoring.rank_correlation``.

    Returns:
        a float, Spearman's rho over the masked positions (0.0 when either side is constant).

    Cost:
        none.
    """
    def ranks(x):
        # average rank: how many are smaller, plus half of the others equal to it
        return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()

    a, b = ranks(credit[mask].double()), ranks(truth[mask].double())
    a, b = a - a.mean(), b - b.mean()
    denom = a.norm() * b.norm()
    return 0.0 if float(denom) == 0 else float(a @ b / denom)


def recall_at_k(credit, mask, targets):
    """10b · Recall@k of the deciding positions (the survey's benchmark, arXiv 2604.09459, section 9.3).

    Inputs:
        credit: (B, T) estimated credit.
        mask: (B, T) bool, the generated positions (the only candidates).
        targets: (B, T) bool, the deciding positions.

    Formula:
        per trajectory: k = |targets & mask|, recall = E[ |top-k of |credit| over the mask  &  targets| ] / k
        score = mean recall over the trajectories with k >= 1

    Defaults:
        k is the trajectory's own number of deciding positions; a tie at the k-th value counts each
        tied position with probability (k - number above) / number tied.

    Degenerate input:
        a trajectory with no deciding position inside its mask is left out of the mean; credit equal
        on every token scores the chance level k / n.

    Deviations from the reference:
        none: equal to ``labkit.scoring.recall_at_k`` with (B, T) bool targets and k left to default.

    Returns:
        a float in [0, 1].

    Cost:
        one sort per trajectory.
    """
    recalls = []
    for b in range(credit.shape[0]):
        wanted = targets[b] & mask[b]
        k = int(wanted.sum())
        if k == 0:
            continue
        # the buggy version ranked every position: the mask must come before the ranking
        size = credit[b][mask[b]].abs()
        kth = torch.sort(size, descending=True).values[k - 1]
        above, tied = size > kth, size == kth
        pick = above.double()
        pick[tied] = (k - int(above.sum())) / int(tied.sum())
        recalls.append(float(pick[wanted[mask[b]]].sum()) / k)
    return sum(recalls) / len(recalls)
