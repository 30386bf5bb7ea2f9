"""Critic-free credit for multi-turn agents built from groups of turns: GiGPO, and RAGEN's
StarPO variance filter (a batch filter, not an estimator).

Everything here works at TURN level. A turn is the run of generated positions sharing one
``turn_id`` inside a trajectory (one position in a tabular environment, many tokens in an LM
agent). Its reward is the sum of the rewards inside it (``rollouts.view(rewards, "turn", "sum")``)
and its anchor key is ``rollouts.anchor_keys[b][k]`` where k is the step id of the turn's first
position (keys are stored per step; a turn's observation is what the agent saw when it began).
"""
from __future__ import annotations

import math
from typing import Hashable

import pandas as pd
import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, group_normalize, group_stats
from labkit.core.turns import turn_rewards
from labkit.credit.registry import register

GIGPO_NORMS = ("mean_norm", "mean_std_norm")


# --------------------------------------------------------------------------- anchor groups
def turn_anchor_keys(rollouts: Rollouts, method: str = "gigpo") -> list[list[Hashable]]:
    """The anchor key of every turn of every trajectory (the key of the turn's first step)."""
    if rollouts.anchor_keys is None:
        raise ValueError(f"anchor_keys: {method} groups turns by the observation they start from, "
                         "but these rollouts have no anchor_keys (one key per step of each trajectory)")
    first_step, present = rollouts.view(rollouts.step_ids, "turn", "first")
    out = []
    for b in range(rollouts.batch_size):
        row = []
        for k in range(present.shape[1]):
            if not bool(present[b, k]):
                break  # turns are numbered 0, 1, ... so the first absent one ends the row
            key = rollouts.anchor_keys[b][int(first_step[b, k])]
            try:
                hash(key)
            except TypeError:
                raise TypeError(f"anchor_keys: key of trajectory {b}, step {int(first_step[b, k])} "
                                f"is not hashable ({type(key).__name__}); use a tuple or string") from None
            row.append(key)
        out.append(row)
    return out


def _anchor_index(rollouts: Rollouts, method: str = "gigpo") -> tuple[torch.Tensor, list[tuple]]:
    """Anchor-group id of every turn, (B, N) long (-1 where there is no turn), and the table of
    groups as (task group, key) in order of first appearance (row-major over the batch)."""
    keys = turn_anchor_keys(rollouts, method)
    N = max(len(row) for row in keys)
    index = torch.full((rollouts.batch_size, N), -1, dtype=torch.long)
    table: dict[tuple, int] = {}
    for b, row in enumerate(keys):
        g = int(rollouts.group_ids[b])
        for k, key in enumerate(row):
            # the task group is part of the identity: equal observations of different tasks
            # (different goals) are different states
            index[b, k] = table.setdefault((g, key), len(table))
    return index, list(table)


def anchor_groups(rollouts: Rollouts) -> pd.DataFrame:
    """One row per GiGPO anchor group: ``group`` (task group id), ``key`` (the shared anchor
    key), ``size`` (number of turns in it, counting repeat visits within a trajectory).

    For the size histogram and the singleton share (``(df["size"] == 1).mean()``) a notebook
    plots: a singleton anchor group gives no step signal, so a high share means GiGPO is
    mostly GRPO. Rows are in order of first appearance. Raises if ``anchor_keys`` is missing.
    """
    index, table = _anchor_index(rollouts, "anchor_groups")
    sizes = torch.bincount(index[index >= 0], minlength=len(table))
    return pd.DataFrame({"group": [g for g, _ in table], "key": [k for _, k in table],
                         "size": sizes.tolist()})


# --------------------------------------------------------------------------- GiGPO
@register("gigpo", level="turn", needs=("anchor_keys",), status="implemented", paper="2505.10978",
          equation=r"A_{i,k} = \left(s_i - \operatorname{mean}_{g(i)} s\right) + \omega \left(R_{i,k} - "
                   r"\operatorname{mean}_{\mathcal{A}(i,k)} R\right),\quad R_{i,k} = \sum_{l \ge k} \gamma^{l-k} "
                   "r_{i,l}",
          symbols="k: turn; A(i,k): turns of the task group starting from the same anchor state (alone: step term "
                  "0); omega = 1; gamma = 0.95")
