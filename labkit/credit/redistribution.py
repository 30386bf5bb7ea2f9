"""Redistribution: split one outcome score over the tokens or steps that produced it.

Both estimators here start from a model that scores outcomes and ask how much of its score each
part of the response is responsible for:

* RED (arXiv 2411.08302), in the spirit of RUDDER's return decomposition: score every prefix and
  give each token the change in score it caused, so the token rewards telescope to the final
  score;
* ACPO's attribution (arXiv 2510.08899): differentiate the outcome model's score with respect
  to the input embeddings and split the outcome over the steps in proportion to their saliency.

The outcome model is an explicit argument (scores or a callable); the estimators never load one.
For the tiny LM, ``ArithmeticLM.prefix_score_fn(critic)`` and
``ArithmeticLM.outcome_attribution_fn(critic)`` wrap a fitted value model (an outcome reward model
fitted to the task's verifier outcomes; any model with the same methods works).
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.core.checks import (as_tensor, check_choice, check_finite, check_number, check_shape,
                                 per_position, resolve_input, trajectory_totals)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit.registry import register

RED_CREDITS = ("reward", "return")
RED_LEVELS = ("token", "step")
ACPO_NORMS = ("abs", "signed")


def prefix_scores(rollouts: Rollouts, scores, prompt_scores) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(score after every token (B, T), prompt score (B,), scorer calls) from tensors or a callable:
    a model's prediction of the outcome at every prefix (RED's scores, RUDDER's return predictor)."""
    calls = 0
    if callable(scores):
        out = scores(rollouts)
        calls = int(rollouts.mask.sum())  # one scored prefix per generated token
        if isinstance(out, tuple):  # a callable may return (scores, prompt_scores)
            if len(out) != 2:
                raise ValueError("scores: a callable must return a (B, T) tensor or a (scores, prompt_scores) pair")
            out, from_fn = out
            calls += rollouts.batch_size
            prompt_scores = from_fn if prompt_scores is None else prompt_scores
        scores = out
    if scores is None:
        raise ValueError("scores: required, a (B, T) tensor of the outcome model's score after every token, "
                         "or a callable rollouts -> that tensor")
    s = per_position("scores", scores, rollouts.mask)
    if prompt_scores is None:
        p = torch.zeros(rollouts.batch_size, dtype=torch.float64)
    else:
        p = as_tensor("prompt_scores", prompt_scores).to(torch.float64)
        check_shape("prompt_scores", p, (rollouts.batch_size,))
        check_finite("prompt_scores", p)
    return s, p, calls


@register("red", level="token", inputs={"scores": "prefix_scores"}, status="implemented", paper="2411.08302",
          equation=r"A_t = R(x, y_{\le t}) - R(x, y_{<t})",
          symbols="R: outcome model's score of prompt x + prefix (a value model fitted to verifier outcomes); R(x) "
                  "= 0 unless given")
