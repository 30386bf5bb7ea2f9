"""ToolWorld's actions written as short token sequences, and the exact credit of every token (POAD).

An LLM agent does not pick "open file 3" as one symbol: it writes the tool call token by token.
Here every action becomes one or two tokens: a verb, then for ``open`` and ``edit`` the file::

    think | search | run tests | submit | open <j> | edit <j>        (vocab: 6 verbs, then N files)

The tabular policy pi(a | o) factorises exactly into a verb policy and a file policy:

    pi(verb | o) = sum of pi(a | o) over the actions with that verb
    pi(j | o, verb) = pi(verb j | o) / pi(verb | o)

so the token view needs no new policy, and the exact truth of ``ToolWorld.truth`` extends to
tokens. With s = (bug, fixed, o) the hidden state before the turn and V_verb(s) =
sum_j pi(j | o, verb) Q(s, verb j) the value of having written the verb:

    verb token of a two-token action:  A = V_verb(s) - V(s)        (choosing to open / edit at all)
    file token:                        A = Q(s, verb j) - V_verb(s) (choosing which file)
    one-token action:                  A = Q(s, a) - V(s)

The two tokens' advantages sum to the action's advantage. ``format_tokens=k`` writes k more
tokens between a verb and its file (the brackets and quotes of a JSON tool call): they are
certain given the verb (probability 1), so their exact advantage is 0, and only a backup that
discounts them (token-level GAE) gives them anything. The token states a critic can condition
on are (o) before the verb and (o, verb) before the file: ``n_token_states = 3 * n_obs``.
This module reads the hidden state for the truth (oracle side); ``tokenize`` keeps it in
``truth`` like ``ToolWorld.sample`` does.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts
from labkit.envs.toolworld.truth import ToolTruth

VERBS = ("think", "search", "run tests", "submit", "open", "edit")
OPEN_VERB, EDIT_VERB = 4, 5
FORMAT_TOKEN = "·"   # one formatting token of a tool call: written with probability 1
MAX_FORMAT_TOKENS = 50


def token_vocab(env) -> list[str]:
    """Display strings of the token ids: the six verbs, then ``file j``, then the formatting token."""
    return list(VERBS) + [f"file {j}" for j in range(env.n_files)] + [FORMAT_TOKEN]


def n_token_states(env) -> int:
    """States a token-level critic conditions on: o before a verb, (o, open) and (o, edit) before a file."""
    return 3 * env.n_obs


def action_tokens(env) -> list[tuple[int, ...]]:
    """The token ids of every action id: ``[(0,), (1,), (2,), (3,), (4, 6), ..., (5, 6 + N - 1)]``."""
    N = env.n_files
    return ([(0,), (1,), (2,), (3,)] + [(OPEN_VERB, len(VERBS) + j) for j in range(N)]
            + [(EDIT_VERB, len(VERBS) + j) for j in range(N)])


def _verb_of(env) -> torch.Tensor:
    """Verb id of every action id, (n_actions,)."""
    return torch.tensor([toks[0] for toks in action_tokens(env)])


def verb_policy(env, pi: torch.Tensor) -> torch.Tensor:
    """pi(verb | o), (n_obs, 6), from the action table pi (n_obs, n_actions)."""
    return torch.zeros(pi.shape[0], len(VERBS), dtype=pi.dtype).index_add_(1, _verb_of(env), pi)


def tokenize(env, rollouts: Rollouts, policy, *, format_tokens: int = 0) -> Rollouts:
    """The token view of ToolWorld rollouts sampled by ``policy``: one position per token.

    ``format_tokens`` (default 0, at most 50): formatting tokens between a verb and its file.

    ``turn_ids`` and ``step_ids`` keep the turn of every token; the turn's reward sits on its last
    token; ``states`` is the token state (o for a verb, n_obs + 2 o + [verb is edit] for a file);
    (formatting tokens share the file's state: nothing was chosen in between); ``logprobs`` are
    the factorised log pi(verb | o), 0 for a formatting token and log pi(j | o, verb).
    ``truth`` keeps ``hidden_states`` per token (the turn's), ``token_in_turn`` (0 for the verb,
    1, 2, ... after it), ``action`` (the
    turn's action id per token), ``success`` and ``bug``, and ``turn_rollouts`` (the original).
    """
    if getattr(env, "n_files", None) is None or not hasattr(env, "obs_names"):
        raise ValueError(f"env: the token view needs a ToolWorld, got {type(env).__name__}")
    if rollouts.states is None or "hidden_states" not in rollouts.truth:
        raise ValueError("rollouts: sample them with ToolWorld.sample (states and truth['hidden_states'] needed)")
    log_pi = policy.log_probs().detach().to(torch.float64)
    pi = log_pi.exp()
    if tuple(pi.shape) != (env.n_obs, env.n_actions):
        raise ValueError(f"policy: logits have shape {tuple(pi.shape)}, this ToolWorld needs ({env.n_obs}, {env.n_actions})")
    format_tokens = check_int("format_tokens", format_tokens, low=0, high=MAX_FORMAT_TOKENS)
    log_verb = verb_policy(env, pi).clamp(min=1e-300).log()
    fmt = len(token_vocab(env)) - 1
    spell = [toks if len(toks) == 1 else (toks[0],) + (fmt,) * format_tokens + toks[1:] for toks in action_tokens(env)]
    vocab = token_vocab(env)
    verb_of = _verb_of(env)
    B = rollouts.batch_size
    lengths = [sum(len(spell[a]) for a, m in zip(row_a, row_m) if m)
               for row_a, row_m in zip(rollouts.tokens.tolist(), rollouts.mask.tolist())]
    L = max(max(lengths), 1)
    cols = {k: torch.zeros(B, L, dtype=torch.long) for k in ("tokens", "states", "action")}
    turn = torch.full((B, L), -1, dtype=torch.long)
    hidden = torch.full((B, L), -1, dtype=torch.long)
    within = torch.full((B, L), -1, dtype=torch.long)
    mask = torch.zeros(B, L, dtype=torch.bool)
    rewards = torch.zeros(B, L, dtype=rollouts.rewards.dtype)
    logprobs = torch.zeros(B, L, dtype=torch.float64)
    text = [[""] * L for _ in range(B)]
    H = rollouts.truth["hidden_states"]
    for b in range(B):
        p = 0
        for t in range(rollouts.horizon):
            if not bool(rollouts.mask[b, t]):
                continue
            a, o = int(rollouts.tokens[b, t]), int(rollouts.states[b, t])
            verb = int(verb_of[a])
            for k, tok in enumerate(spell[a]):
                cols["tokens"][b, p] = tok
                cols["states"][b, p] = o if k == 0 else env.n_obs + 2 * o + int(verb == EDIT_VERB)
                cols["action"][b, p] = a
                turn[b, p], hidden[b, p], within[b, p], mask[b, p] = t, int(H[b, t]), k, True
                logprobs[b, p] = (log_verb[o, verb] if k == 0 else 0.0 if tok == fmt
                                  else log_pi[o, a] - log_verb[o, verb])
                text[b][p] = vocab[tok]
                p += 1
            rewards[b, p - 1] = rollouts.rewards[b, t]
    truth = {"hidden_states": hidden, "token_in_turn": within, "action": torch.where(mask, cols["action"], -1),
             "success": rollouts.truth.get("success"), "bug": rollouts.truth.get("bug"), "turn_rollouts": rollouts}
    return Rollouts(tokens=cols["tokens"], mask=mask, rewards=rewards, group_ids=rollouts.group_ids,
                    step_ids=turn.clone(), turn_ids=turn, logprobs=logprobs.to(rollouts.rewards.dtype),
                    states=cols["states"], anchor_keys=rollouts.anchor_keys, text=text, prompts=rollouts.prompts,
                    truth=truth, info={**rollouts.info, "view": "tokens"})


def _token_index(env, truth: ToolTruth, tokens: Rollouts):
    if tokens.info.get("view") != "tokens":
        raise ValueError("tokens: expected the token view of ToolWorld rollouts (labkit.envs.toolworld.tokens.tokenize)")
    h = tokens.truth["hidden_states"].clamp(min=0)
    b, f, o = h // (2 * env.n_obs), (h // env.n_obs) % 2, h % env.n_obs
    t = tokens.turn_ids.clamp(min=0)
    if bool((t >= truth.Q.shape[0]).any()):
        raise ValueError(f"tokens: turns beyond this truth's max_turns ({truth.Q.shape[0]})")
    return t, b, f, o, tokens.truth["action"].clamp(min=0), tokens.truth["token_in_turn"]


def exact_token_values(env, truth: ToolTruth, tokens: Rollouts) -> torch.Tensor:
    """Exact value before every token, (B, L): V(s) before a verb, V_verb(s) before a file. 0 off-mask."""
    t, b, f, o, a, k = _token_index(env, truth, tokens)
    verb_of = _verb_of(env)
    pi = truth.pi
    v = truth.V[t, b, f, o]
    # V_verb(s) = sum over the verb's actions of pi(a | o) Q(s, a) / pi(verb | o)
    same_verb = (verb_of[None, :] == verb_of[a][..., None]).to(pi.dtype)      # (B, L, A)
    w = pi[o] * same_verb
    q = truth.Q[t, b, f]                                                    # (B, L, A)
    v_verb = (w * q).sum(-1) / w.sum(-1).clamp(min=1e-300)
    return torch.where(tokens.mask, torch.where(k >= 1, v_verb, v), 0.0)


def exact_token_advantage(env, truth: ToolTruth, tokens: Rollouts) -> torch.Tensor:
    """Exact advantage of every token, (B, L) (module docstring); a turn's tokens sum to its A."""
    t, b, f, o, a, k = _token_index(env, truth, tokens)
    before = exact_token_values(env, truth, tokens)
    q = truth.Q[t, b, f, a]
    # a token followed by another token of its action is worth the value before that token;
    # the action's last token is worth Q(s, a)
    after = torch.zeros_like(before)
    after[:, :-1] = before[:, 1:]
    inside = torch.zeros_like(tokens.mask)
    inside[:, :-1] = (k[:, 1:] >= 1) & tokens.mask[:, 1:]
    adv = torch.where(inside, after, q) - before
    return torch.where(tokens.mask, adv, 0.0)


def token_luck(env, truth: ToolTruth, tokens: Rollouts) -> torch.Tensor:
    """What the tool's random answer added, on the last token of each turn: r + gamma V(s') - Q(s, a); 0 elsewhere.

    Writing a token is deterministic (the next token state is known), so luck only enters where
    the environment answers. Per trajectory V(s_0) + sum over turns gamma^t (sum of the turn's
    token advantages + luck) is the realised discounted return."""
    turn_ro = tokens.truth["turn_rollouts"]
    _, luck_turn = truth.skill_luck(turn_ro)
    last = torch.zeros_like(tokens.mask)
    last[:, :-1] = tokens.mask[:, :-1] & (tokens.turn_ids[:, 1:] != tokens.turn_ids[:, :-1])
    last |= tokens.mask & torch.cat([~tokens.mask[:, 1:], torch.ones(tokens.batch_size, 1, dtype=torch.bool)], 1)
    per_token = luck_turn.gather(1, tokens.turn_ids.clamp(min=0))
    return torch.where(last, per_token, 0.0)
