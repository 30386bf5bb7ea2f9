"""Self-distillation credit: the agent's own model, given context the sampled episode did not
have (privileged state, a hint written from finished episodes), is a teacher whose per-token
log-probability gap to the student says which tokens it endorses.

* SDAR (arXiv 2605.15155): GRPO plus on-policy distillation from the privileged teacher as a side
  loss, each token's teacher-student gap passed through a sigmoid gate (endorsed tokens distilled
  strongly, rejected ones softly); read here as an extra advantage term per token;
* CRAFT (arXiv 2606.29476): the group's free sibling rollouts, importance-weighted by the teacher's
  preference for each whole sibling, estimate how the group's mean outcome would move under the
  teacher-tilted policy; that signed estimate gates the distillation term;
* OPID (arXiv 2606.26790): a short hindsight skill written from a group's finished successful
  rollouts is placed in context, and the per-token log-probability shift it causes is added to the
  outcome advantage.

The teacher and the skill-conditioned model are explicit inputs ((B, T) log-probabilities of the
generated tokens); the estimators never run a model. ``labkit.envs.toolworld.teacher`` builds
stand-ins for ToolWorld (a teacher from the exact Q of the hidden state; a skill writer and the
skill-conditioned policy).
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.credit.implicit import _logprobs, _policy_logprobs
from labkit.credit.registry import register

CRAFT_GATES = ("linear", "hard")


def _grpo(rollouts: Rollouts, eps: float) -> torch.Tensor:
    """GRPO's group-relative outcome advantage per trajectory, (B,) float64."""
    return group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps).normalized


def _gap(rollouts: Rollouts, teacher_logprobs, logprobs) -> torch.Tensor:
    """log pi_T - log pi_S of every generated token, (B, T) float64, 0 off the mask."""
    lp = _policy_logprobs(logprobs, rollouts)
    lt = _logprobs("teacher_logprobs", teacher_logprobs, rollouts)
    return torch.where(rollouts.mask, lt - lp, torch.zeros((), dtype=torch.float64))


# --------------------------------------------------------------------------- SDAR
@register("sdar", level="token", needs=("logprobs",), inputs={"teacher_logprobs": "teacher_logprobs"},
          status="stand-in", paper="2605.15155",
          replaces="the same LLM given privileged context as the teacher: on ToolWorld the student's policy tilted "
                   "by the exact Q of the hidden state, pi_T proportional to pi_S exp(Q_t(s, .) / tau)",
          equation=r"A_{i,t} = \frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)} s + \epsilon}"
                   r" + \lambda\,\sigma\!\left(\frac{\Delta_{i,t}}{T_g}\right) \Delta_{i,t},\quad "
                   r"\Delta_{i,t} = \log \pi_T(y_t \mid s_t, c) - \log \pi_S(y_t \mid s_t)",
          symbols="pi_S: the student (the sampling policy); pi_T: the same model given privileged context c; "
                  "sigma: the logistic gate; lambda = 1, T_g = 1; std unbiased, eps = 1e-6")