def red(rollouts: Rollouts, *, scores, prompt_scores=None, outcome_weight: float = 0.0,
        credit: str = "reward", level: str = "token") -> Credit:
    """RED (Li et al. 2024, arXiv:2411.08302): token rewards as the change in an outcome model's score of the prefix.

    Inputs:
        rollouts: ``mask``, ``rewards`` (the outcome, for ``outcome_weight``), ``step_ids`` (for
        level "step").
        ``scores`` (prefix_scores): a (B, T) tensor of the outcome model's score after every
        generated token, or a callable ``scores(rollouts)`` returning that tensor or a
        ``(scores, prompt_scores)`` pair (e.g. ``ArithmeticLM.prefix_score_fn(model)``; an
        outcome reward model's ``prefix_scores`` method also fits).

    Formula:
        R(x, y_<=t) = the outcome model's score of the prompt plus the first t tokens
        r_t = R(x, y_<=t) - R(x, y_<t)          (R(x, y_<1) = R(x), the prompt alone)
            + outcome_weight * outcome          (last generated token only)

        so sum_t r_t = R(x, y) - R(x) + outcome_weight * outcome: the token rewards telescope
        to the final score minus the prompt's. ``credit="reward"`` (default) returns r_t;
        ``credit="return"`` the reward-to-go sum_{t' >= t} r_t' (= final score - score before
        t, plus the outcome term), the undiscounted return PPO would see. ``level="step"``
        sums r_t per step (score after the step minus score before it) and gives every token
        of the step that sum.

    Defaults:
        prompt_scores = None (taken as 0: then the first token also carries the prompt's own
        score), outcome_weight = 0 (pure redistribution), credit = "reward", level = "token".

    Degenerate input:
        a response with nothing generated: no credit (all 0) and ``final_scores`` = 0; a one-token response
        gets R(x, y) - R(x) on its token. A constant scorer gives 0 everywhere except the
        first token (score - prompt score). Scores off the mask are ignored.

    Deviations from the reference:
        RED scores prefixes with an off-the-shelf sequence reward model (its value head read
        at every position) and adds the redistributed rewards to PPO's per-token KL penalty,
        with the original sequence reward optionally kept; the lab exposes the same sum through
        ``outcome_weight``, leaves the KL term to the trainer, and, having no RLHF reward model
        for the arithmetic task, scores prefixes with an outcome reward model fitted to verifier
        outcomes: a different reward model under the same mechanism, so the lab counts RED as
        implemented (the redistribution is the paper's; only the scorer is the task's).
        At tool output inside a response: carry; the score before the first token after it is the
        score after the last token before it, so what the tool output changes in the score goes
        to no token (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token" (level "step" with ``level="step"``); ``info``:
        ``token_rewards`` (B, T) r_t, ``final_scores`` and ``prompt_scores`` (B,),
        ``outcome_weight``.

    Cost:
        ``aux_calls`` = prefixes scored when ``scores`` is a callable (one per generated token,
        plus one per prompt when it supplies prompt scores); 0 for precomputed tensors (their
        cost was paid by whoever computed them).
    """
    outcome_weight = check_number("outcome_weight", outcome_weight)
    check_choice("credit", credit, RED_CREDITS)
    check_choice("level", level, RED_LEVELS)
    s, p, calls = prefix_scores(rollouts, scores, prompt_scores)
    mask = rollouts.mask
    # score before each generated token: the previous generated token's score, or the prompt's
    pos = torch.arange(rollouts.horizon).expand_as(mask)
    prev = torch.where(mask, pos, -1).cummax(1).values          # last generated position <= t
    prev_excl = torch.cat([torch.full_like(prev[:, :1], -1), prev[:, :-1]], 1)
    before = torch.where(prev_excl >= 0, s.gather(1, prev_excl.clamp(min=0)), p[:, None])
    r = torch.where(mask, s - before, torch.zeros((), dtype=torch.float64))
    has = mask.any(1)
    last = torch.where(mask, pos, -1).max(1).values
    final = torch.where(has, s.gather(1, last.clamp(min=0)[:, None]).squeeze(1), torch.zeros_like(p))
    if outcome_weight:
        bonus = torch.zeros_like(r)
        rows = has.nonzero().flatten()
        bonus[rows, last[rows]] = outcome_weight * rollouts.scores.to(torch.float64)[rows]
        r = r + bonus
    info = dict(token_rewards=r, final_scores=final, prompt_scores=p, outcome_weight=outcome_weight)
    cost = Cost(aux_calls=calls)
    if level == "step":
        step, _ = rollouts.view(r, "step", "sum")
        if credit == "return":
            step = step.flip(1).cumsum(1).flip(1)
        return Credit.from_level(rollouts, step, "step", "red", cost=cost, **info)
    token = r if credit == "reward" else r.flip(1).cumsum(1).flip(1)
    return Credit.from_tokens(rollouts, token, "red", cost=cost, **info)


OutcomeModel = Callable[[Rollouts], tuple[torch.Tensor, torch.Tensor]]


