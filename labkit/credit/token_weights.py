"""Token weights on an outcome advantage: one GRPO number per trajectory, handed out unevenly.

GRPO paints a trajectory's group-relative advantage A_i on every token it generated. The five
methods here keep that advantage and change how much of it each token gets, from what the
sampling policy already knows about the token:

* STARE: its surprisal (-log pi) picks the tokens whose update moves the entropy most;
* PAPO: the sign of the entropy change its update causes (entropy polarity);
* DelTA: how well its log-prob gradient separates rewarded from unrewarded samples;
* KTAE: how strongly its presence in a response goes with a correct answer (group statistics);
* GRAIL: a gradient saliency of the token.

Every one returns token-level credit that is GRPO's (``labkit.credit.episode.grpo``, the
default eps and unbiased std) times or plus a per-token term; where the term is neutral the
credit is GRPO's exactly.

The entropy algebra STARE and PAPO read (derived here, for a softmax policy pi = softmax(z) at
one position, H = -sum_k pi_k log pi_k): dH/dz_k = -pi_k (log pi_k + H). A policy-gradient step
of the sampled token a with advantage A moves the logits by eta A (e_a - pi), so to first order

    Delta H = -eta A [ pi_a (log pi_a + H) - sum_k pi_k^2 (log pi_k + H) ].

The first term, the sampled token's own contribution, needs only the token's log-prob and the
entropy: raising a token whose surprisal -log pi_a exceeds the entropy raises H, raising a
typical or likely token (surprisal below H) lowers it. The second term is a correction that
needs the whole next-token distribution.
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.core.checks import ROUND_OFF, as_tensor, check_bool, check_choice, check_finite, check_in_range, check_int, \
    check_number, log_probabilities, per_position, resolve_input
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit.episode import grpo
from labkit.credit.redistribution import OutcomeModel, gradient_input_saliency
from labkit.credit.registry import register

__all__ = ["stare", "papo", "delta", "ktae", "grail", "entropy_polarity", "tabular_token_gradients", "lm_token_gradients",
           "answer_saliency_fn"]

_ZERO = torch.zeros((), dtype=torch.float64)


def _grpo_tokens(rollouts: Rollouts, eps: float) -> torch.Tensor:
    """GRPO's advantage on every generated token, (B, T) float64, 0 off the mask."""
    return grpo(rollouts, eps=eps).token.to(torch.float64)


def _policy_stats(rollouts: Rollouts, method: str, *, entropies: bool = True):
    """(log pi of the sampled token, entropy) per position, float64, 0 off the mask."""
    mask = rollouts.mask
    if rollouts.logprobs is None:
        raise ValueError(f"rollouts: {method} reads the sampling policy's logprobs, but this batch has none")
    logp = log_probabilities("rollouts.logprobs", rollouts.logprobs, mask)
    if not entropies:
        return logp, None
    if rollouts.entropies is None:
        raise ValueError(f"rollouts: {method} reads the sampling policy's entropies, but this batch has none")
    ent = per_position("rollouts.entropies", rollouts.entropies, mask)
    return logp, ent


def _batch_entropy(ent: torch.Tensor, mask: torch.Tensor) -> float:
    """Token-mean entropy over the generated positions (verl's token-mean aggregation)."""
    n = int(mask.sum())
    return float(ent[mask].sum()) / n if n else 0.0


def _top_by(scores: torch.Tensor, candidates: torch.Tensor, fraction: float) -> torch.Tensor:
    """The ceil(fraction * n) candidates with the largest score (at least one when there are
    candidates and fraction > 0); ties go to the earlier position (row-major)."""
    out = torch.zeros_like(candidates)
    n = int(candidates.sum())
    if n == 0 or fraction <= 0.0:
        return out
    k = min(n, max(1, int(n * fraction + 0.999999)))
    flat = candidates.reshape(-1).nonzero().flatten()
    order = torch.sort(-scores.reshape(-1)[flat], stable=True).indices[:k]
    out.reshape(-1)[flat[order]] = True
    return out


# --------------------------------------------------------------------------- STARE
STARE_VARIANTS = ("O1", "C2")


@register("stare", level="token", needs=("logprobs", "entropies"), status="implemented", paper="2606.19236",
          equation=r"A'_{i,t} = \omega_{i,t} A_i,\quad \omega_{i,t} = \begin{cases} W & (i,t) \in L^+ \\ "
                   r"M & (i,t) \in L^- \\ 1 & \text{otherwise} \end{cases}",
          symbols="A_i: GRPO advantage; L+: the top P of positive-advantage tokens by surprisal -log pi; L-: the "
                  "same among negative-advantage tokens (variant C2 only); W = 1.1, M = 0.9, P = 0.1; all omega = 1 "
                  "unless the batch's token-mean entropy is below the target 0.3")