def sdar(rollouts: Rollouts, *, teacher_logprobs, logprobs=None, coef: float = 1.0, gate_temperature: float = 1.0,
         eps: float = 1e-6) -> Credit:
    """SDAR, self-distilled agentic RL (arXiv:2605.15155): GRPO's advantage plus a sigmoid-gated teacher-student gap per token.

    Inputs:
        rollouts: ``rewards`` (the score s_i), ``mask``, ``group_ids``, ``logprobs`` (the
        student's, unless ``logprobs`` is given).
        ``teacher_logprobs`` (teacher_logprobs): (B, T) log-probabilities of the generated
        tokens under the teacher (the same model given privileged context).

    Formula:
        A_hat_i = (s_i - mean_group s) / (std_group s + eps)          (GRPO)
        Delta_t = log pi_T(y_t | s_t, c) - log pi_S(y_t | s_t)        (the token gap)
        g_t     = sigmoid(Delta_t / T_g)                              (the gate)
        A_{i,t} = A_hat_i + lambda * g_t * Delta_t
        A token the teacher endorses (Delta > 0) gets a gate near 1 and is pushed up by its full
        gap; a token it rejects (Delta < 0) gets a gate near 0 and is pushed down only softly.

    Defaults:
        coef (lambda) = 1, gate_temperature (T_g) = 1, eps = 1e-6 (unbiased std, as ``grpo``),
        logprobs = None (``rollouts.logprobs``).

    Degenerate input:
        a teacher equal to the student gives Delta = 0 and GRPO exactly; coef = 0 gives GRPO; a
        group of one gets its raw score as A_hat (GRPO's singleton rule), a group of equal scores
        A_hat = 0 (the gated gap alone remains); a row with nothing generated gets nothing.
        Log-probabilities above 0 are refused by name.

    Deviations from the reference:
        STAND-IN teacher: the paper's teacher is the LLM itself with privileged context in the
        prompt; on ToolWorld labkit builds it from the exact DP Q of the hidden state
        (``labkit.envs.toolworld.teacher.teacher_logprobs``), pi_T proportional to
        pi_S^w exp(Q / tau) (w = 1: the student tilted by privileged values, so it stays the
        same agent). The paper adds the distillation as a side loss next to GRPO's; labkit
        expresses it as an extra advantage term. The two give the same gradient only for the
        on-policy sample and to first order: the policy-gradient (score-function) form of the
        gated reverse-KL loss sum_t g_t (log pi_S - log pi_T)(y_t), with the gate held constant,
        is E[grad log pi_S(y_t) g_t Delta_t], because the direct term E[grad log pi_S] vanishes
        only in expectation over y_t ~ pi_S; importance ratios, clipping and a gate that
        carries gradient are not represented. The per-token gap is not summed into a
        reward-to-go. The gate form, lambda and T_g follow the catalog's description only (the
        paper is not readable here); labkit chose 1 for both.

    Returns:
        credit at level "token"; ``info``: ``gap`` (B, T) Delta, ``gate`` (B, T) g,
        ``advantage`` (B,) A_hat, ``distillation`` (B, T) lambda g Delta.

    Cost:
        none counted here: the student's and the teacher's log-probabilities are inputs (one
        teacher scoring pass over the batch, counted where the input is built).
    """
    coef = check_number("coef", coef, low=0.0)
    gate_temperature = check_number("gate_temperature", gate_temperature, low=0.0, low_open=True)
    eps = check_number("eps", eps, low=0.0)
    gap = _gap(rollouts, teacher_logprobs, logprobs)
    mask = rollouts.mask
    zero = torch.zeros((), dtype=torch.float64)
    gate = torch.where(mask, torch.sigmoid(gap / gate_temperature), zero)
    distil = coef * gate * gap
    adv = _grpo(rollouts, eps)
    token = torch.where(mask, adv[:, None] + distil, zero)
    return Credit.from_tokens(rollouts, token.to(rollouts.rewards.dtype), "sdar", gap=gap, gate=gate,
                              advantage=adv, distillation=distil)


# --------------------------------------------------------------------------- CRAFT
@register("craft", level="token", needs=("logprobs", "groups"), inputs={"teacher_logprobs": "teacher_logprobs"},
          status="stand-in", paper="2606.29476",
          replaces="the same LLM given privileged context as the teacher: on ToolWorld the student's policy tilted "
                   "by the exact Q of the hidden state, pi_T proportional to pi_S exp(Q_t(s, .) / tau)",
          equation=r"A_{i,t} = \hat{A}_i + \lambda\,\left[\hat\delta_{g(i)}\right]_+ \Delta_{i,t},\quad "
                   r"\hat\delta_g = \frac{\sum_{j \in g} w_j s_j - \operatorname{mean}_g s}"
                   r"{\operatorname{std}_g s + \epsilon},\quad w_j \propto \exp\!\Big(\tfrac{1}{\kappa} "
                   r"\sum_t \Delta_{j,t}\Big)",
          symbols="A-hat: GRPO's advantage; Delta: log pi_T - log pi_S of the token; w: self-normalised importance "
                  "weights of the group's siblings (teacher over student, tempered by kappa = 1); delta-hat: the "
                  "signed counterfactual change of the group's mean outcome in std units; [x]_+ = max(x, 0); "
                  "lambda = 1")
