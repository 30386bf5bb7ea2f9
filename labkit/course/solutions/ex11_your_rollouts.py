"""Solutions to the exercises of notebook 11_your_rollouts: 11a, the trajectories that give GRPO no
gradient; 11b, RLOO advantages of a dump's rows with its planted bug fixed (grouped by prompt).

Checked by ``check(no_gradient_rows, "11a")`` and ``check(rloo_by_prompt, "11b")``; the exercises are in
``labkit.course.exercises.ex11_your_rollouts``.
"""
from __future__ import annotations

import torch

__all__ = ["no_gradient_rows", "rloo_by_prompt"]


def no_gradient_rows(scores, group_ids):
    """11a · Trajectories GRPO learns nothing from (Shao et al. 2024, arXiv 2402.03300).

    Inputs:
        scores: (n,) one outcome score per trajectory.
        group_ids: (n,) integer prompt group of each trajectory.

    Formula:
        marked_i = |group(i)| >= 2  and  max_{j in group(i)} s_j - min_{j in group(i)} s_j <= 1e-9

    Defaults:
        none.

    Degenerate input:
        a group of one is never marked (GRPO's group-of-one rule gives it its raw score).

    Deviations from the reference:
        none: equal to ``labkit.core.stats.constant_groups`` (checked by ``check(no_gradient_rows, "11a")``).

    Returns:
        (n,) bool, True on a trajectory of a group of two or more whose scores are all equal to within 1e-9.

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    marked = torch.zeros(len(scores), dtype=torch.bool)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        # equal to within round-off: GRPO's advantages there are below ~5e-4, no gradient
        marked[members] = len(s) >= 2 and bool(s.max() - s.min() <= 1e-9)
    return marked


def rloo_by_prompt(scores, prompts):
    """11b · RLOO advantages of a dump's rows (Ahmadian et al. 2024, arXiv 2402.14740).

    Inputs:
        scores: (n,) one outcome score per row (completion), in the file's order.
        prompts: n strings, the prompt each row answered (any order, any number of rows each).

    Formula:
        A_i = s_i - mean_{j in group(i), j != i} s_j = n/(n-1) * (s_i - mean_group),
        group(i) = every row of the file with the prompt of row i

    Defaults:
        none.

    Degenerate input:
        a prompt with a single row gets 0 (nothing to compare with, verl's vectorised RLOO).

    Deviations from the reference:
        none: equal to ``labkit.credit``'s ``rloo`` with the prompts as the groups.

    Returns:
        (n,) float64 advantages, in the rows' order.

    Cost:
        one pass over the rows.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    # collect each prompt's rows wherever they sit: the buggy version took runs of adjacent rows
    rows_of = {}
    for i, prompt in enumerate(prompts):
        rows_of.setdefault(prompt, []).append(i)
    adv = torch.zeros(len(scores), dtype=torch.float64)
    for rows in rows_of.values():
        if len(rows) < 2:
            continue
        group = scores[rows]
        adv[rows] = group - (group.sum() - group) / (len(rows) - 1)
    return adv
