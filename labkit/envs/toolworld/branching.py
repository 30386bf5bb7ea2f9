"""Recorded re-execution for tree search: restore hidden states, play on, and keep every turn.

``ToolWorld.rollout_from`` returns only the return-to-go of each restored episode. A search tree
needs more: a branch grown from a restored state becomes part of the tree, and a later round may
fork from any of its turns, so the hidden state and the reward of every turn it played must be
kept. ``play_recorded`` plays like ``rollout_from`` (the action at the restored turn is drawn
from the policy too) and records them.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_int
from labkit.envs.toolworld.env import SUBMIT
from labkit.envs.toolworld.replay import restored_states

__all__ = ["play_recorded"]


@torch.no_grad()
def play_recorded(env, policy, bug, fixed, obs, turn, *, seed: int = 0
                  ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Restore K states of ``env`` (a ToolWorld) and play each episode on to the end with ``policy``.

    ``bug``, ``fixed``, ``obs``, ``turn`` (K,) give the state before turn ``turn`` (as in
    ``ToolWorld.rollout_from``); every action, the one at ``turn`` included, is drawn from
    ``policy``; sampling uses its own generator seeded with ``seed``.

    Returns ``(hidden, rewards, env_steps)``: ``hidden`` (K, max_turns) long, the hidden-state
    index (``env.hidden_index``) before every turn the row played (turn ``turn`` on), -1 before
    ``turn`` and after the episode ended; ``rewards`` (K, max_turns) float64, the reward of every
    played turn (0 elsewhere); ``env_steps`` the number of actions taken in total.
    """
    env._check_policy(policy)
    seed = check_int("seed", seed)
    b, f, o, t0, _ = restored_states(env, bug, fixed, obs, turn)
    K, T = b.numel(), env.max_turns
    hidden = torch.full((K, T), -1, dtype=torch.long)
    rewards = torch.zeros(K, T, dtype=torch.float64)
    if K == 0:
        return hidden, rewards, 0
    g = torch.Generator().manual_seed(seed)
    pi_cdf = policy.probs().detach().to(torch.float64).cumsum(-1)
    k_cdf = env.kernel.cumsum(-1)
    alive = torch.zeros(K, dtype=torch.bool)
    done = torch.zeros(K, dtype=torch.bool)
    steps = 0
    for t in range(int(t0.min()), T):
        alive = (alive | (t0 == t)) & ~done
        if not bool(alive.any()):
            if bool((t0 > t).any()):
                continue
            break
        hidden[:, t] = torch.where(alive, env.hidden_index(b, f, o), -1)
        u = torch.rand(K, 1, generator=g, dtype=torch.float64)
        a = (pi_cdf[o] < u).sum(-1).clamp(max=env.n_actions - 1)
        rewards[:, t] = torch.where(alive, env.expected_reward[b, f, a], 0.0)
        steps += int(alive.sum())
        f = torch.where(alive, env.fixed_after[b, f, a], f)
        ended = alive & (a == SUBMIT)
        done = done | ended
        alive = alive & ~ended
        go = alive.nonzero().flatten()
        if go.numel():
            u = torch.rand(go.numel(), 1, generator=g, dtype=torch.float64)
            o[go] = (k_cdf[b[go], f[go], a[go]] < u).sum(-1).clamp(max=env.n_obs - 1)
    return hidden, rewards, steps
