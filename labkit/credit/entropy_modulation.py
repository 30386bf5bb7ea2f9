"""Entropy-modulated credit: rescale or filter an outcome advantage by the policy's own uncertainty.

Three agentic methods published after the survey reuse the sampling policy's entropy at every
turn (CARL's ``turn_entropy``) without any external supervision:

* EMPG scales each turn's outcome advantage by how confident the policy was there, and adds a
  bonus for turns that lead to a confident next turn;
* AEM scales each response's advantage by its relative surprisal, the quantity that decides
  whether the update raises or lowers the policy's entropy;
* T2PO drops the credit of turns after which the policy's uncertainty did not fall (turns that
  made no exploratory headway), so fewer updates go to uninformative actions.
"""
from __future__ import annotations

from typing import Any

import torch

from labkit.core.checks import check_finite, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.credit.entropy import _base_estimator, turn_entropy
from labkit.credit.registry import register

__all__ = ["empg", "aem", "t2po", "turn_surprisal", "next_turn"]


def next_turn(values: torch.Tensor, present: torch.Tensor, fill: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Each turn's successor in the same trajectory: (B, N) values shifted one turn left, and
    whether a next turn exists; ``fill`` where it does not (the trajectory's last turn)."""
    nxt = torch.full_like(values, fill)
    has = torch.zeros_like(present)
    if values.shape[1] > 1:
        has[:, :-1] = present[:, :-1] & present[:, 1:]
        nxt[:, :-1] = torch.where(has[:, :-1], values[:, 1:], torch.full_like(values[:, 1:], fill))
    return nxt, has


def turn_surprisal(rollouts: Rollouts, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean surprisal -log pi(a | s) of the sampled tokens over each turn's positions, and the
    presence mask, (B, N)."""
    if rollouts.logprobs is None:
        raise ValueError(f"logprobs: {method} reads the sampled response's log-probability, but these rollouts "
                         "carry none; sample with a policy that records log-probabilities")
    lp = torch.where(rollouts.mask, rollouts.logprobs, torch.zeros((), dtype=rollouts.logprobs.dtype))
    check_finite("logprobs", lp)
    return rollouts.view(-lp, "turn", "mean")


def _base_turn_credit(rollouts: Rollouts, base: str, base_kwargs: dict[str, Any] | None, method: str):
    """The base estimator's credit, its per-turn mean (B, N), and whether it is constant in every turn."""
    credit = _base_estimator(base, base_kwargs, method)(rollouts, **(base_kwargs or {}))
    lo, _ = rollouts.view(credit.token, "turn", "min")
    hi, _ = rollouts.view(credit.token, "turn", "max")
    mean, _ = rollouts.view(credit.token, "turn", "mean")
    return credit, mean.to(torch.float64), bool(torch.equal(lo, hi))


def _finish(rollouts: Rollouts, method: str, base_credit: Credit, turn_constant: bool, turn_values: torch.Tensor,
            token_values: torch.Tensor, **info: Any) -> Credit:
    """Turn-level credit when the base credit was constant within every turn, else token level."""
    if turn_constant:
        return Credit.from_level(rollouts, turn_values, "turn", method, cost=base_credit.cost, **info)
    return Credit.from_tokens(rollouts, token_values, method, cost=base_credit.cost, **info)


# --------------------------------------------------------------------------- EMPG
@register("empg", level="turn", needs=("entropies",), status="implemented", paper="2509.09265",
          equation=r"A_{i,k} = g(\tilde H_{i,k}) A_i + \zeta f(\tilde H_{i,k+1}) - \overline{(\cdot)},\quad "
                   r"g(\tilde H) = \frac{e^{-k_g \tilde H}}{\operatorname{mean}_{\text{batch}} e^{-k_g \tilde H}},\ "
                   r"f(\tilde H) = e^{-k_f \tilde H}",
          symbols="H_{i,k}: turn k's mean policy entropy; H~: H min-max normalised over all turns of the batch; "
                  "A_i: base outcome advantage (grpo); k_g = k_f = 1, zeta = 0.1; the bonus only where turn k+1 "
                  "exists; the last term subtracts the batch mean over turns")
def empg(rollouts: Rollouts, *, k_g: float = 1.0, k_f: float = 1.0, zeta: float = 0.1, eps: float = 1e-8,
         base: str = "grpo", base_kwargs: dict[str, Any] | None = None) -> Credit:
    """EMPG, entropy-modulated policy gradients (Wang et al. 2025, arXiv:2509.09265): confidence-scaled outcome credit.

    Inputs:
        rollouts: ``entropies`` (the sampling policy's, per position), ``turn_ids``, and what the
        base estimator reads (``grpo``: ``rewards``, ``group_ids``).

    Formula:
        H_{i,k}   = mean over turn k's positions of the policy entropy (the step entropy)
        H~_{i,k}  = (H_{i,k} - min H) / (max H - min H + eps)     min, max over all turns of the batch
        g_{i,k}   = exp(-k_g H~_{i,k}) / (mean over all turns of exp(-k_g H~) + eps)    (mean g = 1)
        f_{i,k}   = exp(-k_f H~_{i,k})
        A'_{i,k}  = g_{i,k} A_{i,k} + zeta f_{i,k+1}       (the bonus only if turn k+1 exists)
        A_{i,k}   = A'_{i,k} - mean over all turns of the batch of A'

        A_{i,k} is the base credit of turn k (default ``grpo``: the trajectory's outcome
        advantage). Confident turns (low entropy) get a larger share of the advantage and
        uncertain ones a smaller one, with the batch's mean scale kept at 1; a turn that leads to
        a confident next turn gets the future-clarity bonus zeta f. The sign of the advantage is
        kept, so a confident error is punished harder than an uncertain one.

    Defaults:
        k_g = 1, k_f = 1, zeta = 0.1, eps = 1e-8 (the authors' published pseudocode), base = "grpo",
        base_kwargs = None.

    Degenerate input:
        all turns equally uncertain (or one turn in the batch): H~ = 0, g = 1 and f = 1, so every
        turn but a trajectory's last gets the bonus zeta before the mean is removed. A
        trajectory with one turn gets no bonus. zeta = 0 and k_g = 0 give the base credit minus
        its batch mean over turns. Rollouts without ``entropies`` are refused, and so is
        ``base="empg"``.

    Deviations from the reference:
        none in the formula (the authors' pseudocode on the project page: step entropy = mean
        token entropy of the step, batch min-max normalisation, g normalised by its batch mean,
        the bonus from the next step of the same trajectory, and a final subtraction of the mean
        step advantage). The reference modulates a GRPO/DAPO advantage; here the base is any
        registered estimator. When the base credit is not constant within a turn, g and the
        bonus are applied to every token of the turn and the mean removed is the mean over
        turns of each turn's mean credit.

    Returns:
        credit at level "turn" when the base credit is constant within every turn (the default),
        else at level "token"; ``info``: ``turn_entropy`` and ``normalized_entropy`` (B, N),
        ``scale`` (g) and ``bonus`` (zeta f of the next turn, 0 where none) (B, N), ``mean_removed``
        (float), ``base`` (name) and ``base_info``.

    Cost:
        the base estimator's cost, passed through unchanged; the entropies are read from the
        sampled batch.
    """
    k_g = check_number("k_g", k_g, low=0.0)
    k_f = check_number("k_f", k_f, low=0.0)
    zeta = check_number("zeta", zeta, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    H, present = turn_entropy(rollouts, "empg")
    H = H.to(torch.float64)
    check_finite("entropies", torch.where(present, H, torch.zeros((), dtype=H.dtype)))
    base_credit, A, turn_constant = _base_turn_credit(rollouts, base, base_kwargs, "empg")

    h = H[present]
    lo, hi = h.min(), h.max()
    Hn = torch.where(present, (H - lo) / (hi - lo + eps), torch.zeros((), dtype=H.dtype))
    g_raw = torch.exp(-k_g * Hn)
    g = torch.where(present, g_raw / (g_raw[present].mean() + eps), torch.zeros((), dtype=H.dtype))
    f_next, has_next = next_turn(torch.exp(-k_f * Hn), present)
    bonus = torch.where(has_next, zeta * f_next, torch.zeros((), dtype=H.dtype))

    modulated = torch.where(present, g * A + bonus, torch.zeros((), dtype=H.dtype))
    mean = modulated[present].mean()
    turn_values = torch.where(present, modulated - mean, torch.zeros((), dtype=H.dtype))
    token = base_credit.token.to(torch.float64) * rollouts.broadcast(g, "turn") \
        + rollouts.broadcast(bonus, "turn") - mean
    return _finish(rollouts, "empg", base_credit, turn_constant, turn_values, token, turn_entropy=H,
                   normalized_entropy=Hn, scale=g, bonus=bonus, mean_removed=float(mean), base=base,
                   base_info=base_credit.info)


# --------------------------------------------------------------------------- AEM
@register("aem", level="turn", needs=("entropies", "logprobs"), status="adaptation", paper="2605.00425",
          replaces="the paper's response-level uncertainty proxy and modulation function (not readable here): "
                   "labkit's reading, the response's relative surprisal -log pi(y|s) - H(pi(.|s)) through a "
                   "bounded tanh scale",
          equation=r"A_{i,k} = \left(1 + \beta \tanh\frac{u_{i,k} - H_{i,k}}{\tau}\right) A_i",
          symbols="u_{i,k}: turn k's mean surprisal -log pi of the sampled tokens; H_{i,k}: turn k's mean policy "
                  "entropy (the expected surprisal); A_i: base outcome advantage (grpo); beta = 0.5, tau = 1 nat")
def aem(rollouts: Rollouts, *, beta: float = 0.5, tau: float = 1.0, base: str = "grpo",
        base_kwargs: dict[str, Any] | None = None) -> Credit:
    """AEM, adaptive entropy modulation (Zhao et al. 2026, arXiv:2605.00425): credit scaled by relative surprisal.

    Inputs:
        rollouts: ``logprobs`` and ``entropies`` (the sampling policy's, per position),
        ``turn_ids``, and what the base estimator reads (``grpo``: ``rewards``, ``group_ids``).

    Formula:
        u_{i,k}  = mean over turn k's positions of -log pi(y_t | s_t)   (response surprisal)
        H_{i,k}  = mean over turn k's positions of the policy entropy   (its expectation)
        r_{i,k}  = u_{i,k} - H_{i,k}                                    (relative surprisal)
        w_{i,k}  = 1 + beta tanh(r_{i,k} / tau)                         (in [1 - beta, 1 + beta])
        A'_{i,k} = w_{i,k} A_{i,k}

        One response is one turn (the unit the environment reacts to). Under a natural-gradient
        step the entropy at a state moves by about -Cov(log pi, A), i.e. each sampled response
        pushes it by A r: a positive advantage on a surprising response (r > 0) raises the
        entropy, one on a confident response lowers it, and the reverse for a negative
        advantage. w makes the surprising responses count more and the expected ones less, so
        while successes are rare and unexpected the update explores (entropy up), and once they
        are the expected behaviour the surprising failures dominate and it exploits (entropy
        down): the balance of positive and negative samples moves the update from one to the
        other without a schedule. ``info["entropy_drift"]`` = A r, each response's push.

    Defaults:
        beta = 0.5, tau = 1 nat (labkit's; the paper's values are not known here), base = "grpo",
        base_kwargs = None.

    Degenerate input:
        beta = 0 returns the base credit; a response exactly as surprising as expected (r = 0)
        keeps its base credit; zero base credit stays 0. Rollouts without ``entropies`` or
        ``logprobs`` are refused, and so is ``base="aem"``.

    Deviations from the reference:
        follows the paper's summary (abstract) only: response-level rather than token-level
        entropy analysis, entropy drift governed by the product of the advantage and the
        relative response surprisal, and a response-level proxy that rescales advantages. The
        proxy (r = surprisal minus the policy's entropy, each averaged over the response's
        tokens), the bounded scale w = 1 + beta tanh(r / tau) and its constants are labkit's
        reading, not the paper's equations (not readable here; no public code was found).

    Returns:
        credit at level "turn" when the base credit is constant within every turn (the default),
        else at level "token"; ``info``: ``surprisal``, ``turn_entropy``, ``relative_surprisal``,
        ``scale`` (w) and ``entropy_drift`` (A r) (B, N), ``base`` (name) and ``base_info``.

    Cost:
        the base estimator's cost, passed through unchanged; the log-probabilities and
        entropies are read from the sampled batch.
    """
    beta = check_number("beta", beta, low=0.0, high=1.0)
    tau = check_number("tau", tau, low=0.0, low_open=True)
    H, present = turn_entropy(rollouts, "aem")
    u, _ = turn_surprisal(rollouts, "aem")
    H, u = H.to(torch.float64), u.to(torch.float64)
    check_finite("entropies", torch.where(present, H, torch.zeros((), dtype=H.dtype)))
    base_credit, A, turn_constant = _base_turn_credit(rollouts, base, base_kwargs, "aem")

    zero = torch.zeros((), dtype=H.dtype)
    r = torch.where(present, u - H, zero)
    w = torch.where(present, 1.0 + beta * torch.tanh(r / tau), zero)
    turn_values = torch.where(present, w * A, zero)
    token = base_credit.token.to(torch.float64) * rollouts.broadcast(w, "turn")
    return _finish(rollouts, "aem", base_credit, turn_constant, turn_values, token, surprisal=u, turn_entropy=H,
                   relative_surprisal=r, scale=w, entropy_drift=torch.where(present, A * r, zero), base=base,
                   base_info=base_credit.info)


# --------------------------------------------------------------------------- T2PO
@register("t2po", level="turn", needs=("entropies",), status="adaptation", paper="2605.02178",
          replaces="turn-level resampling of the turns that made no exploratory headway (and the token-level "
                   "thinking cut): on a fixed batch those turns get zero credit; uncertainty is the policy's mean "
                   "entropy at the turn, not the paper's fused entropy-confidence signal",
          equation=r"A_{i,k} = \mathbf{1}\left[H_{i,k} - H_{i,k+1} > \delta \ \lor\ k = n_i\right] A_i",
          symbols="H_{i,k}: turn k's mean policy entropy (the uncertainty before acting); n_i: the trajectory's last "
                  "turn; delta = min_drop = 0 nats; A_i: base outcome advantage (grpo)")
def t2po(rollouts: Rollouts, *, min_drop: float = 0.0, base: str = "grpo",
         base_kwargs: dict[str, Any] | None = None) -> Credit:
    """T2PO, token- and turn-level policy optimisation (arXiv:2605.02178): no credit for turns without uncertainty progress.

    Inputs:
        rollouts: ``entropies`` (the sampling policy's, per position), ``turn_ids``, and what the
        base estimator reads (``grpo``: ``rewards``, ``group_ids``).

    Formula:
        H_{i,k}  = mean over turn k's positions of the policy entropy (uncertainty when acting)
        p_{i,k}  = H_{i,k} - H_{i,k+1}      the drop in uncertainty the turn brought about
        keep     = p_{i,k} > min_drop, or k is the trajectory's last turn
        A'_{i,k} = A_{i,k} if kept, else 0

        A turn after which the policy is no less unsure than before made no exploratory
        headway: T2PO would discard and resample it; on a fixed batch its tokens get no
        gradient. The last turn ends the episode (its consequence is the outcome itself), so it
        always keeps its credit.

    Defaults:
        min_drop = 0 nats (uncertainty must fall at all), base = "grpo", base_kwargs = None.

    Degenerate input:
        one-turn trajectories keep everything; all-equal entropies drop every turn but the
        last; min_drop below minus the largest possible drop keeps everything (the base
        credit). Rollouts without ``entropies`` are refused, and so is ``base="t2po"``.

    Deviations from the reference:
        an adaptation of the credit effect only. T2PO controls exploration while sampling: it
        cuts a thought once the marginal change of a self-calibrated uncertainty (entropy fused
        with confidence) falls below a min_drop, and it resamples turns whose exploration
        progress is negligible. labkit keeps a fixed batch: there are no thought tokens to cut
        (one ToolWorld turn is one action) and no resampling, so the low-progress turns are
        dropped from the update instead, and the uncertainty is the policy's entropy alone.
        The min_drop's value is labkit's (the paper's is not known here; no public code was read).

    Returns:
        credit at level "turn" when the base credit is constant within every turn (the default),
        else at level "token"; ``info``: ``kept`` (B, N) bool, ``progress`` (B, N) (the last turn's
        is NaN), ``turn_entropy`` (B, N), ``share_updated`` (kept / all turns), ``base`` (name) and
        ``base_info``.

    Cost:
        the base estimator's cost, passed through unchanged (no resampling is done); the
        entropies are read from the sampled batch.
    """
    min_drop = check_number("min_drop", min_drop)
    H, present = turn_entropy(rollouts, "t2po")
    H = H.to(torch.float64)
    check_finite("entropies", torch.where(present, H, torch.zeros((), dtype=H.dtype)))
    base_credit, A, turn_constant = _base_turn_credit(rollouts, base, base_kwargs, "t2po")

    H_next, has_next = next_turn(H, present)
    progress = torch.where(has_next, H - H_next, torch.full_like(H, float("nan")))
    kept = present & (~has_next | (progress > min_drop))
    zero = torch.zeros((), dtype=H.dtype)
    turn_values = torch.where(kept, A, zero)
    token = torch.where(rollouts.broadcast(kept.to(torch.long), "turn").bool(), base_credit.token.to(torch.float64),
                        zero)
    n = int(present.sum())
    return _finish(rollouts, "t2po", base_credit, turn_constant, turn_values, token, kept=kept, progress=progress,
                   turn_entropy=H, share_updated=int(kept.sum()) / max(n, 1), base=base,
                   base_info=base_credit.info)
