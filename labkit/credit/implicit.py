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

from labkit.core.checks import as_tensor, check_choice, check_finite, check_number, check_shape
from labkit.core.rollouts import Credit, Rollouts
from labkit.credit._registry import register

LEVELS = ("token", "step")


def _logprobs(name: str, value, rollouts: Rollouts) -> torch.Tensor:
    """A (B, T) log-probability tensor, finite on the mask, <= 0 (it is a log-probability)."""
    if value is None:
        raise ValueError(f"{name}: required, a (B, T) tensor of log-probabilities of the generated tokens")
    x = as_tensor(name, value)
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    check_shape(name, x, (rollouts.batch_size, rollouts.horizon))
    x = torch.where(rollouts.mask, x.to(torch.float64), torch.zeros((), dtype=torch.float64))
    check_finite(name, x)
    if bool((x > 1e-6).any()):
        raise ValueError(f"{name}: log-probabilities must be <= 0 (got a maximum of {float(x.max()):.4g})")
    return x


def _at_level(rollouts: Rollouts, token: torch.Tensor, level: str, method: str, **info) -> Credit:
    """Token credit as is, or summed per step and spread over the step's tokens."""
    if level == "token" or not bool(rollouts.mask.any()):
        # a batch with no generated token has no steps to sum over: zero token credit
        return Credit.from_tokens(rollouts, token, method, **info)
    step, _ = rollouts.view(token, "step", "sum")
    return Credit.from_level(rollouts, step, "step", method, token_rewards=token, **info)


@register("dpo_implicit_q")
def dpo_implicit_q(rollouts: Rollouts, *, ref_logprobs, logprobs=None, beta: float = 0.1,
                   level: str = "step") -> Credit:
    """From r to Q* (Rafailov et al. 2024, arXiv:2404.12358): a DPO-tuned policy's log-ratio to its reference as credit.

    Formula:
        r_t = beta * (log pi(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t))

        DPO trains pi so that, in the token-level MDP with a sparse outcome reward, r_t equals
        the optimal advantage Q*(s_t, y_t) - V*(s_t) (the paper's derivation): the credit of a
        token is its implicit reward, and the implicit rewards of a trajectory sum to the
        DPO sequence reward beta * log pi(y|x)/pi_ref(y|x). ``level="token"`` returns r_t;
        ``level="step"`` (default) gives every token of step i the step's sum
        sum_{t in step i} r_t = Q*(s_i, step i) - V*(s_i) (zero rewards inside a step make
        the per-token advantages telescope). ``info["token_rewards"]`` keeps r_t at step level.

    Defaults:
        beta = 0.1 (the DPO temperature the shipped tuned model was trained with; any beta > 0
        rescales the credit without reordering it), level = "step". ``logprobs`` (default:
        ``rollouts.logprobs``, the sampling policy's, for rollouts sampled from the tuned
        policy) and ``ref_logprobs`` (required) are (B, T) log-probabilities of the generated
        tokens under the tuned policy and the reference model.

    Degenerate input:
        beta = 0 gives zero credit everywhere (allowed). Rollouts with no generated tokens, or
        a policy equal to its reference, give zero credit. A one-step trajectory's step credit
        is the sequence-level implicit reward. Positions off the mask get 0 whatever the
        inputs hold there. Missing ``logprobs`` when the rollouts carry none raises a
        ValueError naming ``logprobs``; positive or non-finite log-probabilities raise one
        naming the argument.

    Deviations from the reference:
        none in the formula. The paper uses these rewards to guide search and to show DPO
        learns credit; the lab reads them as credit on fixed rollouts of the *base* model
        (off-policy for the tuned model), which is what "how good is DPO's credit" asks.

    Cost:
        none counted here: the two log-probability tensors are inputs (one forward pass of
        each model over the batch, which ``ArithmeticLM.rollout_logprobs`` performs).
    """
    beta = check_number("beta", beta, low=0.0)
    check_choice("level", level, LEVELS)
    if logprobs is None:
        if rollouts.logprobs is None:
            raise ValueError("logprobs: not given and the rollouts carry none; pass the tuned policy's (B, T) "
                             "log-probabilities")
        logprobs = rollouts.logprobs
    lp = _logprobs("logprobs", logprobs, rollouts)
    ref = _logprobs("ref_logprobs", ref_logprobs, rollouts)
    token = beta * (lp - ref)
    return _at_level(rollouts, token, level, "dpo_implicit_q", beta=beta,
                     sequence_reward=token.sum(1))


