"""Episode-level credit: one number per trajectory, painted on every token it generated.

These estimators never look inside a trajectory. They differ only in the baseline subtracted
from the outcome score s_i (the sum of the trajectory's rewards) and in how the result is
scaled. Each returns a ``Credit`` at level 'episode' (values shape (B, 1)), except REINFORCE++,
whose discounted returns vary along the trajectory (level 'token').

Groups: trajectories with the same ``rollouts.group_ids`` answered the same prompt. On degenerate
groups labkit follows verl's ``core_algos`` unless a docstring says otherwise.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_bool, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize, group_stats, masked_moments, whiten
from labkit.credit.registry import register


def _episode_credit(rollouts: Rollouts, adv: torch.Tensor, method: str, **info) -> Credit:
    return Credit.from_level(rollouts, adv[:, None], "episode", method, **info)


@register("reinforce", level="episode", status="implemented", paper="Williams 1992",
          equation=r"A_{i,t} = s_i = \sum_{t'} r_{i,t'}",
          symbols="s_i: trajectory score, the same on every token; no baseline")
def reinforce(rollouts: Rollouts) -> Credit:
    """REINFORCE (Williams 1992): every token's credit is the trajectory's total reward.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i).

    Formula:
        A_{i,t} = s_i = sum_t r_{i,t}
        Unbiased for the policy gradient, and the baseline-free reference point: every routine
        token is pushed up or down by the full outcome, so variance grows with the number of tokens.

    Defaults:
        none (no options).

    Degenerate input:
        none: a group of one is just its score; groups are ignored.

    Deviations from the reference:
        none.

    Returns:
        credit at level "episode" (one value per trajectory, on each of its generated tokens); no
        ``info``.

    Cost:
        none beyond the sampled batch.
    """
    return _episode_credit(rollouts, rollouts.scores, "reinforce")


@register("reinforce_baseline", level="episode", status="implemented", paper="Williams 1992",
          equation=r"A_i = s_i - \frac{1}{B} \sum_{j=1}^{B} s_j",
          symbols="s_i: trajectory score; B: batch size (whole-batch mean, groups ignored, s_i included)")
def reinforce_baseline(rollouts: Rollouts) -> Credit:
    """REINFORCE with a mean baseline (Williams 1992): the score minus the batch mean.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_j).

    Formula:
        A_i = s_i - mean_j s_j over the whole batch (groups ignored). The mean includes s_i
        itself, which shrinks the expected gradient by (B-1)/B (RLOO removes this).

    Defaults:
        none (no options).

    Degenerate input:
        a batch of one gets credit 0 (its own mean); an all-equal batch gets 0.

    Deviations from the reference:
        none.

    Returns:
        credit at level "episode"; no ``info``.

    Cost:
        none beyond the sampled batch.
    """
    scores = rollouts.scores
    return _episode_credit(rollouts, scores - scores.mean(), "reinforce_baseline")


@register("rloo", level="episode", status="implemented", paper="2402.14740",
          equation=r"A_i = s_i - \frac{1}{n-1} \sum_{j \in g(i), j \ne i} s_j",
          symbols="s_i: trajectory score; g(i): trajectories sharing i's prompt; n = |g(i)|; a group of one gets 0")
def rloo(rollouts: Rollouts) -> Credit:
    """REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024, arXiv:2402.14740).

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids`` (the prompt groups).

    Formula:
        A_i = s_i - mean_{j in group(i), j != i} s_j = n/(n-1) * (s_i - mean_group)
        Unbiased: the baseline does not depend on trajectory i.

    Defaults:
        none (no options).

    Degenerate input:
        a group of one has no other sample to compare with and gets credit 0; an all-equal
        group gets 0.

    Deviations from the reference:
        verl's scalar RLOO (``rloo``) returns a singleton's raw score; labkit follows its
        vectorised version (``rloo_vectorized``: 0); elsewhere equal to both (tested).

    Returns:
        credit at level "episode"; no ``info``.

    Cost:
        none beyond the sampled batch.
    """
    mean, _, size = group_stats(rollouts.scores, rollouts.group_ids)
    scale = torch.where(size > 1, size / (size - 1).clamp(min=1), 0.0).to(mean.dtype)
    return _episode_credit(rollouts, scale * (rollouts.scores - mean), "rloo")


@register("grpo", level="episode", status="implemented", paper="2402.03300",
          equation=r"A_i = \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} s_j + "
                   r"\epsilon}",
          symbols="s_i: trajectory score; g(i): trajectories sharing i's prompt; std unbiased; eps = 1e-6; a group "
                  "of one: mean 0, std 1")
def grpo(rollouts: Rollouts, *, eps: float = 1e-6, normalize_std: bool = True) -> Credit:
    """GRPO group-relative advantage (Shao et al. 2024, arXiv:2402.03300).

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids`` (the prompt groups).

    Formula:
        A_i = (s_i - mean_group) / (std_group + eps)      (std unbiased)
        ``normalize_std=False`` drops the division (that is Dr. GRPO, see ``dr_grpo``).

    Defaults:
        eps = 1e-6 (verl's), normalize_std = True.

    Degenerate input:
        a group of one gets mean 0 and std 1, i.e. its raw score / (1 + eps) (verl's
        convention, ``labkit.core.stats.group_normalize``); a group whose scores are all equal
        gets 0 for everyone (0 / eps).

    Deviations from the reference:
        none from verl (``grpo`` and ``grpo_vectorized``: same unbiased std, eps outside the root,
        group-of-one rule; labkit sums in float64, verl in float32, so they agree to about 1e-6,
        tests/bridges/test_bridges_verl_parity.py); TRL uses eps = 1e-4 (only matters for near-constant groups).

    Returns:
        credit at level "episode" (method "dr_grpo" when normalize_std=False); ``info``:
        ``group_mean`` and ``group_std`` (B,), each trajectory's group statistics.

    Cost:
        none beyond the sampled batch.
    """
    eps = check_number("eps", eps, low=0.0)
    adv, mean, std, _ = group_normalize(rollouts.scores, rollouts.group_ids, eps=eps, normalize_std=normalize_std)
    return _episode_credit(rollouts, adv, "grpo" if normalize_std else "dr_grpo",
                           group_mean=mean, group_std=std)


@register("dr_grpo", level="episode", status="implemented", paper="2503.20783",
          equation=r"A_i = s_i - \operatorname{mean}_{j \in g(i)} s_j",
          symbols="s_i: trajectory score; g(i): trajectories sharing i's prompt; a group of one keeps its raw score")
def dr_grpo(rollouts: Rollouts) -> Credit:
    """Dr. GRPO (Liu et al. 2025, arXiv:2503.20783): GRPO without the std division.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids`` (the prompt groups).

    Formula:
        A_i = s_i - mean_group
        Dividing by the group std up-weights near-unanimous groups (question-level difficulty
        bias); Dr. GRPO drops it.

    Defaults:
        none (no options).

    Degenerate input:
        a group of one gets its raw score (mean 0, as in verl); an all-equal group gets 0.

    Deviations from the reference:
        the paper's second change, a token-sum loss over a constant length, is a
        loss-aggregation choice made in the training loop (``labkit.learn.loop``), not here.
        Equal to verl's ``grpo`` with ``norm_adv_by_std_in_grpo=False`` (tested).

    Returns:
        credit at level "episode"; ``info``: ``group_mean`` and ``group_std`` (B,) (as ``grpo``'s).

    Cost:
        none beyond the sampled batch.
    """
    return grpo(rollouts, normalize_std=False)


# Discounted returns vary along a trajectory, so REINFORCE++ credits tokens, not episodes.
@register("reinforce_pp", level="token", status="implemented", paper="2501.03262",
          equation=r"A_{i,t} = \frac{G_{i,t} - \operatorname{mean}(G)}{\sqrt{\operatorname{var}(G) + "
                   r"\epsilon}},\quad G_{i,t} = r_{i,t} + \gamma G_{i,t+1}",
          symbols="mean, population var over all generated tokens of the batch; gamma = 1; eps = 1e-8; "
                  "group_baseline: G = s_i - group mean")
def reinforce_pp(rollouts: Rollouts, *, gamma: float = 1.0, group_baseline: bool = False,
                 eps: float = 1e-8) -> Credit:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262): batch-whitened discounted returns.

    Inputs:
        rollouts: ``rewards``, ``mask``; ``group_ids`` with ``group_baseline=True``.

    Formula:
        G_{i,t} = r_{i,t} + gamma G_{i,t+1}
        A_{i,t} = (G_{i,t} - mean(G)) / sqrt(var(G) + eps)      over every generated token in the batch
        (population variance, ``labkit.core.stats.whiten``, the same whitening ``mappa`` uses).
        ``group_baseline=True`` is the "REINFORCE++-baseline" variant: subtract the group mean
        score from the outcome first, then whiten. The token-level returns make the credit vary
        along a trajectory only through discounting or intermediate rewards; with
        ``group_baseline=True`` the credit is s_i - mean_group, one constant per trajectory, so
        ``gamma`` and intermediate rewards have no effect (as in verl's
        ``reinforce_plus_plus_baseline``).

    Defaults:
        gamma = 1, group_baseline = False, eps = 1e-8 (OpenRLHF's).

    Degenerate input:
        if every token's return is equal (or the batch has one token) the result is 0
        everywhere (0 / sqrt(eps)); with group_baseline a group of one keeps its raw score
        before whitening (verl's convention); a row with nothing generated gets 0.

    Deviations from the reference:
        the KL penalty that REINFORCE++ folds into the reward is not modelled. verl's
        ``reinforce_plus_plus`` (and ``..._baseline``) whiten with ``masked_whiten``, whose variance
        is the unbiased one (n / (n - 1), n = generated tokens in the batch): labkit's credit is
        verl's times sqrt((var_unbiased + eps) / (var + eps)), about 1 + 1/(2n) (1.000001 for a
        batch of 512k tokens; tests/bridges/test_bridges_verl_parity.py checks that this factor is the only
        difference). A batch with one generated token: verl raises, labkit gives 0.

    Returns:
        credit at level "token"; ``info``: ``batch_mean`` and ``batch_var``, the whitening's
        statistics of G.

    Cost:
        none beyond the sampled batch.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    eps = check_number("eps", eps, low=0.0, low_open=True)
    if check_bool("group_baseline", group_baseline):
        centred = group_normalize(rollouts.scores, rollouts.group_ids, normalize_std=False).normalized
        G = rollouts.broadcast(centred, "episode")
    else:
        G = rollouts.returns(gamma)
    mu, var = masked_moments(G, rollouts.mask)
    adv = whiten(G, rollouts.mask, eps, moments=(mu, var))
    return Credit.from_tokens(rollouts, adv, "reinforce_pp", batch_mean=float(mu), batch_var=float(var))
