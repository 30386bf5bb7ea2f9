"""Privileged critics: credit from a critic that sees, at training time, what the actor never sees.

* SWEET-RL (Zhou et al. 2025, arXiv:2503.15478): a turn-level advantage critic that conditions
  on hidden information (here: the bug location and whether it is fixed), trained with a
  Bradley-Terry objective on pairs of trajectories of the same task; it ranks candidate actions
  per turn, and the actor is trained (with DPO) on best-vs-worst candidate pairs.
* CriticSearch (Zhang et al. 2025, arXiv:2511.12159): a frozen critic that reads the whole
  trajectory and the gold answer and judges every turn good or bad; the verdicts become dense
  turn rewards next to the outcome. Here the critic is a STAND-IN judge (``labkit.learn.judges.stand_in_judge``).

Privileged inputs are always explicit arguments (``hidden_states=...``, ``advantage=...``);
nothing here reads ``rollouts.truth``.
"""
from __future__ import annotations

import torch

from labkit.core.checks import (as_tensor, check_finite, check_in_range, check_number, check_probability_table,
                                check_shape, resolve_input)
from labkit.credit.registry import register
from labkit.credit.episode import grpo
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.core.turns import turn_table


# --------------------------------------------------------------------------- SWEET-RL critic
@register("sweet_rl", level="turn", needs=("states",),
          inputs={"critic": "privileged_critic", "hidden_states": "hidden_states"}, status="implemented",
          paper="2503.15478",
          equation=r"A_{i,t} = A_c(h_t, a_t)\quad \left(- \sum_a \pi(a \mid o_t) \, A_c(h_t, a) \text{ if } \pi "
                   r"\text{ is given}\right)",
          symbols="t: turn; A_c: Bradley-Terry turn-advantage critic; h_t: privileged hidden state (or observation "
                  "o_t); default: uncentred")
def sweet_rl(rollouts: Rollouts, *, critic, hidden_states=None, pi=None) -> Credit:
    """SWEET-RL (Zhou et al. 2025, arXiv:2503.15478): a privileged turn critic's advantage of the action.

    Inputs:
        rollouts: ``turn_ids``, ``states`` and ``tokens`` (each turn's observation and action).
        ``critic`` (privileged_critic): a fitted ``labkit.learn.critics.BTCritic``, privileged
        (k_t = the hidden state) or not (k_t = the observation).
        ``hidden_states`` (hidden_states): the hidden state at every position, passed explicitly
        (``rollouts.truth["hidden_states"]``) for a privileged critic.

    Formula:
        Step-wise evaluation from training-time information:

        credit_t = A_c(k_t, a_t) - sum_a pi(a | o_t) A_c(k_t, a)      (``pi`` given)
                 = A_c(k_t, a_t)                                      (``pi=None``, the paper's)
        preference at turn t: (argmax_a A_c(k_t, a), argmin_a A_c(k_t, a)) over all candidates

        SWEET-RL trains the actor with DPO on the preference pairs (best vs worst of the
        candidate actions sampled at the turn, ranked by the critic). The per-turn credit is
        what a policy-gradient learner can use instead. Centring by pi makes the credit an
        advantage under the current policy (the critic's raw values are only defined up to a
        constant per key).

    Defaults:
        pi = None (the paper's uncentred credit).

    Degenerate input:
        a critic fitted on groups with equal outcomes stays 0 and gives credit 0 everywhere;
        ties (e.g. a key never seen in training: all 0) choose the lowest action id for both
        ends of the preference pair (not informative). Absent turns get credit 0 and
        preference (-1, -1). A critic without ``scores``, ``n_actions`` and ``privileged`` is
        refused.

    Deviations from the reference:
        candidates are all of ToolWorld's actions (the paper samples a few from the actor); the
        critic is a table, not an LLM.

    Returns:
        credit at level "turn"; ``info``: ``preferences`` (B, N, 2) action ids (chosen, rejected),
        -1 where there is no turn; ``informative`` (B, N) turns whose best and worst candidates
        differ; ``critic_values`` (B, N, A); ``privileged`` (the critic's).

    Cost:
        ``aux_calls`` = turns x candidates (one critic evaluation each).
    """
    if not all(hasattr(critic, a) for a in ("scores", "n_actions", "privileged")):
        raise ValueError(f"critic: expected a fitted turn-advantage critic with scores(rollouts, hidden_states), "
                         f"n_actions and privileged (e.g. labkit.learn.critics.BTCritic), got {type(critic).__name__}")
    vals, act, present = critic.scores(rollouts, hidden_states)
    taken = vals.gather(-1, act[..., None]).squeeze(-1)
    if pi is not None:
        obs, _, _ = turn_table(rollouts)
        table = check_probability_table("pi", pi, shape=(None, critic.n_actions)).detach()
        if bool((obs[present] >= table.shape[0]).any()):
            raise ValueError("pi: fewer rows than the observations in these rollouts")
        taken = taken - (table[obs.clamp(max=table.shape[0] - 1)] * vals).sum(-1)
    credit = torch.where(present, taken, 0.0)
    best, worst = vals.argmax(-1), vals.argmin(-1)
    prefs = torch.where(present[..., None], torch.stack([best, worst], -1), -1)
    informative = present & (vals.max(-1).values > vals.min(-1).values)
    cost = Cost(aux_calls=int(present.sum()) * critic.n_actions)
    return Credit.from_level(rollouts, credit, "turn", "sweet_rl", cost=cost, preferences=prefs,
                             informative=informative, critic_values=vals, privileged=critic.privileged)


