"""Solutions to exercises 05a and 05b (notebook 05_why_agents_harder): returns discounted once per
turn, and the per-episode mean loss's token weights with their planted mistake fixed.

Checked by ``check(turn_returns, "05a")`` and ``check(episode_mean_weights, "05b")``; the exercises are
in ``labkit.course.exercises.ex05_why_agents_harder`` (05c, a reading, has its solution there: the lab's run).
"""
from __future__ import annotations

import torch

__all__ = ["turn_returns", "episode_mean_weights"]


def turn_returns(rewards, turn_ids, gamma):
    """05a · Returns discounted per turn (POAD, Wen et al. 2024, arXiv 2405.15821; Turn-PPO, arXiv 2512.17008).

    Inputs:
        rewards: (L,) the rewards of one episode's positions.
        turn_ids: (L,) the turn of each position (0, 1, 2, ... in order; -1 for tool output and padding).
        gamma: the discount per turn.

    Formula:
        r_k = sum of the rewards inside turn k,   G_k = r_k + gamma G_{k+1}

    Defaults:
        none: gamma is an argument.

    Degenerate input:
        G = 0 after the last turn; tool output and padding (turn id -1) carry no reward and no discount.

    Deviations from the reference:
        none: equal to ``labkit.credit.turn_gae`` with V = 0 and lam = 1.

    Returns:
        (n_turns,) float64 discounted return of every turn.

    Cost:
        none beyond the episode.
    """
    n_turns = int(turn_ids.max()) + 1
    r = torch.zeros(n_turns, dtype=torch.float64)
    for t, k in enumerate(turn_ids.tolist()):
        if k >= 0:
            r[k] += rewards[t]
    G = torch.zeros(n_turns, dtype=torch.float64)
    running = 0.0
    for k in reversed(range(n_turns)):
        running = r[k] + gamma * running
        G[k] = running
    return G



def episode_mean_weights(advantages, attention_mask, tool_mask):
    """05b · The per-episode mean loss's token weights (GRPO's loss, Shao et al. 2024, arXiv 2402.03300), fixed.

    Inputs:
        advantages: (B, T) each position's advantage (broadcast over the row).
        attention_mask: (B, T) True on every real position (the agent's tokens and tool output).
        tool_mask: (B, T) True on the tokens a tool returned.

    Formula:
        L = -(1/B') sum_b (1/n_b) sum_t A_bt log pi_bt over the agent's generated tokens;
        w_bt = -dL/dlog pi_bt = A_bt / (n_b B') on them, 0 elsewhere.

    Defaults:
        none.

    Degenerate input:
        an episode with no generated token gets 0 and is not counted in B'.

    Deviations from the reference:
        none: minus the gradient of ``labkit.learn.loop.policy_loss(kind="grpo")`` at ratio 1.

    Returns:
        (B, T) float64 weight of every position.

    Cost:
        none beyond the batch.
    """
    generated = attention_mask.bool() & ~tool_mask.bool()  # the fix: tool output is not the agent's
    n_tokens = generated.sum(dim=1, keepdim=True)
    n_episodes = (n_tokens > 0).sum()
    weights = advantages.double() * generated / n_tokens.clamp(min=1)
    return weights / n_episodes.clamp(min=1)
