"""Entropy-gated credit: spend the gradient only where the policy was unsure.

CARL's premise is that few decisions in a multi-turn episode decide the outcome, and that the
policy's own entropy at a decision is a cheap proxy for how critical it is: where the policy is
confident the action is routine, where it hesitates the outcome is still open.
"""
from __future__ import annotations

from typing import Any

import torch

from labkit.core.checks import as_tensor, check_finite, check_number, check_shape
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import top_fraction as select_top
from labkit.credit.registry import get_estimator, register


def turn_entropy(rollouts: Rollouts, method: str = "carl") -> tuple[torch.Tensor, torch.Tensor]:
    """Mean sampling-policy entropy over each turn's positions, and the presence mask, (B, N)."""
    if rollouts.entropies is None:
        raise ValueError(f"entropies: {method} ranks turns by the policy's entropy, but these rollouts "
                         "carry none; sample with a policy that records entropies")
    ent = torch.where(rollouts.mask, rollouts.entropies, torch.zeros((), dtype=rollouts.entropies.dtype))
    return rollouts.view(ent, "turn", "mean")


def _base_estimator(base: str, base_kwargs: dict[str, Any] | None, method: str):
    """The registered estimator ``base`` that ``method`` builds on, with errors naming ``base`` /
    ``base_kwargs`` (one rule for CARL and HICRA, which both reshape a base estimator's credit)."""
    if not isinstance(base, str):
        raise TypeError(f"base: expected an estimator name, got {type(base).__name__}")
    if base == method:
        raise ValueError(f"base: {method} cannot use itself as its base estimator")
    if base_kwargs is not None and not isinstance(base_kwargs, dict):
        raise TypeError(f"base_kwargs: expected a dict of options for {base!r}, got {type(base_kwargs).__name__}")
    try:
        return get_estimator(base)
    except ValueError as err:
        raise ValueError(f"base: {str(err).removeprefix('name: ')}") from None


@register("carl", level="turn", needs=("entropies",), status="implemented", paper="2512.04949",
          equation=r"A_{i,t} = \mathbf{1}\left[k(t) \in \operatorname{top}_{\lceil \rho n \rceil}(H)\right] "
                   r"A^{\text{base}}_{i,t}",
          symbols="k(t): turn of token t; H: turn's mean policy entropy, ranked over all n turns of the batch; rho "
                  "= top_fraction = 0.3; base = grpo")