def craft(rollouts: Rollouts, *, teacher_logprobs, logprobs=None, coef: float = 1.0, temperature: float = 1.0,
          gate: str = "linear", eps: float = 1e-6) -> Credit:
    """CRAFT (arXiv:2606.29476): the group's sibling rollouts, reweighted by the teacher, gate the self-distillation term.

    Inputs:
        rollouts: ``rewards`` (the score s_i), ``mask``, ``group_ids`` (the siblings of a
        prompt), ``logprobs`` (the student's, unless ``logprobs`` is given).
        ``teacher_logprobs`` (teacher_logprobs): (B, T) log-probabilities of the generated
        tokens under the teacher (the same model given privileged context).

    Formula:
        A_hat_i  = (s_i - mean_g s) / (std_g s + eps)                 (GRPO)
        Delta_t  = log pi_T(y_t | s_t, c) - log pi_S(y_t | s_t)
        L_j      = sum_t Delta_{j,t}     (log pi_T(traj j) / pi_S(traj j): the world's own
                                          transition probabilities cancel)
        w_j      = exp(L_j / kappa) / sum_{k in g} exp(L_k / kappa)   (self-normalised)
        delta_g  = sum_j w_j s_j - mean_g s      (the group's mean outcome under the
                                                  teacher-tilted policy, minus the plain mean)
        delta^_g = delta_g / (std_g s + eps)     (in the units of GRPO's advantage)
        gate_g   = max(delta^_g, 0)              gate = "linear"
                 = 1[delta_g > 0]                gate = "hard"
        A_{i,t}  = A_hat_i + lambda * gate_g * Delta_{i,t}
        Where the siblings say favouring the teacher would raise the group's outcome, every
        token of the group is distilled toward the teacher; where they say it would lower it,
        nothing is distilled and GRPO's advantage stands.

    Defaults:
        coef (lambda) = 1, temperature (kappa) = 1 (plain self-normalised importance sampling
        toward pi_T; kappa > 1 tempers toward a geometric mix of student and teacher), gate =
        "linear", eps = 1e-6 (unbiased std), logprobs = None (``rollouts.logprobs``).

    Degenerate input:
        a group of one has no sibling to recycle: delta = 0 and it gets GRPO's singleton
        advantage; a group of equal scores has delta = 0 (every reweighting gives the same mean)
        and A = 0; a teacher equal to the student gives equal weights, delta = 0 and GRPO; a row
        with nothing generated has L = 0 and gets nothing. Log-probabilities above 0 are
        refused by name.

    Deviations from the reference:
        STAND-IN teacher (as ``sdar``: on ToolWorld the student tilted by the exact Q of the
        hidden state). Only the catalog's one-line description and the lab's reading of it are
        followed (the paper is not readable here): that siblings weighted by the teacher-student
        gap give a signed estimate of how favouring the teacher would change the group advantage,
        and that this estimate gates a self-distillation loss. labkit chose: one estimate per
        group (not per token), built from whole-sibling importance weights exp(sum of gaps) with
        temperature kappa, the gate max(delta^, 0) or its sign, and the distillation term written
        as an extra advantage lambda * gate * Delta (the same gradient as the gated reverse-KL
        side loss only for the on-policy sample and to first order; see ``sdar``).

    Returns:
        credit at level "token"; ``info``: ``gap`` (B, T) Delta, ``weights`` (B,) w_j,
        ``delta`` (B,) delta^ of each row's group, ``gate`` (B,), ``advantage`` (B,) A_hat.

    Cost:
        none counted here: the siblings are the batch GRPO already drew (free), and the
        teacher's log-probabilities are an input (one teacher scoring pass, counted where it is
        built).
    """
    coef = check_number("coef", coef, low=0.0)
    temperature = check_number("temperature", temperature, low=0.0, low_open=True)
    check_choice("gate", gate, CRAFT_GATES)
    eps = check_number("eps", eps, low=0.0)
    gap = _gap(rollouts, teacher_logprobs, logprobs)
    mask = rollouts.mask
    zero = torch.zeros((), dtype=torch.float64)
    s = rollouts.scores.to(torch.float64)
    gid = rollouts.group_ids
    stats = group_normalize(s, gid, eps=eps)
    adv = stats.normalized
    log_w = gap.sum(1) / temperature
    weights = torch.zeros_like(s)
    tilted = s.clone()  # a group of one keeps its own score: delta = 0
    for g in torch.unique(gid).tolist():
        rows = (gid == g).nonzero().flatten()
        w = torch.softmax(log_w[rows], 0)
        weights[rows] = w
        if len(rows) > 1:
            tilted[rows] = (w * s[rows]).sum()
    mean = torch.where(stats.size > 1, stats.mean, s)
    spread = stats.std > 0  # equal scores: every reweighting gives the same mean
    delta = torch.where(spread, (tilted - mean) / torch.where(spread, stats.std + eps, 1.0), 0.0)
    g_row = delta.clamp(min=0.0) if gate == "linear" else (delta > 0).to(torch.float64)
    token = torch.where(mask, adv[:, None] + coef * g_row[:, None] * gap, zero)
    return Credit.from_tokens(rollouts, token.to(rollouts.rewards.dtype), "craft", gap=gap, weights=weights,
                              delta=delta, gate=g_row, advantage=adv)


