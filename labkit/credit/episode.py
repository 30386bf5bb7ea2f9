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

from labkit.core.checks import as_tensor, check_bool, check_finite, check_number, check_shape, resolve_input, trajectory_totals
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, group_normalize, group_stats, masked_moments, whiten
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
    scores = rollouts.scores
    # The group mean exactly as group_stats takes it (float64 sums in row order, cast back),
    # without the group std, which RLOO never reads: a dozen fewer tensor operations per call.
    _, inverse, counts = torch.unique(rollouts.group_ids, return_inverse=True, return_counts=True)
    size = counts.to(torch.float64)
    total = torch.zeros(counts.numel(), dtype=torch.float64).index_add_(0, inverse, scores.to(torch.float64))
    mean = (total / size).index_select(0, inverse).to(scores.dtype)
    size = size.index_select(0, inverse)
    scale = torch.where(size > 1, size / (size - 1).clamp(min=1), 0.0).to(mean.dtype)
    return _episode_credit(rollouts, scale * (scores - mean), "rloo")


@register("grpo", level="episode", status="implemented", paper="2402.03300",
          equation=r"A_i = \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} s_j + "
                   r"\epsilon}",
          symbols="s_i: trajectory score; g(i): trajectories sharing i's prompt; std unbiased; eps = 1e-6; a group "
                  "of one: mean 0, std 1")
def grpo(rollouts: Rollouts, *, eps: float = 1e-6, normalize_std: bool = True, batch_std: bool = False) -> Credit:
    """GRPO group-relative advantage (Shao et al. 2024, arXiv:2402.03300).

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids`` (the prompt groups).

    Formula:
        A_i = (s_i - mean_group) / (std_group + eps)      (std unbiased)
        ``normalize_std=False`` drops the division (that is Dr. GRPO, see ``dr_grpo``).
        ``batch_std=True`` divides by the std of every score in the batch instead, one scale
        for all groups (TRL's ``scale_rewards="batch"``): (s_i - mean_group) / (std_batch + eps).

    Defaults:
        eps = 1e-6 (verl's), normalize_std = True, batch_std = False.

    Degenerate input:
        a group of one gets mean 0 and std 1, i.e. its raw score / (1 + eps) (verl's
        convention, ``labkit.core.stats.group_normalize``); a group whose scores are all equal
        gets 0 for everyone (0 / eps), also with eps = 0 (instead of 0 / 0); with
        ``batch_std=True`` and eps = 0, a batch whose std is 0 gets 0.

    Deviations from the reference:
        none from verl (``grpo`` and ``grpo_vectorized``: same unbiased std, eps outside the root,
        group-of-one rule; labkit sums in float64, verl in float32, so they agree to about 1e-6,
        tests/bridges/test_bridges_verl_parity.py); TRL uses eps = 1e-4 (only matters for near-constant groups).

    Returns:
        credit at level "episode" (method "dr_grpo" when normalize_std=False); ``info``:
        ``group_mean`` and ``group_std`` (B,), each trajectory's group statistics (and
        ``batch_std``, a float, with ``batch_std=True``).

    Cost:
        none beyond the sampled batch.
    """
    eps = check_number("eps", eps, low=0.0)
    if check_bool("batch_std", batch_std):
        if not check_bool("normalize_std", normalize_std):
            raise ValueError("batch_std: divides by the batch's std, so it needs normalize_std=True")
        centred, mean, std, _ = group_normalize(rollouts.scores, rollouts.group_ids, normalize_std=False)
        scores = rollouts.scores.to(torch.float64)
        batch = scores.std() if scores.numel() > 1 else torch.zeros((), dtype=torch.float64)
        scale = batch.to(centred.dtype) + eps
        # eps = 0 on a batch of equal scores: 0 / 0; nothing differs, so the advantage is 0
        adv = centred / scale if eps > 0 else torch.where(scale > 0, centred / scale, torch.zeros_like(centred))
        return _episode_credit(rollouts, adv, "grpo", group_mean=mean, group_std=std, batch_std=float(batch))
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
        At tool output inside a response: carry, as verl 0.9.1 (``labkit.credit.tool_spans``); with
        ``group_baseline`` there is no return and no convention applies.

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
        # each row's value on its generated positions, 0 elsewhere: rollouts.broadcast(centred,
        # "episode") without its general segment gather (4x slower on verl's 1024 x 512)
        G = torch.where(rollouts.mask, centred[:, None], torch.zeros((), dtype=centred.dtype))
    else:
        G = rollouts.returns(gamma)
    mu, var = masked_moments(G, rollouts.mask)
    adv = whiten(G, rollouts.mask, eps, moments=(mu, var))
    return Credit.from_tokens(rollouts, adv, "reinforce_pp", batch_mean=float(mu), batch_var=float(var))


