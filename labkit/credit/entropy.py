"""Entropy-gated credit: spend the gradient only where the policy was unsure.

CARL's premise is that few decisions in a multi-turn episode decide the outcome, and that the
policy's own entropy at a decision is a cheap proxy for how critical it is: where the policy is
confident the action is routine, where it hesitates the outcome is still open.
"""
from __future__ import annotations

from typing import Any

import torch

from labkit.core.checks import check_number
from labkit.core.rollouts import Credit, Rollouts
from labkit.core.stats import top_fraction as select_top
from labkit.credit._registry import get_estimator, register


def turn_entropy(rollouts: Rollouts, method: str = "carl") -> tuple[torch.Tensor, torch.Tensor]:
    """Mean sampling-policy entropy over each turn's positions, and the presence mask, (B, N)."""
    if rollouts.entropies is None:
        raise ValueError(f"entropies: {method} ranks turns by the policy's entropy, but these rollouts "
                         "carry none; sample with a policy that records entropies")
    ent = torch.where(rollouts.mask, rollouts.entropies, torch.zeros((), dtype=rollouts.entropies.dtype))
    return rollouts.view(ent, "turn", "mean")


@register("carl")
def carl(rollouts: Rollouts, *, base: str = "grpo", top_fraction: float = 0.3,
         base_kwargs: dict[str, Any] | None = None) -> Credit:
    """CARL, critical-action-focused RL (Shen et al. 2025, arXiv:2512.04949): credit on high-entropy turns.

    Formula:
        H_{i,k}  = mean over turn k's positions of the policy entropy
        keep     = the ceil(top_fraction * n) turns with the largest H among all n turns in the batch
        A_{i,t}  = A^base_{i,t} if t lies in a kept turn, else 0

        The base credit is any registered estimator (default ``grpo``; ``base_kwargs`` are passed
        to it). Zero credit means the turn's tokens get no gradient: CARL reports ~72 % fewer
        updates at equal performance. Ties in entropy are broken by position (row-major:
        trajectory, then turn), so exactly ceil(top_fraction * n) turns are kept.
        ``top_fraction = 1`` returns the base credit. Returns turn-level credit when the base
        credit is constant within every turn (episode- and turn-level bases), else token-level
        credit. ``info``: ``kept`` (B, N) bool, ``turn_entropy`` (B, N), ``share_updated``
        (kept / all turns), ``entropy_threshold`` (entropy of the least uncertain kept turn),
        ``base`` (name) and ``base_info``.

    Defaults:
        base = "grpo", top_fraction = 0.3, base_kwargs = None.

    Degenerate input:
        a batch with one turn keeps it; all-equal entropies keep the first turns (row-major).
        Groups of one, zero variance etc. are whatever the base estimator does with them.
        Rollouts without ``entropies`` raise a ValueError naming ``entropies``; ``base="carl"``
        or an unknown base name raises a ValueError naming ``base``.

    Deviations from the reference:
        credit part only. Deliberate simplifications: the paper also re-samples (branches)
        rollouts from high-entropy states and gives those actions their own action-level
        rewards; labkit keeps only the selective-update part, on a fixed batch, and selects a
        fixed fraction rather than an entropy threshold. No public code was found, so
        conventions are labkit's own.

    Cost:
        the base estimator's cost, passed through unchanged; the entropies are read from the
        sampled batch.
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    if not isinstance(base, str):
        raise TypeError(f"base: expected an estimator name, got {type(base).__name__}")
    if base == "carl":
        raise ValueError("base: carl cannot use itself as its base estimator")
    if base_kwargs is not None and not isinstance(base_kwargs, dict):
        raise TypeError(f"base_kwargs: expected a dict of options for {base!r}, got {type(base_kwargs).__name__}")
    try:
        base_fn = get_estimator(base)
    except ValueError as err:
        raise ValueError(f"base: {str(err).removeprefix('name: ')}") from None
    H, present = turn_entropy(rollouts)
    base_credit = base_fn(rollouts, **(base_kwargs or {}))

    kept = select_top(H, present, top_fraction)
    n, n_keep = int(present.sum()), int(kept.sum())
    threshold = float(H[kept].min()) if n_keep else float("nan")

    token = torch.where(rollouts.broadcast(kept.to(torch.long), "turn").bool(), base_credit.token,
                        torch.zeros((), dtype=base_credit.token.dtype))
    info = dict(kept=kept, turn_entropy=H, share_updated=n_keep / max(n, 1), entropy_threshold=threshold,
                base=base, base_info=base_credit.info)
    lo, _ = rollouts.view(token, "turn", "min")
    hi, _ = rollouts.view(token, "turn", "max")
    if torch.equal(lo, hi):
        return Credit.from_level(rollouts, lo, "turn", "carl", cost=base_credit.cost, **info)
    return Credit.from_tokens(rollouts, token, "carl", cost=base_credit.cost, **info)
