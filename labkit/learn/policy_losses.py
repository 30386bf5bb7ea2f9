"""The policy losses practitioners switch on beyond PPO-clip, as per-token terms.

Each function takes ``policy_loss``'s checked (B, T) inputs (``logp`` differentiable, ``old_logp``
and ``adv`` detached, ``mask`` boolean) and returns ``(per_token, clipped)``: the (B, T) loss terms
that ``labkit.learn.aggregation.aggregate`` turns into one number, and a (B, T) 0/1 tensor of the
positions the rule clipped (or otherwise altered), for ``clip_frac``. The formulas are verl 0.9.1's
(``verl.trainer.ppo.core_algos``), written anew; where labkit differs each docstring says so.
``policy_loss(kind=...)`` in ``labkit.learn.loop`` dispatches to them; ``DEFAULT_AGGREGATION``
holds each kind's default aggregation (verl's default ``loss_agg_mode`` for that loss).

``high_entropy_mask`` is the top-entropy-token rule (arXiv:2506.01939) as TRL computes it.
"""
from __future__ import annotations

import torch

__all__ = ["KINDS", "DEFAULT_AGGREGATION", "dual_clip_terms", "gspo_terms", "cispo_terms", "sapo_terms",
           "clip_cov_terms", "kl_cov_terms", "high_entropy_mask"]

KINDS = ("dual_clip", "gspo", "cispo", "sapo", "clip_cov", "kl_cov")

DEFAULT_AGGREGATION = {"dual_clip": "token-mean", "gspo": "seq-mean-token-mean", "cispo": "token-mean",
                       "sapo": "seq-mean-token-mean", "clip_cov": "token-mean", "kl_cov": "token-mean"}


