"""Scoring estimated credit against exact truth.

Two kinds of question:

* Does the credit point at the right tokens? Compare per-position credit with the exact
  advantage A(s_t, a_t): error, rank correlation, sign agreement, and recall of the positions
  that truly decide the outcome.
* Does it produce the right update? Turn credit into a policy-gradient estimate and compare with
  the exact gradient: cosine, and the estimate's variance across independent batches.

Estimators differ in scale (GRPO divides by a std), so the headline numbers here are
scale-free (correlation, sign, recall, cosine, relative variance); the raw error is reported
too but only compares estimators that share a scale.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.rollouts import Credit, Rollouts, check_rollouts


def _mask(mask) -> torch.Tensor:
    """A boolean (or 0/1) (B, T) selection of positions that selects at least one."""
    mask = as_tensor("mask", mask)
    if mask.dim() != 2:
        raise ValueError(f"mask: expected shape (B, T), got {tuple(mask.shape)}")
    if mask.dtype != torch.bool:
        if bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError("mask: must be boolean (or 0/1)")
        mask = mask.bool()
    if not bool(mask.any()):
        raise ValueError("mask: selects no position, so there is nothing to score")
    return mask


def _credit_tensor(credit, mask: torch.Tensor) -> torch.Tensor:
    est = credit.token if isinstance(credit, Credit) else as_tensor("credit", credit)
    check_shape("credit", est, tuple(mask.shape))
    check_finite("credit", torch.where(mask, est, torch.zeros((), dtype=est.dtype)))
    return est


def _pair(credit: Credit | torch.Tensor, truth_adv: torch.Tensor, mask: torch.Tensor):
    truth_adv = as_tensor("truth_adv", truth_adv)
    mask = as_tensor("mask", mask)
    # credit and truth must agree; a mask of another shape is then the odd one out
    if tuple(mask.shape) != tuple(truth_adv.shape) and isinstance(credit, (Credit, torch.Tensor)) and \
            tuple((credit.token if isinstance(credit, Credit) else credit).shape) == tuple(truth_adv.shape):
        check_shape("mask", mask, tuple(truth_adv.shape))
    mask = _mask(mask)
    est = _credit_tensor(credit, mask)
    check_shape("truth_adv", truth_adv, tuple(mask.shape))
    check_finite("truth_adv", torch.where(mask, truth_adv, torch.zeros((), dtype=truth_adv.dtype)))
    return est[mask].to(torch.float64), truth_adv[mask].to(torch.float64)


def advantage_error(credit, truth_adv, mask) -> dict[str, float]:
    """Mean squared and mean absolute error of per-position credit against the exact advantage."""
    est, true = _pair(credit, truth_adv, mask)
    d = est - true
    return {"mse": float((d ** 2).mean()), "mae": float(d.abs().mean())}


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks (ties share the mean of their ranks), as Spearman's rho needs."""
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    ranks_sorted = torch.arange(len(x), dtype=torch.float64)
    # each run of equal values gets the mean rank of the run
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    first = torch.cumsum(counts, 0) - counts
    mean_rank = first.to(torch.float64) + (counts.to(torch.float64) - 1) / 2
    ranks_sorted = mean_rank[inverse]
    ranks = torch.empty_like(ranks_sorted)
    ranks[order] = ranks_sorted
    return ranks


def rank_correlation(credit, truth_adv, mask) -> float:
    """Spearman's rho between credit and exact advantage over all generated positions.

    Returns 0.0 when either side is constant (no ranking information), rather than NaN.
    """
    est, true = _pair(credit, truth_adv, mask)
    if est.numel() < 2:
        return 0.0
    re, rt = _ranks(est), _ranks(true)
    re, rt = re - re.mean(), rt - rt.mean()
    denom = re.norm() * rt.norm()
    return 0.0 if float(denom) == 0 else float((re @ rt) / denom)


