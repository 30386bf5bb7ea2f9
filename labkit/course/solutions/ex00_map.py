"""Solution to exercise 00a (notebook 00_map): the reward-to-go.

Checked by ``check(reward_to_go, "00a")``; the exercise is ``labkit.course.exercises.ex00_map``.
"""
from __future__ import annotations

import torch

__all__ = ["reward_to_go", "buffer_returns"]


def reward_to_go(rewards, mask, gamma):
    """00a · Reward-to-go (Williams 1992): the credit an outcome reward gives each generated token.

    Inputs:
        rewards: (B, T) rewards, the outcome on the last generated token.
        mask: (B, T) bool, True where the policy generated the token.
        gamma: the discount per generated token.

    Formula:
        G_t = r_t + gamma * G_{t'},  t' the next generated position (tool output does not discount);
        G = 0 after the last generated position; 0 off the mask.

    Defaults:
        none: gamma is given.

    Degenerate input:
        a row with nothing generated gets all zeros; gamma = 0 leaves each token its own reward.

    Deviations from the reference:
        none: equal to ``Rollouts.returns(gamma)`` (checked by ``check(reward_to_go, "00a")``).

    Returns:
        (B, T) float64 reward-to-go, 0 off the mask.

    Cost:
        none beyond the rewards.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    B, T = rewards.shape
    G = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0                      # G after the last generated token
        for t in reversed(range(T)):
            if mask[b, t]:                 # tool output and padding: skipped, no discount step
                running = float(rewards[b, t]) + gamma * running
                G[b, t] = running
    return G



def buffer_returns(rewards, dones, gamma):
    """00b · Returns in a rollout buffer (Williams 1992): the reward-to-go of every step, episode by episode.

    Inputs:
        rewards: (N,) reward of each step, episodes back to back.
        dones: (N,) bool, True on the last step of an episode.
        gamma: the discount per step.

    Formula:
        G_t = r_t + gamma * G_{t+1} inside an episode; G_t = r_t on a step whose done is True.

    Defaults:
        none: gamma is given.

    Degenerate input:
        a buffer that stops mid-episode ends that episode at its last step (no bootstrap); gamma = 0
        leaves each step its own reward; when every step is done each step's return is its reward.

    Deviations from the reference:
        none: equal to ``Rollouts.returns(gamma)`` on the buffer cut into one row per episode.

    Returns:
        (N,) float64 discounted return of every step.

    Cost:
        none beyond the rewards.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if dones[t]:
            running = 0.0  # the step after t belongs to the next episode
        running = rewards[t] + gamma * running  # first add the step's own reward ...
        returns[t] = running                    # ... then store: G_t includes r_t
    return returns
