"""Exercise 05 (notebook 05_why_agents_harder): returns discounted once per turn, not per token.

Graded against ``labkit.credit.td.turn_gae`` with V = 0 and lam = 1 (its values are then the turn
returns); ``reveal_solution(5)`` prints the reference solution, ``turn_returns`` in
labkit/course/solutions/ex05_why_agents_harder.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import ZERO_DISCOUNT, any_of, looks_like
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import td


def _reference(rewards, turn_ids, gamma):
    ids = turn_ids.long()[None]
    mask = ids >= 0
    r = one_token_rollouts(rewards.to(F64)[None], mask, turn_ids=ids)
    n = int(ids.max()) + 1
    return td.turn_gae(r, values=torch.zeros(1, n, dtype=F64), gamma=gamma, lam=1.0).values[0]


def _cases(gen):
    cases = []
    for i in range(6):
        ids = []
        n_turns = randint(gen, 2, 4)
        for k in range(n_turns):
            ids += [k] * randint(gen, 1, 3)
            if k < n_turns - 1 and rand(gen, 1) < 0.7:
                ids += [-1] * randint(gen, 1, 2)  # the tool's answer between two turns
        ids = torch.tensor(ids + [-1] * randint(gen, 0, 2))  # padding
        rewards = torch.where((ids >= 0) & (rand(gen, len(ids)) < 0.4),
                              torch.round(torch.randn(len(ids), generator=gen, dtype=F64), decimals=1), 0.0)
        last = int((ids >= 0).nonzero().max())
        rewards[last] = 1.0
        gamma = round(0.5 + 0.45 * float(rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, turn_ids=ids, gamma=gamma)))
    ids = torch.tensor([0, 0, 0, -1, -1, 1, 1, -1, 2, 2])
    rew = torch.tensor([0.0, -0.1, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0], dtype=F64)
    cases += [
        Case("three turns, tool output between", dict(rewards=rew, turn_ids=ids, gamma=0.9)),
        # the edges, graded once the cases above pass
        Case("one turn", dict(rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64), turn_ids=torch.tensor([0, 0, 0]), gamma=0.9),
             frozenset({"one_turn"})),
        Case("gamma = 0", dict(rewards=rew, turn_ids=ids, gamma=0.0), frozenset({"gamma0"})),
        Case("gamma = 1", dict(rewards=rew, turn_ids=ids, gamma=1.0), frozenset({"gamma1"})),
    ]
    return cases


def _variant(how, where="first"):
    def variant(rewards, turn_ids, gamma):
        ids = turn_ids.long()
        r = rewards.to(F64)
        n = int(ids.max()) + 1
        if how in ("token", "position"):
            keep = ids >= 0 if how == "token" else torch.ones_like(ids, dtype=torch.bool)
            g, out = 0.0, torch.zeros(len(r), dtype=F64)
            for t in range(len(r) - 1, -1, -1):
                if keep[t]:
                    g = float(r[t]) + gamma * g
                    out[t] = g
            pos = [int((ids == k).nonzero().min() if where == "first" else (ids == k).nonzero().max()) for k in range(n)]
            return out[pos]
        per_turn = torch.zeros(n, dtype=F64)
        for k in range(n):
            sel = (ids == k).nonzero().flatten()
            per_turn[k] = r[sel[-1]] if how == "last_only" else r[sel].sum()
        if how == "forward":
            return torch.stack([sum(gamma ** (k - j) * per_turn[j] for j in range(k + 1)) for k in range(n)])
        if how == "absolute":
            return torch.stack([sum(gamma ** j * per_turn[j] for j in range(k, n)) for k in range(n)])
        return torch.stack([sum(gamma ** (j - k) * per_turn[j] for j in range(k, n)) for k in range(n)])
    return variant


EXERCISE = register(Exercise(
    notebook="05", name="turn_returns", title="Returns discounted per turn",
    signature="turn_returns(rewards, turn_ids, gamma) -> tensor (n_turns,)",
    prompt=(
        "Write the return of every turn of one agent episode, discounted once per TURN (the turn-level\n"
        "MDP of POAD, arXiv 2405.15821, and Turn-PPO, arXiv 2512.17008), not once per token.\n"
        "  rewards: (T,) float tensor, the reward after each position\n"
        "  turn_ids: (T,) long tensor, the turn of each generated token (0, 1, 2, ...), -1 for tool output / padding\n"
        "  gamma: float in [0, 1]\n"
        "Return the (n_turns,) returns, n_turns = max(turn_ids) + 1:\n"
        "  r_k = sum of the rewards inside turn k,   G_k = r_k + gamma * G_{k+1},   G after the last turn = 0"),
    cases=_cases, reference=_reference,
    rules=(
        Rule("your values are discounted per token, not per turn: a turn of several tokens is ONE step of the "
             "turn-level MDP and is discounted once",
             any_of(*(looks_like(_variant(h, w)) for h in ("token", "position") for w in ("first", "last"))),
             every=True),
        Rule("a turn's reward is the sum of every reward inside it, not just its last token's",
             looks_like(_variant("last_only")), every=True),
        Rule("a return sums the rewards from turn k to the END, G_k = r_k + gamma * G_{k+1}, not those before it",
             looks_like(_variant("forward")), every=True),
        Rule("discount relative to turn k: gamma^(j - k) for turn j, not gamma^j", looks_like(_variant("absolute")), every=True),
        ZERO_DISCOUNT,
    ),
))
