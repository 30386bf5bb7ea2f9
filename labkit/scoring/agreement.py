"""Does credit point at the right positions? Per-position credit against the exact advantage
A(s_t, a_t): error, rank correlation, sign agreement, recall of the positions that truly decide
the outcome; and the two correlations every comparison uses (Pearson, cosine).

Estimators differ in scale (GRPO divides by a std), so the headline numbers here are
scale-free (correlation, sign, recall); the raw error is reported too but only compares
estimators that share a scale.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape, selection_mask
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts, check_rollouts


def _mask(mask) -> torch.Tensor:
    """A boolean (or 0/1) (B, T) selection of positions that selects at least one."""
    mask = as_tensor("mask", mask)
    if mask.dim() != 2:
        raise ValueError(f"mask: expected shape (B, T), got {tuple(mask.shape)}")
    mask = selection_mask("mask", mask)
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