def gradient_input_saliency(rollouts: Rollouts, outcome_model: OutcomeModel) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient x input attribution of an outcome model at every generated position: (d score /
    d embedding . embedding (B, T) float64, signed, 0 off the mask; the model's scores (B,)).
    ``outcome_model``: a callable rollouts -> (scores (B,), embeds (B, T, D)) whose scores depend
    on embeds (errors name it). One forward and one backward pass per response."""
    if not callable(outcome_model):
        raise TypeError("outcome_model: expected a callable rollouts -> (scores (B,), embeds (B, T, D))")
    B, T = rollouts.batch_size, rollouts.horizon
    with torch.enable_grad():
        out = outcome_model(rollouts)
        if not isinstance(out, tuple) or len(out) != 2:
            raise ValueError("outcome_model: must return (scores (B,), embeds (B, T, D))")
        scores, embeds = out
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (B,):
            raise ValueError(f"outcome_model: scores must be a ({B},) tensor")
        if not isinstance(embeds, torch.Tensor) or embeds.dim() != 3 or tuple(embeds.shape[:2]) != (B, T):
            raise ValueError(f"outcome_model: embeds must be a ({B}, {T}, D) tensor")
        if not scores.requires_grad:
            raise ValueError("outcome_model: its scores do not depend on embeds (no gradient to attribute)")
        (grad,) = torch.autograd.grad(scores.sum(), embeds, allow_unused=True)
    if grad is None:
        raise ValueError("outcome_model: its scores do not depend on embeds (no gradient to attribute)")
    sal = (grad * embeds.detach()).sum(-1).to(torch.float64)
    sal = torch.where(rollouts.mask, sal, torch.zeros((), dtype=torch.float64))
    check_finite("outcome_model saliency", sal)
    return sal, scores


@register("acpo", level="step", inputs={"outcome_model": "outcome_model"}, status="implemented", paper="2510.08899",
          equation=r"A_k = s \, \frac{|c_k|}{\sum_j |c_j|},\quad c_k = \sum_{t \in \text{step } k} \frac{\partial "
                   r"f(y)}{\partial e_t} \cdot e_t",
          symbols="k: step; s: trajectory score (default total); f: outcome model's score; e_t: token t's input "
                  "embedding; normalize='signed' drops the |.|")
def acpo(rollouts: Rollouts, *, outcome_model: OutcomeModel, total=None, normalize: str = "abs") -> Credit:
    """ACPO attribution (Yin et al. 2025, arXiv:2510.08899): the outcome split over steps by gradient saliency.

    Inputs:
        rollouts: ``mask``, ``step_ids``, ``rewards`` (the outcome, the default ``total``).
        ``outcome_model`` (outcome_model): a callable ``outcome_model(rollouts) -> (scores,
        embeds)`` with ``scores`` (B,) differentiable with respect to ``embeds`` (B, T, D), the
        input embeddings of the generated tokens (for the tiny LM:
        ``ArithmeticLM.outcome_attribution_fn(critic)``).

    Formula:
        s(y)   = the outcome model's score of the response, e_t = input embedding of token t
        a_t    = (d s / d e_t) . e_t                     (gradient x input saliency of token t)
        c_i    = sum_{t in step i} a_t
        A_i    = total * c_i / sum_j c_j                 (normalize = "signed")
        A_i    = total * |c_i| / sum_j |c_j|             (normalize = "abs", default)

        Either way the step contributions sum to ``total`` (default: the outcome reward), the
        "factorised" reward of a step. "abs" reads saliency as a share of responsibility (every
        step's credit has the sign of ``total``); "signed" lets a step push against the outcome
        but is unstable when the saliencies nearly cancel. Every token of step i takes A_i.

    Defaults:
        total = None (the outcome reward ``rollouts.scores``; pass e.g. the outcome minus a
        baseline so that failed responses get negative credit to split), normalize = "abs".

    Degenerate input:
        a response whose saliencies are all zero (or cancel exactly under "signed") splits
        ``total`` equally over its steps; a one-step response gets ``total`` on its step; no
        generated tokens: no credit. total = 0 gives 0. Scores that do not depend on
        ``embeds`` are refused (there is no gradient to attribute).

    Deviations from the reference:
        attribution half only: ACPO's difficulty-aware curriculum (ordering training problems
        by how concentrated their credit is) and its entropy regulation act on data selection
        and the optimiser, outside the credit interface. The paper's step attribution is an
        information-theoretic (mutual-information surrogate) score on semantically segmented
        steps; the lab uses gradient x input saliency of an outcome model on the task's ``;``
        steps, the gradient-based attribution the survey describes.

    Returns:
        credit at level "step"; ``info``: ``saliency`` (B, T), ``step_saliency`` (B, S),
        ``model_scores`` (B,), ``total`` (B,), ``normalize``.

    Cost:
        ``aux_calls`` = one forward and one backward pass of the outcome model per response.
    """
    check_choice("normalize", normalize, ACPO_NORMS)
    B = rollouts.batch_size
    tot = trajectory_totals("total", total, rollouts.scores)
    sal, scores = gradient_input_saliency(rollouts, outcome_model)
    c, present = rollouts.view(sal, "step", "sum")
    weights = c.abs() if normalize == "abs" else c
    denom = weights.sum(1, keepdim=True)
    n_steps = present.sum(1, keepdim=True).clamp(min=1)
    uniform = present.to(torch.float64) / n_steps
    # near-zero denominators (all-zero or cancelling saliency) fall back to an equal split
    scale = c.abs().sum(1, keepdim=True)
    degenerate = denom.abs() <= 1e-12 * scale.clamp(min=1e-300)
    share = torch.where(degenerate, uniform, weights / torch.where(degenerate, torch.ones_like(denom), denom))
    step = torch.where(present, tot[:, None] * share, torch.zeros((), dtype=torch.float64))
    return Credit.from_level(rollouts, step, "step", "acpo", cost=Cost(aux_calls=B), saliency=sal,
                             step_saliency=c, model_scores=scores.detach(), total=tot, normalize=normalize)


# --------------------------------------------------------------------------- agentic: SPA-RL
# Appended for the agent worlds; its one extra import sits with the code that uses it.
from labkit.core.stats import group_normalize  # noqa: E402

SPA_CREDITS = ("reward", "return")


@register("spa_rl", level="turn", inputs={"contributions": "progress_contributions"}, status="implemented",
          paper="2505.20732",
          equation=r"A_{i,k} = c_{i,k} = \sum_{t \in \text{turn } k} c(x_t)",
          symbols="c: progress estimator's contribution, fitted so that sum_k c_k ~ outcome; credit='return': sum "
                  "over k' >= k; outcome_weight = 0")
def spa_rl(rollouts: Rollouts, *, contributions, credit: str = "reward", outcome_weight: float = 0.0,
           eps: float = 1e-6) -> Credit:
    """SPA-RL (Wang et al. 2025, arXiv:2505.20732): a progress estimator's per-turn contribution, trained to sum to the outcome, as the turn's reward.

    Inputs:
        rollouts: ``mask``, ``turn_ids``, ``rewards`` (the outcome R), ``group_ids``.
        ``contributions`` (progress_contributions): a (B, T) tensor of the per-position
        contribution, or a callable ``rollouts -> that tensor`` (a fitted
        ``labkit.learn.turn_models.ProgressEstimator`` is one).

    Formula:
        c_k = sum_{t in turn k} c(x_t)    the progress estimator's contribution of turn k, fitted so
                                          that sum_k c_k ~ R over trajectories
        credit = "reward" (default):  A_k = c_k
        credit = "return":            A_k = sum_{k' >= k} c_k'     (the progress still to come)
        plus, with outcome_weight w != 0:  A_k += w * (R_i - mean_group(R)) / (std_group(R) + eps)

        The progress P_k = sum_{k' <= k} c_k' is the estimated completion after turn k; c_k its
        increment. Every position of turn k takes A_k.

    Defaults:
        credit = "reward", outcome_weight = 0 (the contribution alone, SPA's intermediate
        reward), eps = 1e-6.

    Degenerate input:
        a one-turn trajectory gets its whole contribution on its turn (about its outcome, for a
        well-fitted estimator); an all-zero estimator gives zero credit (plus the GRPO term). A
        group of one gets its raw outcome in the GRPO term (``group_normalize``'s singleton
        rule). A row with no played turn gets 0.

    Deviations from the reference:
        SPA-RL's progress estimator is a small MLP head on the LLM agent's representation of the
        whole history, and its PPO reward adds a grounding signal (did the action execute in the
        environment); ToolWorld has no invalid actions, so the grounding term is left out, and
        the estimator sees the last observation and the action (a table, or a tiny MLP that
        also sees the turn index). The paper trains PPO with a critic on these rewards; here the
        reward itself (or its reward-to-go) is the credit, optionally mixed with GRPO.

    Returns:
        credit at level "turn"; ``info``: ``contributions`` (c_k, (B, N)), ``progress`` (P_k),
        ``episode_advantage`` (the GRPO term, (B,)), ``credit``, ``outcome_weight``.

    Cost:
        ``aux_calls`` = one estimator pass per trajectory when ``contributions`` is a callable;
        0 for a precomputed tensor. The fit (a ridge solve for the table) is not counted.
    """
    check_choice("credit", credit, SPA_CREDITS)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    eps = check_number("eps", eps, low=0.0)
    contributions, called = resolve_input("contributions", contributions, rollouts,
                                          expected="a (B, T) tensor of per-turn contributions or a callable "
                                                   "rollouts -> that tensor")
    x = per_position("contributions", contributions, rollouts.mask)
    cost = Cost(aux_calls=rollouts.batch_size if called else 0)
    c, present = rollouts.view(x, "turn", "sum")
    progress = torch.where(present, c.cumsum(1), torch.zeros((), dtype=torch.float64))
    adv = c if credit == "reward" else c.flip(1).cumsum(1).flip(1)
    ep = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps).normalized
    if outcome_weight:
        adv = adv + outcome_weight * ep[:, None]
    adv = torch.where(present, adv, torch.zeros((), dtype=torch.float64))
    return Credit.from_level(rollouts, adv, "turn", "spa_rl", cost=cost, contributions=c, progress=progress,
                             episode_advantage=ep, credit=credit, outcome_weight=outcome_weight)