def sign_agreement(credit, truth_adv, mask, *, threshold: float = 0.05) -> float:
    """Fraction of positions with |A_true| > threshold where sign(credit) == sign(A_true).

    Zero credit counts as a disagreement (it does not push the right way). Returns 0.0 if no
    position has a clearly non-zero true advantage.
    """
    threshold = check_number("threshold", threshold, low=0.0)
    est, true = _pair(credit, truth_adv, mask)
    clear = true.abs() > threshold
    if not bool(clear.any()):
        return 0.0
    return float((torch.sign(est[clear]) == torch.sign(true[clear])).to(torch.float64).mean())


def recall_at_k(credit, mask, targets, k: int | None = None) -> float:
    """Expected fraction of the true deciding positions among the top-k |credit| positions.

    ``targets`` is either a list of positions (the same for every trajectory) or a (B, T) bool
    tensor marking each trajectory's own deciding positions (e.g. only the bifurcations it
    reached while its outcome was still open). k defaults to the number of targets in the
    trajectory. Averaged over trajectories that have at least one target. Ties at the k-th value
    are broken uniformly at random *in expectation* (a tied position counts with the probability
    it would be picked), so credit that paints every token the same scores the chance level k / T.
    """
    mask = _mask(mask)
    est = _credit_tensor(credit, mask)
    B, T = mask.shape
    if isinstance(targets, torch.Tensor) and targets.dtype == torch.bool:
        check_shape("targets", targets, (B, T))
        target_mask = targets & mask
    else:
        positions = [int(p) for p in targets]
        if not positions:
            raise ValueError("targets: need at least one true deciding position")
        if min(positions) < 0 or max(positions) >= T:
            raise ValueError(f"targets: positions must lie in [0, {T - 1}], got {positions}")
        target_mask = torch.zeros(B, T, dtype=torch.bool)
        target_mask[:, positions] = True
        target_mask &= mask
    if k is not None:
        k = check_int("k", k, low=1)
    recalls = []
    for b in range(B):
        n_targets = int(target_mask[b].sum())
        if n_targets == 0:
            continue
        valid = mask[b]
        mags = est[b].abs().to(torch.float64)[valid]
        kk = min(n_targets if k is None else k, len(mags))
        kth = torch.sort(mags, descending=True).values[kk - 1]
        above, tied = mags > kth, mags == kth
        p_pick = above.to(torch.float64)
        p_pick[tied] = (kk - int(above.sum())) / int(tied.sum())
        recalls.append(float(p_pick[target_mask[b][valid]].sum()) / n_targets)
    if not recalls:
        raise ValueError("targets: no trajectory has a deciding position inside its mask")
    return sum(recalls) / len(recalls)


