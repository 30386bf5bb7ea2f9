"""Does a value estimate order the alternatives of one state as their true values do?"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_finite, check_number, check_shape


def ranking_accuracy(predicted, truth, groups, *, min_gap: float = 0.0) -> dict[str, float]:
    """How well ``predicted`` values order alternatives *within* each group, judged by ``truth``.

    The question VinePPO (arXiv:2410.01679) asks of a value estimate: given alternative next
    steps from one state (a group), does it rank them as their true values do? All three inputs
    are 1-D of length N; ``groups[i]`` is the integer group (state) of alternative i.

    * ``pairwise``: over every within-group pair with |truth_i - truth_j| > ``min_gap``, the
      fraction the prediction orders the same way; a tie in the prediction counts 1/2 (a coin
      flip). Chance (and any constant predictor): ``pairwise_chance`` = 0.5.
    * ``top1``: over groups, the probability that the predicted best alternative (a uniform pick
      among tied predicted maxima, in expectation) is truly best, where "truly best" means a
      truth value within ``min_gap`` of the group's maximum. ``top1_chance`` is the same for a
      uniformly random pick: the mean over groups of (number truly best) / (group size); a
      constant predictor scores exactly that.

    ``min_gap`` (default 0) says how far apart two truth values must be to count as different:
    with Monte Carlo truth, set it to a few standard errors so noise is not scored as order.
    ``pairs`` and ``groups`` count what was scored. Degenerate input: groups of one, and groups
    whose alternatives are all truly best, carry no ranking information and are skipped; if no
    pair (or no group) is left, the corresponding accuracy and chance are NaN.
    """
    pred = as_tensor("predicted", predicted, dtype=torch.float64)
    true = as_tensor("truth", truth, dtype=torch.float64)
    grp = as_tensor("groups", groups)
    if pred.dim() != 1 or pred.numel() == 0:
        raise ValueError(f"predicted: expected a non-empty 1-D tensor, got shape {tuple(pred.shape)}")
    check_shape("truth", true, (pred.numel(),))
    check_shape("groups", grp, (pred.numel(),))
    if grp.is_floating_point() or grp.dtype == torch.bool:
        raise TypeError(f"groups: expected integer group labels, got {grp.dtype}")
    check_finite("predicted", pred)
    check_finite("truth", true)
    min_gap = check_number("min_gap", min_gap, low=0.0)

    pair_scores, hits, chances = [], [], []
    for g in torch.unique(grp):
        p, t = pred[grp == g], true[grp == g]
        n = p.numel()
        if n < 2:
            continue
        upper = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        dt, dp = t[:, None] - t[None, :], p[:, None] - p[None, :]
        scored = upper & (dt.abs() > min_gap)
        agree = torch.where(dp == 0, 0.5, (torch.sign(dp) == torch.sign(dt)).to(torch.float64))
        pair_scores.append(agree[scored])
        best = t >= t.max() - min_gap
        if bool(best.all()):
            continue  # any pick is best: nothing to rank
        picked = p == p.max()
        hits.append(float((picked & best).sum()) / float(picked.sum()))
        chances.append(float(best.sum()) / n)

    scores = torch.cat(pair_scores) if pair_scores else torch.zeros(0, dtype=torch.float64)
    nan = float("nan")
    return {
        "pairwise": float(scores.mean()) if scores.numel() else nan,
        "top1": sum(hits) / len(hits) if hits else nan,
        "pairs": int(scores.numel()),
        "groups": len(hits),
        "pairwise_chance": 0.5 if scores.numel() else nan,
        "top1_chance": sum(chances) / len(chances) if chances else nan,
    }
