"""Traces and decompositions: credit spread over a response by a trace, a return predictor or a
log-probability ratio, on top of (or instead of) GRPO's one number per response.

* GRPO-lambda (arXiv 2510.00194): an eligibility trace over the tokens weighs GRPO's advantage,
  a critic-free lambda-return;
* RUDDER (arXiv 1806.07857): a model predicts the return from every prefix; each position's
  redistributed reward is the change of that prediction, and its credit the redistributed
  reward-to-go;
* Progress Advantage (arXiv 2606.26080): the log-probability ratio between an RL-trained policy
  and its reference, summed per step, is the step's (optimal) advantage;
* SC-GRPO (arXiv 2606.18810): the per-token divergence between the policy conditioned on one of
  its own verified-correct solutions and the policy itself multiplies GRPO's advantage.

The models are explicit inputs (tensors or callables); the estimators never run one.
``labkit.bench.later_inputs`` builds them for the benchmark's reasoning tasks (a fitted return
table, a policy trained a few sampled steps, a conditioned policy); the helpers here
(``fit_return_table``, ``trained_policy``, ``self_conditioned_logprobs``) do the fitting.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_bool, check_choice, check_int, check_number
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.credit.implicit import _at_level, _logprobs, _policy_logprobs
from labkit.credit.redistribution import prefix_scores
from labkit.credit.registry import register

TRACE_STYLES = ("recent", "early", "both")
RUDDER_CREDITS = ("return", "reward")
LEVELS = ("token", "step")


def _positions(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, d): each generated token's index among its row's generated tokens (0 first) and its
    distance to the row's last generated token (0 last); 0 off the mask."""
    m = mask.to(torch.long)
    k = m.cumsum(1) - 1
    n = m.sum(1, keepdim=True)
    d = n - 1 - k
    zero = torch.zeros((), dtype=torch.long)
    return torch.where(mask, k, zero), torch.where(mask, d, zero)


def _grpo(rollouts: Rollouts, eps: float, normalize_std: bool) -> torch.Tensor:
    return group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                           normalize_std=normalize_std).normalized


# --------------------------------------------------------------------------- GRPO-lambda
@register("grpo_lambda", level="token", status="implemented", paper="2510.00194",
          equation=r"A_{i,t} = w_{i,t}\,\frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)} s + "
                   r"\epsilon},\quad w_{i,t} = (\gamma\lambda)^{n_i - 1 - t}",
          symbols="s_i: trajectory score; n_i: its generated tokens, t counted among them; lambda = 0.99, gamma = 1; "
                  "trace='early': w = (gamma lambda)^t; 'both': the mean of the two; std unbiased, eps = 1e-6")