def _zero_off(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` with 0 off ``mask`` (padding may hold anything; it must not reach a mean)."""
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype))


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return _zero_off(x, mask).sum() / mask.sum().clamp(min=1)


def dual_clip_terms(logp, old_logp, adv, mask, *, clip_eps: float = 0.2, clip_ratio_c: float = 3.0):
    """Dual-clip PPO (arXiv:1912.09729): PPO-clip whose loss for a negative advantage is capped.

    Formula: r = exp(clamp(logp - old_logp, -20, 20)); l = max(-A r, -A clip(r, 1 - eps, 1 + eps));
    where A < 0 the term is min(l, -A c) with c = ``clip_ratio_c``, so a token whose ratio ran far
    above 1 with a negative advantage gets at most the loss (and no gradient) of ratio c.
    Defaults: eps 0.2, c 3.0 (verl's ``clip_ratio_c``; must be > 1); aggregation token-mean.
    Deviations: symmetric clip range (verl allows clip_ratio_low / clip_ratio_high apart).
    Returns ``(per_token, clipped)``; clipped marks positions where the ordinary clip is active.
    """
    ratio = (logp - old_logp).clamp(-20.0, 20.0).exp()
    l1, l2 = -adv * ratio, -adv * ratio.clamp(1 - clip_eps, 1 + clip_eps)
    clip1 = torch.maximum(l1, l2)
    per_token = torch.where(adv < 0, torch.minimum(-adv * clip_ratio_c, clip1), clip1)
    return per_token, (l2 > l1).to(logp.dtype)


def gspo_terms(logp, old_logp, adv, mask, *, clip_eps: float = 0.2):
    """GSPO (arXiv:2507.18071): one importance ratio per sequence, clipped.

    Formula: s_b = exp(mean over b's generated tokens of (logp - old_logp)), the geometric mean of
    the token ratios; each token uses log s_bt = logp - sg(logp) + sg(log s_b) (value s_b, gradient
    that of logp scaled by s_b), clamped at 10 from above; term max(-A s_bt, -A clip(s_bt, 1 - eps,
    1 + eps)). Defaults: eps 0.2 (the paper uses far smaller ranges, e.g. 3e-4 / 4e-4);
    aggregation seq-mean-token-mean (the paper's; verl's function default too).
    Degenerate input: a row without a generated token gets s = 1 and contributes nothing.
    Deviations: symmetric clip range.
    Returns ``(per_token, clipped)``.
    """
    lengths = mask.sum(-1).clamp(min=1).to(logp.dtype)
    seq_log_ratio = _zero_off(logp.detach() - old_logp, mask).sum(-1) / lengths
    log_s = (logp - logp.detach() + seq_log_ratio.unsqueeze(-1)).clamp(max=10.0)
    s = log_s.exp()
    l1, l2 = -adv * s, -adv * s.clamp(1 - clip_eps, 1 + clip_eps)
    return torch.maximum(l1, l2), (l2 > l1).to(logp.dtype)


def cispo_terms(logp, old_logp, adv, mask, *, clip_eps: float = 0.2):
    """CISPO (arXiv:2506.13585): the clipped importance weight, detached, times A log pi.

    Formula: r = exp(clamp(logp - old_logp, -20, 20)); term -sg(clip(r, 1 - eps, 1 + eps)) A logp.
    Every token keeps a gradient (A times the clipped weight), unlike PPO-clip, which zeroes the
    gradient of clipped tokens. Defaults: eps 0.2 (the paper clips only from above, with a large
    upper bound); aggregation token-mean.
    Deviations: symmetric clip range.
    Returns ``(per_token, clipped)``; clipped marks positions whose weight was clipped.
    """
    ratio = (logp.detach() - old_logp).clamp(-20.0, 20.0).exp()
    weight = ratio.clamp(1 - clip_eps, 1 + clip_eps)
    return -weight * adv * logp, (ratio != weight).to(logp.dtype)


def sapo_terms(logp, old_logp, adv, mask, *, tau_pos: float = 1.0, tau_neg: float = 1.05):
    """SAPO (arXiv:2511.20347): a soft, smooth gate on the ratio instead of a hard clip.

    Formula: r = exp(clamp(logp - old_logp, -20, 20)); tau = tau_pos where A > 0, else tau_neg;
    term -A f(r), f(r) = sigmoid(tau (r - 1)) 4 / tau (f(1) = 2 / tau, f'(1) = 1: at ratio 1 the
    gradient is the plain policy gradient's). Defaults: tau_pos 1.0, tau_neg 1.05 (verl's
    ActorConfig); aggregation seq-mean-token-mean.
    Deviations: verl always aggregates SAPO with seq-mean-token-mean, whatever loss_agg_mode says;
    labkit honours an explicit ``aggregation``.
    Returns ``(per_token, clipped)``; nothing is clipped (all zeros).
    """
    ratio = (logp - old_logp).clamp(-20.0, 20.0).exp()
    tau = torch.where(adv > 0, torch.as_tensor(tau_pos, dtype=logp.dtype), torch.as_tensor(tau_neg, dtype=logp.dtype))
    return -torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau) * adv, torch.zeros_like(logp.detach())


def _covariance(logp, adv, mask):
    """Per-token (A - mean A)(logp - mean logp), means over the minibatch's generated tokens, detached."""
    lp = logp.detach()
    return (adv - _masked_mean(adv, mask)) * (lp - _masked_mean(lp, mask))


def clip_cov_terms(logp, old_logp, adv, mask, *, clip_eps: float = 0.2, clip_cov_ratio: float = 2e-4,
                   clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0, generator: torch.Generator | None = None):
    """Clip-Cov (arXiv:2505.22617): PPO-clip that also drops the gradient of a few tokens whose
    advantage-log-prob covariance is high (the tokens that drive entropy collapse).

    Formula: r = exp(logp - old_logp); l = max(-A r, -A clip(r, 1 - eps, 1 + eps)); candidates are
    generated tokens the ordinary clip leaves alone whose covariance (A - mean A)(logp - mean logp)
    lies strictly inside (lb, ub); k = max(1, floor(ratio N)) of them (N generated tokens), drawn
    at random, get term 0. Defaults: eps 0.2, ratio 2e-4, lb 1.0, ub 5.0 (verl's); aggregation
    token-mean. Degenerate input: no candidate, no token dropped (plain PPO-clip).
    Deviations: verl draws with the global torch random state (``torch.randperm``); labkit draws
    with ``generator`` (default: a fresh one seeded 0), so a run is reproducible. Symmetric clip
    range. The ratio is not clamped (as verl: large log-ratios overflow to inf there too).
    Returns ``(per_token, dropped)``: dropped marks the tokens whose term was zeroed.
    """
    ratio = (logp - old_logp).exp()
    l1, l2 = -adv * ratio, -adv * ratio.clamp(1 - clip_eps, 1 + clip_eps)
    cov = _covariance(logp, adv, mask)
    clipped = (l2 > l1) & mask
    candidate = mask & ~clipped & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    idx = torch.nonzero(candidate)
    keep = torch.ones_like(logp.detach())
    if len(idx) > 0:
        k = max(int(clip_cov_ratio * int(mask.sum())), 1)
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        idx = idx[torch.randperm(len(idx), generator=gen)[:min(k, len(idx))]]
        keep[idx[:, 0], idx[:, 1]] = 0.0
    return torch.maximum(l1, l2) * keep, (1.0 - keep) * mask.to(keep.dtype)


def kl_cov_terms(logp, old_logp, adv, mask, *, kl_cov_ratio: float = 2e-4, ppo_kl_coef: float = 0.1):
    """KL-Cov (arXiv:2505.22617): the unclipped surrogate, plus a |log-ratio| penalty on the tokens
    of highest advantage-log-prob covariance.

    Formula: r = exp(logp - old_logp); term -A r, plus ``ppo_kl_coef`` |logp - old_logp| on the
    k = max(1, floor(ratio N)) generated tokens of largest covariance (A - mean A)(logp - mean logp)
    (``torch.topk``: ties broken as it breaks them). No clipping. Defaults: ratio 2e-4, coefficient
    0.1 (verl's PolicyLossConfig.ppo_kl_coef; verl's function falls back to 1.0 only when the config
    holds None); aggregation token-mean. Degenerate input: no generated token, no penalty.
    Deviations: none beyond the unclamped ratio, which is verl's too.
    Returns ``(per_token, penalised)``: penalised marks the tokens that carry the penalty.
    """
    log_ratio = logp - old_logp
    per_token = -adv * log_ratio.exp()
    flat_valid = torch.nonzero(mask.reshape(-1), as_tuple=True)[0]
    chosen = torch.zeros(logp.numel(), dtype=logp.dtype)
    if len(flat_valid) > 0:
        cov = _covariance(logp, adv, mask).reshape(-1)[flat_valid]
        # verl centres with the plain means of the valid tokens (the same numbers as _covariance's)
        k = max(1, int(len(cov) * kl_cov_ratio))
        chosen[flat_valid[torch.topk(cov, k, largest=True).indices]] = 1.0
    chosen = chosen.reshape(logp.shape)
    return per_token + chosen * ppo_kl_coef * log_ratio.abs(), chosen


def high_entropy_mask(entropies: torch.Tensor, mask: torch.Tensor, top_quantile: float) -> torch.Tensor:
    """The generated tokens whose entropy is in the top ``top_quantile`` of the minibatch's
    (arXiv:2506.01939, "Beyond the 80/20 rule"; TRL's ``top_entropy_quantile``).

    A token is kept when its entropy is >= the (1 - top_quantile) quantile (``torch.quantile``,
    linear interpolation) of the entropies at generated positions, so 1.0 keeps every token and
    0.0 keeps only the highest-entropy one(s). Returns a boolean (B, T) mask, False off ``mask``
    and everywhere when no token is generated.
    """
    values = entropies.detach()[mask]
    if values.numel() == 0:
        return torch.zeros_like(mask)
    threshold = torch.quantile(values.to(torch.float64), 1.0 - top_quantile)
    return (entropies.detach().to(torch.float64) >= threshold) & mask