@register("reinforce_pp_baseline", level="token", status="implemented", paper="2501.03262",
          equation=r"A_{i,t} = \frac{G_i - \operatorname{mean}(G)}{\sqrt{\operatorname{var}(G) + \epsilon}},\quad "
                   r"G_i = s_i - \operatorname{mean}_{j \in g(i)} s_j",
          symbols="s_i: trajectory score; g(i): its prompt group; mean, population var over all generated tokens "
                  "of the batch; eps = 1e-8")
def reinforce_pp_baseline(rollouts: Rollouts, *, eps: float = 1e-8) -> Credit:
    """REINFORCE++-baseline (Hu 2025, arXiv:2501.03262): the group-mean baseline, then batch whitening.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``mask``, ``group_ids``.

    Formula:
        G_i = s_i - mean_group, painted on every generated token of trajectory i, then
        A_{i,t} = (G_i - mean(G)) / sqrt(var(G) + eps) over every generated token in the batch.
        It is ``reinforce_pp(group_baseline=True)`` under verl's name for it.

    Defaults:
        eps = 1e-8 (OpenRLHF's).

    Degenerate input:
        a group of one keeps its raw score before whitening (verl's convention); equal G
        everywhere gives 0 (0 / sqrt(eps)).

    Deviations from the reference:
        as ``reinforce_pp``: the whitening uses the population variance, verl's ``masked_whiten``
        the unbiased one (a factor of about 1 + 1/(2n), n generated tokens); no KL term.
        At tool output inside a response: no return, so no convention applies; the whitening
        counts generated tokens only, as verl's (``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``batch_mean`` and ``batch_var``.

    Cost:
        none beyond the sampled batch.
    """
    credit = reinforce_pp(rollouts, group_baseline=True, eps=eps)
    credit.method = "reinforce_pp_baseline"
    return credit


@register("opo", level="episode", status="implemented", paper="2505.23585",
          equation=r"A_i = s_i - \frac{\sum_{j \in g(i)} L_j s_j}{\sum_{j \in g(i)} L_j}",
          symbols="s_i: trajectory score; L_j: generated tokens of trajectory j; g(i): its prompt group; a group of "
                  "one: baseline 0")
def opo(rollouts: Rollouts) -> Credit:
    """OPO, on-policy RL with the optimal reward baseline (arXiv:2505.23585).

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``mask`` (lengths L_i), ``group_ids``.

    Formula:
        b_g = sum_j L_j s_j / sum_j L_j over the group (the length-weighted mean score),
        A_i = s_i - b_g, no std division. With a sequence-level loss summed over tokens, the
        baseline that minimises the gradient's variance weighs each sample by its length.

    Defaults:
        none (no options).

    Degenerate input:
        a group of one gets baseline 0, so its raw score (verl's convention); a group whose
        trajectories generated nothing falls back to the plain mean.

    Deviations from the reference:
        none from verl's ``compute_opo_outcome_advantage`` (tested); the paper's other part,
        strictly on-policy training (one gradient step per batch), is a training-loop choice.

    Returns:
        credit at level "episode"; ``info``: ``baseline`` (B,), each trajectory's b_g.

    Cost:
        none beyond the sampled batch.
    """
    scores = rollouts.scores.to(torch.float64)
    length = rollouts.mask.sum(1).to(torch.float64)
    _, inverse, size = torch.unique(rollouts.group_ids, return_inverse=True, return_counts=True)
    n = size.numel()
    weighted = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse, length * scores)
    total = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse, length)
    plain = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse, scores) / size
    base = torch.where(total > 0, weighted / total.clamp(min=1e-300), plain)
    base = torch.where(size > 1, base, torch.zeros_like(base))[inverse]
    adv = (scores - base).to(rollouts.scores.dtype)
    return _episode_credit(rollouts, adv, "opo", baseline=base.to(rollouts.scores.dtype))


