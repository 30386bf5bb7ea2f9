"""Hand-built cooperative games and tiny teams that the games, multi-agent and judge tests share."""

import torch

from labkit.core.rollouts import Rollouts


def game_from(fn, n):
    """Table of the game v(S) = fn(set of players in S)."""
    return torch.tensor([float(fn({i for i in range(n) if S >> i & 1})) for S in range(2 ** n)],
                        dtype=torch.float64)


def team(rows, rewards, groups=None, n_agents=None):
    """Rollouts with one position per action. ``rows[b]`` lists the acting agent of every
    position; ``rewards[b][i]`` is agent i's reward, put on agent i's last position."""
    B = len(rows)
    T = max(len(r) for r in rows)
    mask = torch.zeros(B, T, dtype=torch.bool)
    agent = torch.full((B, T), -1, dtype=torch.long)
    rew = torch.zeros(B, T, dtype=torch.float64)
    for b, row in enumerate(rows):
        for t, a in enumerate(row):
            mask[b, t] = True
            agent[b, t] = a
        for a in set(row):
            last = max(t for t, x in enumerate(row) if x == a)
            rew[b, last] = rewards[b][a]
    info = {} if n_agents is None else {"n_agents": n_agents}
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=None if groups is None else torch.tensor(groups),
                    turn_ids=torch.where(mask, torch.arange(T).expand(B, T), -1),
                    agent_ids=agent, info=info)


def agent_values(credit, ro):
    """Credit per agent read back from the token credit (it must be constant per agent)."""
    lo, present = credit.at(ro, "agent", "min")
    hi, _ = credit.at(ro, "agent", "max")
    assert torch.allclose(lo, hi), "credit must be constant over an agent's positions"
    return torch.where(present, lo, 0)


# closed-form 3-player games (values for players 0, 1, 2)
REDUNDANT = game_from(lambda S: 1 if S else 0, 3)                 # any player suffices


COMPLEMENTARY = game_from(lambda S: 1 if len(S) == 3 else 0, 3)   # all three needed


GLOVE = game_from(lambda S: 1 if 0 in S and (1 in S or 2 in S) else 0, 3)  # 1 left, 2 right


# --------------------------------------------------------------------------- agent estimators
def glove_rollouts():
    """Two tasks x two trajectories, 3 agents; agent 0 acts twice, interleaved with the others."""
    rows = [[0, 1, 0, 2], [0, 1, 2, 0], [1, 0, 2], [0, 1, 2]]
    rewards = [[1, 0, 0], [0.5, 0.2, 0], [0, 1, 1], [1, 1, 0]]
    return team(rows, rewards, groups=[0, 0, 1, 1])
