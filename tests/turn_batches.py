"""Hand-built batches of turns that the credit and learn tests share: every expected number can be computed
on paper.
"""

import math

import torch

from labkit.core.rollouts import Rollouts


def three_tokens():
    # one trajectory: action 0 = two tokens (turn 0), action 1 = one token (turn 1) with reward 1
    return Rollouts(tokens=torch.tensor([[5, 7, 2]]), mask=torch.ones(1, 3, dtype=torch.bool),
                    rewards=torch.tensor([[0.0, 0.5, 1.0]], dtype=torch.float64),
                    turn_ids=torch.tensor([[0, 0, 1]]))


def turn_batch(turn_rewards, *, turn_len=1, groups=None, keys=None, entropies=None, tool=False):
    """Rollouts whose trajectory b has len(turn_rewards[b]) turns of ``turn_len`` tokens each.

    A turn's reward sits on its last token; each turn is one step, so ``keys[b][k]`` is the
    anchor key of turn k. ``entropies[b][k]`` is spread over turn k's tokens (each token gets
    the value, so the turn mean is that value). ``tool=True`` puts one masked (environment)
    position after every turn but the last, as tool output in an LM agent.
    """
    B = len(turn_rewards)
    gap = 1 if tool else 0
    T = max(len(r) * (turn_len + gap) - gap for r in turn_rewards)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    ent = torch.zeros(B, T, dtype=torch.float64)
    for b, row in enumerate(turn_rewards):
        for k, r in enumerate(row):
            start = k * (turn_len + gap)
            mask[b, start:start + turn_len] = True
            tid[b, start:start + turn_len] = k
            rew[b, start + turn_len - 1] = r
            if entropies is not None:
                ent[b, start:start + turn_len] = entropies[b][k]
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=None if groups is None else torch.tensor(groups),
                    step_ids=tid.clone(), turn_ids=tid, anchor_keys=keys,
                    entropies=ent if entropies is not None else None)


def turn_credit(credit, ro):
    """Credit of every turn, read back from the token credit (it must be constant per turn)."""
    lo, present = credit.at(ro, "turn", "min")
    hi, _ = credit.at(ro, "turn", "max")
    assert torch.allclose(lo, hi), "credit must be constant within a turn"
    return torch.where(present, lo, 0)


S2 = math.sqrt(0.5)  # unbiased std of the outcomes {1, 0}


def outcome_turns(n_turns, outcomes, *, groups=None, states=None, actions=None):
    """Trajectory b has n_turns[b] one-position turns; its outcome sits on its last turn."""
    B, T = len(n_turns), max(max(n_turns), 1)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    for b, n in enumerate(n_turns):
        mask[b, :n] = True
        if n:
            rew[b, n - 1] = outcomes[b]
    tid = torch.where(mask, torch.arange(T).expand(B, T), -1)
    tok = torch.zeros(B, T, dtype=torch.long) if actions is None else torch.tensor(actions)
    st = None if states is None else torch.tensor(states)
    return Rollouts(tokens=tok, mask=mask, rewards=rew, step_ids=tid.clone(), turn_ids=tid,
                    group_ids=None if groups is None else torch.tensor(groups), states=st)


def scored_turns(n_turns, scores, groups):
    """One position per turn; trajectory b has n_turns[b] turns and its score on the last one."""
    B, T = len(n_turns), max(n_turns)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    for b, (n, s) in enumerate(zip(n_turns, scores)):
        mask[b, :n] = True
        tid[b, :n] = torch.arange(n)
        rew[b, n - 1] = s
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=torch.tensor(groups), step_ids=tid.clone(), turn_ids=tid)


def turn_values(credit):
    return torch.where(credit.present.bool(), credit.values, 0.0)


def turn_rollouts(obs, act, rewards=None):
    """One position per turn (a tabular agent): trajectory b plays len(obs[b]) turns."""
    B, T = len(obs), max(len(o) for o in obs)
    mask = torch.zeros(B, T, dtype=torch.bool)
    states = torch.zeros(B, T, dtype=torch.long)
    tokens = torch.zeros(B, T, dtype=torch.long)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    for b, (o, a) in enumerate(zip(obs, act)):
        n = len(o)
        mask[b, :n] = True
        states[b, :n] = torch.tensor(o, dtype=torch.long)
        tokens[b, :n] = torch.tensor(a, dtype=torch.long)
        tid[b, :n] = torch.arange(n)
        if rewards is not None and n:
            rew[b, n - 1] = rewards[b]
    return Rollouts(tokens=tokens, mask=mask, rewards=rew, states=states, step_ids=tid.clone(), turn_ids=tid)
