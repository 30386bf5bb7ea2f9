"""Does credit produce the right update? Credit turned into a policy-gradient estimate, batch by
batch, against the exact gradient: cosine, and the estimate's variance across batches, of the
whole parameter gradient or of what it does to chosen states' logits (``logit_view``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from labkit.core.checks import as_tensor, check_integer_tensor, check_int
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.scoring.agreement import cosine


def gradient_study(policy, rollouts: Rollouts | Sequence[Rollouts], estimator: Callable[[Rollouts], Credit],
                   exact_grad: torch.Tensor, *, n_batches: int | None = None,
                   whole: Rollouts | None = None,
                   view: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
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

    ``view`` (optional): a linear map applied to every batch estimate (stacked, shaped
    (n_batches, *parameter shape)) and to ``exact_grad`` before the statistics, so they describe
    what a step does rather than the step itself, e.g. ``logit_view(policy, states)``: how a step
    along g moves those states' logits. Linear, so the view of the mean is the mean of the views.
    """
    if view is not None and not callable(view):
        raise TypeError(f"view: expected a function of a gradient, got {type(view).__name__}")
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
    exact = exact_grad
    if view is not None:
        G = view(G.reshape(n_batches, *per_traj.shape[1:]))
        exact = view(exact_grad)
        if not isinstance(G, torch.Tensor) or not isinstance(exact, torch.Tensor) \
                or G.dim() < 1 or G.shape[0] != n_batches or G.shape[1:] != exact.shape:
            raise ValueError("view: must map (n_batches, *g.shape) estimates to (n_batches, *view(g).shape) "
                             "and the exact gradient to view(g)'s shape")
        G = G.reshape(n_batches, -1)
    mean = G.mean(0)
    var = float(((G - mean) ** 2).sum(1).mean())
    msq = float(mean @ mean)
    exact = exact.reshape(-1).to(G.dtype)
    cos_each = (G @ exact) / (G.norm(dim=1) * exact.norm()).clamp(min=1e-300)
    return {
        "cosine": float(cos_each.mean()),
        "cosine_of_mean": cosine(mean, exact),
        "variance": var,
        "relative_variance": var / msq if msq > 0 else float("inf"),
        "mean_norm": msq ** 0.5,
        "exact_norm": float(exact.norm()),
    }


def logit_view(policy, states=None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A ``view`` for ``gradient_study``: a parameter gradient (with any leading batch dimensions)
    -> how a step along it moves the logits of ``states`` (a list of state indices; all states if
    None), (..., len(states), n_actions), by the policy's ``logit_change``. The same definition for
    every policy: the table's own rows for a tabular policy, features @ g.T for shared weights."""
    if not callable(getattr(policy, "logit_change", None)) or not hasattr(policy, "n_states"):
        raise TypeError(f"policy: {type(policy).__name__} has no logit_change (how a step moves its logits)")
    if states is None:
        return policy.logit_change
    idx = as_tensor("states", states)
    if idx.dim() != 1 or idx.numel() == 0:
        raise ValueError(f"states: expected a non-empty list of state indices, got shape {tuple(idx.shape)}")
    idx = check_integer_tensor("states", idx)
    n_states = int(policy.n_states)
    if bool(((idx < 0) | (idx >= n_states)).any()):
        raise ValueError(f"states: indices must lie in [0, {n_states - 1}], got {idx.tolist()}")

    def view(gradient: torch.Tensor) -> torch.Tensor:
        return policy.logit_change(gradient)[..., idx, :]

    return view
