"""How a policy loss turns per-token terms into one number, and what that does to credit.

An estimator writes an advantage on every token; the loss then sums the tokens' terms with
weights of its own, and the gradient each token receives is its advantage times that weight.
Two responses with the same advantage get different pushes when one is longer: a weight is
credit assignment the estimator never sees. The rules the engines offer (verl's
``loss_agg_mode``; TRL's ``loss_type`` normalisers, which are the same rules under other names):

* ``token-mean``: every generated token of the batch weighs 1 / N (N tokens in the batch). A long
  response counts more in total. TRL's ``bnpo``, ``dapo``, ``cispo`` and ``vespo``; the lab's ``ppo_clip``.
* ``token-sum``: every token weighs 1. verl's, for losses summed over data-parallel ranks.
* ``seq-mean-token-sum``: 1 / B' (B' responses with a generated token). The plain policy
  gradient's sequence sum, batch mean; TRL's ``luspo``.
* ``seq-mean-token-mean``: 1 / (B' L_b) (L_b tokens in response b). Every response counts alike
  whatever its length, so each token of a long one counts less: GRPO's paper; TRL's ``grpo`` and ``sapo``.
* ``seq-mean-token-sum-norm``: 1 / (B' C) with a constant C (default: the batch's width T). Dr.
  GRPO's fix of the length bias; TRL's ``dr_grpo`` (C = max_completion_length).

``aggregate`` computes the loss, ``token_weights`` the weight of every token (what
``aggregate`` multiplies each term by), and ``effective_credit`` the advantage times that weight:
the per-token credit that reaches the gradient (at ratio 1, before any clipping).
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_number, check_shape, selection_mask

__all__ = ["AGGREGATIONS", "TRL_LOSS_TYPES", "check_aggregation", "aggregate", "token_weights", "effective_credit"]

AGGREGATIONS = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")

#: TRL's ``loss_type`` -> the aggregation it normalises with (TRL 1.16 ``GRPOTrainer``; its
#: ``dr_grpo`` divides by max_completion_length, pass it as ``scale_factor``). ``cispo``, ``sapo``,
#: ``luspo`` and ``vespo`` also name a per-token rule: TRL's ``luspo`` is PPO-clip summed over each
#: sequence's tokens and averaged over sequences (with a sequence-level ratio), ``vespo`` a
#: variance-shaped weight the lab does not compute; here they give only their normaliser.
#: TRL's sequence means divide by every row of the batch, these rules by the rows with a generated
#: token: the same whenever no completion is empty (TRL's never is: it ends with a token).
TRL_LOSS_TYPES = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean",
                  "dr_grpo": "seq-mean-token-sum-norm", "luspo": "seq-mean-token-sum", "cispo": "token-mean",
                  "sapo": "seq-mean-token-mean", "vespo": "token-mean"}


def check_aggregation(name: str, mode) -> str:
    """``mode`` as one of :data:`AGGREGATIONS` (a TRL ``loss_type`` is translated); a ValueError
    naming ``name`` otherwise."""
    resolved = TRL_LOSS_TYPES.get(mode, mode) if isinstance(mode, str) else mode
    if resolved not in AGGREGATIONS:
        raise ValueError(f"{name}: expected one of {AGGREGATIONS} or a TRL loss_type {tuple(TRL_LOSS_TYPES)}, "
                         f"got {mode!r}")
    return resolved


def _mask(name: str, mask, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    m = as_tensor(name, mask)
    if m.dim() != 2:
        raise ValueError(f"{name}: expected shape (B, T), got {tuple(m.shape)}")
    if shape is not None:
        check_shape(name, m, shape)
    return selection_mask(name, m)


def token_weights(mask, mode: str = "token-mean", *, scale_factor: float | None = None,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The weight ``aggregate`` gives every position, (B, T), 0 off ``mask``.

    ``mode``: one of :data:`AGGREGATIONS` (or a TRL ``loss_type`` of :data:`TRL_LOSS_TYPES`);
    ``scale_factor``: C of ``seq-mean-token-sum-norm`` (default: the batch's width T). A batch
    with no generated token gets all zeros.
    """
    mode = check_aggregation("mode", mode)
    m = _mask("mask", mask)
    if scale_factor is not None:
        scale_factor = check_number("scale_factor", scale_factor, low=0.0, low_open=True)
        if mode != "seq-mean-token-sum-norm":
            raise ValueError(f"scale_factor: only seq-mean-token-sum-norm takes one, not {mode!r}")
    md = m.to(dtype)
    lengths = md.sum(1, keepdim=True)
    rows = float((lengths > 0).sum())
    if mode == "token-sum":
        w = md
    elif mode == "token-mean":
        w = md / max(float(lengths.sum()), 1.0)
    elif mode == "seq-mean-token-sum":
        w = md / max(rows, 1.0)
    elif mode == "seq-mean-token-mean":
        w = md / lengths.clamp(min=1) / max(rows, 1.0)
    else:
        w = md / max(rows, 1.0) / (scale_factor if scale_factor is not None else m.shape[1])
    return w


def aggregate(per_token, mask, mode: str = "token-mean", *, scale_factor: float | None = None) -> torch.Tensor:
    """The loss: ``per_token`` (B, T) terms summed with ``token_weights(mask, mode)``, a scalar
    differentiable in ``per_token``. Rows without a generated token contribute nothing (and do
    not count as responses)."""
    x = as_tensor("per_token", per_token)
    if x.dim() != 2:
        raise ValueError(f"per_token: expected shape (B, T), got {tuple(x.shape)}")
    m = _mask("mask", mask, tuple(x.shape))
    w = token_weights(m, mode, scale_factor=scale_factor, dtype=x.dtype if x.is_floating_point() else torch.float64)
    return (torch.where(m, x, torch.zeros((), dtype=x.dtype)) * w).sum()


def effective_credit(advantages, mask, mode: str = "token-mean", *, scale_factor: float | None = None) -> torch.Tensor:
    """The credit that reaches the gradient: ``advantages`` (B, T) times each position's
    aggregation weight, 0 off ``mask`` (the policy-gradient coefficient of log pi at ratio 1,
    before clipping). Multiplied by the batch's token count N it reads on the advantages' scale
    under ``token-mean``."""
    adv = as_tensor("advantages", advantages)
    if adv.dim() != 2:
        raise ValueError(f"advantages: expected shape (B, T), got {tuple(adv.shape)}")
    m = _mask("mask", mask, tuple(adv.shape))
    return adv.to(torch.float64) * token_weights(m, mode, scale_factor=scale_factor)
