"""Turn credit from what a program can check along the way: verified progress and execution feedback.

* ``vpr``: Verifiable Process Rewards. A program that knows the task checks the progress state
  at every turn boundary; a turn's reward is the progress it made (a regression is negative), so
  the rewards telescope, and the outcome's group-relative advantage is added.
* ``gvpo``: Group Verification-based Policy Optimization. GRPO's group-relative outcome advantage
  plus a step correction of +-beta from what execution reported about the turn's work (a test
  run that failed after an edit, a verified pass).

Both take their checks as explicit inputs (a tensor, or a callable rollouts -> tensor); on
ToolWorld the producers are ``labkit.envs.toolworld.progress.progress_states`` and
``execution_feedback``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import (as_tensor, check_choice, check_finite, check_number, check_shape, resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, group_normalize
from labkit.credit.process import turn_reward_design
from labkit.credit.registry import register

Checked = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]
VPR_BASELINES = ("outcome", "return_to_go")
GVPO_NORMALIZE = ("none", "group")


def _present(rollouts: Rollouts) -> torch.Tensor:
    return rollouts.view(rollouts.mask, "turn", "first")[1]


# --------------------------------------------------------------------------- VPR
@register("vpr", level="turn", needs=("turns",), inputs={"progress": "progress_states"}, status="implemented",
          paper="2605.10325",
          equation=r"A_{i,k} = \frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)} s + \epsilon} "
                   r"+ w \sum_{l \ge k} \gamma^{l-k} \left(p_{i,l+1} - p_{i,l}\right)",
          symbols="p_{i,l}: the checker's progress state before turn l (p_{i,n_i} after the last); s_i: outcome; "
                  "w = 1; gamma = 1 (then the sum is p_{i,n_i} - p_{i,k}); eps = 1e-6")
def vpr(rollouts: Rollouts, *, progress: Checked, progress_weight: float = 1.0, outcome_weight: float = 1.0,
        gamma: float = 1.0, baseline: str = "outcome", normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """VPR, Verifiable Process Rewards for agentic reasoning (arXiv:2605.10325): verified progress per turn.

    Inputs:
        rollouts: ``rewards`` (the outcome s_i, the trajectory's total reward), ``group_ids``
        (task groups), ``turn_ids``.
        ``progress`` (progress_states): p_{i,k}, the progress state a program that knows the
        task verifies at every turn boundary, (B, N + 1) with N the batch's largest number of
        turns: column 0 before the first turn, column k + 1 after turn k; columns past a
        trajectory's last boundary are ignored. Or a callable rollouts -> (B, N + 1), e.g.
        ``functools.partial(labkit.envs.toolworld.progress.progress_states, env)`` (located,
        fixed, confirmed by tests, submitted with the fix, read by the world's own checker).

    Formula:
        v_{i,k} = p_{i,k+1} - p_{i,k}                 the verified progress of turn k (k < n_i)
        O_i     = (s_i - mean_g s) / (std_g s + eps)  GRPO's outcome advantage
        baseline = "outcome":
            A_{i,k} = outcome_weight * O_i + progress_weight * sum_{l >= k} gamma^{l-k} v_{i,l}
            (at gamma = 1 the progress term is p_{i,n_i} - p_{i,k}: the progress still to be
            made from turn k on, a state baseline subtracted from where the episode ended)
        baseline = "return_to_go": ``turn_reward_design``'s leave-one-out construction on the
            verified rewards, G_{i,k} = progress_weight * sum_{l >= k} v_{i,l} + outcome_weight
            * s_i against the mean G of the task's other trajectories at turn index k, divided
            by that index's std (gamma must be 1 there).
        Every position of turn k takes A_{i,k}.

    Defaults:
        progress_weight = outcome_weight = 1, gamma = 1, baseline = "outcome", normalize_std =
        True (GRPO's std on the outcome term), eps = 1e-6: labkit's choices.

    Degenerate input:
        a constant progress state gives v = 0 and plain GRPO (times outcome_weight); a group of
        one keeps its raw outcome (GRPO's singleton rule); a group whose outcomes are all equal
        is credited by its verified progress alone. A trajectory with no turn gets 0, absent
        turns get 0.

    Deviations from the reference:
        the paper is not readable here: the formula follows the catalog's description ("converts
        intermediate symbolic or algorithmic oracles into dense turn-level supervision"): the
        oracle verifies a progress state, a turn's reward is the progress it made, so the dense
        rewards telescope and cannot be farmed by repeating a checkable event (unlike a bonus
        per event, ``turn_reward_design``). How the paper mixes them with the outcome is not
        known to the lab; the outcome-plus-return-to-go form and the leave-one-out option are
        labkit's. On ToolWorld the checker is the world's own program (it reads the hidden bug
        location, as a puzzle's solver knows the solution), so nothing is substituted.

    Returns:
        credit at level "turn"; ``info``: ``progress`` p (B, N + 1) as read, ``verified_rewards``
        v (B, N), ``outcome_advantage`` O (B,) (the first-turn advantage with "return_to_go"),
        ``progress_term`` (B, N), and the settings ``gamma``, ``baseline``.

    Cost:
        a callable costs one ``aux_calls`` per trajectory (the checker runs once over its
        transcript, no model); a tensor costs nothing here.
    """
    progress_weight = check_number("progress_weight", progress_weight)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    eps = check_number("eps", eps, low=0.0)
    check_choice("baseline", baseline, VPR_BASELINES)
    if baseline == "return_to_go" and gamma != 1.0:
        raise ValueError(f"gamma: baseline 'return_to_go' compares undiscounted returns (gamma 1), got {gamma}")
    present = _present(rollouts)
    B, N = present.shape
    n_turns = present.sum(1)
    progress, called = resolve_input("progress", progress, rollouts,
                                     expected="a (B, N + 1) tensor of verified progress states or a callable "
                                              "rollouts -> that (e.g. labkit.envs.toolworld.progress.progress_states)")
    p = as_tensor("progress", progress)
    check_shape("progress", p, (B, N + 1))
    p = p.to(torch.float64)
    used = torch.arange(N + 1)[None, :] <= n_turns[:, None]
    check_finite("progress", p[used])
    p = torch.where(used, p, 0.0)
    v = torch.where(present, p[:, 1:] - p[:, :-1], 0.0)
    cost = Cost(aux_calls=B) if called else Cost()
    if baseline == "return_to_go":
        inner = turn_reward_design(rollouts, turn_rewards=v, turn_weight=progress_weight,
                                   outcome_weight=outcome_weight, normalize_std=normalize_std, eps=eps,
                                   baseline="return_to_go")
        # turn_term holds G = progress_weight * (p_n - p_k) + outcome_weight * s at gamma 1
        return Credit.from_level(rollouts, inner.values, "turn", "vpr", cost=cost, progress=p, verified_rewards=v,
                                 outcome_advantage=inner.info["outcome_advantage"],
                                 progress_term=torch.where(present, progress_weight * v.flip(1).cumsum(1).flip(1), 0.0),
                                 gamma=gamma, baseline=baseline)
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    term = progress_weight * discounted_returns(v, present, gamma)
    adv = torch.where(present, outcome_weight * outcome[:, None] + term, 0.0)
    return Credit.from_level(rollouts, adv, "turn", "vpr", cost=cost, progress=p, verified_rewards=v,
                             outcome_advantage=outcome, progress_term=torch.where(present, term, 0.0),
                             gamma=gamma, baseline=baseline)


# --------------------------------------------------------------------------- GVPO
@register("gvpo", level="turn", inputs={"feedback": "execution_feedback"}, status="adaptation",
          paper="openreview-RY47Tq0VsV",
          replaces="compiler and runtime feedback of a coding agent's steps: the tool reports ToolWorld shows the "
                   "agent (a test run after an edit passing or failing, an edit of a file a read called fine, a "
                   "submit with or without passing tests)",
          equation=r"A_{i,k} = \frac{s_i - \operatorname{mean}_{g(i)} s}{\operatorname{std}_{g(i)} s + \epsilon} "
                   r"+ \beta\, c_{i,k}",
          symbols="c_{i,k} in {-1, 0, +1}: execution feedback on turn k (error -1, verified success +1), "
                  "optionally z-scored over the group's turns; beta = 0.5; eps = 1e-6")
def gvpo(rollouts: Rollouts, *, feedback: Checked, beta: float = 0.5, normalize: str = "none",
         normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """GVPO, group verification-based policy optimisation for interactive coding agents (OpenReview RY47Tq0VsV, 2026): outcome plus execution corrections.

    Inputs:
        rollouts: ``rewards`` (the outcome s_i), ``group_ids`` (task groups), ``turn_ids``.
        ``feedback`` (execution_feedback): c_{i,k} in {-1, 0, +1}, what execution reported about
        turn k's work (-1 an error: a failing test run, a rejected step; +1 a verified success;
        0 nothing checked), (B, N) with N the batch's largest number of turns, or a callable
        rollouts -> (B, N), e.g. ``functools.partial(labkit.envs.toolworld.progress
        .execution_feedback, env)``. Entries off a trajectory's turns are ignored.

    Formula:
        O_i     = (s_i - mean_g s) / (std_g s + eps)              GRPO's outcome advantage
        c~_{i,k} = c_{i,k}                                        normalize = "none"
                 = (c_{i,k} - mean) / (std + eps)                 normalize = "group": over every
                                                                  turn of task group g
        A_{i,k} = O_i + beta * c~_{i,k}

        Every position of turn k takes A_{i,k}.

    Defaults:
        beta = 0.5, normalize = "none", normalize_std = True (GRPO's std), eps = 1e-6: labkit's
        choices (the paper is not readable here).

    Degenerate input:
        all-zero feedback gives plain GRPO; with normalize = "group", feedback equal on every
        turn of a group gives 0 there and a group with a single turn keeps its raw feedback
        (GRPO's singleton rule). A group of one keeps its raw outcome. Absent turns get 0.

    Deviations from the reference:
        ADAPTATION: the paper's process-verifiable feedback is what a coding agent's execution
        reports (syntax errors, runtime exceptions, tests); ToolWorld has no code to run, so its
        tools' visible reports stand in (``execution_feedback``: the test run after an edit,
        an edit of a file a read called fine, a submit with or without passing tests). They are
        noisy as execution can be (flaky tests, misread files). The additive form, the signs
        and beta follow the catalog's description ("step-level correction terms added to the
        group-relative outcome advantage"); the group normalisation option is labkit's.

    Returns:
        credit at level "turn"; ``info``: ``feedback`` c (B, N) as read, ``correction`` beta * c~
        (B, N), ``outcome_advantage`` O (B,), and the settings ``beta``, ``normalize``.

    Cost:
        a callable costs one ``aux_calls`` per trajectory (the reports are read once from its
        transcript, no model); a tensor costs nothing here.
    """
    beta = check_number("beta", beta, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    check_choice("normalize", normalize, GVPO_NORMALIZE)
    present = _present(rollouts)
    B, N = present.shape
    feedback, called = resolve_input("feedback", feedback, rollouts,
                                     expected="a (B, N) tensor of execution feedback in {-1, 0, +1} or a callable "
                                              "rollouts -> that (e.g. labkit.envs.toolworld.progress.execution_feedback)")
    c = as_tensor("feedback", feedback)
    check_shape("feedback", c, (B, N))
    c = c.to(torch.float64)
    inside = c[present]
    check_finite("feedback", inside)
    bad = ~((inside == -1) | (inside == 0) | (inside == 1))
    if bool(bad.any()):
        raise ValueError(f"feedback: execution feedback must be -1, 0 or +1 on every played turn, got "
                         f"{float(inside[bad][0])!r}")
    c = torch.where(present, c, 0.0)
    if normalize == "group" and bool(present.any()):
        pool = rollouts.group_ids[:, None].expand(B, N)[present]
        z = torch.zeros_like(c)
        z[present] = group_normalize(c[present], pool, eps=eps).normalized
        c_used = z
    else:
        c_used = c
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    correction = torch.where(present, beta * c_used, 0.0)
    adv = torch.where(present, outcome[:, None] + correction, 0.0)
    cost = Cost(aux_calls=B) if called else Cost()
    return Credit.from_level(rollouts, adv, "turn", "gvpo", cost=cost, feedback=c, correction=correction,
                             outcome_advantage=outcome, beta=beta, normalize=normalize)