def pearson(a: torch.Tensor, b: torch.Tensor, *, constant: float = float("nan")) -> float:
    """Pearson correlation of two same-size tensors (flattened, float64).

    A correlation is undefined when there are fewer than two values or either side is constant
    (std below 1e-12); that case returns ``constant`` (NaN by default; pass 0.0 where a constant
    credit should count as ranking nothing). Non-finite inputs raise a ValueError."""
    a, b = _flat_pair(a, b)
    if a.numel() < 2 or float(a.std()) < 1e-12 or float(b.std()) < 1e-12:
        return constant
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def _flat_pair(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    """Two tensors of equal size, flattened to float64 and checked finite."""
    a = as_tensor("a", a).reshape(-1).to(torch.float64)
    b = as_tensor("b", b).reshape(-1).to(torch.float64)
    if a.shape != b.shape:
        raise ValueError(f"b: expected as many values as a ({a.numel()}), got {b.numel()}")
    check_finite("a", a)
    check_finite("b", b)
    return a, b


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two gradients (any shape, flattened); 0.0 if either is zero."""
    a, b = _flat_pair(a, b)
    denom = a.norm() * b.norm()
    return 0.0 if float(denom) == 0 else float(a @ b / denom)


def score_credit(credit: Credit, rollouts: Rollouts, truth_adv: torch.Tensor, *,
                 targets=None, threshold: float = 0.05) -> dict[str, float]:
    """All per-position metrics in one dict; recall@k only if deciding ``targets`` are given
    (positions or a (B, T) bool mask, see ``recall_at_k``)."""
    check_rollouts(rollouts)
    m = rollouts.mask
    out = {"rank_corr": rank_correlation(credit, truth_adv, m),
           "sign_agree": sign_agreement(credit, truth_adv, m, threshold=threshold),
           **advantage_error(credit, truth_adv, m)}
    if targets is not None:
        out["recall_at_k"] = recall_at_k(credit, m, targets)
    return out


def gradient_study(policy, rollouts: Rollouts | Sequence[Rollouts], estimator: Callable[[Rollouts], Credit],
                   exact_grad: torch.Tensor, *, n_batches: int | None = None,
                   whole: Rollouts | None = None) -> dict[str, float]:
    """Policy-gradient quality of an estimator over ``n_batches`` independent batches.

    ``rollouts`` is either one Rollouts holding ``n_batches`` consecutive batches of equal size
    (sample them in one call; this splits them) or the list of batches itself (split once and
    reuse it when studying several estimators). The estimator sees one batch at a time, so batch-level statistics
    (a mean baseline, REINFORCE++'s whitening) are computed per batch as in training. For batch i
    the estimate is g_i = (1/B) sum_b sum_t credit_bt grad log pi(a_bt | s_bt). Reports

    * ``cosine``: mean over batches of cos(g_i, exact) — what one update sees;
    * ``cosine_of_mean``: cos(mean_i g_i, exact) — the direction once noise is averaged out
      (close to 1 for unbiased estimators given enough batches);
    * ``variance``: total variance (1/n) sum_i ||g_i - mean g||^2 (depends on credit scale);
    * ``relative_variance``: variance / ||mean g||^2, a scale-free noise-to-signal ratio
      (inf if the mean gradient is exactly zero, e.g. no batch contained a success).

    ``whole`` (with a list of batches): the Rollouts they were split from, in order; the
    per-trajectory gradients are then taken in one call over it (the same numbers, faster).
    """
    if isinstance(rollouts, Rollouts):
        if n_batches is None:
            raise ValueError("n_batches: needed to split one Rollouts into batches")
        whole = rollouts
        batches = rollouts.split(check_int("n_batches", n_batches, low=2))
    else:
        batches = list(rollouts)
        if len(batches) < 2 or len({len(b) for b in batches}) != 1:
            raise ValueError("rollouts: need at least two batches of equal size")
        n_batches = len(batches)
        if whole is not None and (whole.batch_size != n_batches * len(batches[0])
                                  or whole.horizon != batches[0].horizon):
            raise ValueError(f"whole: expected the {n_batches} batches concatenated "
                             f"({n_batches * len(batches[0])} rows), got {whole.batch_size} rows")
    credits = [estimator(b).token for b in batches]
    if whole is not None:
        # one call over every row instead of one per batch: each row's terms are summed alone and
        # in the same order, so the result is the same (tested); it is the slider's hot loop
        per_traj = policy.trajectory_gradients(whole, torch.cat(credits))
    else:
        per_traj = torch.cat([policy.trajectory_gradients(b, c) for b, c in zip(batches, credits)])
    G = per_traj.reshape(n_batches, -1, per_traj[0].numel()).mean(1)
    mean = G.mean(0)
    var = float(((G - mean) ** 2).sum(1).mean())
    msq = float(mean @ mean)
    exact = exact_grad.reshape(-1).to(G.dtype)
    cos_each = (G @ exact) / (G.norm(dim=1) * exact.norm()).clamp(min=1e-300)
    return {
        "cosine": float(cos_each.mean()),
        "cosine_of_mean": cosine(mean, exact),
        "variance": var,
        "relative_variance": var / msq if msq > 0 else float("inf"),
        "mean_norm": msq ** 0.5,
        "exact_norm": float(exact.norm()),
    }


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