def gigpo(rollouts: Rollouts, *, omega: float = 1.0, gamma: float = 0.95, norm: str = "mean_norm",
          eps: float = 1e-6) -> Credit:
    """GiGPO, group-in-group policy optimisation (Feng et al. 2025, arXiv:2505.10978): turn credit.

    Inputs:
        rollouts: ``rewards``, ``group_ids`` (task groups), ``turn_ids``, ``step_ids`` and
        ``anchor_keys`` (one observation key per step; a turn's key is its first step's).

    Formula:
        episode term  A^E_i   = s_i - mean_{group(i)} s              (norm = "mean_norm")
                              = (s_i - mean) / (std + eps)           (norm = "mean_std_norm")
        step returns  R_{i,k} = r_{i,k} + gamma R_{i,k+1}            (over turns, R past the end = 0)
        step term     A^S_{i,k} = R_{i,k} - mean_{anchor(i,k)} R     (or / (std + eps) likewise)
        A_{i,k} = A^E_i + omega * A^S_{i,k}

        s_i is the trajectory's total reward, groups are ``group_ids``; an anchor group is the set
        of turns (from any trajectory of the same task group, repeat visits within one trajectory
        included) whose anchor key is identical. Every token of turn k takes A_{i,k}.

    Defaults:
        stds are unbiased, eps = 1e-6, omega = 1, gamma = 0.95 as in verl-agent's examples;
        norm = "mean_norm".

    Degenerate input:
        verl-agent's conventions: a task group of one has mean 0 and std 1, so its episode term
        is the raw score (/(1 + eps)); an anchor group of one has step term 0 (no comparison
        possible); an anchor group (or task group) whose values are all equal has term 0, also
        with eps = 0 (not 0 / 0: ``labkit.core.stats.group_normalize``). With every
        anchor group a singleton, or omega = 0, GiGPO is exactly ``dr_grpo`` (mean_norm) or
        ``grpo`` with the same eps (mean_std_norm). A trajectory with no generated turn gets 0.
        Rollouts without ``anchor_keys`` are refused.

    Deviations from the reference:
        deliberate differences from verl-agent: (1) its episode term by default pools one entry
        per *step row* (``compute_mean_std_cross_steps``), so longer trajectories weigh more in
        the group mean; labkit uses one score per trajectory, the paper's Eq. 3. (2) Only exact
        key matching (verl-agent optionally merges text observations with similarity >= 0.95).
        (3) Rewards are read per turn from the token rewards, discounting once per turn, not per
        token.
        Tool output between turns does not enter: step returns discount once per turn (the
        carry convention of ``labkit.credit.tool_spans``).

    Returns:
        credit at level "turn"; ``info``: ``anchor_index`` (B, N) anchor-group id per turn,
        ``anchor_sizes`` (size of each group), ``turn_anchor_size`` (B, N), ``singleton_share``
        (share of anchor groups of size 1), ``singleton_turn_share`` (share of turns that sit in
        one), ``episode_term`` (B,), ``step_term`` and ``step_returns`` (B, N), and the settings
        ``omega``, ``gamma``, ``norm``.

    Cost:
        none beyond the sampled batch.
    """
    omega = check_number("omega", omega, low=0.0)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    check_choice("norm", norm, GIGPO_NORMS)
    eps = check_number("eps", eps, low=0.0)
    index, table = _anchor_index(rollouts)
    r, present = turn_rewards(rollouts)
    present = present[:, : index.shape[1]]
    r = r[:, : index.shape[1]]
    dtype = r.dtype
    use_std = norm == "mean_std_norm"

    # episode term: GRPO on the trajectory scores (a group of one: mean 0, std 1)
    a_ep = group_normalize(rollouts.scores.to(dtype), rollouts.group_ids, eps=eps, normalize_std=use_std).normalized

    # step term: discounted turn returns compared within their anchor group; an anchor group of
    # one has nothing to compare with and gets 0 (verl-agent), not its raw return
    R = discounted_returns(r, present, gamma)
    flat_ids = index[present]
    step_flat = group_normalize(R[present], flat_ids, eps=eps, normalize_std=use_std, singleton="zero").normalized
    a_step = torch.zeros_like(R)
    a_step[present] = step_flat

    adv = torch.where(present, a_ep[:, None] + omega * a_step, 0)
    sizes = torch.bincount(flat_ids, minlength=len(table))
    turn_size = torch.where(present, sizes[index.clamp(min=0)], 0)
    return Credit.from_level(
        rollouts, adv, "turn", "gigpo",
        anchor_index=index, anchor_sizes=sizes, turn_anchor_size=turn_size,
        singleton_share=float((sizes == 1).double().mean()),
        singleton_turn_share=float((turn_size[present] == 1).double().mean()),
        episode_term=a_ep, step_term=a_step, step_returns=R, omega=omega, gamma=gamma, norm=norm)


# --------------------------------------------------------------------------- StarPO filter
def starpo_filter(rollouts: Rollouts, *, keep: float = 0.25) -> Rollouts:
    """RAGEN's StarPO-S variance filter (Wang et al. 2025, arXiv:2504.20073): train only on the
    task groups whose outcomes disagree most.

        spread_g = unbiased std of the scores s_i in task group g
        keep the max(1, floor(keep * n_groups)) groups with the largest spread

    Not an estimator: it returns the selected trajectories (``rollouts.select``, original batch
    order kept) for any estimator to use. A group with zero spread gives GRPO-style estimators
    no signal at all, which is why RAGEN drops low-variance groups (its default keeps 25 %).
    ``keep = 1`` returns every trajectory. floor and the unbiased std follow RAGEN
    (``int(ratio * n_groups)``, ``torch.std``); the at-least-one rule follows its later versions.
    Ties in spread are broken by group id, smallest first (RAGEN's ``topk`` leaves them
    unspecified). A group of one has spread 0 (nothing to compare). ``info["starpo"]`` of the
    result holds ``kept_groups``, ``spreads`` (a dict group id -> spread for every group) and
    ``keep``.
    """
    keep = check_number("keep", keep, low=0.0, high=1.0, low_open=True)
    gids = rollouts.group_ids
    _, std, _ = group_stats(rollouts.scores.to(torch.float64), gids)
    groups = torch.unique(gids)  # sorted ascending
    spreads = torch.stack([std[gids == g][0] for g in groups])
    # + 1e-9: 0.3 * 10 is 3.0000000000000004 in floats but 0.29 * 100 is 28.999999999999996
    n_keep = max(1, min(len(groups), math.floor(keep * len(groups) + 1e-9)))
    # stable sort on -spread keeps the ascending group order among equal spreads
    order = torch.sort(-spreads, stable=True).indices[:n_keep]
    kept = groups[order]
    rows = torch.isin(gids, kept).nonzero().flatten()
    out = rollouts.select(rows)
    out.info = dict(out.info)
    out.info["starpo"] = {"kept_groups": sorted(int(g) for g in kept),
                          "spreads": {int(g): float(s) for g, s in zip(groups, spreads)},
                          "keep": keep}
    return out