@register("grpo_passk", level="episode", status="implemented", paper="2503.19595",
          equation=r"A_i = \mathbb{1}[i = b(g(i))]\,\frac{s_{(1)} - s_{(2)}}"
                   r"{\operatorname{std}_{j \in g(i)} s_j + \epsilon}",
          symbols="b(g): the first trajectory of group g with its highest score; s_(1), s_(2): the group's best and "
                  "second-best scores; std unbiased; eps = 1e-6; normalize_std=False drops the division")
def grpo_passk(rollouts: Rollouts, *, eps: float = 1e-6, normalize_std: bool = True) -> Credit:
    """Pass@k GRPO (arXiv:2503.19595, as verl implements it): only the group's best answer gets credit.

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids``.

    Formula:
        in each group, the best trajectory gets A = (s_(1) - s_(2)) / (std_group + eps), its
        margin over the second best; every other trajectory gets 0. Training then pushes up the
        best of k samples (pass@k), not the average one.

    Defaults:
        eps = 1e-6, normalize_std = True (verl's ``norm_adv_by_std_in_grpo``).

    Degenerate input:
        a group of one gets 0 (verl raises: it needs two samples); ties for the best: the first
        trajectory of the group (lowest row) gets the credit, and the margin is 0 when two share
        the best score; with eps = 0 a group of equal scores gets 0 (not 0 / 0).

    Deviations from the reference:
        verl's ``compute_grpo_passk_outcome_advantage`` breaks ties with ``torch.topk``, whose
        order among equal scores is unspecified; labkit takes the lowest row. With a tie the
        margin is 0, so the advantages agree either way (tested).

    Returns:
        credit at level "episode"; ``info``: ``best`` (B,) bool, the trajectory credited in its group.

    Cost:
        none beyond the sampled batch.
    """
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    scores = rollouts.scores.to(torch.float64)
    _, inverse, size = torch.unique(rollouts.group_ids, return_inverse=True, return_counts=True)
    n = size.numel()
    top = torch.full((n,), -torch.inf, dtype=torch.float64).scatter_reduce(0, inverse, scores, "amax")
    is_top = scores == top[inverse]
    rows = torch.arange(scores.numel())
    first = torch.full((n,), scores.numel(), dtype=torch.long).scatter_reduce(
        0, inverse, torch.where(is_top, rows, scores.numel()), "amin")
    best = rows == first[inverse]
    # the second best: the group's max once its credited row is left out (= the best on a tie)
    second = torch.full((n,), -torch.inf, dtype=torch.float64).scatter_reduce(
        0, inverse, torch.where(best, -torch.inf, scores), "amax")
    margin = torch.where(size > 1, top - second, torch.zeros_like(top))
    if normalize_std:
        _, std, _ = group_stats(scores, rollouts.group_ids)
        scale = std.new_zeros(n).scatter_reduce(0, inverse, std, "amax") + eps
        # eps = 0 on a group of equal scores: a margin of 0 over a std of 0; its advantage is 0
        margin = margin / scale if eps > 0 else torch.where(scale > 0, margin / scale, torch.zeros_like(margin))
    adv = torch.where(best & (size[inverse] > 1), margin[inverse], torch.zeros_like(scores))
    return _episode_credit(rollouts, adv.to(rollouts.scores.dtype), "grpo_passk", best=best)


@register("gpg", level="episode", status="implemented", paper="2504.02546",
          equation=r"A_i = \alpha\,\frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{F},\quad "
                   r"\alpha = \frac{B}{\max(1, |\{j : s_j \neq 0\}|)}",
          symbols="s_i: trajectory score; g(i): its prompt group (a group of one: mean 0); B: trajectories in the "
                  "batch; F = f_norm = 1")