def grpo_lambda(rollouts: Rollouts, *, lam: float = 0.99, gamma: float = 1.0, trace: str = "recent",
                eps: float = 1e-6, normalize_std: bool = True) -> Credit:
    """GRPO-lambda (Parthasarathi et al. 2025, arXiv:2510.00194): GRPO's advantage weighted over the tokens by an eligibility trace.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``mask``, ``group_ids``.

    Formula:
        A_hat_i = (s_i - mean_group) / (std_group + eps)        (GRPO's advantage)
        critic-free TD errors: the value of every prefix is taken as the group's mean score
        (GRPO's one baseline), so with the reward at the end every TD error is 0 except the
        last token's, delta_{n-1} = A_hat_i. The lambda-return advantage (forward view, GAE)
        of token t is then
            A_{i,t} = sum_l (gamma lambda)^l delta_{t+l} = (gamma lambda)^(n_i - 1 - t) A_hat_i
        which is the backward view's accumulating trace of grad log pi read once at the end of
        the response (trace = "recent": late tokens weigh more).
        trace = "early":  w_t = (gamma lambda)^t            (the trace run from the start)
        trace = "both":   w_t = ((gamma lambda)^(n-1-t) + (gamma lambda)^t) / 2
        A_{i,t} = w_t A_hat_i, t counted over generated tokens only.

    Defaults:
        lam = 0.99, gamma = 1.0, trace = "recent", eps = 1e-6, normalize_std = True (GRPO's).

    Degenerate input:
        gamma * lam = 1 gives every token weight 1: GRPO exactly; lam = 0
        keeps only the last token ("recent") or the first ("early"). A group of one gets its raw
        score / (1 + eps) as A_hat (GRPO's singleton rule); a group with equal scores gets 0; a
        row with nothing generated gets nothing.

    Deviations from the reference:
        paper not readable here; follows the catalog's description (critic-free lambda-return
        and eligibility-trace weighting of GRPO's signal over the tokens) and public summaries
        of the paper (a trace over the tokens' log-probabilities applied after each response, a
        critic-free TD error, several trace weightings including one that balances early and
        late tokens). The lab's reading: the critic-free value is GRPO's group mean at every
        prefix, so the lambda-return is a trace weight on GRPO's advantage; the "early" and
        "both" weightings are the lab's forms of the paper's variations; intermediate rewards
        enter only through the score; the negative-advantage clamping the summaries mention is
        left to the loss.

    Returns:
        credit at level "token"; ``info``: ``weights`` (B, T) w_t, ``advantage`` (B,) A_hat,
        ``lam``, ``gamma``, ``trace``.

    Cost:
        none beyond the sampled batch.
    """
    lam = check_number("lam", lam, low=0.0, high=1.0)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    check_choice("trace", trace, TRACE_STYLES)
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    mask = rollouts.mask
    k, d = _positions(mask)
    decay = torch.tensor(gamma * lam, dtype=torch.float64)
    late, early = decay ** d.to(torch.float64), decay ** k.to(torch.float64)
    w = {"recent": late, "early": early, "both": (late + early) / 2}[trace]
    w = torch.where(mask, w, torch.zeros((), dtype=torch.float64))
    adv = _grpo(rollouts, eps, normalize_std)
    return Credit.from_tokens(rollouts, (w * adv[:, None]).to(rollouts.rewards.dtype), "grpo_lambda",
                              weights=w, advantage=adv, lam=lam, gamma=gamma, trace=trace)


# --------------------------------------------------------------------------- RUDDER
@register("rudder", level="token", inputs={"scores": "prefix_scores"}, status="adaptation", paper="1806.07857",
          replaces="the LSTM return predictor: on the chain a table of the mean return per (state, action) fitted on "
                   "a separate history batch (the chain's state is its whole history); on the tiny LM the shipped "
                   "outcome reward model read at every prefix",
          equation=r"A_t = \sum_{t' \ge t} r'_{t'} = R - g_{t-1},\quad r'_t = g_t - g_{t-1} "
                   r"+ \mathbb{1}[t = n-1]\,(R - g_{n-1})",
          symbols="g_t: the predictor's return after position t; g_{-1}: before the first (prompt_scores, 0 unless "
                  "given); R: the trajectory's return; credit='reward' gives r'_t")