@register("t_reg")
def t_reg(rollouts: Rollouts, *, better_logprobs, worse_logprobs, scale: float = 1.0,
          level: str = "token") -> Credit:
    """T-REG (Zhou et al. 2024, arXiv:2412.02685): self-generated token rewards from contrastive prompting.

    Formula:
        r_t = scale * (log p(y_t | better-prompt, x, y_<t) - log p(y_t | worse-prompt, x, y_<t))

        The same model reads the same completion twice, once told to answer well and once
        told to answer badly; a token the "better" reading prefers gets positive credit, one the
        "worse" reading prefers negative credit. ``level="step"`` sums r_t over each step and
        gives every token of the step that sum (``info["token_rewards"]`` keeps r_t).

    Defaults:
        scale = 1.0, level = "token". ``better_logprobs`` and ``worse_logprobs`` (required) are
        (B, T) log-probabilities of the generated tokens under the two conditionings; for the
        tiny LM: ``treg.rollout_logprobs(ro, condition="better")`` and ``condition="worse"``
        with ``treg = ArithmeticLM.load().tuned("treg")``.

    Degenerate input:
        scale = 0 or identical conditionings give zero credit; rollouts with no generated
        tokens give none. Positions off the mask get 0. Positive or non-finite
        log-probabilities raise a ValueError naming the argument.

    Deviations from the reference:
        T-REG prompts a large instruction-following LLM in natural language ("revise to be
        better / worse") and uses the token rewards only as a regulariser of DPO's implicit
        rewards; the tiny LM cannot read instructions, so the lab fine-tunes a copy of it with
        two conditioning tokens (``;`` = an accepted completion follows, ``#`` = a rejected one;
        ``scripts/train_implicit_lm.py``), a separate model rather than the policy itself, and
        uses the contrast directly as credit. The paper's normalisation of the contrast (a
        squashing into a bounded weight) is left out: ``scale`` only rescales.

    Cost:
        none counted here: the two log-probability tensors are inputs (two forward passes of
        the conditioned model over the batch).
    """
    scale = check_number("scale", scale, low=0.0)
    check_choice("level", level, LEVELS)
    good = _logprobs("better_logprobs", better_logprobs, rollouts)
    bad = _logprobs("worse_logprobs", worse_logprobs, rollouts)
    return _at_level(rollouts, scale * (good - bad), level, "t_reg", scale=scale)


# --------------------------------------------------------------------------- StepAgent (inverse RL)
# One self-contained block: StepAgent's learned step reward read as turn credit. The reward model
# (labkit.learn.irl.StepRewardIRL) is an explicit argument: a (n_obs, A) table or a callable.
def _step_agent_rewards(rollouts: Rollouts, reward) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    from labkit.core.turns import turn_table  # local imports keep this block self-contained for merging
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


@register("step_agent")
def step_agent(rollouts: Rollouts, *, reward, pi=None, gamma: float = 0.0) -> Credit:
    """StepAgent (Deng et al. 2024, arXiv:2411.03817): an inverse-RL step reward from expert demos as turn credit.

    Formula:
        r_t = r_phi(o_t, a_t)     the learned step reward of the turn's (observation, action)

        With ``pi`` (the agent's (n_obs, A) policy table) the reward is centred on the agent's own
        average at that observation, r_t - sum_a pi(a | o_t) r_phi(o_t, a) (a baseline that does
        not depend on the action, so the policy gradient keeps its expectation). The turn's credit
        is the discounted sum from t on: c_t = sum_{k >= t} gamma^(k - t) r_k; gamma = 0 keeps
        each turn's own reward (StepAgent's step-wise comparison with the expert's step). For
        ``labkit.learn.irl.StepRewardIRL`` r_phi = log D / (1 - D) ~ log pi_E(a | o) / pi(a | o).

    Defaults:
        gamma = 0.0, pi = None (no centring). ``reward`` (required): an (n_obs, A) tensor
        indexed by observation and action ids, or a callable (obs (B, N), action (B, N)) -> (B, N)
        reward per turn, e.g. a fitted ``StepRewardIRL``.

    Degenerate input:
        Rollouts with no played turn give zero credit; a one-turn trajectory gets its turn's
        reward. Observations the expert never visited carry reward 0 in ``StepRewardIRL`` (no
        evidence either way), hence zero credit without ``pi``. A table that does not cover an
        observation or action id, a non-finite reward, or gamma outside [0, 1] raises a
        ValueError naming the argument.

    Deviations from the reference:
        StepAgent learns the step reward with an LLM discriminator on the agent's and the
        expert's step outputs and alternates it with PPO over a novice-to-expert curriculum of
        expert prefixes; here the discriminator is a table over ToolWorld's (observation,
        action) with a closed-form logistic fit (``labkit.learn.irl``), the expert is the best
        memoryless policy the exact DP finds (``expert_policy``), there is no curriculum, and
        the reward is scored as credit on fixed rollouts rather than trained on.

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
    from labkit.core.rollouts import Cost
    cost = Cost(aux_calls=int(present.sum()))
    return Credit.from_level(rollouts, c, "turn", "step_agent", cost=cost, step_rewards=r, gamma=gamma)
