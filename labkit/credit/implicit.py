"""Implicit credit: token rewards read off the log-probabilities of language models, no reward model.

Both estimators here turn a *difference of log-probabilities* into credit:

* From r to Q* (arXiv 2404.12358): a policy tuned by DPO against a reference model defines the
  token reward beta * (log pi - log pi_ref), which is the optimal advantage Q*(s_t, a_t) - V*(s_t)
  of the token-level MDP DPO implicitly solves;
* T-REG (arXiv 2412.02685): one model prompted two opposite ways ("write a better answer" /
  "write a worse answer") scores the same tokens; where the two disagree, the token matters.

The log-probabilities are explicit (B, T) arguments: the estimators never run a model. For the
tiny LM, ``ArithmeticLM.rollout_logprobs`` computes them, ``ArithmeticLM.tuned("dpo")`` is the
DPO-tuned policy and ``tuned("treg")`` the model taught the conditioning tokens
(``scripts/train_implicit_lm.py``).
"""
from __future__ import annotations

import torch

from labkit.core.checks import (as_tensor, check_choice, check_finite, check_number, check_shape, log_probabilities,
                                per_position, resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.core.turns import turn_table
from labkit.credit.registry import register

LEVELS = ("token", "step")


def _logprobs(name: str, value, rollouts: Rollouts) -> torch.Tensor:
    """A (B, T) log-probability tensor, finite on the mask, <= 0 (it is a log-probability)."""
    if value is None:
        raise ValueError(f"{name}: required, a (B, T) tensor of log-probabilities of the generated tokens")
    x = as_tensor(name, value)
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    return log_probabilities(name, x, rollouts.mask)


def _policy_logprobs(logprobs, rollouts: Rollouts) -> torch.Tensor:
    """The policy's log-probabilities: ``logprobs`` if given, else the ones the rollouts were
    sampled with (one rule for every log-ratio estimator here)."""
    if logprobs is None:
        if rollouts.logprobs is None:
            raise ValueError("logprobs: not given and the rollouts carry none; pass the policy's (B, T) "
                             "log-probabilities")
        logprobs = rollouts.logprobs
    return _logprobs("logprobs", logprobs, rollouts)


def _at_level(rollouts: Rollouts, token: torch.Tensor, level: str, method: str, **info) -> Credit:
    """Token credit as is, or summed per step and spread over the step's tokens."""
    if level == "token":
        return Credit.from_tokens(rollouts, token, method, **info)
    step, _ = rollouts.view(token, "step", "sum")
    return Credit.from_level(rollouts, step, "step", method, token_rewards=token, **info)


@register("dpo_implicit_q", level="step", needs=("logprobs",), inputs={"ref_logprobs": "ref_logprobs"},
          status="implemented", paper="2404.12358",
          equation=r"A_{i,k} = \beta \sum_{t \in \text{step } k} \left(\log \pi(y_t \mid x, y_{<t}) - \log "
                   r"\pi_{\text{ref}}(y_t \mid x, y_{<t})\right)",
          symbols="pi: DPO-tuned policy; pi_ref: its reference model; beta = 0.1; level='token' gives each token "
                  "its own term")
def dpo_implicit_q(rollouts: Rollouts, *, ref_logprobs, logprobs=None, beta: float = 0.1,
                   level: str = "step") -> Credit:
    """From r to Q* (Rafailov et al. 2024, arXiv:2404.12358): a DPO-tuned policy's log-ratio to its reference as credit.

    Inputs:
        rollouts: ``mask``, ``step_ids`` (for level "step"), ``logprobs`` (the tuned policy's,
        unless ``logprobs`` is given: for rollouts sampled from the tuned policy).
        ``ref_logprobs`` (ref_logprobs): (B, T) log-probabilities of the generated tokens under
        the reference model.

    Formula:
        r_t = beta * (log pi(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t))

        DPO trains pi so that, in the token-level MDP with a sparse outcome reward, r_t equals
        the optimal advantage Q*(s_t, y_t) - V*(s_t) (the paper's derivation): the credit of a
        token is its implicit reward, and the implicit rewards of a trajectory sum to the
        DPO sequence reward beta * log pi(y|x)/pi_ref(y|x). ``level="token"`` returns r_t;
        ``level="step"`` (default) gives every token of step i the step's sum
        sum_{t in step i} r_t = Q*(s_i, step i) - V*(s_i) (zero rewards inside a step make
        the per-token advantages telescope).

    Defaults:
        beta = 0.1 (the DPO temperature the shipped tuned model was trained with; any beta > 0
        rescales the credit without reordering it), level = "step", logprobs = None
        (``rollouts.logprobs``).

    Degenerate input:
        beta = 0 gives zero credit everywhere (allowed). A row with nothing generated, or a
        policy equal to its reference, gets zero credit. A one-step trajectory's step credit
        is the sequence-level implicit reward. Positions off the mask get 0 whatever the
        inputs hold there. Log-probabilities above 0 are refused (probabilities or logits
        passed by mistake).

    Deviations from the reference:
        none in the formula. The paper uses these rewards to guide search and to show DPO
        learns credit; the lab reads them as credit on fixed rollouts of the *base* model
        (off-policy for the tuned model), which is what "how good is DPO's credit" asks.

    Returns:
        credit at level "step" (level "token" with ``level="token"``); ``info``: ``beta``,
        ``sequence_reward`` (B,), and at step level ``token_rewards`` (B, T) r_t.

    Cost:
        none counted here: the two log-probability tensors are inputs (one forward pass of
        each model over the batch, which ``ArithmeticLM.rollout_logprobs`` performs).
    """
    beta = check_number("beta", beta, low=0.0)
    check_choice("level", level, LEVELS)
    lp = _policy_logprobs(logprobs, rollouts)
    ref = _logprobs("ref_logprobs", ref_logprobs, rollouts)
    token = beta * (lp - ref)
    return _at_level(rollouts, token, level, "dpo_implicit_q", beta=beta,
                     sequence_reward=token.sum(1))


@register("t_reg", level="token",
          inputs={"better_logprobs": "conditioned_logprobs", "worse_logprobs": "conditioned_logprobs"},
          status="stand-in", paper="2412.02685",
          replaces="the LLM's 'better' / 'worse' self-prompts: a copy of the tiny LM fine-tuned to read two "
                   "conditioning tokens",
          equation=r"A_t = \alpha \left(\log p(y_t \mid \text{better}, x, y_{<t}) - \log p(y_t \mid \text{worse}, "
                   r"x, y_{<t})\right)",
          symbols="p: one model read under 'better' / 'worse' conditioning (two tokens fine-tuned in the lab); "
                  "alpha = scale = 1; token level")
def t_reg(rollouts: Rollouts, *, better_logprobs, worse_logprobs, scale: float = 1.0,
          level: str = "token") -> Credit:
    """T-REG (Zhou et al. 2024, arXiv:2412.02685): self-generated token rewards from contrastive prompting.

    Inputs:
        rollouts: ``mask``, ``step_ids`` (for level "step").
        ``better_logprobs`` and ``worse_logprobs`` (conditioned_logprobs): (B, T)
        log-probabilities of the generated tokens under the two conditionings; for the tiny LM:
        ``treg.rollout_logprobs(ro, condition="better")`` and ``condition="worse"`` with
        ``treg = ArithmeticLM.load().tuned("treg")``.

    Formula:
        r_t = scale * (log p(y_t | better-prompt, x, y_<t) - log p(y_t | worse-prompt, x, y_<t))

        The same model reads the same completion twice, once told to answer well and once
        told to answer badly; a token the "better" reading prefers gets positive credit, one the
        "worse" reading prefers negative credit. ``level="step"`` sums r_t over each step and
        gives every token of the step that sum.

    Defaults:
        scale = 1.0, level = "token".

    Degenerate input:
        scale = 0 or identical conditionings give zero credit; a row with nothing generated
        gets none. Positions off the mask get 0.

    Deviations from the reference:
        T-REG prompts a large instruction-following LLM in natural language ("revise to be
        better / worse") and uses the token rewards only as a regulariser of DPO's implicit
        rewards; the tiny LM cannot read instructions, so the lab fine-tunes a copy of it with
        two conditioning tokens (``;`` = an accepted completion follows, ``#`` = a rejected one;
        ``scripts/train_implicit_lm.py``), a separate model rather than the policy itself, and
        uses the contrast directly as credit. The paper's normalisation of the contrast (a
        squashing into a bounded weight) is left out: ``scale`` only rescales.

    Returns:
        credit at level "token" (level "step" with ``level="step"``, then with ``info``
        ``token_rewards`` (B, T) r_t); ``info``: ``scale``.

    Cost:
        none counted here: the two log-probability tensors are inputs (two forward passes of
        the conditioned model over the batch).
    """
    scale = check_number("scale", scale, low=0.0)
    check_choice("level", level, LEVELS)
    good = _logprobs("better_logprobs", better_logprobs, rollouts)
    bad = _logprobs("worse_logprobs", worse_logprobs, rollouts)
    return _at_level(rollouts, scale * (good - bad), level, "t_reg", scale=scale)


# --------------------------------------------------------------------------- agentic: ITPO and iStar
# The two turn-level implicit estimators below work on agent rollouts (one turn = one or more
# positions sharing a turn id).

ITPO_NORMS = ("softmax", "none")


@register("itpo", level="turn", needs=("logprobs",), inputs={"ref_logprobs": "ref_logprobs"}, status="adaptation",
          paper="2603.23550",
          replaces="the implicit PRM (a language model updated online from outcome labels): the policy's own "
                   "log-ratio to its snapshot from before training",
          equation=r"A_{i,k} = \frac{G_{i,k} - \operatorname{mean}_{g(i)} G_{\cdot,0}}{\operatorname{std}_{g(i)} "
                   r"G_{\cdot,0} + \epsilon},\quad G_{i,k} = s_i \sum_{l \ge k} \operatorname{softmax}_l(r_{i,l})",
          symbols="r_{i,l} = beta * sum of log pi/pi_ref over turn l; softmax over the trajectory's turns, so G_0 "
                  "= s_i; std 0 -> 1; beta = 1")
def itpo(rollouts: Rollouts, *, ref_logprobs, logprobs=None, beta: float = 1.0,
         normalize: str = "softmax", eps: float = 1e-6) -> Credit:
    """ITPO (Wang et al. 2026, arXiv:2603.23550): turn rewards from the policy's log-ratio to its pre-training reference, group-normalised returns as credit.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``turn_ids``, ``logprobs`` (the
        current policy's, unless ``logprobs`` is given).
        ``ref_logprobs`` (ref_logprobs): (B, T) log-probabilities of the taken actions under the
        reference; for a tabular ToolWorld agent
        ``labkit.learn.turn_models.policy_logprobs(policy, rollouts)`` on a copy of the policy
        taken before training (exact, no model needed).

    Formula:
        r_k   = beta * sum_{t in turn k} (log pi(a_t | h_t) - log pi_ref(a_t | h_t))
                                                   (implicit turn reward, pi_ref = the policy
                                                    before training)
        normalize = "softmax" (Norm-ITPO, default):
          rho_k = R * exp(r_k) / sum_{k' in trajectory} exp(r_k')
                                                   (the outcome R split over the turns: sum_k rho_k = R)
        normalize = "none":
          rho_k = r_k  (+ R on the last turn)      (implicit process rewards plus the outcome)
        G_k   = sum_{k' >= k} rho_k'               (reward-to-go of turn k; G_0 = the episode total)
        A_k   = (G_k - mean_group(G_0)) / (std_group(G_0) + eps)    (std taken as 1 when it is 0)

        The baseline and the scale are GRPO's, computed on the episode totals of the group (with
        "softmax" G_0 = R, so they are exactly GRPO's); a turn's credit is what was earned from
        it on. Every position of turn k takes A_k.

    Defaults:
        beta = 1.0 (softmax weights compare log-ratios directly; the paper's beta scales an
        implicit PRM trained with a small DPO temperature), normalize = "softmax", eps = 1e-6,
        logprobs = None (``rollouts.logprobs``, the sampling policy's).

    Degenerate input:
        a policy equal to its reference gives r_k = 0: "softmax" then splits R equally over the
        turns, "none" leaves only the outcome. A one-turn trajectory gets its whole outcome on
        its turn. A group of one gets mean 0 and std 1 (raw returns, GRPO's singleton rule,
        ``group_normalize``); a group whose totals are all equal keeps its within-episode spread
        unscaled (std taken as 1, not eps: the within-episode spread would otherwise be
        multiplied by 1 / eps). A row with no played turn gets 0.

    Deviations from the reference:
        ITPO reads the implicit rewards off an implicit PRM (in the lab's reading of the paper, a
        language model updated online from outcome labels, PRIME-style) and feeds them to PPO, GRPO or RLOO; here the
        "implicit PRM" is the policy itself against its pre-training snapshot, as the lab's
        task asks, exact for a tabular agent, and the advantage is the GRPO-normalised
        reward-to-go above (one of the paper's combinations, not its PPO critic).

    Returns:
        credit at level "turn"; ``info``: ``turn_rewards`` (r_k, (B, N)), ``redistributed``
        (rho_k), ``returns`` (G_k), ``beta``, ``normalize``.

    Cost:
        none counted here: both log-probability tensors are inputs (one pass of the policy and
        one of the frozen reference over the batch; table look-ups for a tabular agent).
    """
    beta = check_number("beta", beta, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    check_choice("normalize", normalize, ITPO_NORMS)
    lp = _policy_logprobs(logprobs, rollouts)
    ref = _logprobs("ref_logprobs", ref_logprobs, rollouts)
    r, present = rollouts.view(beta * (lp - ref), "turn", "sum")
    R = rollouts.scores.to(torch.float64)
    if normalize == "softmax":
        w = torch.softmax(torch.where(present, r, -torch.inf), 1)
        rho = torch.where(present, R[:, None] * w, torch.zeros((), dtype=torch.float64))
    else:
        last = (present.cumsum(1) == present.sum(1, keepdim=True)) & present
        rho = torch.where(present, r + torch.where(last, R[:, None], 0.0), torch.zeros((), dtype=torch.float64))
    G = rho.flip(1).cumsum(1).flip(1)
    G = torch.where(present, G, torch.zeros((), dtype=torch.float64))
    # the episode total: exactly R under "softmax" (the weights sum to 1 only up to rounding)
    total = R if normalize == "softmax" else G[:, 0]
    norm = group_normalize(total, rollouts.group_ids, eps=eps)
    # A group whose totals are all equal has std 0; GRPO's 0 / eps is harmless there (every
    # numerator is 0), but turn returns still differ inside an episode and would be blown up by
    # 1 / eps, so such a group is left unscaled.
    scale = torch.where(norm.std > 1e-12 * norm.mean.abs().clamp(min=1.0), norm.std + eps,
                        torch.ones_like(norm.std))
    adv = torch.where(present, (G - norm.mean[:, None]) / scale[:, None], torch.zeros((), dtype=torch.float64))
    return Credit.from_level(rollouts, adv, "turn", "itpo", turn_rewards=r, redistributed=rho, returns=G,
                             beta=beta, normalize=normalize)


@register("istar", level="turn", inputs={"step_rewards": "implicit_step_rewards"}, status="implemented",
          paper="2509.19199",
          equation=r"A_{i,k} = \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} "
                   r"s_j + \epsilon} + \alpha \, \frac{r_{i,k} - \operatorname{mean}_{g(i)} "
                   r"r}{\operatorname{std}_{g(i)} r + \epsilon}",
          symbols="r_{i,k}: implicit PRM reward of turn k (a DPO-fitted table); r stats over all turns of the "
                  "group; alpha = 1; eps = 1e-6")
def istar(rollouts: Rollouts, *, step_rewards, alpha: float = 1.0, eps: float = 1e-6) -> Credit:
    """iStar (Liu et al. 2025, arXiv:2509.19199): an implicit step reward model's per-turn log-ratio, group-normalised, added to the GRPO episode advantage.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``turn_ids``.
        ``step_rewards`` (implicit_step_rewards): a (B, T) tensor of the PRM's step reward at
        every position, or a callable ``rollouts -> that tensor`` (a fitted
        ``labkit.learn.turn_models.ImplicitStepRewardModel`` is one).

    Formula:
        r_k   = sum_{t in turn k} r_phi(h_t, a_t),  r_phi = beta * log pi_phi / pi_ref
                (the implicit PRM, fitted with a DPO loss on pairs of whole trajectories of one
                 task, the better outcome preferred)
        A^E_i = (R_i - mean_group(R)) / (std_group(R) + eps)                 (GRPO, episode level)
        A^S_k = (r_k - mean(r over every turn of the group)) / (std(same) + eps)   (step level)
        A_k   = A^E_i + alpha * A^S_k

        Every position of turn k takes A_k.

    Defaults:
        alpha = 1.0 (the two advantages added with equal weight; the paper treats the weight
        of the step term as a hyperparameter), eps = 1e-6.

    Degenerate input:
        alpha = 0 is GRPO. All step rewards equal in a group (e.g. an unfitted PRM, r = 0)
        gives A^S = 0 there (0 / eps), hence GRPO. A group with a single played turn keeps that
        turn's raw step reward (GRPO's singleton rule, ``group_normalize``); a group of one
        trajectory gets its raw outcome as A^E. A row with no played turn gets 0.

    Deviations from the reference:
        iStar's PRM is a copy of the policy LLM trained alternately with it, and it computes
        rewards per step (reasoning + action); here the PRM is a table over (observation,
        action) fitted on a batch of the current agent, the lab's stand-in for that LLM (it
        cannot read history beyond the last observation, as the agent cannot). The paper's
        step normalisation is over the steps of the group; so is this one.

    Returns:
        credit at level "turn"; ``info``: ``step_rewards`` (r_k, (B, N)), ``episode_advantage``
        (A^E, (B,)), ``step_advantage`` (A^S, (B, N)), ``alpha``.

    Cost:
        ``aux_calls`` = one PRM pass per trajectory when ``step_rewards`` is a callable; 0 for
        a precomputed tensor. The PRM fit (milliseconds for the table) is not counted.
    """
    alpha = check_number("alpha", alpha)
    eps = check_number("eps", eps, low=0.0)
    step_rewards, called = resolve_input("step_rewards", step_rewards, rollouts,
                                         expected="a (B, T) tensor of implicit step rewards or a callable "
                                                  "rollouts -> that tensor")
    calls = rollouts.batch_size if called else 0
    x = per_position("step_rewards", step_rewards, rollouts.mask)
    r, present = rollouts.view(x, "turn", "sum")
    ep = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps).normalized
    rows = present.nonzero(as_tuple=True)
    step_adv = torch.zeros_like(r)
    step_adv[rows] = group_normalize(r[rows], rollouts.group_ids[rows[0]], eps=eps).normalized
    adv = torch.where(present, ep[:, None] + alpha * step_adv, torch.zeros((), dtype=torch.float64))
    return Credit.from_level(rollouts, adv, "turn", "istar", cost=Cost(aux_calls=calls), step_rewards=r,
                             episode_advantage=ep, step_advantage=step_adv, alpha=alpha)


# --------------------------------------------------------------------------- StepAgent (inverse RL)
# StepAgent's learned step reward read as turn credit. The reward model
# (labkit.learn.irl.StepRewardIRL) is an explicit argument: a (n_obs, A) table or a callable.
def _step_agent_rewards(rollouts: Rollouts, reward) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    obs, act, present = turn_table(rollouts)
    if callable(reward) and not isinstance(reward, torch.Tensor):
        r = as_tensor("reward", reward(obs, act)).to(torch.float64)
        check_shape("reward", r, tuple(obs.shape))
        called = True
    else:
        table = as_tensor("reward", reward, dtype=torch.float64)
        if table.dim() != 2:
            raise ValueError("reward: expected a (n_obs, n_actions) table or a callable, "
                             f"got shape {tuple(table.shape)}")
        played = bool(present.any())
        hi_o = int(obs[present].max()) if played else -1
        hi_a = int(act[present].max()) if played else -1
        if hi_o >= table.shape[0] or hi_a >= table.shape[1]:
            raise ValueError(f"reward: table of shape {tuple(table.shape)} does not cover observation {hi_o} "
                             f"/ action {hi_a}")
        r = table[obs.clamp(0, table.shape[0] - 1), act.clamp(0, table.shape[1] - 1)]
        called = False
    r = torch.where(present, r, torch.zeros((), dtype=torch.float64))
    check_finite("reward", r)
    return r, obs, present, called


@register("step_agent", level="turn", needs=("states",), inputs={"reward": "irl_reward"}, status="implemented",
          paper="2411.03817",
          equation=r"A_{i,k} = \sum_{l \ge k} \gamma^{l-k} r_\phi(o_l, a_l)",
          symbols="k: turn; r_phi: inverse-RL step reward ~ log pi_E/pi; gamma = 0 (own turn only); with pi given "
                  "r_phi is centred on its pi-average")
def step_agent(rollouts: Rollouts, *, reward, pi=None, gamma: float = 0.0) -> Credit:
    """StepAgent (Deng et al. 2024, arXiv:2411.03817): an inverse-RL step reward from expert demos as turn credit.

    Inputs:
        rollouts: ``turn_ids``, ``states`` and ``tokens`` (each turn's observation and action).
        ``reward`` (irl_reward): an (n_obs, A) tensor indexed by observation and action ids, or a
        callable (obs (B, N), action (B, N)) -> (B, N) reward per turn, e.g. a fitted
        ``labkit.learn.irl.StepRewardIRL``.

    Formula:
        r_t = r_phi(o_t, a_t)     the learned step reward of the turn's (observation, action)

        With ``pi`` (the agent's (n_obs, A) policy table) the reward is centred on the agent's own
        average at that observation, r_t - sum_a pi(a | o_t) r_phi(o_t, a) (a baseline that does
        not depend on the action, so the policy gradient keeps its expectation). The turn's credit
        is the discounted sum from t on: c_t = sum_{k >= t} gamma^(k - t) r_k; gamma = 0 keeps
        each turn's own reward (StepAgent's step-wise comparison with the expert's step). For
        ``StepRewardIRL`` r_phi = log D / (1 - D) ~ log pi_E(a | o) / pi(a | o).

    Defaults:
        gamma = 0.0, pi = None (no centring).

    Degenerate input:
        A row with no played turn gets zero credit; a one-turn trajectory gets its turn's
        reward. Observations the expert never visited carry reward 0 in ``StepRewardIRL`` (no
        evidence either way), hence zero credit without ``pi``. A table that does not cover an
        observation or action id is refused.

    Deviations from the reference:
        StepAgent learns the step reward with an LLM discriminator on the agent's and the
        expert's step outputs and alternates it with PPO over a novice-to-expert curriculum of
        expert prefixes; here the discriminator is a table over ToolWorld's (observation,
        action) with a closed-form logistic fit (``labkit.learn.irl``), the expert is the best
        memoryless policy the exact DP finds (``expert_policy``), there is no curriculum, and
        the reward is scored as credit on fixed rollouts rather than trained on.

    Returns:
        credit at level "turn"; ``info``: ``step_rewards`` (B, N) r_t (centred with ``pi``),
        ``gamma``.

    Cost:
        ``aux_calls`` = one reward-model lookup per played turn (table or callable). Fitting the
        reward (expert demonstrations, agent samples at the expert's observations) is counted by
        ``StepRewardIRL`` (``expert_turns``, ``policy_samples``), not here.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    if reward is None:
        raise ValueError("reward: required, an (n_obs, A) step-reward table or a callable (obs, action) -> reward")
    r, obs, present, _ = _step_agent_rewards(rollouts, reward)
    if pi is not None:
        p = as_tensor("pi", pi, dtype=torch.float64)
        if p.dim() != 2:
            raise ValueError(f"pi: expected the agent's (n_obs, A) policy table, got shape {tuple(p.shape)}")
        if isinstance(reward, torch.Tensor) or not callable(reward):
            table = as_tensor("reward", reward, dtype=torch.float64)
        else:
            table = getattr(reward, "reward", None)
            if table is None:
                raise ValueError("pi: centring needs the reward as a table (a tensor or an object with .reward)")
        if tuple(p.shape) != tuple(table.shape):
            raise ValueError(f"pi: shape {tuple(p.shape)} differs from the reward table's {tuple(table.shape)}")
        base = (p * table).sum(-1)[obs.clamp(0, p.shape[0] - 1)]
        r = torch.where(present, r - base, torch.zeros((), dtype=torch.float64))
    c = torch.zeros_like(r)
    acc = torch.zeros(r.shape[0], dtype=torch.float64)
    for k in range(r.shape[1] - 1, -1, -1):  # reward-to-go over the turns, right to left
        acc = torch.where(present[:, k], r[:, k] + gamma * acc, acc)
        c[:, k] = torch.where(present[:, k], acc, 0.0)
    cost = Cost(aux_calls=int(present.sum()))
    return Credit.from_level(rollouts, c, "turn", "step_agent", cost=cost, step_rewards=r, gamma=gamma)
