"""Hindsight credit: how much more (or less) likely was the action, knowing how the episode ended?

HCA (Harutyunyan et al. 2019) asks, after the episode, the *hindsight* question: given the
outcome Z that happened, what was the probability h(a | s, Z) of each action at s? An action
that the successful episodes chose more often than the policy does (h > pi) made success more
likely; one they chose less often made it less likely. HCAPO (Tan et al. 2026) puts that ratio
into a GRPO-style agent trainer. Both need h, which this module supplies in two ways:

* ``labkit.envs.toolworld.exact_hindsight``: from the exact DP truth of a ToolWorld, which knows
  the hidden state (an oracle, for testing and as the upper bound);
* ``labkit.learn.critics.LearnedHindsight``: counted on rollouts, conditioned only on what the agent sees (the
  observation, optionally the turn) and the outcome: the realistic one.

Everything here works at TURN level (one turn = the run of positions sharing a ``turn_id``; its
observation is ``rollouts.states`` and its action the token at its first position). The outcome
Z must be binary (0 / 1): by default Z is the trajectory's total reward, which in a ToolWorld
with ``step_cost = 0``, ``wrong_submit = 0`` and ``success_reward = 1`` is the success flag;
otherwise pass ``outcome=`` (e.g. the success flag) explicitly.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import (as_tensor, check_bool, check_finite, check_in_range, check_number,
                                check_probability_table, check_shape, resolve_input)
from labkit.credit.registry import register
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.turns import binary_outcome, turn_table
from labkit.credit.episode import grpo

Hindsight = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]


# --------------------------------------------------------------------------- turn helpers
def turn_policy_probs(rollouts: Rollouts, pi=None) -> torch.Tensor:
    """pi(a_t | o_t) of every turn's action, (B, N): from the table ``pi`` (n_obs, n_actions) if
    given, else from ``rollouts.logprobs`` at the turn's first position (the sampling policy).
    ``pi`` must be a probability table: non-negative, each row summing to 1 within 1e-6
    (``check_probability_table``; a ValueError naming ``pi`` otherwise)."""
    obs, act, present = turn_table(rollouts)
    if pi is not None:
        pi = check_probability_table("pi", pi)
        if bool((obs[present] >= pi.shape[0]).any()) or bool((act[present] >= pi.shape[1]).any()):
            raise ValueError("pi: table too small for the observations / actions in these rollouts")
        p = pi[obs.clamp(max=pi.shape[0] - 1), act.clamp(max=pi.shape[1] - 1)]
    else:
        if rollouts.logprobs is None:
            raise ValueError("pi: these rollouts carry no logprobs; pass the policy table pi=policy.probs()")
        lp, _ = rollouts.view(rollouts.logprobs.to(torch.float64), "turn", "first")
        p = lp.exp()
    return torch.where(present, p, 1.0)


def _resolve(name: str, value, rollouts: Rollouts, present: torch.Tensor) -> tuple[torch.Tensor, bool]:
    value, called = resolve_input(name, value, rollouts,
                                  expected="a (B, N) tensor of per-turn probabilities or a callable rollouts -> that")
    x = as_tensor(name, value).to(torch.float64)
    check_shape(name, x, tuple(present.shape))
    check_finite(name, torch.where(present, x, 0.0))
    check_in_range(name, x, low=0.0, high=1.0, where=present, what="probabilities")
    return x, called


# --------------------------------------------------------------------------- HCA
@register("hca", level="turn", needs=("states", "logprobs"), inputs={"hindsight": "hindsight"}, status="implemented",
          paper="1912.02503",
          equation=r"A_{i,k} = \left(1 - \frac{\pi(a_k \mid s_k)}{h(a_k \mid s_k, Z_i)}\right) Z_i",
          symbols="k: turn; Z_i in {0,1}: trajectory outcome; h: probability of the action given the outcome "
                  "(exact or learned hindsight model)")
def hca(rollouts: Rollouts, *, hindsight: Hindsight, outcome=None, pi=None,
        max_ratio: float | None = None) -> Credit:
    """Return-conditioned hindsight credit assignment (Harutyunyan et al. 2019, arXiv:1912.02503): (1 - pi / h) Z.

    Inputs:
        rollouts: ``rewards`` (Z, unless ``outcome`` is given), ``turn_ids``, ``states`` and
        ``tokens`` (each turn's observation and action), ``logprobs`` (pi(a_t | s_t), unless
        the table ``pi`` is given).
        ``hindsight`` (hindsight): h(a_t | ., Z) of every turn's action, (B, N) with N the
        batch's largest number of turns, or a callable ``rollouts -> (B, N)``: e.g.
        ``exact_hindsight(...)`` (oracle) or a fitted ``LearnedHindsight`` (counted on what the
        agent sees).

    Formula:
        credit_t = (1 - pi(a_t | s_t) / h(a_t | s_t, Z)) * Z

        Z is the binary outcome of the trajectory. Why it is unbiased with the exact h. By Bayes,
        h(a | s, z) = pi(a | s) P(z | s, a) / P(z | s), so E[credit | s, a] = sum_z P(z | s, a) z
        - sum_z P(z | s) z = Q(s, a) - V(s) = A(s, a), the advantage of the success probability
        (equal to ToolWorld's exact A when success pays 1 and nothing else is rewarded),
        wherever Q(s, a) > 0. The outcome's luck is averaged out by the ratio, not by a
        baseline. Support caveat: an action after which success is impossible (Q(s, a) = 0,
        e.g. submitting an unfixed bug) never appears in a successful episode, so its credit is
        always 0, not -V(s): HCA cannot blame what no success carries (the paper assumes h > 0
        wherever pi > 0). With a binary Z every failed trajectory gets credit 0 (its information
        is in the ratios of the successful ones).

    Defaults:
        Z = the trajectory's total reward, which must be 0 / 1 (or pass ``outcome=`` (B,)).
        pi = None (pi(a_t | s_t) from ``rollouts.logprobs``; else an (n_obs, n_actions) table
        of probabilities: non-negative rows summing to 1 within 1e-6, refused otherwise).
        ``max_ratio`` = None (no clipping; a number caps pi / h).

    Degenerate input:
        groups play no role (a group of one is fine); a batch with no success gives credit 0
        everywhere; absent turns get 0. h = 0 for an action of a trajectory whose Z = 1 is
        impossible for the exact h and for ``LearnedHindsight`` (it counts the action) and is
        refused if passed, as is a non-binary outcome.

    Deviations from the reference:
        the paper also has state-conditioned HCA (h(a | s, s')); labkit implements the
        return-conditioned form only, with Z = the whole episode's outcome (the return from
        every turn on when only the end is rewarded).

    Returns:
        credit at level "turn"; ``info``: ``ratio`` (pi / h, (B, N)), ``hindsight`` (h),
        ``outcome`` (Z).

    Cost:
        none beyond the rollouts (h is a table lookup); a callable h counts as one auxiliary
        call per trajectory (``aux_calls`` = B).
    """
    _, _, present = turn_table(rollouts)
    z = binary_outcome(rollouts, outcome)
    h, called = _resolve("hindsight", hindsight, rollouts, present)
    p = turn_policy_probs(rollouts, pi)
    need = present & (z[:, None] > 0)
    if bool((h[need] <= 0).any()):
        raise ValueError("hindsight: h(a_t | s_t, Z=1) is 0 for an action of a successful trajectory; "
                         "the hindsight model must give every action it saw succeed a positive probability")
    ratio = torch.where(present, p / h.clamp(min=1e-300), 1.0)
    if max_ratio is not None:
        ratio = ratio.clamp(max=check_number("max_ratio", max_ratio, low=0.0, low_open=True))
    credit = torch.where(present, (1 - ratio) * z[:, None], 0.0)
    cost = Cost(aux_calls=rollouts.batch_size if called else 0)
    return Credit.from_level(rollouts, credit, "turn", "hca", cost=cost, ratio=ratio, hindsight=h, outcome=z)


# --------------------------------------------------------------------------- HCAPO
@register("hcapo", level="turn", needs=("states", "logprobs"), inputs={"hindsight": "hindsight"}, status="stand-in",
          paper="2603.08754",
          replaces="the LLM re-scoring its own action given the outcome (post-hoc critic): a hindsight model "
                   "fitted on rollouts, or the exact DP on tabular worlds",
          equation=r"A_{i,k} = A^{\text{grpo}}_i + \omega \max\left(0, (\rho_k - 1) Z_i\right),\quad \rho_k = "
                   r"\min\left(\frac{h(a_k \mid s_k, Z_i)}{\pi(a_k \mid s_k)}, \rho_{\max}\right)",
          symbols="h: action prob given outcome from a fitted model (LLM in paper); Z_i in {0,1}; omega = 1; "
                  "rho_max = 5; max(0,.): do-no-harm")
def hcapo(rollouts: Rollouts, *, hindsight: Hindsight, outcome=None, pi=None, omega: float = 1.0,
          rho_max: float = 5.0, do_no_harm: bool = True, eps: float = 1e-6) -> Credit:
    """HCAPO (Tan et al. 2026, arXiv:2603.08754): GRPO plus a hindsight-ratio step term, per turn.

    Inputs:
        rollouts: as ``hca`` (``rewards``, ``turn_ids``, ``states``, ``tokens``, ``logprobs``),
        plus ``group_ids`` for the GRPO term.
        ``hindsight`` (hindsight): h(a_t | ., Z) of every turn's action, as in ``hca``.

    Formula:
        Hindsight credit assignment for long-horizon LLM agents:

        hindsight ratio     rho_t   = min(h(a_t | s_t, Z) / pi(a_t | s_t), rho_max)
        refined step Q      Q^H_t   = rho_t * Z                 (HCA: Q(s, a) = E_{Z|s}[rho Z])
        step baseline       V^H_t   = sum_a pi(a | s_t) rho(a) Z = Z   (h sums to 1 over actions)
        step term           A^S_t   = Q^H_t - V^H_t = (rho_t - 1) * Z
        do-no-harm mask     A^S_t   = max(A^S_t, 0) in successful trajectories (``do_no_harm``)
        multi-scale         A_t     = A^GRPO_i + omega * A^S_t

        A^GRPO_i is ``grpo`` on the trajectory outcomes (trajectory scale); the step term moves
        the turns of a successful trajectory whose action the hindsight model finds more likely
        given success.

    Defaults:
        omega = 1, rho_max = 5, do_no_harm = True, eps = 1e-6 (GRPO's). ``outcome`` and ``pi``
        as in ``hca`` (a ``pi`` that is not a probability table is refused).

    Degenerate input:
        the GRPO term follows ``grpo`` (a group of one: raw score / (1 + eps); an all-equal group: 0); failed
        trajectories have step term 0 (Z = 0), so they carry only the GRPO term. Absent turns
        get 0; a non-binary outcome is refused.

    Deviations from the reference:
        STAND-IN: in the paper the hindsight probability P(a_t | context, outcome) comes from the
        LLM itself as a post-hoc critic (generative verification: the policy re-scores its own
        action with the successful outcome in the prompt). Here it comes from ``hindsight``: a
        model fitted on rollouts (``LearnedHindsight``) or the exact DP (``exact_hindsight``,
        oracle); in short, the outcome-conditioned action probability comes from a model fitted
        on rollouts (exact on tabular environments).
        Where labkit may differ from the paper: only the abstract and third-party summaries of
        the paper were readable here, which name the hindsight ratio, the refined step Q, the
        multi-scale (trajectory GRPO + step) advantage, a "do-no-harm" mask that zeroes negative
        hindsight signals in successful trials, and temporal smoothing across adjacent
        reasoning / action steps. The formulas above are labkit's reconstruction from HCA's
        identity, not checked against the paper's equations; temporal smoothing is not applied
        (a ToolWorld turn is one action).

    Returns:
        credit at level "turn"; ``info``: ``rho`` (B, N), ``step_term`` (B, N), ``episode_term``
        (B,), ``hindsight``, and the settings ``omega``, ``rho_max``, ``do_no_harm``.

    Cost:
        as ``hca``: none beyond the rollouts; a callable h counts as one auxiliary call per
        trajectory (``aux_calls`` = B).
    """
    omega = check_number("omega", omega, low=0.0)
    rho_max = check_number("rho_max", rho_max, low=1.0)
    _, _, present = turn_table(rollouts)
    z = binary_outcome(rollouts, outcome)
    h, called = _resolve("hindsight", hindsight, rollouts, present)
    p = turn_policy_probs(rollouts, pi)
    rho = torch.where(present, (h / p.clamp(min=1e-300)).clamp(max=rho_max), 1.0)
    step = (rho - 1) * z[:, None]
    if check_bool("do_no_harm", do_no_harm):
        step = torch.where(z[:, None] > 0, step.clamp(min=0.0), step)
    step = torch.where(present, step, 0.0)
    base = grpo(rollouts, eps=eps)
    episode = base.values[:, 0].to(torch.float64)
    adv = torch.where(present, episode[:, None] + omega * step, 0.0)
    cost = Cost(aux_calls=rollouts.batch_size if called else 0)
    return Credit.from_level(rollouts, adv, "turn", "hcapo", cost=cost, rho=rho, step_term=step,
                             episode_term=episode, hindsight=h, omega=omega, rho_max=rho_max,
                             do_no_harm=do_no_harm)
