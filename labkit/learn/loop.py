"""One small policy-gradient loop that every training demo in the course uses.

    for each iteration:
        rollouts = learner.collect(...)                 # sample a batch with the current policy
        credit   = estimator(rollouts)                  # ANY labkit estimator: the thing we compare
        for each epoch, for each minibatch:
            logp = learner.logprobs(rollouts, rows)     # differentiable log pi(token)
            loss = policy_loss(logp, old_logp, credit.token, mask, kind)
            step the optimiser (gradient norm clipped)
        critic.update(rollouts, returns)                # only if a learned critic is in play
        every eval_every iterations: learner.evaluate() -> success

The estimator is the only thing that changes between GRPO, PPO-with-critic and VinePPO runs, so
learning curves differ by credit assignment alone. Three losses (``kind``):

* ``"reinforce"``: -(1/B) sum_b sum_t A_bt log pi(a_bt | s_bt), the plain policy-gradient
  estimate (sequence sum, batch mean; ``labkit.policies.tabular`` computes the same gradient).
* ``"ppo_clip"``: -min(rho A, clip(rho, 1 - eps, 1 + eps) A) with rho = pi / pi_old, averaged
  over every generated token in the minibatch (verl's default "token-mean").
* ``"grpo"``: the same clipped surrogate, averaged within each sequence and then over sequences
  (the GRPO paper's "seq-mean-token-mean"). No KL penalty: like Dr. GRPO and DAPO, labkit drops it.

With one epoch and one minibatch rho = 1 and both clipped losses have the plain policy gradient
of the token-averaged objective; extra epochs reuse the batch, which is where clipping matters.

Six more kinds are the losses practitioners switch on in verl, computed as verl 0.9.1 does and
documented in ``labkit.learn.policy_losses``: ``"dual_clip"`` (PPO-clip with the dual clip for
negative advantages), ``"gspo"`` (one clipped ratio per sequence), ``"cispo"`` (clipped, detached
importance weight times A log pi), ``"sapo"`` (a soft sigmoid gate instead of the clip),
``"clip_cov"`` and ``"kl_cov"`` (the few tokens of highest advantage-log-prob covariance lose
their gradient, or pay a |log-ratio| penalty). ``policy_loss``'s ``top_entropy_quantile`` keeps
only the highest-entropy tokens' terms, for any kind.

A *learner* couples an environment and a policy. It provides ``parameters()``,
``collect(n_iteration, seed) -> Rollouts`` (with ``logprobs`` of the sampled tokens),
``logprobs(rollouts, rows) -> (len(rows), T)`` (differentiable), ``evaluate(seed) -> float``
(success rate) and ``default_lr`` (``labkit.core.protocols.Learner``). Each world brings its
own: ``labkit.envs.chain.ChainLearner``, ``labkit.envs.toolworld.ToolLearner``,
``labkit.envs.teamtask.TeamLearner`` and ``labkit.envs.arithmetic.learner.LMLearner``.

Off-policy mode (SORL, arXiv:2511.20718). ``staleness=k`` trains iteration i on the batch that
was sampled at iteration i - k (by the policy of that time: an asynchronous pipeline whose sampler
lags k updates behind the learner), so rho = pi / pi_behaviour is off by k updates and the clip
fires often. Two switches of ``policy_loss`` are SORL's mechanism, a rule of the loss, not of
credit (no estimator carries it): ``ratio_level="turn"`` (one importance ratio per turn, the
geometric mean of its tokens' ratios) and ``renorm="sorl"`` (clipping-triggered normalisation: the
minibatch's surrogate is scaled down by the share of advantage mass whose ratio left the trust
region). Defaults (``staleness=0``, ``ratio_level="token"``, ``renorm=None``) are the on-policy
loop above, unchanged. How faithful: the turn ratio is SORL's; for the normaliser only the
paper's description could be read (gradients normalised by a clipping-triggered factor that
down-weights highly off-policy samples), so kappa (the share of |A| outside the trust region) is
the lab's reading of it, in two variants (per minibatch, per trajectory). In a tabular world a
turn is one action, so the turn ratio equals the token ratio there. Measured on notebook 08's
ToolWorld (``scripts/build_offpolicy_irl.py``, ``data/offpolicy_irl/``): staleness costs far more than
the normalisation wins back, and the gain is seed-dependent.

Cost accounting, per iteration and cumulated in the returned curve: ``env_steps`` (actions /
tokens sampled for training), ``policy_tokens`` (token positions the policy ran to *sample* the
batch and to compute the credit, e.g. VinePPO's vines), ``aux_calls`` (critic / reward model
calls). Gradient passes are the same for every estimator at equal batch size and are not counted.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable, Sequence

import pandas as pd
import torch

from labkit.core.checks import (ROUND_OFF, as_tensor, check_choice, check_finite, check_in_range, check_int, check_learner,
                                check_number, check_shape, selection_mask)
from labkit.core.progress import progress_bar
from labkit.core.protocols import Learner
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_spread
from labkit.learn.aggregation import aggregate, check_aggregation
from labkit.learn import policy_losses as _pl
from labkit.credit import get_estimator

LOSSES = ("reinforce", "ppo_clip", "grpo") + _pl.KINDS


# --------------------------------------------------------------------------- the loss
def turn_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor, turn_ids: torch.Tensor) -> torch.Tensor:
    """Turn-level log importance ratio (SORL): every position gets the mean log-ratio of its turn's
    generated positions, i.e. the turn's ratio is the geometric mean of its tokens' ratios.

    ``turn_ids`` (B, T) labels turns 0, 1, ... (-1 off the turns). A one-token turn keeps its
    token's ratio, so in a tabular world (one action per turn) this equals the token ratio.
    Positions off ``mask`` or with ``turn_ids`` -1 keep their own log-ratio (they carry no loss).
    """
    ids = turn_ids.long()
    if tuple(ids.shape) != tuple(log_ratio.shape):
        raise ValueError(f"turn_ids: expected shape {tuple(log_ratio.shape)}, got {tuple(ids.shape)}")
    valid = mask & (ids >= 0)
    n = int(ids.max()) + 1 if bool(valid.any()) else 1
    idx = ids.clamp(min=0)
    w = valid.to(log_ratio.dtype)
    total = torch.zeros(ids.shape[0], n, dtype=log_ratio.dtype).scatter_add(1, idx, log_ratio * w)
    count = torch.zeros(ids.shape[0], n, dtype=log_ratio.dtype).scatter_add(1, idx, w)
    mean = (total / count.clamp(min=1)).gather(1, idx)
    return torch.where(valid, mean, log_ratio)


def _loss_inputs(logp, old_logp, advantages, mask):
    """``policy_loss``'s four (B, T) inputs, checked: one shape (no broadcasting of a (B,)
    advantage against (B, T)), a boolean (or 0/1) mask, finite values and log-probabilities
    <= 0 on the mask."""
    tensors = {"logp": as_tensor("logp", logp), "old_logp": as_tensor("old_logp", old_logp),
               "advantages": as_tensor("advantages", advantages), "mask": as_tensor("mask", mask)}
    # the shape most of the four share is the batch's; the odd one out is named
    shapes = [tuple(t.shape) for t in tensors.values()]
    shape = max(shapes, key=shapes.count)
    if len(shape) != 2:
        raise ValueError(f"logp: expected shape (B, T), got {tuple(tensors['logp'].shape)}")
    for name, t in tensors.items():
        check_shape(name, t, shape)
    logp, old_logp, advantages, mask = tensors.values()
    mask = selection_mask("mask", mask)
    for name, x in (("logp", logp.detach()), ("old_logp", old_logp), ("advantages", advantages)):
        check_finite(name, torch.where(mask, x, torch.zeros((), dtype=x.dtype)))
    for name, x in (("logp", logp.detach()), ("old_logp", old_logp)):
        check_in_range(name, x, high=ROUND_OFF, where=mask, what="log-probabilities")
    return logp, old_logp, advantages, mask


RENORMS = (None, "sorl", "sorl_row")
RATIO_LEVELS = ("token", "turn")


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                kind: str = "ppo_clip", *, clip_eps: float = 0.2, ratio_level: str = "token",
                turn_ids: torch.Tensor | None = None, renorm: str | None = None,
                aggregation: str | None = None, clip_ratio_c: float = 3.0, tau_pos: float = 1.0,
                tau_neg: float = 1.05, clip_cov_ratio: float = 2e-4, clip_cov_lb: float = 1.0,
                clip_cov_ub: float = 5.0, kl_cov_ratio: float = 2e-4, ppo_kl_coef: float = 0.1,
                generator: torch.Generator | None = None, entropies: torch.Tensor | None = None,
                top_entropy_quantile: float = 1.0) -> tuple[torch.Tensor, dict]:
    """The policy-gradient surrogate of ``kind`` (see the module docstring) and diagnostics.

    All inputs (B, T); ``mask`` selects generated positions. Returns ``(loss, stats)`` with
    ``clip_frac`` (share of tokens whose ratio was clipped) and ``approx_kl`` (mean of
    old_logp - logp). Rows without a masked token contribute nothing.

    ``aggregation``: how the per-token terms become the loss, one of
    ``labkit.learn.aggregation.AGGREGATIONS`` (verl's ``loss_agg_mode``) or a TRL ``loss_type``
    normaliser; None keeps ``kind``'s own (``reinforce``: seq-mean-token-sum over every row,
    ``ppo_clip``: token-mean, ``grpo``: seq-mean-token-mean).

    SORL's switches (clipped kinds only; see the module docstring): ``ratio_level="turn"`` uses
    one ratio per turn (``turn_log_ratio``; needs ``turn_ids``); ``renorm="sorl"`` multiplies the
    surrogate by 1 - kappa, kappa = sum |A| over positions whose ratio lies outside
    [1 - eps, 1 + eps] / sum |A| over all positions of the minibatch (detached): with no clipping
    the loss is unchanged, with every position outside the trust region the minibatch makes no
    step. ``renorm="sorl_row"`` computes kappa per trajectory instead, so a trajectory that has
    drifted far from its behaviour policy is down-weighted and the others keep their weight
    (which still matters under Adam, which undoes a scale common to every position). ``stats``
    then also holds ``out_frac`` (share of positions outside the region) and ``scale`` (mean
    weight 1 - kappa over positions).

    The kinds of ``labkit.learn.policy_losses`` (``"dual_clip"``, ``"gspo"``, ``"cispo"``,
    ``"sapo"``, ``"clip_cov"``, ``"kl_cov"``: verl's losses of those names, each documented
    there) take the token-level ratio only (``ratio_level="token"``, ``renorm=None``) and their
    options with verl's defaults: ``clip_ratio_c`` (dual_clip, > 1), ``tau_pos`` / ``tau_neg``
    (sapo, > 0), ``clip_cov_ratio`` (in (0, 1]), ``clip_cov_lb`` < ``clip_cov_ub`` and
    ``generator`` (clip_cov's random draw; None: seeded 0), ``kl_cov_ratio`` (in (0, 1]) and
    ``ppo_kl_coef`` (>= 0) (kl_cov). Other kinds ignore them. Their default aggregation is
    ``policy_losses.DEFAULT_AGGREGATION[kind]``; ``clip_frac`` counts the positions each rule
    clipped (clip_cov: dropped; kl_cov: penalised; sapo: none).

    ``top_entropy_quantile`` < 1 (any kind; needs ``entropies`` (B, T), the policy's entropy at
    each position): only generated tokens whose entropy is in that top quantile of the
    minibatch's keep their term (``policy_losses.high_entropy_mask``); the others' terms become 0
    but still count in the aggregation's denominators, as in TRL. ``stats`` then also holds
    ``entropy_keep_frac``.
    """
    check_choice("kind", kind, LOSSES)
    check_choice("ratio_level", ratio_level, RATIO_LEVELS)
    if renorm not in RENORMS:
        raise ValueError(f"renorm: expected one of {RENORMS}, got {renorm!r}")
    if aggregation is not None:
        check_aggregation("aggregation", aggregation)
    if ratio_level == "turn" and turn_ids is None:
        raise ValueError("turn_ids: ratio_level='turn' needs the (B, T) turn labels (rollouts.turn_ids)")
    clip_eps = check_number("clip_eps", clip_eps, low=0.0, low_open=True)
    options = _kind_options(kind, clip_ratio_c=clip_ratio_c, tau_pos=tau_pos, tau_neg=tau_neg,
                            clip_cov_ratio=clip_cov_ratio, clip_cov_lb=clip_cov_lb, clip_cov_ub=clip_cov_ub,
                            kl_cov_ratio=kl_cov_ratio, ppo_kl_coef=ppo_kl_coef, generator=generator)
    if kind in _pl.KINDS and (ratio_level != "token" or renorm is not None):
        name = "ratio_level" if ratio_level != "token" else "renorm"
        raise ValueError(f"{name}: SORL's switches apply to ppo_clip and grpo only, not to kind {kind!r}")
    top_entropy_quantile = check_number("top_entropy_quantile", top_entropy_quantile, low=0.0, high=1.0)
    if top_entropy_quantile < 1.0 and entropies is None:
        raise ValueError("entropies: top_entropy_quantile < 1 needs the (B, T) entropies of the policy")
    logp, old_logp, advantages, mask = _loss_inputs(logp, old_logp, advantages, mask)
    keep = None  # the top-entropy rule's tokens; None = every token
    if top_entropy_quantile < 1.0:
        ent = as_tensor("entropies", entropies)
        check_shape("entropies", ent, tuple(logp.shape))
        check_finite("entropies", torch.where(mask, ent.detach(), torch.zeros((), dtype=ent.dtype)))
        keep = _pl.high_entropy_mask(ent, mask, top_entropy_quantile)
    m = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).detach()
    log_ratio = logp - old_logp.to(logp.dtype).detach()
    if ratio_level == "turn":
        log_ratio = turn_log_ratio(log_ratio, mask.bool(), turn_ids)
    if kind in _pl.KINDS:
        terms = getattr(_pl, f"{kind}_terms")
        per_token, clipped = terms(logp, old_logp.to(logp.dtype).detach(), advantages.to(logp.dtype).detach(),
                                   mask, **options)
        if keep is not None:
            per_token = per_token * keep.to(per_token.dtype)
        loss = aggregate(per_token, mask, aggregation or _pl.DEFAULT_AGGREGATION[kind])
        n = m.sum().clamp(min=1)
        stats = {"clip_frac": float((clipped * m).sum() / n),
                 "approx_kl": float(((old_logp.to(logp.dtype) - logp.detach()) * m).sum() / n)}
        if keep is not None:
            stats["entropy_keep_frac"] = float(keep.sum() / n)
        return loss, stats
    weight = torch.ones_like(m)  # SORL's down-weighting, detached; 1 = plain surrogate
    out_frac = 0.0
    if kind != "reinforce" and (renorm is not None or ratio_level == "turn"):
        r = log_ratio.detach().clamp(max=20.0).exp()
        outside = ((r < 1 - clip_eps) | (r > 1 + clip_eps)).to(m.dtype) * m
        out_frac = float(outside.sum() / m.sum().clamp(min=1))
        if renorm is not None:
            # kappa: share of the advantage mass whose ratio left the trust region, over the
            # minibatch ("sorl") or per trajectory ("sorl_row"); 0 when nothing is at stake
            dims = None if renorm == "sorl" else 1
            mass = (adv.abs() * m).sum(dim=dims, keepdim=dims is not None)
            hit = (adv.abs() * outside).sum(dim=dims, keepdim=dims is not None)
            kappa = torch.where(mass > 0, hit / mass.clamp(min=1e-30), torch.zeros_like(mass))
            weight = (1 - kappa) * weight
    if kind == "reinforce":
        per_token = -adv * logp
        if keep is not None:
            per_token = per_token * keep.to(per_token.dtype)
        loss = (per_token * m).sum() / max(logp.shape[0], 1) if aggregation is None else \
            aggregate(per_token, mask, aggregation)
        clipped = torch.zeros_like(m)
    else:
        ratio = log_ratio.clamp(max=20.0).exp()  # clamp: a wild ratio must not overflow to inf
        unclipped, clipped_obj = ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
        per_token = -torch.minimum(unclipped, clipped_obj) * weight
        if keep is not None:
            per_token = per_token * keep.to(per_token.dtype)
        clipped = (clipped_obj < unclipped).to(m.dtype)
        if aggregation is not None:
            loss = aggregate(per_token, mask, aggregation)
        elif kind == "ppo_clip":
            loss = (per_token * m).sum() / m.sum().clamp(min=1)
        else:  # grpo: mean over a sequence's tokens, then over sequences that have tokens
            lengths = m.sum(1)
            has = lengths > 0
            loss = ((per_token * m).sum(1)[has] / lengths[has]).sum() / has.sum().clamp(min=1)
    n = m.sum().clamp(min=1)
    stats = {"clip_frac": float((clipped * m).sum() / n), "approx_kl": float((-log_ratio.detach() * m).sum() / n)}
    if renorm is not None or ratio_level == "turn":
        stats.update(out_frac=out_frac, scale=float((weight * m).sum() / n))
    if keep is not None:
        stats["entropy_keep_frac"] = float(keep.sum() / n)
    return loss, stats


def loss_credit(logp, old_logp, advantages, mask, kind: str = "ppo_clip", **options) -> torch.Tensor:
    """The credit that reaches the gradient under ``policy_loss(..., kind, **options)``: minus the
    loss's derivative with respect to every position's log-probability, (B, T) float64, 0 off
    ``mask``. The gradient the policy receives is the sum over positions of this number times
    grad log pi, so it is the advantage after everything the loss does to it: the aggregation's
    weight (``labkit.learn.aggregation``), the importance ratio, and the clip, gate, dropped or
    penalised tokens of ``kind``.

    At ratio 1 (``logp`` equal to ``old_logp``) every kind gives the aggregation's
    ``effective_credit`` except where a rule acts there too (clip_cov's dropped tokens,
    kl_cov's penalty, the top-entropy rule's tokens); away from 1, PPO-clip's clipped tokens get
    0, CISPO's keep A times the clipped weight, SAPO's are scaled by its gate's slope. ``options``
    are ``policy_loss``'s (``aggregation``, ``clip_eps``, ``entropies``, ``top_entropy_quantile``,
    the kinds' options); the inputs are checked there.
    """
    lp = as_tensor("logp", logp).detach().to(torch.float64).clone().requires_grad_(True)
    old = as_tensor("old_logp", old_logp)
    adv = as_tensor("advantages", advantages)
    loss, _ = policy_loss(lp, old.to(torch.float64) if old.is_floating_point() else old,
                          adv.to(torch.float64) if adv.is_floating_point() else adv, mask, kind, **options)
    (grad,) = torch.autograd.grad(loss, lp, allow_unused=True)
    credit = torch.zeros_like(lp) if grad is None else -grad
    return torch.where(selection_mask("mask", as_tensor("mask", mask)), credit.detach(),
                       torch.zeros((), dtype=torch.float64))


#: ``train``'s ``loss_options``: the options of ``policy_loss`` a run may set
LOSS_OPTIONS = ("clip_ratio_c", "tau_pos", "tau_neg", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio",
                "ppo_kl_coef", "top_entropy_quantile")


def _kind_options(kind: str, *, clip_ratio_c, tau_pos, tau_neg, clip_cov_ratio, clip_cov_lb, clip_cov_ub,
                  kl_cov_ratio, ppo_kl_coef, generator) -> dict:
    """The options of ``policy_loss``'s extra kinds, each checked (a ValueError naming it), and
    the ones ``kind``'s per-token function takes."""
    clip_ratio_c = check_number("clip_ratio_c", clip_ratio_c, low=1.0, low_open=True)
    tau_pos = check_number("tau_pos", tau_pos, low=0.0, low_open=True)
    tau_neg = check_number("tau_neg", tau_neg, low=0.0, low_open=True)
    clip_cov_ratio = check_number("clip_cov_ratio", clip_cov_ratio, low=0.0, high=1.0, low_open=True)
    clip_cov_lb = check_number("clip_cov_lb", clip_cov_lb)
    clip_cov_ub = check_number("clip_cov_ub", clip_cov_ub)
    if not clip_cov_lb < clip_cov_ub:
        raise ValueError(f"clip_cov_ub: must exceed clip_cov_lb ({clip_cov_lb}), got {clip_cov_ub}")
    kl_cov_ratio = check_number("kl_cov_ratio", kl_cov_ratio, low=0.0, high=1.0, low_open=True)
    ppo_kl_coef = check_number("ppo_kl_coef", ppo_kl_coef, low=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator or None, got {type(generator).__name__}")
    return {"ppo_clip": {}, "grpo": {}, "reinforce": {}, "dual_clip": {"clip_ratio_c": clip_ratio_c},
            "gspo": {}, "cispo": {}, "sapo": {"tau_pos": tau_pos, "tau_neg": tau_neg},
            "clip_cov": {"clip_cov_ratio": clip_cov_ratio, "clip_cov_lb": clip_cov_lb, "clip_cov_ub": clip_cov_ub,
                         "generator": generator},
            "kl_cov": {"kl_cov_ratio": kl_cov_ratio, "ppo_kl_coef": ppo_kl_coef}}[kind]


# --------------------------------------------------------------------------- the loop
def train(learner: Learner, estimator: Callable[[Rollouts], Credit] | str, *, iterations: int = 20,
          kind: str = "ppo_clip", lr: float | None = None, epochs: int = 1, minibatches: int = 1,
          clip_eps: float = 0.2, max_grad_norm: float | None = 1.0, optimizer: str = "adam",
          critic=None, eval_every: int = 5,
          seed: int = 0, progress: bool = True, label: str | None = None, staleness: int = 0,
          ratio_level: str = "token", renorm: str | None = None, aggregation: str | None = None,
          loss_options: dict | None = None, loss_fn: Callable[..., torch.Tensor] | None = None) -> pd.DataFrame:
    """Train ``learner``'s policy for ``iterations`` batches with credit from ``estimator``.

    ``estimator``: a registered name (``"grpo"``) or a callable ``rollouts -> Credit`` (use a
    lambda or ``functools.partial`` to pass a critic or a value_fn). ``critic``: anything with
    ``update(rollouts, targets)``; after each policy update it is regressed on
    ``credit.info["returns"]`` (GAE's A + V), or on the Monte Carlo returns if the estimator gave
    none. ``optimizer``: ``"adam"`` or ``"sgd"`` (plain gradient steps) with ``lr`` (default
    ``learner.default_lr``), gradient norm clipped to ``max_grad_norm`` (None = off). ``seed``
    fixes sampling and minibatch order.

    Off-policy mode (SORL; module docstring): ``staleness`` k >= 0 trains iteration i on the
    batch sampled at iteration max(1, i - k) (its stored ``logprobs`` are the behaviour policy's,
    so the ratio sees k updates of drift; the first k iterations train on the oldest batch there
    is); every iteration still samples (and is charged) one fresh batch. ``ratio_level`` and
    ``renorm`` go to ``policy_loss``, as does ``aggregation`` (how the loss weighs tokens; None:
    ``kind``'s own; ``labkit.learn.aggregation``). With any of the three set, the curve also has ``staleness``
    (the age of the batch trained on), ``out_frac`` and ``scale`` columns. ``loss_options``: more
    of ``policy_loss``'s options, by name (:data:`LOSS_OPTIONS`: the kinds' options and
    ``top_entropy_quantile``). clip_cov's random draw is seeded by ``seed``; the top-entropy rule
    ranks the entropies stored in the rollouts (the sampling policy's, equal to the current
    policy's on the first epoch of a fresh batch).

    Your own loss: ``loss_fn(logp, old_logp, advantages, mask) -> scalar loss`` (the four (B, T)
    tensors of a minibatch, ``logp`` differentiable, ``mask`` boolean) is minimised in place of
    ``policy_loss(..., kind)``; everything else (sampling, credit, optimiser, clipping of the
    gradient norm) is unchanged, and ``clip_frac`` / ``approx_kl`` are still measured the lab's
    way (``policy_loss`` of ``kind`` with ``clip_eps`` on the same minibatch), so a curve says how
    far the loss moved the policy whatever it computes. The curve's ``kind`` column then reads
    ``"loss_fn"``. It cannot be combined with ``ratio_level`` / ``renorm`` (switches of
    ``policy_loss``). A ``loss_fn`` equal to ``policy_loss(..., kind)`` gives ``kind``'s curve.

    Training schedules (``labkit.learn.schedules``: PilotRL, PRS): an ``estimator`` with a
    ``for_iteration(it)`` method is asked for iteration it's estimator every iteration, and the
    curve gains a ``stage`` column (``estimator.stage_of(it)``; NaN at iteration 0).

    Returns one row per iteration: ``iteration`` (1-based), ``train_reward`` (mean score of the
    batch), ``success`` (``learner.evaluate``; at iteration 0, the untrained policy, every
    ``eval_every`` iterations and at the end; NaN elsewhere), ``loss``, ``grad_norm``,
    ``entropy``, ``clip_frac``, ``approx_kl``, cumulative ``env_steps`` / ``policy_tokens`` /
    ``aux_calls``, ``seconds``; ``label``, ``kind``, ``seed`` as columns.
    """
    check_learner("learner", learner)
    iterations = check_int("iterations", iterations, low=1)
    check_choice("kind", kind, LOSSES)
    epochs = check_int("epochs", epochs, low=1)
    minibatches = check_int("minibatches", minibatches, low=1)
    clip_eps = check_number("clip_eps", clip_eps, low=0.0, low_open=True)
    eval_every = check_int("eval_every", eval_every, low=1)
    seed = check_int("seed", seed)
    staleness = check_int("staleness", staleness, low=0)
    check_choice("ratio_level", ratio_level, RATIO_LEVELS)
    if renorm not in RENORMS:
        raise ValueError(f"renorm: expected one of {RENORMS}, got {renorm!r}")
    if aggregation is not None:
        check_aggregation("aggregation", aggregation)
    off_policy = staleness > 0 or ratio_level != "token" or renorm is not None
    loss_options = dict(loss_options or {})
    unknown = sorted(set(loss_options) - set(LOSS_OPTIONS))
    if unknown:
        raise ValueError(f"loss_options: unknown option(s) {unknown}; expected some of {LOSS_OPTIONS}")
    if kind == "clip_cov":
        loss_options["generator"] = torch.Generator().manual_seed(seed)
    if loss_fn is not None:
        if not callable(loss_fn):
            raise TypeError(f"loss_fn: expected a callable (logp, old_logp, advantages, mask) -> scalar loss, "
                            f"got {type(loss_fn).__name__}")
        if ratio_level != "token" or renorm is not None or aggregation is not None or \
                set(loss_options) - {"generator"}:
            raise ValueError("loss_fn: replaces policy_loss, so policy_loss's switches ratio_level, renorm, "
                             "aggregation and loss_options do not apply; leave them at their defaults")
    if max_grad_norm is not None:
        max_grad_norm = check_number("max_grad_norm", max_grad_norm, low=0.0, low_open=True)
    if isinstance(estimator, str):
        label = label or estimator
        estimator = get_estimator(estimator)
    # a training schedule (labkit.learn.schedules.Schedule) hands out one estimator per iteration
    schedule = estimator if callable(getattr(estimator, "for_iteration", None)) else None
    if schedule is None and not callable(estimator):
        raise TypeError("estimator: expected a registered name or a callable rollouts -> Credit")
    if critic is not None and not callable(getattr(critic, "update", None)):
        raise TypeError("critic: expected an object with update(rollouts, targets)")
    label = label or getattr(estimator, "__name__", "estimator")
    lr = check_number("lr", learner.default_lr if lr is None else lr, low=0.0, low_open=True)

    check_choice("optimizer", optimizer, ("adam", "sgd"))
    params = [p for p in learner.parameters() if p.requires_grad]
    optimizer = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(params, lr=lr)
    shuffle = torch.Generator().manual_seed(seed)
    totals = {"env_steps": 0, "policy_tokens": 0, "aux_calls": 0}
    rows = [{"iteration": 0, "success": learner.evaluate(seed=seed), **totals, "seconds": 0.0}]
    start = time.perf_counter()
    queue: deque = deque(maxlen=staleness + 1)  # (iteration sampled, batch); oldest first
    for it in progress_bar(range(1, iterations + 1), desc=label, enabled=progress, leave=False):
        fresh = learner.collect(it, seed=seed * 1_000_003 + it)
        queue.append((it, fresh))
        born, rollouts = queue[0]  # with staleness 0 this is the fresh batch
        credit = (schedule.for_iteration(it) if schedule is not None else estimator)(rollouts)
        if not isinstance(credit, Credit):
            raise TypeError(f"estimator: returned {type(credit).__name__}, expected a Credit")
        advantages = credit.token.detach()
        if not torch.isfinite(advantages[rollouts.mask]).all():
            raise ValueError(f"estimator: {label} produced non-finite credit")
        mask, old = rollouts.mask, rollouts.logprobs
        B = rollouts.batch_size
        if loss_options.get("top_entropy_quantile", 1.0) < 1.0 and rollouts.entropies is None:
            raise ValueError("loss_options: top_entropy_quantile < 1 needs entropies, and the learner's rollouts "
                             "carry none")
        losses, norms, stats = [], [], []
        for _ in range(epochs):
            order = torch.randperm(B, generator=shuffle)
            for rows_idx in order.chunk(min(minibatches, B)):
                logp = learner.logprobs(rollouts, rows_idx)
                lab_logp = logp if loss_fn is None else logp.detach()  # with loss_fn: the lab's stats only
                loss, st = policy_loss(lab_logp, old[rows_idx], advantages[rows_idx], mask[rows_idx], kind,
                                       clip_eps=clip_eps, ratio_level=ratio_level, renorm=renorm,
                                       aggregation=aggregation, **loss_options,
                                       entropies=None if rollouts.entropies is None else rollouts.entropies[rows_idx],
                                       turn_ids=None if rollouts.turn_ids is None else rollouts.turn_ids[rows_idx])
                if loss_fn is not None:
                    loss = _custom_loss(loss_fn, logp, old[rows_idx], advantages[rows_idx], mask[rows_idx])
                optimizer.zero_grad()
                loss.backward()
                norm = (torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if max_grad_norm is not None
                        else torch.sqrt(sum((p.grad ** 2).sum() for p in params if p.grad is not None)))
                optimizer.step()
                losses.append(float(loss.detach()))
                norms.append(float(norm))
                stats.append(st)
        if critic is not None:
            targets = credit.info.get("returns")
            critic.update(rollouts, targets if targets is not None else rollouts.returns())
        sampled = int(fresh.mask.sum())
        # a batch filter (StarPO) trains on fewer steps than were sampled: charge what was sampled
        # (the fresh batch: in off-policy mode it is sampled now and trained on k iterations later)
        totals["env_steps"] += int(fresh.info.get("sampled_steps", sampled)) + credit.cost.env_steps
        totals["policy_tokens"] += int(fresh.info.get("generation_cost", sampled)) + credit.cost.policy_tokens
        totals["aux_calls"] += credit.cost.aux_calls
        entropy = float(fresh.entropies[fresh.mask].mean()) if fresh.entropies is not None else float("nan")
        spread, flat = rollouts.info.get("sampled_spread") or group_spread(rollouts)
        evaluate = it % eval_every == 0 or it == iterations
        rows.append({"iteration": it, "train_reward": float(fresh.scores.mean()),
                     "success": learner.evaluate(seed=seed) if evaluate else float("nan"),
                     "loss": sum(losses) / len(losses), "grad_norm": sum(norms) / len(norms),
                     "entropy": entropy, "reward_spread": spread, "zero_spread_share": flat,
                     "clip_frac": sum(s["clip_frac"] for s in stats) / len(stats),
                     "approx_kl": sum(s["approx_kl"] for s in stats) / len(stats),
                     **totals, "seconds": time.perf_counter() - start})
        if schedule is not None:
            rows[-1]["stage"] = schedule.stage_of(it)
        if off_policy:
            rows[-1].update(staleness=it - born, out_frac=sum(s.get("out_frac", 0.0) for s in stats) / len(stats),
                            scale=sum(s.get("scale", 1.0) for s in stats) / len(stats))
    out = pd.DataFrame(rows)
    out.insert(0, "label", label)
    out["kind"], out["seed"] = (kind if loss_fn is None else "loss_fn"), seed
    return out


def _custom_loss(loss_fn: Callable[..., torch.Tensor], logp: torch.Tensor, old_logp: torch.Tensor,
                 advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``train``'s ``loss_fn`` on one minibatch (copies of the inputs it must not change, the old
    log-probabilities and advantages detached), checked: one finite number that depends on
    ``logp``. Returns it as a 0-d tensor."""
    loss = loss_fn(logp, old_logp.detach().clone(), advantages.detach().clone(), mask.clone())
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"loss_fn: expected it to return a scalar tensor, got {type(loss).__name__}")
    if loss.numel() != 1:
        raise ValueError(f"loss_fn: expected it to return one number (a scalar tensor), got shape {tuple(loss.shape)}")
    if not bool(torch.isfinite(loss.detach()).all()):
        raise ValueError(f"loss_fn: returned a non-finite loss ({float(loss.detach().reshape(()))})")
    if not loss.requires_grad:
        raise ValueError("loss_fn: its loss does not depend on logp (no gradient flows back to the policy)")
    return loss.reshape(())


def compare(make_learner: Callable[[int], Learner], runs: dict[str, Callable[[Learner], dict]], *,
            seeds: Sequence[int] = (0, 1, 2), progress: bool = True, **common) -> pd.DataFrame:
    """Train a fresh learner per (run, seed) and stack the curves.

    ``make_learner(seed)`` builds a fresh learner. ``runs`` maps a label to a function that,
    given that learner, returns the keyword arguments of ``train`` for the run (at least
    ``estimator``), so a run can build a fresh critic or a value_fn tied to the learner's model.
    ``common`` goes to every run (a run's own arguments win).
    """
    if not callable(make_learner):
        raise TypeError(f"make_learner: expected a function seed -> learner, got {type(make_learner).__name__}")
    if not runs:
        raise ValueError("runs: need at least one run")
    seeds = [check_int("seeds", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    curves = []
    bar = progress_bar(total=len(runs) * len(seeds), desc="runs", enabled=progress)
    for label, make_kwargs in runs.items():
        if not callable(make_kwargs):
            raise TypeError(f"runs: entry {label!r} must be a function learner -> train keyword arguments")
        for s in seeds:
            learner = check_learner("make_learner", make_learner(s))
            kwargs = {**common, **make_kwargs(learner)}
            if "estimator" not in kwargs:
                raise ValueError(f"runs: entry {label!r} gave no estimator")
            curves.append(train(learner, kwargs.pop("estimator"), seed=s, label=label, progress=False, **kwargs))
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True)


def curve_band(curves: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Evaluated points of learning curves as mean / min / max of exact J over seeds, per
    ``by`` and iteration (chart-ready for ``viz.line_chart(..., band=("min", "max"))``)."""
    for col in (by, "iteration", "success"):
        if col not in curves.columns:
            raise ValueError(f"curves: missing column {col!r}")
    evals = curves.dropna(subset=["success"])
    return (evals.groupby([by, "iteration"], sort=False).success.agg(["mean", "min", "max"]).reset_index())


def summarise(curves: pd.DataFrame) -> pd.DataFrame:
    """Success change from iteration 0 to the last iteration per run: mean, std, min, max over
    seeds, plus the mean cost of a run."""
    if not {"label", "seed", "iteration", "success"} <= set(curves.columns):
        raise ValueError("curves: expected the DataFrame returned by train / compare")
    first = curves[curves.iteration == 0].set_index(["label", "seed"]).success
    last_it = curves.groupby(["label", "seed"]).iteration.transform("max")
    last = curves[curves.iteration == last_it].set_index(["label", "seed"])
    change = (last.success - first).rename("change")
    table = change.groupby("label").agg(["mean", "std", "min", "max"]).add_prefix("change_")
    table["success_before"] = first.groupby("label").mean()
    table["success_after"] = last.success.groupby("label").mean()
    for col in ("env_steps", "policy_tokens", "aux_calls", "seconds"):
        table[col] = last[col].groupby("label").mean()
    table["seeds"] = change.groupby("label").size()
    return table.reset_index()


OFFPOLICY_ARMS = {
    "on-policy": {},
    "stale": {"staleness": None},
    "stale + SORL (batch)": {"staleness": None, "renorm": "sorl"},
    "stale + SORL (per trajectory)": {"staleness": None, "renorm": "sorl_row"},
}


def offpolicy_comparison(make_learner: Callable[[int], Learner], estimator="grpo", *, staleness: int = 4,
                         seeds: Sequence[int] = (0, 1, 2), arms: Sequence[str] | None = None,
                         progress: bool = False, **common) -> pd.DataFrame:
    """SORL's experiment: on-policy training against training on batches ``staleness`` iterations
    old, without and with the clipping-triggered normalisation (``OFFPOLICY_ARMS``), one fresh
    learner per (arm, seed). ``common`` goes to ``train`` (e.g. ``kind="grpo"``, ``lr``,
    ``epochs``, ``iterations``). Returns the stacked curves (``compare``); ``summarise`` gives
    mean and range of the final success per arm."""
    staleness = check_int("staleness", staleness, low=1)
    names = list(OFFPOLICY_ARMS) if arms is None else list(arms)
    for n in names:
        if n not in OFFPOLICY_ARMS:
            raise ValueError(f"arms: unknown arm {n!r}; known: {list(OFFPOLICY_ARMS)}")
    runs = {}
    for n in names:
        kw = {k: (staleness if v is None else v) for k, v in OFFPOLICY_ARMS[n].items()}
        runs[n] = lambda learner, kw=kw: {"estimator": estimator, **kw}
    return compare(make_learner, runs, seeds=seeds, progress=progress, **common)
