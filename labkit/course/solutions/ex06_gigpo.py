"""Solutions to notebook 06_gigpo's exercises: 06a GiGPO's anchor-group step term, 06b GiGPO's
std-normalised advantage (the bug fixed), 06c a PPO-clip policy loss with both aggregations.

Checked by ``check(gigpo_step_term, "06a")``, ``check(gigpo_advantage, "06b")`` and
``check(policy_loss, "06c")``; the exercises are ``labkit.course.exercises.ex06_gigpo``.
"""
from __future__ import annotations

import torch

__all__ = ["gigpo_step_term", "gigpo_advantage", "policy_loss"]


def gigpo_step_term(turn_rewards, present, anchors, gamma):
    """06a · GiGPO's step term (Feng et al. 2025, arXiv 2505.10978): a turn against its anchor group.

    Inputs:
        turn_rewards: (B, N) each turn's summed reward, 0 where absent.
        present: (B, N) bool, which turns exist.
        anchors: (B, N) integer key of the observation each turn starts from.
        gamma: the discount per turn.

    Formula:
        R_k = r_k + gamma R_{k+1},   A^S_k = R_k - mean of R over the turns with the same anchor

    Defaults:
        norm = "mean_norm" (no std division), as GiGPO's default.

    Degenerate input:
        an anchor group of one gets 0; absent turns get 0; repeat visits in one episode count.

    Deviations from the reference:
        none: equal to ``labkit.credit.gigpo``'s ``info["step_term"]`` for one task group.

    Returns:
        (B, N) float64 step term, 0 where no turn is present.

    Cost:
        none beyond the batch.
    """
    B, N = turn_rewards.shape
    R = torch.zeros(B, N, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for k in reversed(range(N)):
            if present[b, k]:
                running = turn_rewards[b, k] + gamma * running
                R[b, k] = running
    groups = {}
    for b in range(B):
        for k in range(N):
            if present[b, k]:
                groups.setdefault(int(anchors[b, k]), []).append((b, k))
    out = torch.zeros(B, N, dtype=torch.float64)
    for members in groups.values():
        if len(members) == 1:
            continue  # nothing to compare with
        mean = sum(R[b, k] for b, k in members) / len(members)
        for b, k in members:
            out[b, k] = R[b, k] - mean
    return out



def gigpo_advantage(turn_rewards, present, anchors, gamma, omega):
    """06b · GiGPO's turn advantage, norm "mean_std_norm" (Feng et al. 2025, arXiv 2505.10978).

    Inputs:
        turn_rewards: (B, N) each turn's reward, 0 where absent; B >= 2 episodes of one task.
        present: (B, N) bool, which turns exist.
        anchors: (B, N) integer key of the observation each turn starts from.
        gamma: the discount per turn;  omega: the weight of the step term.

    Formula:
        A^E_i = (s_i - mean s) / (std s + 1e-6),   s_i = sum of episode i's rewards
        R_k = r_k + gamma R_{k+1},   A^S_k = (R_k - mean R) / (std R + 1e-6) over the anchor group
        A_k = A^E_i + omega A^S_k

    Defaults:
        unbiased stds, eps = 1e-6, as verl-agent.

    Degenerate input:
        the bug was here: an anchor group of one has an undefined (NaN) unbiased std; it gets step
        term 0, nothing to compare with. A group of equal values gets 0 (0 / (0 + 1e-6)).

    Deviations from the reference:
        none: equal to ``labkit.credit.gigpo(..., norm="mean_std_norm")`` for one task group.

    Returns:
        (B, N) float64 advantage, 0 where no turn is present.

    Cost:
        none beyond the batch.
    """
    B, N = turn_rewards.shape
    present = present.bool()
    r = torch.where(present, turn_rewards.double(), 0.0)
    R = torch.zeros_like(r)
    running = torch.zeros(B, dtype=torch.float64)
    for k in reversed(range(N)):
        running = r[:, k] + gamma * running
        R[:, k] = running
    scores = r.sum(1)
    episode = (scores - scores.mean()) / (scores.std() + 1e-6)
    step = torch.zeros_like(R)
    for key in anchors[present].unique():
        members = present & (anchors == key)
        returns = R[members]
        if len(returns) < 2:
            continue  # the fix: a group of one has no std and nothing to compare with
        step[members] = (returns - returns.mean()) / (returns.std() + 1e-6)
    return torch.where(present, episode[:, None] + omega * step, 0.0)


def policy_loss(logp, old_logp, advantages, mask, aggregation):
    """06c · The clipped PPO policy loss (Schulman et al. 2017, arXiv 1707.06347), two aggregations.

    Inputs:
        logp, old_logp: (B, T) log-probabilities of the sampled tokens, now and at sampling.
        advantages: (B, T) credit per token.
        mask: (B, T) bool, the generated tokens.
        aggregation: "token-mean" or "seq-mean-token-mean".

    Formula:
        rho = exp(logp - old_logp),   l_t = -min(rho A_t, clip(rho, 1 - eps, 1 + eps) A_t)
        token-mean:           sum of l_t over generated tokens / their number
        seq-mean-token-mean:  mean over sequences with tokens of (sum of l_t in the row / its tokens)

    Defaults:
        eps = 0.2, no KL term (as Dr. GRPO and DAPO).

    Degenerate input:
        a row with no generated token is no sequence; a batch with none has loss 0 (gradient 0).

    Deviations from the reference:
        none: equal to ``labkit.learn.loop.policy_loss`` with kind "ppo_clip" (token-mean) or
        "grpo" (seq-mean-token-mean), whose log-ratio is also clamped at 20 against overflow.

    Returns:
        0-d tensor, differentiable with respect to logp.

    Cost:
        O(B T).
    """
    eps = 0.2
    m = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - eps, 1 + eps) * advantages
    per_token = -torch.minimum(unclipped, clipped) * m  # 0 on padding and tool output
    if aggregation == "token-mean":
        return per_token.sum() / m.sum().clamp(min=1)
    if aggregation == "seq-mean-token-mean":
        lengths = m.sum(1)
        has = lengths > 0  # a row with no generated token is no sequence
        per_sequence = per_token.sum(1)[has] / lengths[has]
        return per_sequence.sum() / has.sum().clamp(min=1)
    raise ValueError(f"aggregation: expected 'token-mean' or 'seq-mean-token-mean', got {aggregation!r}")
