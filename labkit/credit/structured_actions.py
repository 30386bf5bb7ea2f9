"""Structured action credit: a turn is judged against turns that issued a command of the same shape.

A^3 (action advantage assignment) trains command-line agents. Their commands have structure (a
program, its arguments), so a command can be compared with the structurally similar commands of
the same task group, and a group's rollouts that share a prefix and then part ways say what the
choice at the parting turn was worth. Here a turn's command is the text before " -> " in its
display text (ToolWorld's "open 3 -> file 3 looks fine"), parsed into a verb (the first word) and
an argument (the rest): the lab's stand-in for a shell command's syntax tree.
"""
from __future__ import annotations

from typing import Hashable, Sequence

import torch

from labkit.core.checks import check_choice, check_number
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns, group_normalize
from labkit.core.turns import turn_rewards
from labkit.credit.group import turn_anchor_keys
from labkit.credit.registry import register

__all__ = ["A3_SIMILAR", "A3_NORMS", "parse_command", "turn_commands", "a3"]

A3_SIMILAR = ("verb", "subchain")
A3_NORMS = ("mean_norm", "mean_std_norm")
START_VERB = "<start>"  # the previous verb of a trajectory's first turn


def parse_command(command: str) -> tuple[str, str]:
    """(verb, argument) of a command string: the first word and the rest, whitespace-normalised
    ("open 3" -> ("open", "3"), "run tests" -> ("run", "tests"), "think" -> ("think", ""))."""
    if not isinstance(command, str):
        raise TypeError(f"command: expected a str, got {type(command).__name__}")
    words = command.split()
    return (words[0], " ".join(words[1:])) if words else ("", "")


def turn_commands(rollouts: Rollouts, commands: Sequence[Sequence[str]] | None = None) -> list[list[str]]:
    """The command of every turn of every trajectory: ``commands`` when given (one string per
    turn), else the text of the turn's positions joined, cut at the first " -> " (the command,
    not the tool's answer), else "action <id>" from the token at the turn's first position."""
    _, present = turn_rewards(rollouts)
    n_turns = present.sum(1).tolist()
    if commands is not None:
        if isinstance(commands, str) or len(commands) != rollouts.batch_size:
            raise ValueError(f"commands: expected one list of command strings per trajectory "
                             f"({rollouts.batch_size})")
        out = []
        for b, (row, n) in enumerate(zip(commands, n_turns)):
            if isinstance(row, str) or len(row) != n:
                raise ValueError(f"commands: trajectory {b} has {n} turns, got {len(row)} commands")
            if not all(isinstance(c, str) for c in row):
                raise TypeError(f"commands: trajectory {b}: every command must be a str")
            out.append(list(row))
        return out
    if rollouts.text is None:
        first, _ = rollouts.view(rollouts.tokens, "turn", "first")
        return [[f"action {int(first[b, k])}" for k in range(n)] for b, n in enumerate(n_turns)]
    ids, mask = rollouts.turn_ids.tolist(), rollouts.mask.tolist()
    out = []
    for b, n in enumerate(n_turns):
        parts: list[list[str]] = [[] for _ in range(n)]
        for t, (k, on) in enumerate(zip(ids[b], mask[b])):
            if on and 0 <= k < n:
                parts[k].append(rollouts.text[b][t])
        out.append(["".join(p).split(" -> ", 1)[0].strip() for p in parts])
    return out


def _pool_mean(values: torch.Tensor, keys: list[Hashable]) -> torch.Tensor:
    """Mean of ``values`` (1-D) over the entries sharing each entry's key."""
    table: dict[Hashable, int] = {}
    ids = torch.tensor([table.setdefault(k, len(table)) for k in keys], dtype=torch.long)
    return group_normalize(values, ids, normalize_std=False, singleton="zero").mean


def _observation_keys(rollouts: Rollouts, n_turns: list[int]) -> list[list[Hashable]]:
    """What the agent saw when each turn began: its anchor key, else its state, else nothing."""
    if rollouts.anchor_keys is not None:
        return turn_anchor_keys(rollouts, "a3")
    if rollouts.states is not None:
        first, _ = rollouts.view(rollouts.states, "turn", "first")
        return [first[b, :n].tolist() for b, n in enumerate(n_turns)]
    return [[None] * n for n in n_turns]