def rudder(rollouts: Rollouts, *, scores, prompt_scores=None, credit: str = "return",
           correction: bool = True) -> Credit:
    """RUDDER (Arjona-Medina et al. 2019, arXiv:1806.07857): return decomposition, the change of a return predictor as the redistributed reward.

    Inputs:
        rollouts: ``rewards`` (the return R is their sum), ``mask``.
        ``scores`` (prefix_scores): (B, T) the predicted return after every generated position
        g_t, or a callable ``rollouts -> that tensor`` or ``-> (scores, prompt_scores)``
        (``fit_return_table(...)`` on a tabular world; an outcome reward model's
        ``prefix_scores`` on the tiny LM).

    Formula:
        r'_t = g_t - g_{t-1}                 (contribution analysis by differences; g_{-1} = the
                                             prompt's prediction)
        correction = True: the last generated position also gets R - g_{n-1}, so that
        sum_t r'_t = R - g_{-1}: the redistributed rewards keep the return.
        credit = "return" (default): A_t = sum_{t' >= t} r'_t' = R - g_{t-1}, the redistributed
        reward-to-go (with a good predictor its expectation given the position is r'_t: the
        future is already paid out); credit = "reward": A_t = r'_t.

    Defaults:
        prompt_scores = None (taken as 0: the first position carries the whole prediction),
        credit = "return", correction = True.

    Degenerate input:
        a constant predictor c gives r'_0 = c - g_{-1} and 0 after it (plus R - c at the end);
        a perfect predictor g_t = R moves all credit to the positions where the prediction
        changed. A row with nothing generated gets nothing. Positions off the mask are ignored.

    Deviations from the reference:
        RUDDER's predictor is an LSTM trained online on the agent's episodes (with auxiliary
        losses) and its redistribution feeds a PPO or Q-learning agent; here the predictor is
        an input: a table of the mean return per (state, action) fitted on a history batch on
        the chain (a Markov world: its state holds the history an LSTM would read), the shipped
        outcome reward model on the tiny LM. Integrated-gradient and layer-wise relevance
        contribution analyses are not offered, only differences of predictions.

    Returns:
        credit at level "token"; ``info``: ``redistributed`` (B, T) r'_t, ``predictions`` (B, T)
        g_t, ``prompt_scores`` (B,), ``credit``, ``correction``.

    Cost:
        ``aux_calls`` = predictions made when ``scores`` is a callable (one per generated
        position, plus one per prompt when it returns prompt scores); 0 for a tensor.
    """
    check_choice("credit", credit, RUDDER_CREDITS)
    correction = check_bool("correction", correction)
    g, p, calls = prefix_scores(rollouts, scores, prompt_scores)
    mask = rollouts.mask
    pos = torch.arange(rollouts.horizon).expand_as(mask)
    # the prediction before each generated position: the previous generated position's, or the prompt's
    prev = torch.where(mask, pos, -1).cummax(1).values
    prev = torch.cat([torch.full_like(prev[:, :1], -1), prev[:, :-1]], 1)
    before = torch.where(prev >= 0, g.gather(1, prev.clamp(min=0)), p[:, None])
    zero = torch.zeros((), dtype=torch.float64)
    r = torch.where(mask, g - before, zero)
    if correction:
        R = torch.where(mask, rollouts.rewards.to(torch.float64), zero).sum(1)
        last = torch.where(mask, pos, -1).max(1).values
        rows = (last >= 0).nonzero().flatten()
        r[rows, last[rows]] += R[rows] - g[rows, last[rows]]
    token = r if credit == "reward" else torch.where(mask, r.flip(1).cumsum(1).flip(1), zero)
    return Credit.from_tokens(rollouts, token.to(rollouts.rewards.dtype), "rudder", cost=Cost(aux_calls=calls),
                              redistributed=r, predictions=g, prompt_scores=p, credit=credit, correction=correction)


def fit_return_table(history: Rollouts, n_states: int, n_actions: int, *, prior: float = 1.0):
    """RUDDER's return predictor for a tabular world: the mean return of the ``history`` episodes
    that took action a in state s, shrunk towards the history's mean return by ``prior`` pseudo
    episodes (an unseen pair predicts that mean). Returns ``(predict, mean)``: ``predict(rollouts)
    -> (B, T)`` the prediction after every generated position (0 off the mask), ``mean`` the
    history's mean return (the prediction before any action)."""
    n_states = check_int("n_states", n_states, low=1)
    n_actions = check_int("n_actions", n_actions, low=1)
    prior = check_number("prior", prior, low=0.0)
    if history.states is None:
        raise ValueError("history: needs rollouts.states (a tabular world's sampler records them)")
    m = history.mask
    R = torch.where(m, history.rewards.to(torch.float64), 0.0).sum(1)
    mean = float(R.mean())
    cell = (history.states.clamp(0, n_states - 1) * n_actions + history.tokens.clamp(0, n_actions - 1))[m]
    ret = R[:, None].expand_as(m)[m]
    total = torch.zeros(n_states * n_actions, dtype=torch.float64).index_add_(0, cell, ret)
    count = torch.zeros(n_states * n_actions, dtype=torch.float64).index_add_(0, cell, torch.ones_like(ret))
    table = torch.where(count + prior > 0, (total + prior * mean) / (count + prior).clamp(min=1e-300),
                        torch.full_like(total, mean))

    def predict(rollouts: Rollouts) -> torch.Tensor:
        c = rollouts.states.clamp(0, n_states - 1) * n_actions + rollouts.tokens.clamp(0, n_actions - 1)
        return torch.where(rollouts.mask, table[c], 0.0)

    return predict, mean