# --------------------------------------------------------------------------- CriticSearch
@register("critic_search", level="turn", needs=("states",), inputs={"verdicts": "turn_verdicts"}, status="stand-in",
          paper="2511.12159",
          replaces="the frozen critique LLM that reads the trajectory and the gold answer: verdicts from the sign "
                   "of the exact turn advantage, flipped at a seeded error rate",
          equation=r"A_{i,k} = A^{\text{grpo}}_i + \alpha \, \frac{v_{i,k} - \operatorname{mean}_{g(i)} "
                   r"v}{\operatorname{std}_{g(i)} v + \epsilon}",
          symbols="v_{i,k}: 0/1 judge verdict on turn k; mean/std over all turns of the task group; A^grpo_i: grpo "
                  "credit; alpha = 1; eps = 1e-6")
def critic_search(rollouts: Rollouts, *, verdicts, alpha: float = 1.0, eps: float = 1e-6) -> Credit:
    """CriticSearch-style (Zhang et al. 2025, arXiv:2511.12159): GRPO plus retrospective dense turn rewards.

    Inputs:
        rollouts: ``rewards``, ``group_ids``, ``turn_ids``, ``states`` and ``tokens`` (the turns).
        ``verdicts`` (turn_verdicts): (B, N) 0/1 turn verdicts with N the batch's largest number
        of turns, or a callable ``rollouts -> (B, N)`` (the judge).

    Formula:
        turn reward     r_t  = verdict_t in {0 (bad), 1 (good)}
        turn term       A^T_t = (r_t - mean_g r) / (std_g r + eps)   pooled over every turn of
                                                                     the task group g
        hybrid          A_t  = A^GRPO_i + alpha * A^T_t

        A^GRPO_i is ``grpo`` on the trajectory outcomes: the critic's turn rewards complement the
        global reward, and the combination is optimised with GRPO, as the paper describes its
        hybrid advantage.

    Defaults:
        alpha = 1, eps = 1e-6, unbiased std.

    Degenerate input:
        a pool of turns whose verdicts are all equal gets turn term 0; a group of one
        trajectory with one turn gets mean 0 / std 1 (GRPO's singleton rule) in both terms, i.e.
        score / (1 + eps) + alpha * verdict / (1 + eps). Absent turns get 0.

    Deviations from the reference:
        STAND-IN: the paper's frozen critique LLM, reading the full trajectory and the gold
        answer, is replaced by ``labkit.learn.judges.stand_in_judge``: verdicts simulated from
        the exact turn advantage (the privileged knowledge) with a seeded error rate. The exact
        reward mapping and normalisation are labkit's reading of the paper's summary (turn
        rewards from binary verdicts, group normalisation as in GRPO), not checked against its
        equations.

    Returns:
        credit at level "turn"; ``info``: ``turn_rewards`` (B, N), ``turn_term`` (B, N),
        ``episode_term`` (B,), ``alpha``.

    Cost:
        one judge call per trajectory (the critic reads the whole trajectory once),
        ``aux_calls`` = B, counted whether ``verdicts`` is a tensor or a callable.
    """
    alpha = check_number("alpha", alpha, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    _, _, present = turn_table(rollouts)
    verdicts, _ = resolve_input("verdicts", verdicts, rollouts,
                                expected="a (B, N) tensor of 0/1 turn verdicts or a callable rollouts -> that")
    v = as_tensor("verdicts", verdicts).to(torch.float64)
    check_shape("verdicts", v, tuple(present.shape))
    check_finite("verdicts", torch.where(present, v, 0.0))
    check_in_range("verdicts", v, low=0.0, high=1.0, where=present, what="verdicts (0 bad, 1 good)")
    r = torch.where(present, v, 0.0)
    term = torch.zeros_like(r)
    if bool(present.any()):
        pool = rollouts.group_ids[:, None].expand_as(r)[present]
        term[present] = group_normalize(r[present], pool, eps=eps).normalized
    episode = grpo(rollouts, eps=eps).values[:, 0].to(torch.float64)
    adv = torch.where(present, episode[:, None] + alpha * term, 0.0)
    return Credit.from_level(rollouts, adv, "turn", "critic_search", cost=Cost(aux_calls=rollouts.batch_size),
                             turn_rewards=r, turn_term=term, episode_term=episode, alpha=alpha)