@register("a3", level="turn", needs=("groups",), status="adaptation", paper="2605.08013",
          replaces="shell commands matched through their syntax trees: a turn's command parsed into verb and "
                   "argument (ToolWorld's think / search / run tests / submit / open j / edit j), sub-chains of "
                   "(previous verb, verb); the rollout tree: a task group's episodes merged on their shared "
                   "observed prefix",
          equation=r"A_{i,k} = w_O (s_i - \bar{s}_g) + w_R \left(\bar{R}_{g,(c,x)} - \bar{R}_{g,c}\right) + "
                   r"w_M \left(\bar{s}_{\mathrm{branch}(i,k)} - \bar{s}_{\mathrm{node}(i,k) \setminus "
                   r"\mathrm{branch}(i,k)}\right)",
          symbols="c: the turn's sub-chain (previous verb, verb); x: its argument; R: return-to-go; node(i,k): the "
                  "group's episodes with the same observed history up to turn k; branch: those of them that issued "
                  "the same command at k; w_O = w_R = w_M = 1")
def a3(rollouts: Rollouts, *, similar: str = "subchain", gamma: float = 1.0, norm: str = "mean_norm",
       outcome_weight: float = 1.0, residual_weight: float = 1.0, margin_weight: float = 1.0,
       commands: Sequence[Sequence[str]] | None = None, eps: float = 1e-6) -> Credit:
    """A^3, action advantage assignment for CLI agents (arXiv:2605.08013): structured action credit.

    Inputs:
        rollouts: ``rewards`` (s_i the total), ``group_ids`` (task groups), ``turn_ids``; a turn's
        command from ``text`` (before " -> "; ``commands`` overrides it; without either, the
        turn's first token id); the observation each turn began from, for the rollout tree, from
        ``anchor_keys`` (else ``states``; else the tree is built on commands alone).

    Formula:
        every turn's command parses into (verb v, argument x); its similarity key is
            c_{i,k} = v_{i,k}                      similar = "verb" (same verb, any argument)
                    = (v_{i,k-1}, v_{i,k})         similar = "subchain" (v_{i,-1} = "<start>")
        and its structure is (c_{i,k}, x_{i,k}).
        outcome   O_i      = s_i - mean_g s                     (norm = "mean_norm")
                           = (s_i - mean_g s) / (std_g s + eps)  (norm = "mean_std_norm")
        residual  Res_{i,k} = mean R over the group's turns with structure (c, x)
                              - mean R over the group's turns with key c,
                  R_{i,k} = sum_{j >= k} gamma^{j-k} r_{i,j}    (turn rewards' return-to-go)
        margin    M_{i,k}  = mean s over branch(i,k) - mean s over node(i,k) minus branch(i,k)
                  node(i,k): the group's episodes whose observations at turns 0..k and commands
                  at turns 0..k-1 equal episode i's (a node of the group's rollout tree);
                  branch(i,k): those of them that issued i's command at turn k
        A_{i,k} = outcome_weight * O_i + residual_weight * Res_{i,k} + margin_weight * M_{i,k}

        Every token of turn k takes A_{i,k}; each part is returned (see Returns).

    Defaults:
        similar = "subchain", gamma = 1, norm = "mean_norm" (all three parts in reward units),
        outcome_weight = residual_weight = margin_weight = 1, eps = 1e-6, unbiased std.

    Degenerate input:
        a verb without argument variants (every turn with key c has the same argument) has
        residual 0; a node where every episode issued the same command is no divergence and has
        margin 0, as is a node of one episode; so a group of one episode gets only its outcome
        term, which is its raw score (``grpo``'s singleton rule: mean 0, std 1). A trajectory
        with no generated turn gets 0.

    Deviations from the reference:
        ADAPTATION: the paper matches shell commands through their syntax trees and builds a
        rollout tree by branching; ToolWorld has neither, so a command is its verb and argument
        (ToolWorld's tools), a sub-chain is (previous verb, verb), and the tree is the task
        group's episodes merged on their shared observed prefix (they all start at "start").
        The three parts follow the catalog's description only (the paper and its code are not
        readable here); labkit's choices: the residual compares the mean return of a structure
        with that of its similarity class (not each turn's own return, which would carry its
        episode's luck); the margin is the branch's mean outcome against the pooled other
        branches of the node; weights 1.

    Returns:
        credit at level "turn"; ``info``: ``outcome_term`` (B,), ``residual_term``,
        ``margin_term``, ``returns`` R (B, N), ``divergent`` (B, N) bool (turns at a node with
        two or more branches), ``commands`` (the parsed command strings per turn), and the
        settings ``similar``, ``gamma``, ``norm``, ``outcome_weight``, ``residual_weight`` and
        ``margin_weight``.

    Cost:
        none beyond the sampled batch (the tree is read off the group, nothing is re-run).
    """
    check_choice("similar", similar, A3_SIMILAR)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    check_choice("norm", norm, A3_NORMS)
    weights = {w: check_number(w, v, low=0.0) for w, v in (("outcome_weight", outcome_weight),
                                                           ("residual_weight", residual_weight),
                                                           ("margin_weight", margin_weight))}
    eps = check_number("eps", eps, low=0.0)
    r, present = turn_rewards(rollouts)
    dtype = r.dtype if r.is_floating_point() else torch.float64
    r = r.to(dtype)
    B, N = present.shape
    n_turns = present.sum(1).tolist()
    cmds = turn_commands(rollouts, commands)
    obs = _observation_keys(rollouts, n_turns)
    groups = rollouts.group_ids.tolist()
    scores = rollouts.scores.to(dtype)

    outcome = group_normalize(scores, rollouts.group_ids, eps=eps, normalize_std=norm == "mean_std_norm").normalized

    # residual: the mean return of a structure against the mean return of its similarity class
    R = discounted_returns(r, present, gamma)
    similar_keys, exact_keys = [], []
    for b in range(B):
        prev = START_VERB
        for k in range(n_turns[b]):
            verb, arg = parse_command(cmds[b][k])
            c = verb if similar == "verb" else (prev, verb)
            similar_keys.append((groups[b], c))
            exact_keys.append((groups[b], c, arg))
            prev = verb
    residual = torch.zeros(B, N, dtype=dtype)
    if similar_keys:
        flat = R[present]
        residual[present] = _pool_mean(flat, exact_keys) - _pool_mean(flat, similar_keys)

    # margins: walk each group's episodes down their shared observed prefix (a rollout tree)
    # ids: an edge is (node, command) into the next turn, a node is (edge, what was observed)
    ids: dict[tuple, int] = {}
    nodes = torch.full((B, N), -1, dtype=torch.long)
    for b in range(B):
        edge = ids.setdefault(("root", groups[b]), len(ids))
        for k in range(n_turns[b]):
            node = ids.setdefault(("node", edge, obs[b][k]), len(ids))
            nodes[b, k] = node
            edge = ids.setdefault(("edge", node, cmds[b][k]), len(ids))
    margin = torch.zeros(B, N, dtype=dtype)
    divergent = torch.zeros(B, N, dtype=torch.bool)
    members: dict[int, list[tuple[int, int]]] = {}
    for b in range(B):
        for k in range(n_turns[b]):
            members.setdefault(int(nodes[b, k]), []).append((b, k))
    for turns in members.values():
        branches: dict[str, list[int]] = {}
        for b, k in turns:
            branches.setdefault(cmds[b][k], []).append(b)
        if len(branches) < 2:
            continue  # every episode here did the same: no divergence to read a margin from
        total, count = sum(float(scores[b]) for b, _ in turns), len(turns)
        for b, k in turns:
            mine = branches[cmds[b][k]]
            own = sum(float(scores[j]) for j in mine)
            margin[b, k] = own / len(mine) - (total - own) / (count - len(mine))
            divergent[b, k] = True

    adv = (weights["outcome_weight"] * outcome[:, None] + weights["residual_weight"] * residual
           + weights["margin_weight"] * margin)
    adv = torch.where(present, adv, 0)
    return Credit.from_level(rollouts, adv, "turn", "a3", outcome_term=outcome, residual_term=residual,
                             margin_term=margin, returns=R, divergent=divergent, commands=cmds,
                             similar=similar, gamma=gamma, norm=norm, **weights)