# --------------------------------------------------------------------------- Progress Advantage
@register("progress_advantage", level="step", needs=("logprobs",), inputs={"ref_logprobs": "ref_logprobs"},
          status="adaptation", paper="2606.26080",
          replaces="the RL post-trained LLM agent and its reference: on the chain the uniform reference after ten "
                   "sampled GRPO policy-gradient steps; on the tiny LM the DPO-tuned copy against the base model (no "
                   "RL-trained copy ships)",
          equation=r"A_{i,k} = \beta \sum_{t \in \text{step } k} \left(\log \pi_\theta(y_t \mid s_t) - \log "
                   r"\pi_{\text{ref}}(y_t \mid s_t)\right)",
          symbols="pi_theta: the RL-trained policy; pi_ref: its reference (the policy before RL); beta = 1; "
                  "level='token' gives each token its own term")
def progress_advantage(rollouts: Rollouts, *, ref_logprobs, logprobs=None, beta: float = 1.0,
                       level: str = "step") -> Credit:
    """Progress Advantage (Oh et al. 2026, arXiv:2606.26080): an RL-trained policy's log-ratio to its reference, per step, as the step's advantage.

    Inputs:
        rollouts: ``mask``, ``step_ids`` (for level "step"), ``logprobs`` (the RL-trained
        policy's, unless ``logprobs`` is given: for rollouts sampled from another policy).
        ``ref_logprobs`` (ref_logprobs): (B, T) log-probabilities of the generated tokens under
        the reference policy (the checkpoint RL started from).

    Formula:
        PA_k = beta * sum_{t in step k} (log pi_theta(y_t | s_t) - log pi_ref(y_t | s_t))

        For the optimum of KL-regularised RL (coefficient beta) in a stochastic MDP, the paper
        derives that this log-ratio equals the optimal advantage A*(s_k, a_k); it is a
        by-product of RL post-training, no reward model. Every token of step k takes PA_k
        (``level="token"``: each token its own term). ``failure_step``: the step with the
        lowest PA in each trajectory, the paper's failure attribution.

    Defaults:
        beta = 1.0 (any beta > 0 rescales without reordering), level = "step", logprobs = None
        (``rollouts.logprobs``).

    Degenerate input:
        beta = 0 or a policy equal to its reference gives zero credit; a row with nothing
        generated gets zero credit and ``failure_step`` -1. Log-probabilities above 0 are refused.

    Deviations from the reference:
        the paper scores an RL post-trained LLM agent against its reference checkpoint; the
        lab has none: on the chain the RL-trained policy is the uniform reference after ten
        sampled GRPO policy-gradient steps (``trained_policy``; no KL term, so the log-ratio
        tracks the policy's advantage weighted by state visits rather than the KL-regularised
        optimal advantage); on the tiny LM the DPO-tuned copy against the base
        model (the same pair From r to Q* reads). The paper's aggregations over checkpoints are
        not modelled.

    Returns:
        credit at level "step" (level "token" with ``level="token"``); ``info``: ``beta``,
        ``sequence_advantage`` (B,) the summed log-ratio, ``failure_step`` (B,) long, and at
        step level ``token_rewards`` (B, T) the per-token terms.

    Cost:
        none counted here: the two log-probability tensors are inputs (one forward pass of each
        model over the batch).
    """
    beta = check_number("beta", beta, low=0.0)
    check_choice("level", level, LEVELS)
    lp = _policy_logprobs(logprobs, rollouts)
    ref = _logprobs("ref_logprobs", ref_logprobs, rollouts)
    token = beta * (lp - ref)
    step, present = rollouts.view(token, "step", "sum")
    failure = torch.where(present, step, torch.inf).argmin(1)
    failure = torch.where(present.any(1), failure, torch.full_like(failure, -1))
    return _at_level(rollouts, token, level, "progress_advantage", beta=beta,
                     sequence_advantage=token.sum(1), failure_step=failure)