def carl(rollouts: Rollouts, *, base: str = "grpo", top_fraction: float = 0.3,
         base_kwargs: dict[str, Any] | None = None) -> Credit:
    """CARL, critical-action-focused RL (Shen et al. 2025, arXiv:2512.04949): credit on high-entropy turns.

    Inputs:
        rollouts: ``entropies`` (the sampling policy's, per position), ``turn_ids``, and what the
        base estimator reads (``grpo``: ``rewards``, ``group_ids``).

    Formula:
        H_{i,k}  = mean over turn k's positions of the policy entropy
        keep     = the ceil(top_fraction * n) turns with the largest H among all n turns in the batch
        A_{i,t}  = A^base_{i,t} if t lies in a kept turn, else 0

        The base credit is any registered estimator (default ``grpo``; ``base_kwargs`` are passed
        to it). Zero credit means the turn's tokens get no gradient: CARL reports ~72 % fewer
        updates at equal performance. Ties in entropy are broken by position (row-major:
        trajectory, then turn), so exactly ceil(top_fraction * n) turns are kept.
        ``top_fraction = 1`` returns the base credit.

    Defaults:
        base = "grpo", top_fraction = 0.3, base_kwargs = None.

    Degenerate input:
        a batch with one turn keeps it; all-equal entropies keep the first turns (row-major).
        Groups of one, zero variance etc. are whatever the base estimator does with them.
        Rollouts without ``entropies`` are refused, and so is ``base="carl"``.

    Deviations from the reference:
        credit part only. Deliberate simplifications: the paper also re-samples (branches)
        rollouts from high-entropy states and gives those actions their own action-level
        rewards; labkit keeps only the selective-update part, on a fixed batch, and selects a
        fixed fraction rather than an entropy threshold. No public code was found, so
        conventions are labkit's own.

    Returns:
        credit at level "turn" when the base credit is constant within every turn (episode- and
        turn-level bases, the default), else at level "token"; ``info``: ``kept`` (B, N) bool,
        ``turn_entropy`` (B, N), ``share_updated`` (kept / all turns), ``entropy_threshold``
        (entropy of the least uncertain kept turn), ``base`` (name) and ``base_info``.

    Cost:
        the base estimator's cost, passed through unchanged; the entropies are read from the
        sampled batch.
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    base_fn = _base_estimator(base, base_kwargs, "carl")
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


# --------------------------------------------------------------------------- HICRA
@register("hicra", level="token", inputs={"planning_mask": "planning_mask"}, status="implemented",
          paper="2509.03646",
          equation=r"A'_t = A_t + \alpha \, |A_t| \, \mathbf{1}[t \in \mathcal{P}]",
          symbols="A_t: base credit (grpo); P: planning tokens (planning_mask); alpha = 0.2")
def hicra(rollouts: Rollouts, *, planning_mask, alpha: float = 0.2, base: str = "grpo",
          base_kwargs: dict[str, Any] | None = None, base_credit=None) -> Credit:
    """HICRA, hierarchy-aware credit (Wang et al. 2025, arXiv:2509.03646): base credit amplified on planning tokens.

    Inputs:
        rollouts: ``mask``, and what the base estimator reads (``grpo``: ``rewards``,
        ``group_ids``).
        ``planning_mask`` (planning_mask): a (B, T) bool tensor marking the planning tokens (for
        the arithmetic task: ``labkit.envs.arithmetic.labels.planning_mask``, operands and the
        answer mark).

    Formula:
        A'_t = A_t + alpha * |A_t|    if token t is a planning token
        A'_t = A_t                    otherwise

        A_t is a base estimator's token credit (default ``grpo``). On a planning token a
        positive credit grows by the factor (1 + alpha) and a negative one shrinks by
        (1 - alpha): the update pushes strategic choices up harder and punishes them less
        than the procedural tokens of the same trajectory.

    Defaults:
        alpha = 0.2, base = "grpo" (the paper's setting), base_kwargs = None. ``base_credit``
        (a Credit or a (B, T) tensor) replaces the base estimator when given, e.g. VinePPO
        step advantages.

    Degenerate input:
        no planning token (an all-False mask) returns the base credit; all tokens planning
        adds alpha |A| everywhere; alpha = 0 returns the base credit. Zero base credit (a
        group of one failing under GRPO, an all-equal group) stays 0. Planning flags off the
        mask are ignored; a mask that is not bool is refused.

    Deviations from the reference:
        HICRA finds planning tokens with "strategic grams" (n-grams of planning phrases mined
        from reasoning traces); the arithmetic task knows them by construction, so the mask is
        exact rather than mined. Credit part only: the paper's semantic-entropy diagnostics
        are not reproduced.

    Returns:
        credit at level "token"; ``info``: ``planning_mask`` (on generated tokens),
        ``planning_share`` (planning / generated tokens), ``bonus`` (B, T) the added alpha|A_t|,
        ``alpha``, ``base`` (name) and ``base_info``.

    Cost:
        the base estimator's cost (or ``base_credit``'s), passed through unchanged.
    """
    alpha = check_number("alpha", alpha, low=0.0)
    mask = as_tensor("planning_mask", planning_mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"planning_mask: expected a bool tensor, got {mask.dtype}")
    check_shape("planning_mask", mask, (rollouts.batch_size, rollouts.horizon))
    mask = mask & rollouts.mask
    if base_credit is not None:
        if isinstance(base_credit, Credit):
            A, cost, base_info, base = base_credit.token, base_credit.cost, base_credit.info, base_credit.method
        else:
            A = as_tensor("base_credit", base_credit)
            check_shape("base_credit", A, (rollouts.batch_size, rollouts.horizon))
            A, cost, base_info, base = A, Cost(), {}, "given"
        A = A.to(torch.float64) if not A.is_floating_point() else A
        check_finite("base_credit", torch.where(rollouts.mask, A, torch.zeros((), dtype=A.dtype)))
    else:
        bc = _base_estimator(base, base_kwargs, "hicra")(rollouts, **(base_kwargs or {}))
        A, cost, base_info = bc.token, bc.cost, bc.info
    A = torch.where(rollouts.mask, A, torch.zeros((), dtype=A.dtype))
    bonus = torch.where(mask, alpha * A.abs(), torch.zeros((), dtype=A.dtype))
    n = int(rollouts.mask.sum())
    return Credit.from_tokens(rollouts, A + bonus, "hicra", cost=cost, planning_mask=mask, bonus=bonus,
                              planning_share=int(mask.sum()) / max(n, 1), alpha=alpha, base=base,
                              base_info=base_info)
