"""ToolWorld's episodes as one response with the tool's answers inside it, and the exact credit
of every generated position.

``ToolWorld.sample`` gives one position per turn (the action). An LLM agent's response also
holds what the tool answered, written into the context between its own turns but not generated
by it (``mask`` False). ``with_tool_output`` inserts those answers: after every action but the
last, ``answer_tokens`` positions holding the observation the tool returned. Because every
action is one position, the k-th generated position of a row is turn k, so the exact per-turn
truth of ``ToolWorld.truth`` is the exact per-position truth here (``tool_output_truth``).
This module reads the hidden state for the truth (oracle side).
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.envs.toolworld.truth import ToolTruth

MAX_ANSWER_TOKENS = 20


def with_tool_output(env, turns: Rollouts, *, answer_tokens: int | str = 1) -> Rollouts:
    """ToolWorld's turn rollouts (one position per action, from ``ToolWorld.sample``) with the
    tool's answer after every action but the last as positions the policy did not generate:
    ``answer_tokens`` of them (default 1, at most 20), or with ``"words"`` one per word of the
    observation's text (``file 2 looks buggy``: 4), so answers differ in length as real ones do.

    An answer position holds token ``n_actions + o`` (o the observation returned), state o, reward,
    log-probability and entropy 0, and the text ``-> <observation>`` (with ``"words"``: ``-> <first
    word>``, then one word each; otherwise ``...`` on the answer's later positions). Actions keep
    their token, state, reward, log-probability, entropy and turn (also their step). Groups,
    anchor keys and prompts are the turn rollouts'; ``truth`` is empty.
    """
    check_rollouts(turns, "ToolWorld.sample")
    by_words = isinstance(answer_tokens, str)
    if by_words:
        if answer_tokens != "words":
            raise ValueError(f"answer_tokens: expected a number of positions or 'words', got {answer_tokens!r}")
    else:
        answer_tokens = check_int("answer_tokens", answer_tokens, low=1, high=MAX_ANSWER_TOKENS)
    after = turns.truth.get("observations_after")
    if not isinstance(after, torch.Tensor) or tuple(after.shape) != tuple(turns.mask.shape):
        raise ValueError("turns.truth['observations_after']: missing or mis-shaped; pass ToolWorld.sample's rollouts")
    A = env.n_actions
    rows = []
    for b in range(turns.batch_size):
        row = []
        n = int(turns.mask[b].sum())
        for t in range(n):
            a = int(turns.tokens[b, t])
            row.append(dict(token=a, gen=True, turn=t, state=int(turns.states[b, t]),
                            reward=float(turns.rewards[b, t]), logprob=float(turns.logprobs[b, t]),
                            entropy=float(turns.entropies[b, t]), text=env.action_names[a]))
            o = int(after[b, t])
            if t < n - 1 and o >= 0:
                words = env.obs_names[o].split()
                texts = ([f"-> {words[0]}"] + words[1:] if by_words
                         else [f"-> {env.obs_names[o]}"] + ["..."] * (answer_tokens - 1))
                for text in texts:
                    row.append(dict(token=A + o, gen=False, turn=-1, state=o, reward=0.0, logprob=0.0, entropy=0.0,
                                    text=text))
        rows.append(row)
    B, T = len(rows), max(len(r) for r in rows)

    def column(key, fill, dtype):
        out = torch.full((B, T), fill, dtype=dtype)
        for b, row in enumerate(rows):
            out[b, :len(row)] = torch.tensor([p[key] for p in row], dtype=dtype)
        return out

    turn_ids = column("turn", -1, torch.long)
    return Rollouts(tokens=column("token", 0, torch.long), mask=column("gen", False, torch.bool),
                    rewards=column("reward", 0.0, turns.rewards.dtype), group_ids=turns.group_ids,
                    step_ids=turn_ids, turn_ids=turn_ids.clone(), logprobs=column("logprob", 0.0, turns.logprobs.dtype),
                    entropies=column("entropy", 0.0, turns.entropies.dtype), states=column("state", 0, torch.long),
                    anchor_keys=turns.anchor_keys, text=[[p["text"] for p in r] + [""] * (T - len(r)) for r in rows],
                    prompts=turns.prompts)


def _spread(values: torch.Tensor, turns: Rollouts, response: Rollouts) -> torch.Tensor:
    """Per-turn values (B, n) put on the generated positions of ``response`` (0 elsewhere)."""
    out = torch.zeros(response.mask.shape, dtype=values.dtype)
    out[response.mask] = values[turns.mask]
    return out


def tool_output_truth(truth: ToolTruth, turns: Rollouts, response: Rollouts) -> dict[str, torch.Tensor]:
    """Exact per-position quantities of ``response = with_tool_output(env, turns, ...)`` under
    the policy and discount ``truth`` was computed for (``ToolWorld.truth(policy, gamma=...)``),
    each (B, T) float64:

    * ``advantage``: the exact A = Q - V of every action, 0 off the mask (what credit is scored
      against);
    * ``values``: an exact critic's value before every position: V_t(s_t) before action t;
      before the first answer position E[V_{t+1}] = (Q_t - r_t) / gamma (the answer not yet
      read); before the answer's later positions V_{t+1}(s_{t+1}) (the answer read); 0 elsewhere.
      Only ``through`` reads the values on the answers.
    """
    if truth.gamma <= 0:
        raise ValueError("truth: needs gamma > 0 (the value before a tool answer is (Q - r) / gamma)")
    turn_adv = truth.advantage(turns)
    v_turn, q_turn, nxt = truth.value(turns), truth.q_value(turns), truth.next_value(turns)
    expected_next = (q_turn - turns.rewards.to(torch.float64)) / truth.gamma
    mask = response.mask
    # the turn each position belongs to or answers: generated positions counted so far, minus one
    turn_of = (mask.long().cumsum(1) - 1).clamp(min=0)
    spans = ~mask & (mask.long().flip(1).cumsum(1).flip(1) > 0) & (mask.long().cumsum(1) > 0)
    first = spans & torch.cat([torch.ones_like(mask[:, :1]), mask[:, :-1]], 1)

    def per_turn(x: torch.Tensor) -> torch.Tensor:
        # (B, n_turns) turn values, read at every position's turn (pad the turn axis if needed)
        width = max(int(turn_of.max()) + 1, x.shape[1])
        padded = torch.zeros(x.shape[0], width, dtype=torch.float64)
        padded[:, :x.shape[1]] = x
        return padded.gather(1, turn_of)

    values = torch.where(mask, _spread(v_turn, turns, response), torch.zeros((), dtype=torch.float64))
    values = torch.where(first, per_turn(expected_next), values)
    values = torch.where(spans & ~first, per_turn(nxt), values)
    return {"advantage": _spread(turn_adv, turns, response), "values": values}