def trained_policy(env, reference, *, steps: int = 10, n: int = 64, group_size: int = 8, step_size: float = 1.0,
                   seed: int = 0):
    """A tabular policy "RL-trained" from ``reference``: ``steps`` GRPO policy-gradient ascent
    steps, each on a fresh batch of ``n`` episodes (groups of ``group_size``) that ``env`` samples
    from the current policy (seeds ``seed``, ``seed + 1``, ...), each moving the logits by
    ``step_size`` times the sampled gradient scaled to a largest entry of 1. A copy; the
    reference is not changed, and no exact truth is read."""
    import copy

    steps = check_int("steps", steps, low=0)
    n = check_int("n", n, low=1)
    group_size = check_int("group_size", group_size, low=1)
    step_size = check_number("step_size", step_size, low=0.0)
    policy = copy.deepcopy(reference)
    for i in range(steps):
        batch = env.sample(policy, n, group_size=group_size, seed=seed + i)
        adv = _grpo(batch, 1e-6, True)
        credit = torch.where(batch.mask, adv[:, None].expand_as(batch.mask), 0.0)
        g = policy.trajectory_gradients(batch, credit).mean(0)
        top = float(g.abs().max())
        if top == 0:
            continue
        with torch.no_grad():
            policy.logits += step_size * (g / top).to(policy.logits.dtype)
    return policy


# --------------------------------------------------------------------------- SC-GRPO
@register("sc_grpo", level="token", needs=("logprobs",), inputs={"conditioned_logprobs": "conditioned_logprobs"},
          status="stand-in", paper="2606.18810",
          replaces="the LLM conditioned in context on one of its own verified-correct solutions: on the chain the "
                   "policy mixed half-and-half with the action the group's verified solution took in the same "
                   "state; on the tiny LM the T-REG copy read after its 'accepted completion follows' token "
                   "against the same copy unconditioned",
          equation=r"A_{i,t} = \widehat{KL}_{i,t}\,\frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)}"
                   r" s + \epsilon},\quad \widehat{KL}_{i,t} = \rho_t - 1 - \log \rho_t,\ "
                   r"\rho_t = \frac{\pi_c(y_t \mid s_t)}{\pi(y_t \mid s_t)}",
          symbols="pi: the policy; pi_c: the policy conditioned on a verified-correct solution of its own; KL-hat: "
                  "the sampled token's estimate of KL(pi || pi_c) (k3); std unbiased, eps = 1e-6")