def gpg(rollouts: Rollouts, *, f_norm: float = 1.0) -> Credit:
    """GPG, group policy gradient (arXiv:2504.02546).

    Inputs:
        rollouts: ``rewards`` (their sum is the score s_i), ``group_ids``.

    Formula:
        A_i = alpha (s_i - mean_group) / f_norm with alpha = B / (number of trajectories with a
        non-zero score): the group-mean advantage, scaled up by how few trajectories carry a
        reward, so a batch of mostly zero-reward groups still gives a gradient of full size.

    Defaults:
        f_norm = 1 (verl's).

    Degenerate input:
        a group of one gets mean 0, so alpha s_i (verl's convention); a batch with no non-zero
        score gets alpha = B and all-zero advantages.

    Deviations from the reference:
        none from verl's ``compute_gpg_outcome_advantage`` (tested); the paper's threshold on
        the share of non-zero groups, which drops the scaling when it is high, is not modelled.

    Returns:
        credit at level "episode"; ``info``: ``alpha`` (a float).

    Cost:
        none beyond the sampled batch.
    """
    f_norm = check_number("f_norm", f_norm, low=0.0, low_open=True)
    scores = rollouts.scores
    alpha = scores.numel() / max(1, int((scores != 0).sum()))
    centred = group_normalize(scores, rollouts.group_ids, normalize_std=False).normalized
    return _episode_credit(rollouts, alpha * centred / f_norm, "gpg", alpha=float(alpha))


@register("gdpo", level="episode", inputs={"reward_parts": "reward_parts"}, status="implemented",
          paper="2601.05242",
          equation=r"A_i = \frac{a_i - \bar a}{\sqrt{\operatorname{var}(a) + 10^{-8}}},\quad "
                   r"a_i = \sum_k w_k \frac{r_{i,k} - \operatorname{mean}_{j \in g(i)} r_{j,k}}"
                   r"{\operatorname{std}_{j \in g(i)} r_{j,k} + \epsilon}",
          symbols="r_{i,k}: reward function k's score of trajectory i; w_k: its weight (1 by default); g(i): its "
                  "prompt group; std unbiased, eps = 1e-6; mean and unbiased var of a over every generated "
                  "token of the batch")
def gdpo(rollouts: Rollouts, *, reward_parts, weights=None, eps: float = 1e-6,
         normalize_std: bool = True) -> Credit:
    """GDPO, group reward-decoupled normalisation (arXiv:2601.05242).

    Inputs:
        rollouts: ``mask`` (the whitening weighs a trajectory by its generated tokens), ``group_ids``.
        ``reward_parts`` (reward_parts): (B, K) float tensor, each reward function's score of every trajectory
            (or a callable rollouts -> that tensor), e.g. ``rollouts.info['reward_parts']`` of a
            TRL or verl file read by ``labkit.io``.
        weights: K weights w_k (None: all 1), as verl's ``gdpo_reward_weights``.

    Formula:
        each reward function is GRPO-normalised within the prompt group on its own,
        (r_k - mean_group) / (std_group + eps), the K results are summed with weights w_k, and
        the sum is whitened over every generated token of the batch (mean, unbiased variance,
        1e-8 inside the square root, verl's ``masked_whiten``). GRPO normalises the summed
        reward instead, so a reward function with a large spread drowns the others; here each
        one counts by its rank inside the group, whatever its scale.

    Defaults:
        weights = None (all 1), eps = 1e-6, normalize_std = True (verl's ``norm_adv_by_std_in_grpo``).

    Degenerate input:
        a group of one keeps each raw score / (1 + eps) before whitening (GRPO's convention);
        a reward function constant within a group adds 0 there; a batch with fewer than two
        generated tokens gets 0 (verl raises).

    Deviations from the reference:
        none from verl's ``compute_gdpo_outcome_advantage`` (tested); verl reads the parts
        from ``non_tensor_batch`` under ``algorithm.gdpo_reward_keys``, labkit takes the tensor.
        verl computes in float32, labkit in float64.

    Returns:
        credit at level "episode"; ``info``: ``part_advantages`` (B, K), each reward function's
        group-normalised score, and ``summed`` (B,), their weighted sum before whitening.

    Cost:
        none beyond the sampled batch (the reward functions scored every trajectory when it
        was sampled).
    """
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    parts, _ = resolve_input("reward_parts", reward_parts, rollouts,
                             expected="each reward function's score of every trajectory, a (B, K) float tensor")
    parts = as_tensor("reward_parts", parts)
    check_shape("reward_parts", parts, (rollouts.batch_size, None))
    if parts.shape[1] == 0 or not (parts.is_floating_point() or parts.dtype in (torch.int32, torch.int64, torch.bool)):
        raise ValueError(f"reward_parts: expected (B, K) numbers with K >= 1, got {tuple(parts.shape)} {parts.dtype}")
    parts = parts.to(torch.float64)
    check_finite("reward_parts", parts)
    K = parts.shape[1]
    if weights is None:
        w = torch.ones(K, dtype=torch.float64)
    else:
        w = as_tensor("weights", weights).to(torch.float64)
        check_shape("weights", w, (K,))
        check_finite("weights", w)
    normed = torch.stack([group_normalize(parts[:, k], rollouts.group_ids, eps=eps,
                                          normalize_std=normalize_std).normalized for k in range(K)], 1)
    summed = normed @ w
    length = rollouts.mask.sum(1).to(torch.float64)
    n = float(length.sum())
    if n < 2:
        adv = torch.zeros_like(summed)
    else:
        mean = (length * summed).sum() / n
        var = (length * (summed - mean) ** 2).sum() / (n - 1)
        adv = (summed - mean) / torch.sqrt(var + 1e-8)
    dtype = rollouts.scores.dtype
    return _episode_credit(rollouts, adv.to(dtype), "gdpo", part_advantages=normed.to(dtype), summed=summed.to(dtype))