def stare(rollouts: Rollouts, *, top_fraction: float = 0.1, up_weight: float = 1.1, down_weight: float = 0.9,
          variant: str = "O1", target_entropy: float | None = 0.3, eps: float = 1e-6) -> Credit:
    """STARE (arXiv:2606.19236): surprisal-guided token reweighting of GRPO's advantage, gated by entropy.

    Inputs:
        rollouts: ``rewards`` and ``group_ids`` (GRPO's advantage), ``logprobs`` (surprisal is
        -log pi of the sampled token) and ``entropies`` (the gate reads their token mean).

    Formula:
        A_i = GRPO's advantage. Among the tokens of positive-advantage trajectories, L+ is the
        top ``top_fraction`` (ceil, at least one) by surprisal s = -log pi; variant "C2" also
        takes L-, the same share of the negative-advantage tokens. omega = ``up_weight`` on L+,
        ``down_weight`` on L- (C2), 1 elsewhere; A'_{i,t} = omega_{i,t} A_i. The gate: when the
        batch's token-mean entropy is at or above ``target_entropy`` every omega is 1 (GRPO).
        Rare tokens of good answers are the ones whose reinforcement raises entropy (their
        surprisal exceeds the entropy: see the module docstring), so amplifying them works
        against entropy collapse.

    Defaults:
        top_fraction = 0.1, up_weight = 1.1, down_weight = 0.9, variant = "O1" (one-sided),
        target_entropy = 0.3 (the reference's run script), eps = 1e-6 (GRPO's).
        ``target_entropy=None`` keeps the gate always on.

    Degenerate input:
        no positive-advantage token (a failing group of one, an all-equal group) leaves L+
        empty; equal surprisals pick the earliest positions. A batch at or above the target
        entropy gets GRPO's credit unchanged.

    Deviations from the reference:
        none in the weights (the reference's ``compute_stare_token_weights``, variants O1 and
        C2, read for the formula): the gate reads the batch's own token-mean entropy, which is
        what the reference's controller is updated with before the loss. Ties in surprisal go to
        the earlier position (the reference's ``torch.topk`` leaves them unspecified). The
        adaptive weight schedule (off by default there) needs a training loop and is not here.
        The weights multiply the advantage, as they multiply the clipped surrogate there.

    Returns:
        credit at level "token"; ``info``: ``weights`` (B, T) omega, ``amplified`` and
        ``attenuated`` (B, T) bool (L+ and L-), ``gate_on``, ``batch_entropy``, ``advantage``
        (B, T) GRPO's.

    Cost:
        none beyond the sampled batch (log-probs and entropies come with it).
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0)
    up_weight = check_number("up_weight", up_weight, low=0.0)
    down_weight = check_number("down_weight", down_weight, low=0.0)
    check_choice("variant", variant, STARE_VARIANTS)
    if target_entropy is not None:
        target_entropy = check_number("target_entropy", target_entropy, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    mask = rollouts.mask
    logp, ent = _policy_stats(rollouts, "stare")
    A = _grpo_tokens(rollouts, eps)
    surprisal = -logp
    plus = _top_by(surprisal, mask & (A > 0), top_fraction)
    minus = _top_by(surprisal, mask & (A < 0), top_fraction) if variant == "C2" else torch.zeros_like(mask)
    h = _batch_entropy(ent, mask)
    gate = target_entropy is None or h < target_entropy
    w = torch.ones_like(A)
    if gate:
        w = torch.where(plus, up_weight, w)
        w = torch.where(minus, down_weight, w)
    w = torch.where(mask, w, _ZERO)
    return Credit.from_tokens(rollouts, (w * A).to(rollouts.rewards.dtype), "stare", weights=w, amplified=plus,
                              attenuated=minus, gate_on=bool(gate), batch_entropy=h, advantage=A)


# --------------------------------------------------------------------------- PAPO
def entropy_polarity(logprobs: torch.Tensor, entropies: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """First-order entropy change per unit step of each token's update, sampled-token term only:
    A pi_a (-log pi_a - H) (see the module docstring); > 0 the update expands entropy, < 0 it
    contracts it."""
    return advantages * logprobs.exp() * (-logprobs - entropies)


@register("papo", level="token", needs=("logprobs", "entropies"), status="adaptation",
          replaces="the online entropy-trajectory phase signal: the batch's token-mean entropy against a target "
                   "entropy; polarity from the sampled token's term only (log-prob and entropy), without the "
                   "state-wise distributional correction",
          paper="2605.11775",
          equation=r"A'_{i,t} = \left(1 + \beta\, \phi\, \operatorname{sign} P_{i,t}\right) A_i,\quad "
                   r"P_{i,t} = A_i\, \pi_{i,t} \left(-\log \pi_{i,t} - H_{i,t}\right)",
          symbols="A_i: GRPO advantage; pi: probability of the sampled token; H: entropy at that position; P: entropy "
                  "polarity (first-order entropy change of the token's update); phi = +1 when the batch's mean "
                  "entropy is below the target 0.3 (favour expansion), -1 otherwise; beta = 0.2")
def papo(rollouts: Rollouts, *, beta: float = 0.2, target_entropy: float = 0.3, eps: float = 1e-6) -> Credit:
    """PAPO (arXiv:2605.11775): advantage scaled asymmetrically by each token update's entropy polarity.

    Inputs:
        rollouts: ``rewards`` and ``group_ids`` (GRPO's advantage), ``logprobs`` and
        ``entropies`` of the sampling policy.

    Formula:
        For a softmax policy, a policy-gradient step of token a with advantage A changes the
        entropy to first order by -eta A [pi_a (log pi_a + H) - sum_k pi_k^2 (log pi_k + H)]
        (derived in the module docstring). The polarity is its sampled-token term,
        P = A pi_a (-log pi_a - H), computable from the token's log-prob and the entropy:
        positive (expanding) when a rare token is pushed up or a likely one pushed down,
        negative (contracting) otherwise. The phase phi = +1 when the batch's token-mean entropy
        is below ``target_entropy`` (exploration is short: expanding updates are favoured),
        -1 otherwise. A'_{i,t} = (1 + beta phi sign P_{i,t}) A_i: both branches are kept, one
        scaled up by beta and the other down.

    Defaults:
        beta = 0.2, target_entropy = 0.3, eps = 1e-6 (GRPO's): the lab's choices.

    Degenerate input:
        a token whose surprisal equals the entropy (a uniform policy: every token of the
        chain's uniform policy) has polarity 0 and keeps GRPO's credit; zero advantage stays
        0. ``beta = 0`` is GRPO.

    Deviations from the reference:
        the paper was not readable here and no public code was found; this follows the
        catalog's description ("signed token-level entropy polarity to adaptively reweight
        advantages across entropy-expanding and entropy-contracting updates") and the
        abstract's first-order analysis. The polarity drops the distributional correction
        (it needs the whole next-token distribution); the online phase signal from the
        entropy trajectory is replaced by one batch's entropy against a target; the sign-only
        weights and their size are the lab's.

    Returns:
        credit at level "token"; ``info``: ``polarity`` (B, T) P, ``weights`` (B, T),
        ``expanding`` and ``contracting`` (B, T) bool, ``phase`` (+1 or -1), ``batch_entropy``,
        ``advantage`` (B, T) GRPO's.

    Cost:
        none beyond the sampled batch.
    """
    beta = check_number("beta", beta, low=0.0, high=1.0)
    target_entropy = check_number("target_entropy", target_entropy, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    mask = rollouts.mask
    logp, ent = _policy_stats(rollouts, "papo")
    A = _grpo_tokens(rollouts, eps)
    pol = torch.where(mask, entropy_polarity(logp, ent, A), _ZERO)
    # a polarity within round-off of 0 (surprisal equal to the entropy) is neutral
    tol = 1e-12 * A.abs().clamp(min=1.0)
    direction = torch.where(pol.abs() <= tol, _ZERO, pol.sign())
    h = _batch_entropy(ent, mask)
    phase = 1.0 if h < target_entropy else -1.0
    w = torch.where(mask, 1.0 + beta * phase * direction, _ZERO)
    return Credit.from_tokens(rollouts, (w * A).to(rollouts.rewards.dtype), "papo", polarity=pol, weights=w,
                              expanding=mask & (direction > 0), contracting=mask & (direction < 0), phase=phase,
                              batch_entropy=h, advantage=A)


# --------------------------------------------------------------------------- DelTA
TokenGradients = Callable[[Rollouts], torch.Tensor]


def tabular_token_gradients(policy) -> TokenGradients:
    """A ``token_gradients`` input from a tabular policy (``probs()`` -> (n_states, n_actions)):
    ``fn(rollouts) -> (B, T, n_states * n_actions)``, at every generated position the exact
    gradient of log pi(a_t | s_t) with respect to the logit table, e_{s_t, a_t} - pi(. | s_t) on
    row s_t and 0 elsewhere (0 off the mask). The rollouts need ``states``; their ``tokens`` are
    the actions."""
    probs_fn = getattr(policy, "probs", None)
    if not callable(probs_fn):
        raise TypeError(f"policy: expected a tabular policy with probs() -> (n_states, n_actions), "
                        f"got {type(policy).__name__}")

    def fn(rollouts: Rollouts) -> torch.Tensor:
        with torch.no_grad():
            P = as_tensor("policy.probs()", probs_fn()).detach().to(torch.float64)
        if P.dim() != 2:
            raise ValueError(f"policy: probs() must be (n_states, n_actions), got shape {tuple(P.shape)}")
        if rollouts.states is None:
            raise ValueError("rollouts: tabular token gradients read the state of every position (states); "
                             "this batch has none")
        mask = rollouts.mask
        S, A = P.shape
        s, a = rollouts.states[mask].long(), rollouts.tokens[mask].long()
        if s.numel() and (int(s.max()) >= S or int(a.max()) >= A):
            raise ValueError(f"policy: its table is {(S, A)} (states, actions), but the rollouts visit state "
                             f"{int(s.max())} and take action {int(a.max())}")
        g = torch.zeros(s.numel(), S, A, dtype=torch.float64)
        rows = torch.arange(s.numel())
        g[rows, s] = -P[s]
        g[rows, s, a] += 1.0
        out = torch.zeros(*mask.shape, S * A, dtype=torch.float64)
        out[mask] = g.reshape(s.numel(), S * A)
        return out

    return fn


def lm_token_gradients(model, *, pad_id: int = 0) -> TokenGradients:
    """A ``token_gradients`` input from a causal LM: ``fn(rollouts) -> (B, T, V * D)``, at every
    generated position the gradient of log pi(token_t) with respect to the output layer's weights,
    (e_{token} - pi) h^T flattened (pi the next-token distribution, h the last hidden state; one
    forward pass, no grad). The rollouts need ``info['prompt_ids']``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a causal LM (torch module), got {type(model).__name__}")

    def fn(rollouts: Rollouts) -> torch.Tensor:
        prompts = rollouts.info.get("prompt_ids")
        if prompts is None:
            raise ValueError("rollouts: need info['prompt_ids'] (use ArithmeticLM.rollouts or load_reference)")
        mask, tokens = rollouts.mask, rollouts.tokens
        B, T = tokens.shape
        seqs = [list(p) + tokens[b][mask[b]].tolist() for b, p in enumerate(prompts)]
        L = max(len(q) for q in seqs)
        ids = torch.full((B, L), pad_id, dtype=torch.long)
        attention = torch.zeros(B, L, dtype=torch.long)
        for b, q in enumerate(seqs):
            ids[b, :len(q)] = torch.tensor(q)
            attention[b, :len(q)] = 1
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model(input_ids=ids, attention_mask=attention, output_hidden_states=True)
        finally:
            model.train(was_training)
        pi = torch.softmax(out.logits.double(), -1)
        h = out.hidden_states[-1].double()
        feats = torch.zeros(B, T, pi.shape[-1] * h.shape[-1], dtype=torch.float64)
        for b in range(B):
            cols = mask[b].nonzero().flatten()
            pos = len(prompts[b]) - 1 + torch.arange(cols.numel())     # the logits that score token j
            e = -pi[b, pos]
            e[torch.arange(cols.numel()), tokens[b, cols]] += 1.0
            feats[b, cols] = (e[:, :, None] * h[b, pos][:, None, :]).reshape(cols.numel(), -1)
        return feats

    return fn


@register("delta", level="token", inputs={"token_gradients": "token_gradients"}, status="adaptation",
          replaces="the paper's token-coefficient estimator (paper and code not readable here): a soft assignment of "
                   "each token to its own advantage side (cosine of its gradient to the difference of the side "
                   "centroids, through a sigmoid), refined for a fixed number of rounds; gradients exact on the "
                   "chain, the output layer's exact gradient on the LM",
          paper="2605.21467",
          equation=r"A'_{i,t} = c_{i,t} A_i,\quad c_{i,t} \propto 2\sigma\!\left(\frac{\sigma_i\, \cos(g_{i,t},\, "
                   r"\mu^+ - \mu^-)}{\tau}\right),\quad \mu^\pm = \frac{\sum_{\pm} c |A| g}{\sum_{\pm} c |A|}",
          symbols="A_i: GRPO advantage; sigma_i = sign A_i; g_{i,t}: the token's log-prob gradient (token_gradients: "
                  "e_{s,a} - pi(.|s) in a tabular policy's logits, (e_v - pi) h^T in an LM's output layer); mu+-: "
                  "advantage-weighted centroids of each side; c normalised to mean 1 on each side; tau = 0.25; "
                  "2 rounds")
def delta(rollouts: Rollouts, *, token_gradients, tau: float = 0.25, rounds: int = 2, eps: float = 1e-6) -> Credit:
    """DelTA (arXiv:2605.21467): token coefficients from how well a token's gradient separates the two sides.

    Inputs:
        rollouts: ``rewards`` and ``group_ids`` (GRPO's advantage).
        ``token_gradients`` (token_gradients): (B, T, F) float tensor, every generated token's
        log-prob gradient as a feature vector (or a callable rollouts -> that tensor):
        ``tabular_token_gradients(policy)`` (exact) or ``lm_token_gradients(model)`` (the output
        layer's exact gradient, a last-layer proxy of the whole gradient).

    Formula:
        The update direction of GRPO is sum A_i g_{i,t}: a linear discriminator between the
        positive side's centroid mu+ and the negative side's mu- of the token gradients g.
        Tokens shared by both sides pull both centroids alike and dilute it. Starting from
        c = 1, each round:
        mu+- = advantage-weighted mean of c g over the tokens of that side;
        d_{i,t} = sign(A_i) cos(g_{i,t}, mu+ - mu-) (how characteristic the token is of its own side);
        c_{i,t} = 2 sigmoid(d_{i,t} / tau), rescaled to mean 1 on each side (the self-normalised
        surrogate keeps each side's total weight). A'_{i,t} = c_{i,t} A_i.

    Defaults:
        tau = 0.25, rounds = 2, eps = 1e-6 (GRPO's): the lab's choices.

    Degenerate input:
        zero-advantage tokens keep 0 and stay out of the centroids; a side with no token has a
        zero centroid; a token with a zero gradient (a certain action) gets d = 0, c = 1 before
        rescaling; mu+ = mu- (nothing separates the sides) gives GRPO's credit.

    Deviations from the reference:
        the paper's method sections and its code were not readable here; this follows the
        catalog's description and the abstract (coefficients that amplify side-specific token
        gradient directions and down-weight shared ones, reweighting a self-normalised
        surrogate). The soft assignment rule (cosine, sigmoid, tau, rounds) is the lab's. The
        gradients are exact on a tabular world; on the LM they are the output layer's exact
        gradient (the paper names a last-layer token-gradient proxy; its exact form was not
        readable).

    Returns:
        credit at level "token"; ``info``: ``coefficients`` (B, T) c, ``alignment`` (B, T) d,
        ``advantage`` (B, T) GRPO's, ``separation`` ||mu+ - mu-|| of the last round.

    Cost:
        none beyond the sampled batch when the gradients come from its own forward pass (the
        LM's: one scoring pass, which the bench counts as an input cost).
    """
    tau = check_number("tau", tau, low=0.0, low_open=True)
    rounds = check_int("rounds", rounds, low=1)
    eps = check_number("eps", eps, low=0.0)
    mask = rollouts.mask
    G, _ = resolve_input("token_gradients", token_gradients, rollouts,
                         expected="every generated token's log-prob gradient as a (B, T, F) tensor")
    G = as_tensor("token_gradients", G)
    if G.dim() != 3 or tuple(G.shape[:2]) != tuple(mask.shape):
        raise ValueError(f"token_gradients: expected shape ({rollouts.batch_size}, {rollouts.horizon}, F), "
                         f"got {tuple(G.shape)}")
    g = G[mask].to(torch.float64)                       # (N, F)
    check_finite("token_gradients", g)
    A = _grpo_tokens(rollouts, eps)
    adv = A[mask]
    side = adv.sign()
    norm = g.norm(dim=1)
    c = torch.ones_like(adv)
    d = torch.zeros_like(adv)
    sep = 0.0
    pos, neg = side > 0, side < 0

    def centroid(part, weight):
        total = weight[part].sum()
        return (weight[part, None] * g[part]).sum(0) / total if float(total) > 0 else g.new_zeros(g.shape[1])

    for _ in range(rounds):
        w = c * adv.abs()
        mu = centroid(pos, w) - centroid(neg, w)
        sep = float(mu.norm())
        denom = norm * sep
        ok = denom > 1e-12
        d = torch.where(ok, side * (g @ mu) / torch.where(ok, denom, 1.0), _ZERO)
        c = 2.0 * torch.sigmoid(d / tau)
        for part in (pos, neg):
            n = int(part.sum())
            if n:
                c[part] = c[part] * n / c[part].sum()
        c = torch.where(side == 0, 1.0, c)
    coef = torch.zeros_like(A)
    coef[mask] = c
    align = torch.zeros_like(A)
    align[mask] = d
    return Credit.from_tokens(rollouts, (coef * A).to(rollouts.rewards.dtype), "delta", coefficients=coef,
                              alignment=align, advantage=A, separation=sep)


# --------------------------------------------------------------------------- KTAE
KTAE_KEYS = ("auto", "token", "state_action")


def _fisher_two_sided(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Two-sided Fisher exact test p-value of each 2x2 table [[a, b], [c, d]] (float64 counts):
    the sum of the hypergeometric probabilities of every table with the same margins that is at
    most as likely as the observed one."""
    r1, c1, n = a + b, a + c, a + b + c + d
    out = torch.ones_like(a)

    def log_comb(m, k):
        return torch.lgamma(m + 1) - torch.lgamma(k + 1) - torch.lgamma(m - k + 1)

    for i in range(a.numel()):
        lo, hi = int(max(0.0, float(r1[i] + c1[i] - n[i]))), int(min(float(r1[i]), float(c1[i])))
        k = torch.arange(lo, hi + 1, dtype=torch.float64)
        logp = log_comb(c1[i], k) + log_comb(n[i] - c1[i], r1[i] - k) - log_comb(n[i], r1[i])
        p = logp.exp()
        obs = float((log_comb(c1[i], a[i]) + log_comb(n[i] - c1[i], r1[i] - a[i]) - log_comb(n[i], r1[i])).exp())
        # relative tolerance: tables as likely as the observed one are counted despite round-off
        out[i] = float(p[p <= obs * (1 + 1e-7)].sum().clamp(max=1.0))
    return out


def _information_gain(a, b, c, d) -> torch.Tensor:
    """Mutual information (bits) between 'the key is present' and 'the answer is correct'."""
    n = a + b + c + d

    def h(*parts):
        tot = sum(parts)
        out = torch.zeros_like(tot)
        for p in parts:
            q = torch.where(tot > 0, p / torch.where(tot > 0, tot, 1.0), _ZERO)
            out = out - torch.where(q > 0, q * torch.log2(torch.where(q > 0, q, 1.0)), _ZERO)
        return out

    hy = h(a + c, b + d)
    hyx = (a + b) / n * h(a, b) + (c + d) / n * h(c, d)
    return torch.where(n > 0, hy - hyx, _ZERO)


def _ktae_group(keys_rows: list[torch.Tensor], correct: torch.Tensor, alpha: float, beta_ig: float,
                use_tf: bool, top: float) -> dict[int, float]:
    """KTAE's key weight of every key appearing in one group's responses (keys_rows: each
    response's keys, in order; correct: (n,) bool)."""
    n_c, n_w = int(correct.sum()), int((~correct).sum())
    if n_c == 0 or n_w == 0:
        return {}
    every = torch.cat(keys_rows) if keys_rows else torch.zeros(0, dtype=torch.long)
    uniq = torch.unique(every)
    if uniq.numel() == 0:
        return {}
    present = torch.stack([torch.isin(uniq, r) for r in keys_rows]).to(torch.float64)     # (n, K)
    a = present[correct].sum(0)
    b = present[~correct].sum(0)
    c, d = n_c - a, n_w - b
    ig = _information_gain(a, b, c, d)
    p = _fisher_two_sided(a, b, c, d)
    fisher = torch.where((p - 1.0).abs() > 1e-9, torch.exp(-2.0 * p), _ZERO)
    x = torch.asin(torch.sqrt((a / (a + c + 1e-10)).clamp(0, 1))) - torch.asin(torch.sqrt((b / (b + d + 1e-10)).clamp(0, 1)))
    if use_tf:
        k1, bb = 2.0, 0.5
        cor = torch.cat([r for r, ok in zip(keys_rows, correct.tolist()) if ok])
        wro = torch.cat([r for r, ok in zip(keys_rows, correct.tolist()) if not ok])
        tot_c, tot_w = cor.numel(), wro.numel()
        if tot_c and tot_w:
            avg = (tot_c + tot_w) / 2
            kc, kw = k1 * (1 - bb + bb * tot_c / avg), k1 * (1 - bb + bb * tot_w / avg)
            fc = (cor[:, None] == uniq[None, :]).sum(0).to(torch.float64) / tot_c
            fw = (wro[:, None] == uniq[None, :]).sum(0).to(torch.float64) / tot_w
            tfc, tfw = fc * (k1 + 1) / (fc + kc), fw * (k1 + 1) / (fw + kw)
            x = x + tfc / (tfw + 1e-5) - tfw / (tfc + 1e-5)
    score = (alpha * fisher + beta_ig * ig) * x / (alpha + beta_ig)
    weight = (torch.sigmoid(score) - 0.5) * 2.0 * top
    return dict(zip(uniq.tolist(), weight.tolist()))


@register("ktae", level="token", status="adaptation",
          replaces="the key of the presence statistics: on a world that records states (the chain) a token is its "
                   "(state, action) pair, since the action ids alone occur in nearly every response; on the LM it is "
                   "the token id, as published",
          paper="2505.16826",
          equation=r"A'_{i,t} = A_i + \mathrm{top}\left(2\sigma(k_{o_{i,t}}) - 1\right),\quad k_v = "
                   r"\frac{\alpha\, e^{-2 p_v} + \beta\, \mathrm{IG}_v}{\alpha + \beta}\left(h_v + "
                   r"\frac{tf^+_v}{tf^-_v} - \frac{tf^-_v}{tf^+_v}\right)",
          symbols="A_i: GRPO advantage; v = o_{i,t}: the token's key (token id, or (state, action) on a tabular "
                  "world); in its group: p_v two-sided Fisher exact p of presence vs correct, IG_v information gain "
                  "(bits), h_v = asin sqrt(share of correct responses containing v) - the same for wrong ones, "
                  "tf+-: BM25-saturated frequency among correct / wrong tokens; alpha = beta = top = 1")
def ktae(rollouts: Rollouts, *, alpha: float = 1.0, beta_ig: float = 1.0, use_tf: bool = True, top: float = 1.0,
         key: str = "auto", eps: float = 1e-6) -> Credit:
    """KTAE, key-token advantage estimation (arXiv:2505.16826): group statistics of token presence and correctness.

    Inputs:
        rollouts: ``rewards`` and ``group_ids`` (GRPO's advantage; a response is correct when its
        score is > 0), ``tokens``; ``states`` when the key is the (state, action) pair.

    Formula:
        In each group, for every key v in its responses: the 2x2 table of (contains v) x
        (correct); p_v its two-sided Fisher exact p-value, mapped to e^{-2 p_v} (0 when p_v = 1);
        IG_v the information gain of presence about correctness (bits); h_v = asin sqrt(a/(a+c))
        - asin sqrt(b/(b+d)) (half Cohen's h of the two presence rates); with ``use_tf`` the
        BM25-saturated frequencies tf+-_v of v among the correct and wrong responses' tokens add
        tf+/tf- - tf-/tf+ (each with 1e-5 in the denominator). k_v = (alpha e^{-2p} + beta IG) x /
        (alpha + beta); the key weight is top (2 sigmoid(k_v) - 1), in (-top, top), positive
        for keys that go with correct answers. A'_{i,t} = A_i + weight(key of token t).

    Defaults:
        alpha = 1, beta_ig = 1, use_tf = True, top = 1 (the values the reference's advantage
        function uses), key = "auto" ((state, action) when the rollouts carry states, else the
        token id), eps = 1e-6 (GRPO's).

    Degenerate input:
        a group of one, or a group with no correct or no wrong response, gets no key weights
        (GRPO's credit): the statistics need both outcomes. A key present in every response of
        the group has p = 1, IG = 0: weight 0.

    Deviations from the reference:
        (read for the formula: ``compute_ktae_outcome_advantage_and_keytokens`` and
        ``ComputeKeyTokens``) float64 instead of float32; the Fisher test counts tables within a
        relative 1e-7 of the observed one's probability as equally likely (float32 ties are
        left to chance there), and p is taken as 1 within 1e-9. The reference zeroes the weight
        of its tokenizer's end-of-text id; labkit does not (the lab's tasks give it no special
        role). On the chain the key is the (state, action) pair (the adaptation).

    Returns:
        credit at level "token"; ``info``: ``key_weight`` (B, T) the added term, ``advantage``
        (B, T) GRPO's, ``key`` (the key used).

    Cost:
        none beyond the sampled batch.
    """
    alpha = check_number("alpha", alpha, low=0.0)
    beta_ig = check_number("beta_ig", beta_ig, low=0.0)
    if alpha + beta_ig <= 0:
        raise ValueError("alpha: alpha + beta_ig must be > 0 (the key score divides by it)")
    use_tf = check_bool("use_tf", use_tf)
    top = check_number("top", top, low=0.0)
    check_choice("key", key, KTAE_KEYS)
    eps = check_number("eps", eps, low=0.0)
    if key == "auto":
        key = "state_action" if rollouts.states is not None else "token"
    if key == "state_action" and rollouts.states is None:
        raise ValueError("key: 'state_action' needs rollouts.states, but this batch has none")
    mask = rollouts.mask
    A = _grpo_tokens(rollouts, eps)
    tokens = rollouts.tokens.long()
    if key == "state_action":
        width = int(tokens[mask].max()) + 1 if bool(mask.any()) else 1
        keys = rollouts.states.long() * width + tokens
    else:
        keys = tokens
    bonus = torch.zeros_like(A)
    scores = rollouts.scores.to(torch.float64)
    for g in torch.unique(rollouts.group_ids).tolist():
        rows = (rollouts.group_ids == g).nonzero().flatten().tolist()
        if len(rows) < 2:
            continue
        table = _ktae_group([keys[r][mask[r]] for r in rows], scores[rows] > 0, alpha, beta_ig, use_tf, top)
        if not table:
            continue
        for r in rows:
            ks = keys[r][mask[r]].tolist()
            bonus[r, mask[r]] = torch.tensor([table[k] for k in ks], dtype=torch.float64)
    check_finite("ktae key weights", bonus)
    return Credit.from_tokens(rollouts, (A + bonus).to(rollouts.rewards.dtype), "ktae", key_weight=bonus,
                              advantage=A, key=key)


# --------------------------------------------------------------------------- GRAIL
@register("grail", level="token", needs=("logprobs",), inputs={"sum_pi_squared": "sum_pi_squared"},
          status="adaptation",
          replaces="the gradient-activation saliency of the answer with respect to the policy's hidden activations: "
                   "by default the squared norm of each token's own log-prob gradient with respect to its logits "
                   "(from logprobs and sum_pi_squared); on the LM, gradient x input-embedding saliency of the "
                   "policy's own answer log-probability (outcome_model)",
          paper="2606.04889",
          equation=r"A'_{i,t} = A_i \frac{n_i\, S_{i,t}}{\sum_{t'} S_{i,t'}},\quad S_{i,t} = 1 - 2\pi_{i,t} + "
                   r"\sum_v \pi_{i,t}(v)^2 \;\text{or}\; \left|\nabla_{x_{i,t}} \log p(\text{answer}) \cdot "
                   r"x_{i,t}\right|",
          symbols="A_i: GRPO advantage; n_i: trajectory i's generated tokens; S: saliency, by default ||d log pi / d "
                  "logits||^2 of the sampled token, or with outcome_model the gradient x input embedding x of the "
                  "answer's log-probability; S summing to 0 in a trajectory gives every token 1")
def grail(rollouts: Rollouts, *, sum_pi_squared, outcome_model: OutcomeModel | None = None,
          eps: float = 1e-6) -> Credit:
    """GRAIL (arXiv:2606.04889): GRPO's sequence advantage handed out to tokens by a gradient saliency.

    Inputs:
        rollouts: ``rewards`` and ``group_ids`` (GRPO's advantage), ``logprobs``.
        ``sum_pi_squared`` (sum_pi_squared): (B, T) sum over the vocabulary of pi(v)^2 at every
        position (or a callable rollouts -> that tensor).
        outcome_model: optional callable rollouts -> (scores (B,), input embeddings (B, T, D)),
        scores differentiable in the embeddings (``answer_saliency_fn`` builds one from a causal
        LM: the log-probability of its own final answer); when given it replaces the default
        saliency.

    Formula:
        S_{i,t} = 1 - 2 pi_{i,t} + sum_v pi_{i,t}(v)^2, the squared norm of the sampled token's
        log-prob gradient with respect to the logits (the policy's last activation): how far an
        update on this token can move the policy there; or, with ``outcome_model``,
        S_{i,t} = |grad_{x_{i,t}} score_i . x_{i,t}| (gradient x input). The weights
        w_{i,t} = n_i S_{i,t} / sum_t' S_{i,t'} have mean 1 over each trajectory, so the
        trajectory's total credit is GRPO's; A'_{i,t} = w_{i,t} A_i.

    Defaults:
        outcome_model = None, eps = 1e-6 (GRPO's).

    Degenerate input:
        a trajectory whose saliencies sum to 0 (every token certain) gets weight 1 everywhere
        (GRPO's credit); equal saliencies give GRPO's credit (the chain's uniform policy).

    Deviations from the reference:
        the paper's method section and code were not readable here; this follows the abstract
        and the catalog ("gradient-activation saliency to reweight sequence-level advantages
        into intrinsic token-wise advantages", more weight on tokens more locally sensitive to
        the final answer). The saliency is the adaptation: a tabular policy has no hidden
        activations, so by default it is the norm of the token's own logit gradient, which needs
        no model call; the LM's gradient x input of its own answer log-probability (one forward
        and backward pass) is closer to the paper's. The mean-1 normalisation is the lab's.

    Returns:
        credit at level "token"; ``info``: ``saliency`` (B, T) S, ``weights`` (B, T) w,
        ``advantage`` (B, T) GRPO's, ``source`` ("logit_gradient" or "outcome_model").

    Cost:
        none beyond the sampled batch by default (sum_pi_squared is a reduction of its logits);
        with ``outcome_model``, ``aux_calls`` = B (one forward and backward pass per response).
    """
    eps = check_number("eps", eps, low=0.0)
    mask = rollouts.mask
    logp, _ = _policy_stats(rollouts, "grail", entropies=False)
    s2, _ = resolve_input("sum_pi_squared", sum_pi_squared, rollouts,
                          expected="the policy's sum over the vocabulary of squared probabilities, (B, T)")
    s2 = per_position("sum_pi_squared", s2, mask)
    check_in_range("sum_pi_squared", s2, low=0.0, high=1.0 + ROUND_OFF, where=mask,
                   what="sums of squared probabilities")
    A = _grpo_tokens(rollouts, eps)
    cost = Cost()
    if outcome_model is not None:
        sal = gradient_input_saliency(rollouts, outcome_model)[0].abs()
        cost, source = Cost(aux_calls=rollouts.batch_size), "outcome_model"
    else:
        sal = torch.where(mask, (1.0 - 2.0 * logp.exp() + s2).clamp(min=0.0), _ZERO)
        source = "logit_gradient"
    n = mask.sum(1, keepdim=True).to(torch.float64)
    total = sal.sum(1, keepdim=True)
    scale = sal.abs().max(1, keepdim=True).values
    flat = total <= 1e-12 * scale.clamp(min=1e-300)
    w = torch.where(flat, 1.0, n * sal / torch.where(flat, 1.0, total))
    w = torch.where(mask, w, _ZERO)
    return Credit.from_tokens(rollouts, (w * A).to(rollouts.rewards.dtype), "grail", cost=cost, saliency=sal,
                              weights=w, advantage=A, source=source)


def answer_saliency_fn(model, *, answer_steps: int = 1):
    """An ``outcome_model`` for GRAIL from a causal LM: ``fn(rollouts) -> (scores, embeds)``,
    ``scores`` (B,) the log-probability the model gives the tokens of each response's last
    ``answer_steps`` steps (its final answer), differentiable with respect to ``embeds`` (B, T, D),
    the input embeddings of the generated tokens (the prompt's are held fixed). The rollouts need
    ``info['prompt_ids']``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a causal LM (torch module), got {type(model).__name__}")
    answer_steps = check_int("answer_steps", answer_steps, low=1)

    def fn(rollouts: Rollouts):
        prompts = rollouts.info.get("prompt_ids")
        if prompts is None:
            raise ValueError("rollouts: need info['prompt_ids'] (use ArithmeticLM.rollouts or load_reference)")
        table = model.get_input_embeddings()
        mask = rollouts.mask
        gen = table(rollouts.tokens.clamp(min=0)).detach().requires_grad_(True)       # (B, T, D)
        last = rollouts.step_ids.max(1).values
        answer = mask & (rollouts.step_ids > (last - answer_steps)[:, None])
        # one right-padded batch: prompt, then the generated tokens (positions off the mask left out)
        rows, picks = [], []
        for b in range(rollouts.batch_size):
            cols = mask[b].nonzero().flatten()
            p = torch.tensor(prompts[b], dtype=torch.long)
            rows.append(torch.cat([table(p).detach(), gen[b, cols]]))
            picks.append((len(p), cols))
        L = max(len(r) for r in rows)
        x = torch.stack([torch.cat([r, r.new_zeros(L - len(r), r.shape[1])]) for r in rows])
        attention = (torch.arange(L)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
        logp = torch.log_softmax(model(inputs_embeds=x, attention_mask=attention).logits.double(), -1)
        scores = []
        for b, (n_prompt, cols) in enumerate(picks):
            # position n_prompt - 1 + j predicts generated token j
            pred = logp[b, n_prompt - 1:n_prompt - 1 + len(cols)]
            pick = pred.gather(1, rollouts.tokens[b, cols][:, None]).squeeze(1)
            scores.append(pick[answer[b, cols]].sum())
        return torch.stack(scores), gen

    return fn