def sc_grpo(rollouts: Rollouts, *, conditioned_logprobs, logprobs=None, eps: float = 1e-6,
            normalize_std: bool = True, normalize_weights: bool = False) -> Credit:
    """SC-GRPO (arXiv:2606.18810): the per-token divergence between the self-conditioned and the plain policy multiplies GRPO's advantage.

    Inputs:
        rollouts: ``rewards`` (the score s_i), ``mask``, ``group_ids``, ``logprobs`` (the
        policy's, unless ``logprobs`` is given).
        ``conditioned_logprobs`` (conditioned_logprobs): (B, T) log-probabilities of the
        generated tokens under the policy conditioned on one of its own verified-correct
        solutions to the same problem.

    Formula:
        A_hat_i = (s_i - mean_group) / (std_group + eps)           (GRPO)
        rho_t   = pi_c(y_t | s_t) / pi(y_t | s_t)
        KL_t    = rho_t - 1 - log rho_t  (>= 0; for y_t ~ pi an unbiased estimate of
                                          KL(pi(. | s_t) || pi_c(. | s_t)), the k3 estimator)
        A_{i,t} = KL_t * A_hat_i
        normalize_weights = True divides KL_t by its mean over the row's generated tokens, so a
        response's total push is GRPO's and only its spread over the tokens changes.
        Tokens where the verified solution changes the policy's mind get the group's signal;
        routine tokens, which the solution does not move, get little.

    Defaults:
        eps = 1e-6, normalize_std = True, normalize_weights = False, logprobs = None
        (``rollouts.logprobs``).

    Degenerate input:
        a conditioned policy equal to the policy gives 0 everywhere (with normalize_weights a
        row whose divergence is all 0 falls back to weight 1: GRPO); a group of one gets its
        raw score as A_hat (GRPO's singleton rule), a group with equal scores 0; a row with
        nothing generated gets nothing. Log-probabilities above 0 are refused.

    Deviations from the reference:
        the paper conditions the LLM in context on one of its own verified trajectories and
        reads the full next-token distributions; the lab cannot prompt its models, so on the
        chain the conditioned policy is the policy mixed (weight 0.5) with the action the
        group's first verified-correct trajectory took in the same state (unchanged in states
        it did not visit, and everywhere in a group with no correct trajectory), and on the tiny
        LM it is the T-REG copy read after its "accepted completion follows" token, against the
        same copy without it. The divergence is estimated from the sampled token (k3) instead of
        summed over the vocabulary; the paper's KL direction and weight normalisation are not
        readable here (catalog description followed).

    Returns:
        credit at level "token"; ``info``: ``divergence`` (B, T) KL_t, ``weights`` (B, T),
        ``advantage`` (B,) A_hat.

    Cost:
        none counted here: both log-probability tensors are inputs (one pass of the policy and
        one of the conditioned policy over the batch).
    """
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    normalize_weights = check_bool("normalize_weights", normalize_weights)
    lp = _policy_logprobs(logprobs, rollouts)
    lc = _logprobs("conditioned_logprobs", conditioned_logprobs, rollouts)
    mask = rollouts.mask
    zero = torch.zeros((), dtype=torch.float64)
    log_rho = torch.where(mask, lc - lp, zero)
    kl = torch.where(mask, torch.expm1(log_rho) - log_rho, zero).clamp(min=0.0)
    w = kl
    if normalize_weights:
        n = mask.sum(1, keepdim=True).clamp(min=1).to(torch.float64)
        mean = kl.sum(1, keepdim=True) / n
        w = torch.where(mean > 0, kl / torch.where(mean > 0, mean, torch.ones_like(mean)), mask.to(torch.float64))
        w = torch.where(mask, w, zero)
    adv = _grpo(rollouts, eps, normalize_std)
    return Credit.from_tokens(rollouts, (w * adv[:, None]).to(rollouts.rewards.dtype), "sc_grpo",
                              divergence=kl, weights=w, advantage=adv)


def self_conditioned_logprobs(policy, rollouts: Rollouts, *, mix: float = 0.5) -> torch.Tensor:
    """SC-GRPO's conditioned policy on a tabular world (a stand-in for in-context conditioning):
    in every group, the first trajectory with the group's best score, if that score is above 0,
    is the verified solution; pi_c(. | s) = (1 - mix) pi(. | s) + mix * onehot(the solution's
    action in s) in the states the solution visited, pi elsewhere and in groups without a
    correct trajectory. Returns log pi_c of every generated token, (B, T), 0 off the mask."""
    mix = check_number("mix", mix, low=0.0, high=1.0)
    if rollouts.states is None:
        raise ValueError("rollouts: needs rollouts.states (a tabular world's sampler records them)")
    probs = policy.probs().detach().to(torch.float64)
    S, A = probs.shape
    s = rollouts.states.clamp(0, S - 1)
    a = rollouts.tokens.clamp(0, A - 1)
    mask = rollouts.mask
    p = probs[s, a]
    scores = rollouts.scores.to(torch.float64)
    out = p.clone()
    for gid in torch.unique(rollouts.group_ids).tolist():
        rows = (rollouts.group_ids == gid).nonzero().flatten()
        best = int(rows[scores[rows].argmax()])
        if float(scores[best]) <= 0:
            continue
        taken = {}
        for t in mask[best].nonzero().flatten().tolist():
            taken.setdefault(int(s[best, t]), int(a[best, t]))
        for b in rows.tolist():
            for t in mask[b].nonzero().flatten().tolist():
                star = taken.get(int(s[b, t]))
                if star is not None:
                    out[b, t] = (1 - mix) * p[b, t] + mix * float(int(a[b, t]) == star)
    return torch.where(mask, out.clamp(min=1e-300).log(), 0.0)