# --------------------------------------------------------------------------- OPID
@register("opid", level="token", needs=("logprobs",), inputs={"conditioned_logprobs": "conditioned_logprobs"},
          status="stand-in", paper="2606.26790",
          replaces="the LLM that writes a hindsight skill from a group's finished rollouts and the LLM re-scoring "
                   "each response with the skill in context: on ToolWorld a rule-based skill writer (the file the "
                   "group's successful episodes edited) and the student's logits with a bonus on the actions the "
                   "skill names",
          equation=r"A_{i,t} = \frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)} s + \epsilon}"
                   r" + \lambda \left(\log \pi(y_t \mid s_t, k_{g(i)}) - \log \pi(y_t \mid s_t)\right)",
          symbols="k_g: the hindsight skill written from group g's finished successful rollouts (none: the shift "
                  "is 0); pi(. | s, k): the policy with the skill in context; lambda = 1; std unbiased, "
                  "eps = 1e-6")
def opid(rollouts: Rollouts, *, conditioned_logprobs, logprobs=None, coef: float = 1.0, eps: float = 1e-6) -> Credit:
    """OPID, on-policy skill distillation (arXiv:2606.26790): the log-probability shift a hindsight skill causes, added to the outcome advantage.

    Inputs:
        rollouts: ``rewards`` (the score s_i), ``mask``, ``group_ids``, ``logprobs`` (the
        policy's, unless ``logprobs`` is given).
        ``conditioned_logprobs`` (conditioned_logprobs): (B, T) log-probabilities of the
        generated tokens re-scored with the group's hindsight skill in context (equal to the
        policy's where the group has no skill).

    Formula:
        A_hat_i = (s_i - mean_group s) / (std_group s + eps)           (GRPO)
        shift_t = log pi(y_t | s_t, skill) - log pi(y_t | s_t)
        A_{i,t} = A_hat_i + lambda * shift_t
        Tokens the skill makes likelier (the steps it advises) gain credit, tokens it makes
        less likely lose some, in successful and failed responses alike.

    Defaults:
        coef (lambda) = 1, eps = 1e-6 (unbiased std, as ``grpo``), logprobs = None
        (``rollouts.logprobs``).

    Degenerate input:
        no skill (conditioned = policy) gives shift 0 and GRPO exactly; coef = 0 gives GRPO; a
        group of one gets its raw score as A_hat, a group of equal scores 0 (the shift alone
        remains); a row with nothing generated gets nothing. Log-probabilities above 0 are
        refused by name.

    Deviations from the reference:
        STAND-IN skill writer and conditioned model: the paper's LLM summarises finished
        rollouts into a short hindsight skill (a whole-task strategy or advice for a critical
        step) and re-scores each response with it in context. On ToolWorld
        (``labkit.envs.toolworld.teacher``) the skill writer reads a group's finished
        successful rollouts and writes the file they edited ("the bug is in file j: open it,
        edit it, submit"; no success in the group, no skill); the skill-conditioned policy is the
        student's logits plus a bonus on the actions consistent with the skill. How the shift is
        scaled, clipped or normalised follows the catalog's description only; labkit adds it
        raw with lambda = 1.

    Returns:
        credit at level "token"; ``info``: ``shift`` (B, T), ``advantage`` (B,) A_hat.

    Cost:
        none counted here: both log-probability tensors are inputs (the skill-conditioned
        scoring pass is counted where the input is built).
    """
    coef = check_number("coef", coef, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    lp = _policy_logprobs(logprobs, rollouts)
    lc = _logprobs("conditioned_logprobs", conditioned_logprobs, rollouts)
    mask = rollouts.mask
    zero = torch.zeros((), dtype=torch.float64)
    shift = torch.where(mask, lc - lp, zero)
    adv = _grpo(rollouts, eps)
    token = torch.where(mask, adv[:, None] + coef * shift, zero)
    return Credit.from_tokens(rollouts, token.to(rollouts.rewards.dtype), "opid", shift=shift, advantage=adv)