@register("remax", level="token", inputs={"greedy_scores": "greedy_scores"}, status="implemented",
          paper="2310.10505",
          equation=r"A_{i,t} = G_{i,t} - s(y^{*}_{g(i)}),\quad G_{i,t} = \sum_{t' \ge t} r_{i,t'}",
          symbols="G_{i,t}: reward-to-go (the score s_i when only the end is rewarded); y*_g: the policy's "
                  "greedy response to prompt g; s(y*_g): its score")
def remax(rollouts: Rollouts, *, greedy_scores) -> Credit:
    """ReMax (Li et al. 2023, arXiv:2310.10505): the greedy response's reward is the baseline.

    Inputs:
        rollouts: ``rewards``, ``mask``.
        ``greedy_scores`` (greedy_scores): (B,) float tensor, the score of the policy's greedy (argmax) response
            to each trajectory's prompt (or a callable rollouts -> that tensor).

    Formula:
        A_{i,t} = G_{i,t} - b_i with G the undiscounted reward-to-go and b_i the greedy
        response's score. The baseline depends on the prompt but not on the sampled response,
        so the estimate stays unbiased; it needs one extra (greedy) generation per prompt
        instead of a group of samples, and it works with one sample per prompt.

    Defaults:
        none (no options).

    Degenerate input:
        a sample equal to its greedy response's score gets 0; rows with nothing generated get 0.

    Deviations from the reference:
        equal to verl's ``compute_remax_outcome_advantage`` on every generated token (tested),
        which receives the greedy scores as ``reward_baselines``; on tool-output positions inside
        a response verl leaves the reward-to-go (its loss masks them), labkit 0. Generating the
        greedy responses is the caller's.
        At tool output inside a response labkit and verl both carry (undiscounted: carry and
        through agree; ``labkit.credit.tool_spans``).

    Returns:
        credit at level "token"; ``info``: ``baseline`` (B,), each trajectory's b_i.

    Cost:
        the greedy responses, one per prompt, are the caller's cost: counted as one policy
        forward per group when ``greedy_scores`` is a callable labkit calls, not when it is a tensor.
    """
    b, called = resolve_input("greedy_scores", greedy_scores, rollouts,
                              expected="the greedy response's score for every trajectory's prompt, a (B,) tensor")
    b = trajectory_totals("greedy_scores", b, rollouts.scores)
    # in float64: the undiscounted reward-to-go is then one reverse cumulative sum
    G = discounted_returns(rollouts.rewards.to(torch.float64), rollouts.mask, 1.0)
    adv = (G - b[:, None]).to(rollouts.rewards.dtype)
    cost = Cost(policy_forwards=int(torch.unique(rollouts.group_ids).numel())) if called else None
    return Credit.from_tokens(rollouts, adv, "remax", cost=cost, baseline=b.to(rollouts.rewards.dtype))
