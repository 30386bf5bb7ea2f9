"""Judge-shaped outcome credit for agents: TRIAGE (a role per turn) and Rubric-Grounded RL (a rubric per episode).

TRIAGE asks a judge to sort every action segment of an agent's run into one of four roles and
adds a small, capped reward per role to the group-relative outcome advantage, so a failed run
still credits its useful exploration and a successful one still pays for its backtracking.
Rubric-Grounded RL asks a grader to check a response item by item against a written rubric and
trains on the weighted share of satisfied items instead of a single pass / fail verdict. Both
take the judge's output as a tensor or a callable ``rollouts -> tensor``; the lab's STAND-IN
judges (exact quantities with a known error rate) live in ``labkit.learn.judges``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import as_tensor, check_finite, check_number, check_shape, resolve_input
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.credit.registry import register

JudgeOutput = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]

#: TRIAGE's roles by label (0..3, worst to best), as ``labkit.learn.judges.TURN_ROLES`` names them.
ROLE_NAMES = ("regression", "plumbing", "exploration", "decisive")
#: The default role -> reward lookup, in ``ROLE_NAMES`` order.
ROLE_REWARDS = (-0.5, 0.0, 0.25, 0.5)


def _judged(rollouts: Rollouts, output, name: str, expected: str) -> tuple[torch.Tensor, bool]:
    output, called = resolve_input(name, output, rollouts, expected=expected)
    return as_tensor(name, output).to(torch.float64), called


def _labels_in(name: str, x: torch.Tensor, allowed: tuple[float, ...], what: str) -> None:
    check_finite(name, x)
    if not bool(torch.isin(x, torch.tensor(allowed, dtype=torch.float64)).all()):
        bad = x[~torch.isin(x, torch.tensor(allowed, dtype=torch.float64))][0].item()
        raise ValueError(f"{name}: {what}, got {bad:g}")


def _role_rewards(role_rewards) -> torch.Tensor:
    if isinstance(role_rewards, (str, bytes)) or not isinstance(role_rewards, (tuple, list, torch.Tensor)):
        raise TypeError(f"role_rewards: expected {len(ROLE_NAMES)} numbers (one per role {ROLE_NAMES}), "
                        f"got {type(role_rewards).__name__}")
    try:
        lookup = torch.as_tensor(role_rewards, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"role_rewards: expected {len(ROLE_NAMES)} numbers, got {role_rewards!r}") from None
    if lookup.numel() != len(ROLE_NAMES):
        raise ValueError(f"role_rewards: expected {len(ROLE_NAMES)} numbers (one per role {ROLE_NAMES}), "
                         f"got {lookup.numel()}")
    check_finite("role_rewards", lookup)
    return lookup


@register("triage", level="turn", inputs={"roles": "turn_roles"}, status="stand-in", paper="2606.32017",
          replaces="the LLM judge's role label of every turn: thresholds on the exact turn advantage and on the "
                   "exact belief's movement, each label wrong w.p. 0.1",
          equation=r"A_{i,n} = \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} "
                   r"s_j + \epsilon} + c_i \, \rho(\ell_{i,n}),\quad c_i = \min\Big(1, \frac{C}{\sum_m "
                   r"|\rho(\ell_{i,m})|}\Big)",
          symbols="l_{i,n} in {0 regression, 1 plumbing, 2 exploration, 3 decisive}: judge's role of turn n; rho: "
                  "role_rewards = (-0.5, 0, 0.25, 0.5); C = cap = 1; eps = 1e-6")
def triage(rollouts: Rollouts, *, roles: JudgeOutput = None, role_rewards=ROLE_REWARDS, cap: float = 1.0,
           normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """TRIAGE (arXiv:2606.32017, role-typed credit assignment): a judge's role per turn, a capped reward per role on top of GRPO.

    Inputs:
        rollouts: ``rewards`` (the outcome s_i), ``group_ids``, ``turn_ids``.
        ``roles`` (turn_roles): l_{i,n}, the judge's role of turn n of trajectory i, (B, N)
        with N the batch's largest number of turns, labels 0 regression, 1 plumbing (no
        progress), 2 exploration (gained information), 3 decisive (progress); or a callable
        rollouts -> (B, N), e.g. ``functools.partial(labkit.learn.judges.stand_in_turn_roles,
        advantage=A, information=labkit.learn.judges.belief_movement(env, truth, rollouts))``.

    Formula:
        A fixed lookup rho turns each role into a small process reward; the rewards of one
        trajectory are scaled down together so that their absolute total never exceeds the cap
        C (the shaping stays bounded however long the run), and added to the group-relative
        outcome advantage:

            rho_{i,n} = role_rewards[l_{i,n}]
            c_i       = min(1, C / sum_m |rho_{i,m}|)              (1 when the sum is 0)
            A_{i,n}   = (s_i - mean_g s) / (std_g s + eps) + c_i * rho_{i,n}

        Every position of turn n takes A_{i,n}. A failed run's exploration turns rise above
        its other turns; a successful run's regressions fall below.

    Defaults:
        role_rewards = (-0.5, 0, 0.25, 0.5) for (regression, plumbing, exploration, decisive),
        cap = 1: half a group standard deviation for a decisive turn or a regression, a
        quarter for exploration, nothing for plumbing, and at most one standard deviation of
        shaping per trajectory (labkit's choice); normalize_std = True (GRPO), eps = 1e-6.

    Degenerate input:
        cap = 0 or all-plumbing roles give plain GRPO on every turn; a group of one gets its raw
        outcome (GRPO's singleton rule) plus its shaping; a group with equal outcomes is ranked
        by the roles alone. Absent turns get 0. Labels outside {0, 1, 2, 3} are refused.

    Deviations from the reference:
        follows the catalog's description only (the paper was not readable here): the four
        roles, the fixed role -> reward lookup, the cap and the addition to the outcome
        advantage are the description's; the lookup values, the cap's form (a common scale
        on a trajectory's rewards, bounding their absolute sum) and segment = turn are labkit's
        choices. STAND-IN: the paper's judge is an LLM; in labkit the roles usually come from
        ``labkit.learn.judges.stand_in_turn_roles``: decisive / regression when the exact turn
        advantage is above 0.1 / below -0.1, exploration when the turn moved the exact belief
        over the buggy file by more than 0.05 (total variation), plumbing otherwise, each label
        replaced by a uniformly drawn other role w.p. 0.1.

    Returns:
        credit at level "turn"; ``info``: ``roles`` (B, N), ``shaping`` c_i rho_{i,n} (B, N),
        ``scale`` c_i (B,), ``outcome_advantage`` (B,), ``role_rewards`` (4,), ``cap``.

    Cost:
        a callable judge costs one ``aux_calls`` per trajectory (it reads the run once and
        labels every turn); a tensor costs nothing here.
    """
    lookup = _role_rewards(role_rewards)
    cap = check_number("cap", cap, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    present = rollouts.view(rollouts.mask, "turn", "first")[1]
    shape = tuple(present.shape)
    labels, called = _judged(rollouts, roles, "roles", f"a tensor of shape {shape} or a callable rollouts -> {shape}")
    check_shape("roles", labels, shape)
    _labels_in("roles", labels[present], (0.0, 1.0, 2.0, 3.0),
               "role labels must be 0 (regression), 1 (plumbing), 2 (exploration) or 3 (decisive)")
    labels = torch.where(present, labels, 0.0)
    rho = torch.where(present, lookup[labels.long()], 0.0)
    total = rho.abs().sum(1)
    scale = torch.where(total > cap, cap / total.clamp(min=1e-300), torch.ones_like(total))
    shaping = scale[:, None] * rho
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    adv = torch.where(present, outcome[:, None] + shaping, 0.0)
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_level(rollouts, adv, "turn", "triage", cost=cost, roles=labels, shaping=shaping, scale=scale,
                             outcome_advantage=outcome, role_rewards=lookup, cap=cap)


@register("rubric_rl", level="episode", inputs={"rubric_verdicts": "rubric_verdicts"}, status="stand-in",
          paper="2605.08061",
          replaces="the grader model's verdict on every rubric item: the exact answer from the episode and the "
                   "hidden truth, each flipped w.p. 0.1",
          equation=r"A_i = \frac{g_i - \operatorname{mean}_{j \in g(i)} g_j}{\operatorname{std}_{j \in g(i)} g_j + "
                   r"\epsilon},\quad g_i = \sum_k w_k v_{i,k}",
          symbols="v_{i,k} in {0, 1}: grader's verdict on rubric item k; w_k: rubric_weights (sum 1, default equal); "
                  "g_i: graded reward; eps = 1e-6")
def rubric_rl(rollouts: Rollouts, *, rubric_verdicts: JudgeOutput = None, rubric_weights=None,
              normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """Rubric-Grounded RL (arXiv:2605.08061, structured judge rewards): a rubric's weighted satisfied items as the reward, GRPO on it.

    Inputs:
        rollouts: ``group_ids`` (the outcome itself enters only as a rubric item).
        ``rubric_verdicts`` (rubric_verdicts): v_{i,k} in {0, 1}, the grader's verdict on item k
        of the rubric for trajectory i, (B, K); or a callable rollouts -> (B, K), e.g.
        ``functools.partial(labkit.learn.judges.stand_in_rubric_verdicts, env)`` (K = 5 items of
        ``labkit.learn.judges.RUBRIC_CRITERIA``, one of them the outcome).
        ``rubric_weights``: w (K,) non-negative, one per item (default: equal), e.g.
        ``labkit.learn.judges.RUBRIC_WEIGHTS``.

    Formula:
        The grader checks the episode item by item; the graded reward is the weighted share of
        satisfied items, and the credit is GRPO's group-relative advantage of that reward:

            g_i = sum_k w_k v_{i,k}                       (w normalised to sum 1)
            A_i = (g_i - mean_g g) / (std_g g + eps)      (normalize_std=False: g_i - mean_g g)

        Every turn (position) of trajectory i takes A_i: the credit is episode-level, so it can
        rank whole runs more finely than pass / fail (a failed run that found and opened the
        buggy file above one that looped), but it cannot tell a run's good turns from its bad
        ones.

    Defaults:
        rubric_weights = None (equal weights 1 / K), normalize_std = True (GRPO), eps = 1e-6.

    Degenerate input:
        a group of one gets its raw graded reward (GRPO's singleton rule); a group whose graded
        rewards are all equal gets 0. Verdicts outside {0, 1}, negative weights or weights that
        sum to 0 are refused.

    Deviations from the reference:
        follows the catalog's description only (the paper was not readable here): the
        item-by-item grading and the weighted sum replacing a single verdict are the
        description's; GRPO on the graded reward, the weights' normalisation to sum 1 and the
        ToolWorld rubric (``labkit.learn.judges.RUBRIC_CRITERIA``, weights
        ``RUBRIC_WEIGHTS``) are labkit's. STAND-IN: the paper's grader is a language model; in
        labkit it is ``labkit.learn.judges.stand_in_rubric_verdicts``: the exact answer to each
        item (read from the episode and the hidden truth), flipped w.p. 0.1 per item. The
        environment's own verified outcome is not used beside the graded reward.

    Returns:
        credit at level "episode"; ``info``: ``verdicts`` (B, K), ``graded_reward`` g (B,),
        ``rubric_weights`` (K,), ``group_mean`` and ``group_std`` (B,).

    Cost:
        a callable grader costs one ``aux_calls`` per trajectory (it reads the run once and
        checks every item); a tensor costs nothing here.
    """
    eps = check_number("eps", eps, low=0.0)
    B = rollouts.batch_size
    v, called = _judged(rollouts, rubric_verdicts, "rubric_verdicts",
                        f"a ({B}, K) tensor (K rubric items) or a callable rollouts -> ({B}, K)")
    if v.dim() != 2 or v.shape[0] != B or v.shape[1] < 1:
        raise ValueError(f"rubric_verdicts: expected shape ({B}, K) with K >= 1 rubric items, got {tuple(v.shape)}")
    K = v.shape[1]
    _labels_in("rubric_verdicts", v, (0.0, 1.0), "verdicts must be 0 (not met) or 1 (met)")
    if rubric_weights is None:
        w = torch.full((K,), 1.0 / K, dtype=torch.float64)
    else:
        w = as_tensor("rubric_weights", rubric_weights).to(torch.float64)
        check_shape("rubric_weights", w, (K,))
        check_finite("rubric_weights", w)
        if bool((w < 0).any()):
            raise ValueError(f"rubric_weights: must be >= 0, got {w.tolist()}")
        if float(w.sum()) <= 0:
            raise ValueError("rubric_weights: must not sum to 0 (no item would count)")
        w = w / w.sum()
    graded = v @ w
    adv, mean, std, _ = group_normalize(graded, rollouts.group_ids, eps=eps, normalize_std=normalize_std)
    cost = Cost(aux_calls=B) if called else Cost()
    return Credit.from_level(rollouts, adv[:, None], "episode", "rubric_rl", cost=cost, verdicts=v,
                             graded_reward=graded, rubric_weights=w, group_mean=mean, group_std=std)
