"""Turn-level views of ``Rollouts`` shared by the agent estimators and by the worlds' truth.

A turn is the run of generated positions sharing one ``turn_id`` inside a trajectory (one
position in a tabular world, many tokens in an LM agent). Its observation is
``rollouts.states`` at its first position and its action the token there.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_number, check_shape
from labkit.core.rollouts import Rollouts
from labkit.core.stats import next_masked


def turn_rewards(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """Reward received inside each turn and whether the turn exists, both (B, N)."""
    return rollouts.view(rollouts.rewards, "turn", "sum")


def action_discounts(rollouts: Rollouts, gamma: float) -> torch.Tensor:
    """Per-position discounts (B, T) for backups that discount between actions only: 1 where the
    next generated position belongs to the same turn (a token inside a multi-token action),
    ``gamma`` where it starts a new turn or there is none. 0 off-mask. POAD's rule (BAD);
    with every turn one position it is ``gamma`` everywhere, the ordinary token-level discount."""
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    ids, mask = rollouts.turn_ids, rollouts.mask
    # turn id of the next generated position, -1 where there is none (shifted by one so that
    # next_masked's 0 for "none" cannot be mistaken for turn 0)
    nxt = next_masked(ids + 1, mask) - 1
    same = mask & (nxt == ids)
    d = torch.where(same, torch.ones((), dtype=torch.float64), torch.tensor(gamma, dtype=torch.float64))
    return torch.where(mask, d, torch.zeros((), dtype=torch.float64))


def turn_table(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observation, action and presence of every turn, each (B, N) (obs/action 0 where absent)."""
    if rollouts.states is None:
        raise ValueError("rollouts.states: turn-level credit needs the observation of every turn")
    obs, present = rollouts.view(rollouts.states, "turn", "first")
    act, _ = rollouts.view(rollouts.tokens, "turn", "first")
    return obs.long(), act.long(), present


def turn_hidden_states(rollouts: Rollouts, hidden_states, n_hidden: int, why: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The privileged hidden state of every turn and the presence mask, each (B, N).

    ``hidden_states`` (B, T) is ``rollouts.truth["hidden_states"]``, passed explicitly by the
    caller (estimators never read ``truth`` on their own); ``why`` says in the error what needs
    it. Every played turn must carry a state in [0, n_hidden)."""
    if hidden_states is None:
        raise ValueError(f"hidden_states: {why}; pass hidden_states=rollouts.truth['hidden_states']")
    hidden = as_tensor("hidden_states", hidden_states).long()
    check_shape("hidden_states", hidden, tuple(rollouts.mask.shape))
    hs, present = rollouts.view(hidden, "turn", "first")
    hs = hs.long()
    if bool(((hs < 0) | (hs >= n_hidden))[present].any()):
        raise ValueError(f"hidden_states: not a valid hidden state (0..{n_hidden - 1}) at a played turn; "
                         "pass truth['hidden_states'] of these rollouts")
    return hs.clamp(0, n_hidden - 1), present


def binary_outcome(rollouts: Rollouts, outcome=None, name: str = "outcome") -> torch.Tensor:
    """The outcome Z per trajectory, (B,) float64, checked to be 0 or 1 (default: the total reward)."""
    z = rollouts.scores if outcome is None else as_tensor(name, outcome)
    z = z.to(torch.float64).reshape(-1)
    check_shape(name, z, (rollouts.batch_size,))
    if bool(((z != 0) & (z != 1)).any()):
        where = "the total reward (rollouts.scores)" if outcome is None else name
        raise ValueError(f"{name}: hindsight credit here needs a binary outcome (0 / 1), but {where} has "
                         f"values {sorted(set(z.tolist()))[:5]}; pass outcome= the success flag")
    return z
