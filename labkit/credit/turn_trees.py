"""Turn-level search trees grown by re-execution: AT2PO's entropy-guided tree and Tree-GRPO's forest.

Both methods build trees whose nodes are whole agent turns (observation, action, tool answer)
and whose leaves are finished episodes, and both credit a turn from the outcomes of the leaves
below it. The lab grows the trees from a sampled ToolWorld batch: every sampled episode is a
chain of nodes; a fork restores the hidden state before some turn of a chain (the simulator's
save-state, ``hidden_states``), lets ``policy`` play on to the end and adds the new episode as a
branch (``labkit.envs.toolworld.branching.play_recorded`` records its turns, so later rounds
may fork from it too). The machinery below (``_Forest``) is shared:

* a *chain* is one finished episode (a leaf); chain c forked at turn f from chain p copies p's
  turns before f and plays its own from f on (the sampled rows are chains with no parent);
* a *node* is a turn of some chain, shared by every chain that copied it: node (o, t) with o the
  chain that played turn t first (``owner``); its leaves are the chains through it.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_choice, check_int, check_number, per_position
from labkit.core.credit import Cost, Credit
from labkit.core.protocols import Env, require
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize
from labkit.core.turns import turn_hidden_states, turn_rewards
from labkit.credit.registry import register

__all__ = ["at2po", "tree_grpo", "AT2PO_ADVANTAGES", "AT2PO_VALUES", "TREE_GRPO_CREDITS"]

AT2PO_ADVANTAGES = ("value", "local", "global", "local_global")
AT2PO_VALUES = ("entropy", "child_mean", "leaf_mean")
TREE_GRPO_CREDITS = ("leaf", "subtree", "difference")


def _entropy_table(policy) -> torch.Tensor:
    """Entropy of the policy's action distribution at every observation, (n_obs,) float64."""
    p = policy.probs().detach().to(torch.float64)
    return -(p * torch.where(p > 0, p.log(), 0.0)).sum(-1)


class _Forest:
    """Every chain of every tree, padded to ``env.max_turns`` turns (C chains).

    ``hidden`` (C, T) hidden state before each played turn (-1 elsewhere), ``rewards`` (C, T),
    ``present`` (C, T), ``tree`` / ``group`` (C,) the chain's tree and task group, ``parent`` /
    ``fork`` (C,) the chain it was forked from (-1 for a sampled row) and the fork turn,
    ``owner`` (C, T) the chain whose turn t this chain's turn t is (node (owner, t)), ``entropy``
    (C, T) the policy's entropy at each played turn's observation."""

    def __init__(self, env, policy, rollouts: Rollouts, hidden_states, tree: torch.Tensor, *, seed: int,
                 entropies: torch.Tensor | None = None):
        require("env", env, Env, "a search tree grows branches by restoring hidden states and playing on")
        if not all(hasattr(env, a) for a in ("kernel", "fixed_after", "expected_reward", "hidden_index")):
            raise ValueError(f"env: tree branches are recorded turn by turn (labkit.envs.toolworld.branching), "
                             f"which needs a ToolWorld, got {type(env).__name__}")
        if policy is None or not hasattr(policy, "probs"):
            raise ValueError("policy: the branches are played by the policy (a labkit policy with probs())")
        env._check_policy(policy)
        hs, present = turn_hidden_states(rollouts, hidden_states, env.n_hidden,
                                         "a search tree restores the hidden state before a turn to fork there")
        B, N = present.shape
        T = env.max_turns
        if N > T:
            raise ValueError(f"rollouts: more turns ({N}) than env.max_turns ({T})")
        r, _ = turn_rewards(rollouts)
        self.env, self.policy, self.T, self.B = env, policy, T, B
        self.h_table = _entropy_table(policy)
        self.hidden = torch.full((B, T), -1, dtype=torch.long)
        self.hidden[:, :N] = torch.where(present, hs, -1)
        self.rewards = torch.zeros(B, T, dtype=torch.float64)
        self.rewards[:, :N] = torch.where(present, r.to(torch.float64), 0.0)
        self.present = self.hidden >= 0
        self.entropy = self._entropy(self.hidden)
        if entropies is not None:
            self.entropy[:, :N] = torch.where(present, entropies, 0.0)
        self.tree = tree.clone()
        _, self.group = torch.unique(rollouts.group_ids, return_inverse=True)
        self.parent = torch.full((B,), -1, dtype=torch.long)
        self.fork = torch.zeros(B, dtype=torch.long)
        self.owner = torch.arange(B)[:, None].expand(B, T).clone()
        self.cost = Cost()
        self.seed = seed
        self.rounds = 0

    def _entropy(self, hidden: torch.Tensor) -> torch.Tensor:
        obs = self.env.decode_hidden(hidden.clamp(min=0))[-1]
        return torch.where(hidden >= 0, self.h_table[obs], 0.0)

    @property
    def n_chains(self) -> int:
        return self.hidden.shape[0]

    def grow(self, parents: torch.Tensor, forks: torch.Tensor) -> None:
        """Fork one new chain from each (parent chain, fork turn): restore the hidden state before
        that turn, draw the turn's action and every later one from the policy."""
        from labkit.envs.toolworld.branching import play_recorded
        n = parents.numel()
        if n == 0:
            return
        h0 = self.hidden[parents, forks]
        state = self.env.decode_hidden(h0)
        hid, rew, steps = play_recorded(self.env, self.policy, *state, forks, seed=self.seed + 7919 * (self.rounds + 1))
        self.rounds += 1
        t = torch.arange(self.T)[None, :]
        before = t < forks[:, None]
        new = torch.arange(self.n_chains, self.n_chains + n)
        hid = torch.where(before, self.hidden[parents], hid)
        self.hidden = torch.cat([self.hidden, hid])
        self.rewards = torch.cat([self.rewards, torch.where(before, self.rewards[parents], rew)])
        self.entropy = torch.cat([self.entropy, torch.where(before, self.entropy[parents], self._entropy(hid))])
        self.present = self.hidden >= 0
        self.owner = torch.cat([self.owner, torch.where(before, self.owner[parents], new[:, None])])
        self.tree = torch.cat([self.tree, self.tree[parents]])
        self.group = torch.cat([self.group, self.group[parents]])
        self.parent = torch.cat([self.parent, parents])
        self.fork = torch.cat([self.fork, forks])
        self.cost = self.cost + Cost(policy_forwards=steps, policy_tokens=steps, env_steps=steps, env_resets=n)

    # ---- the tree's shape
    @property
    def returns(self) -> torch.Tensor:
        """Every chain's (leaf's) outcome: its total reward, (C,)."""
        return self.rewards.sum(1)

    def node_ids(self) -> torch.Tensor:
        """(C, T) flat node id owner * T + t of every played turn (-1 elsewhere)."""
        t = torch.arange(self.T)[None, :]
        return torch.where(self.present, self.owner * self.T + t, -1)

    def terminal(self) -> torch.Tensor:
        """(C, T) the chain's last played turn (a leaf node: nothing is played after it)."""
        nxt = torch.cat([self.present[:, 1:], torch.zeros_like(self.present[:, :1])], 1)
        return self.present & ~nxt

    def parent_ids(self) -> torch.Tensor:
        """(C, T) flat id of the parent of every played turn's node; the root of tree k is C * T + k."""
        ids = self.node_ids()
        root = self.n_chains * self.T + self.tree
        prev = torch.cat([root[:, None], ids[:, :-1]], 1)
        return torch.where(self.present, prev, -1)

    def leaf_mean(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean of the per-chain ``x`` over the leaves below every node, flat (C * T,), and below
        every tree's root, (n_trees,)."""
        ids = self.node_ids()
        keep = ids >= 0
        xx = x[:, None].expand_as(ids)[keep]
        size = self.n_chains * self.T
        tot = torch.zeros(size, dtype=torch.float64).index_add_(0, ids[keep], xx)
        cnt = torch.zeros(size, dtype=torch.float64).index_add_(0, ids[keep], torch.ones_like(xx))
        n_trees = int(self.tree.max()) + 1
        rt = torch.zeros(n_trees, dtype=torch.float64).index_add_(0, self.tree, x)
        rc = torch.zeros(n_trees, dtype=torch.float64).index_add_(0, self.tree, torch.ones_like(x))
        return tot / cnt.clamp(min=1), rt / rc.clamp(min=1)

    def backed_up(self, x: torch.Tensor, weighted: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Node values by backing up the per-chain leaf values ``x`` bottom-up: a leaf node takes
        its chain's x, an inner node the mean of its children's values, weighted by each child's
        policy entropy when ``weighted`` (a plain mean when every child's entropy is 0). Flat
        (C * T,) and per tree root (n_trees,)."""
        ids, pids, term = self.node_ids(), self.parent_ids(), self.terminal()
        C, T = self.n_chains, self.T
        n_trees = int(self.tree.max()) + 1
        V = torch.zeros(C * T + n_trees, dtype=torch.float64)
        for t in range(T - 1, -1, -1):
            here = self.present[:, t]
            if not bool(here.any()):
                continue
            leaf = here & term[:, t]
            V[ids[leaf, t]] = x[leaf]
            # every distinct (node, parent) edge at turn t, once
            edge = torch.unique(torch.stack([ids[here, t], pids[here, t]], 1), dim=0)
            child_ids = edge[:, 0]
            child_chain = child_ids // T
            w = self.entropy[child_chain, t] if weighted else torch.ones(edge.shape[0], dtype=torch.float64)
            size = V.numel()
            num = torch.zeros(size, dtype=torch.float64).index_add_(0, edge[:, 1], w * V[child_ids])
            den = torch.zeros(size, dtype=torch.float64).index_add_(0, edge[:, 1], w)
            plain = torch.zeros(size, dtype=torch.float64).index_add_(0, edge[:, 1], V[child_ids])
            cnt = torch.zeros(size, dtype=torch.float64).index_add_(0, edge[:, 1], torch.ones_like(w))
            par = torch.unique(edge[:, 1])
            V[par] = torch.where(den[par] > 0, num[par] / den[par].clamp(min=1e-300), plain[par] / cnt[par])
        return V[:C * T], V[C * T:]

    def children_counts(self) -> torch.Tensor:
        """Distinct children of every node (flat, C * T) and tree root (appended, n_trees)."""
        ids, pids = self.node_ids(), self.parent_ids()
        keep = ids >= 0
        edge = torch.unique(torch.stack([ids[keep], pids[keep]], 1), dim=0)
        n_trees = int(self.tree.max()) + 1
        return torch.zeros(self.n_chains * self.T + n_trees, dtype=torch.long).index_add_(
            0, edge[:, 1], torch.ones(edge.shape[0], dtype=torch.long))

    def inner_nodes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(chain, turn) of every inner node, each node once (the chain that played it first)."""
        own = self.present & ~self.terminal() & (self.owner == torch.arange(self.n_chains)[:, None])
        c, t = own.nonzero(as_tuple=True)
        return c, t

    def row_turns(self, flat: torch.Tensor, N: int) -> torch.Tensor:
        """A flat per-node quantity read at the sampled rows' own turns, (B, N)."""
        ids = self.node_ids()[:self.B, :N]
        return torch.where(ids >= 0, flat[ids.clamp(min=0)], 0.0)

    def info(self) -> dict:
        return dict(n_chains=self.n_chains, fork_parents=self.parent[self.B:].clone(),
                    fork_turns=self.fork[self.B:].clone(), chain_returns=self.returns, chain_trees=self.tree.clone())


def _turns(rollouts: Rollouts) -> tuple[torch.Tensor, int]:
    _, present = turn_rewards(rollouts)
    return present, present.shape[1]


# --------------------------------------------------------------------------- AT2PO
@register("at2po", level="turn", needs=("entropies",),
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="adaptation",
          replaces="the tree grown online during sampling from an LLM agent's turns: grown after the fact from "
                   "the sampled batch's episodes (the group's M chains), by re-execution from the simulator's saved "
                   "hidden states; the node entropy is the policy's exact entropy at the turn's observation rather "
                   "than the Monte Carlo per-token estimate",
          paper="2601.04767",
          equation=r"V_n = \begin{cases} \hat{r}_n & n \text{ leaf} \\ \sum_{c \in C(n)} "
                   r"\frac{H(c)}{\sum_{c'} H(c')} V_c & \text{otherwise} \end{cases},\quad A_{i,t} = V_{n(i,t)},"
                   r"\quad s(n) = H(n) - \alpha \lvert C(p(n)) \rvert",
          symbols="n(i,t): node of episode i's turn t; leaves: finished episodes, r^ their outcome GRPO-normalised "
                  "over the prompt's tree; H: policy entropy at the node's turn; C(n): children; p(n): parent; "
                  "L = 2 rounds fork a sibling branch at the K = 4 inner nodes of highest s, alpha = 0.1")
def at2po(rollouts: Rollouts, *, env=None, policy=None, hidden_states=None, rounds: int = 2, k: int = 4,
          alpha: float = 0.1, advantage: str = "value", value_rule: str = "entropy", eps: float = 1e-6,
          seed: int = 0) -> Credit:
    """AT2PO (Zong et al. 2026, arXiv:2601.04767): an entropy-guided turn tree, each turn credited with its node's backed-up value.

    Inputs:
        rollouts: ``rewards`` (the outcome), ``turn_ids``, ``group_ids`` (a task group is one
        prompt: its episodes are the tree's first branches), ``entropies`` (the policy's entropy
        at every turn of the sampled episodes), ``mask``.
        ``env`` (env), ``policy`` (policy), ``hidden_states`` (hidden_states): a ToolWorld, the
        policy that sampled the batch and ``rollouts.truth["hidden_states"]``; a branch restores
        the hidden state before a turn and the policy plays on to the end.

    Formula:
        Tree: one per task group, rooted at the prompt; a node is one turn (observation,
        action, tool answer) and a leaf a finished episode. The group's M episodes are the
        first M branches. Entropy-guided expansion, ``rounds`` (L) times: every inner node n of
        the tree gets the score

            s(n) = H(n) - alpha * |children(parent(n))|

        (H(n): the policy's entropy at n's turn; the penalty spreads the forks over the tree),
        and at each of the ``k`` (K) nodes of highest score a new branch is grown beside n: the
        state before n's turn is restored, a fresh action drawn and the episode played on to the
        end (a sibling of n). Leaves: M + L K per tree.

        Turn-wise credit: each leaf's outcome, GRPO-normalised over the tree's leaves,

            r^_l = (R_l - mean_tree R) / (std_tree R + eps),

        is backed up bottom-up: V(leaf) = r^, V(n) = sum_c w_c V(c), w_c = H(c) / sum_c' H(c')
        over n's children (``value_rule="entropy"``, the paper's child-weighted value;
        ``"child_mean"``: w uniform; ``"leaf_mean"``: V(n) = mean r^ of the leaves below n,
        TreeRL's). A turn of a sampled episode takes f(V) of its node n:

            "value" (default):  A = V(n)
            "local":            A = V(n) - V(parent(n))        (n against its sibling branches)
            "global":           A = V(n) - V(root)
            "local_global":     the sum of the two (TreeRL's)

    Defaults:
        rounds (L) = 2, k (K) = 4 (the paper's M = 10, L = 2, K = 6 scaled to a group of 8),
        alpha = 0.1 (ours: the paper's value was not read), advantage = "value" and value_rule =
        "entropy" (the paper's main setting), eps = 1e-6, seed = 0.

    Degenerate input:
        with rounds = 0 no branch is grown (no cost): a turn's node value is the
        entropy-weighted mean of the normalised outcomes below it, and an episode's last turns,
        below any branching, take its own normalised outcome. A tree of one leaf (a group of
        one, unexpanded) normalises it to its raw outcome (the group-of-one rule); an
        all-equal tree gives 0. A node whose children all have entropy 0 takes their plain mean.
        Under "local" a turn with one child (no branch beside its path) gets 0. Ties in the
        score go to a seeded random order. Turns off the mask get 0.

    Deviations from the reference:
        ADAPTATION: the paper grows the tree during sampling; the lab grows it from the
        finished batch (the group's episodes are the tree's initial M chains), restoring the
        simulator's saved hidden state to fork, and only the sampled episodes take credit (the
        branches give values). H(n) is the exact entropy of pi(. | o_t) (from
        ``rollouts.entropies`` on the sampled turns and the policy's table on branch turns),
        the quantity the paper's per-token Monte Carlo estimate (Eq. 2) estimates. One action
        is one token here, so the turn-level importance ratio of ATPO's objective is a training
        choice that does not change credit and is left out. The paper forks a branch "from the
        state" of the selected node; the branching penalty on the parent's children shows the
        new branch is the node's sibling, which the lab follows.

    Returns:
        credit at level "turn"; ``info``: ``node_values`` (B, N) V of every turn's node,
        ``parent_values`` (B, N), ``root_values`` (B,) V of the group's root, ``n_chains`` (leaves in
        all trees), ``fork_parents`` / ``fork_turns`` (the chain and turn each branch was forked
        from), ``chain_returns``, ``chain_trees``, ``advantage``, ``value_rule``.

    Cost:
        every branch: one ``env_resets``, and one ``env_steps``, ``policy_forwards`` and
        ``policy_tokens`` per turn it plays (the shared prefix is not replayed).
    """
    rounds = check_int("rounds", rounds, low=0)
    k = check_int("k", k, low=1)
    alpha = check_number("alpha", alpha, low=0.0)
    check_choice("advantage", advantage, AT2PO_ADVANTAGES)
    check_choice("value_rule", value_rule, AT2PO_VALUES)
    eps = check_number("eps", eps, low=0.0)
    seed = check_int("seed", seed)
    if rollouts.entropies is None:
        raise ValueError("rollouts.entropies: at2po expands the tree at the turns of highest policy entropy")
    present, N = _turns(rollouts)
    # (Rollouts already holds entropies >= 0 up to round-off)
    ent = per_position("rollouts.entropies", rollouts.entropies, rollouts.mask).clamp(min=0.0)
    ent_turn = rollouts.view(ent, "turn", "first")[0]
    _, group = torch.unique(rollouts.group_ids, return_inverse=True)
    forest = _Forest(env, policy, rollouts, hidden_states, group, seed=seed, entropies=ent_turn)
    g = torch.Generator().manual_seed(seed)
    for _ in range(rounds):
        c, t = forest.inner_nodes()
        if c.numel() == 0:
            break
        counts = forest.children_counts()
        pids = forest.parent_ids()[c, t]
        score = forest.entropy[c, t] - alpha * counts[pids].double()
        order = torch.randperm(c.numel(), generator=g)   # seeded tie-break
        picked = []
        for tree in torch.unique(forest.tree[c]).tolist():
            idx = order[forest.tree[c[order]] == tree]
            top = torch.argsort(score[idx], descending=True, stable=True)[:k]
            picked.append(idx[top])
        sel = torch.cat(picked)
        forest.grow(c[sel], t[sel])
    R = forest.returns
    rhat = group_normalize(R, forest.tree, eps=eps).normalized
    if value_rule == "leaf_mean":
        V, V_root = forest.leaf_mean(rhat)
    else:
        V, V_root = forest.backed_up(rhat, weighted=value_rule == "entropy")
    V_all = torch.cat([V, V_root])
    node_v = forest.row_turns(V, N)
    pids = forest.parent_ids()[:forest.B, :N]
    parent_v = torch.where(pids >= 0, V_all[pids.clamp(min=0)], 0.0)
    root_v = V_root[forest.tree[:forest.B]]
    adv = {"value": node_v, "local": node_v - parent_v, "global": node_v - root_v[:, None],
           "local_global": 2 * node_v - parent_v - root_v[:, None]}[advantage]
    adv = torch.where(present, adv, 0.0)
    return Credit.from_level(rollouts, adv, "turn", "at2po", cost=forest.cost, node_values=node_v,
                             parent_values=torch.where(present, parent_v, 0.0), root_values=root_v,
                             advantage=advantage, value_rule=value_rule, **forest.info())


# --------------------------------------------------------------------------- Tree-GRPO
@register("tree_grpo", level="turn",
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="adaptation",
          replaces="trees grown online while sampling an LLM agent's steps: grown after the fact from the sampled "
                   "batch (each sampled episode the first chain of its own tree), by re-execution from the "
                   "simulator's saved hidden states; only the sampled episodes take credit, each turn the mean leaf "
                   "advantage below its node rather than its own leaf's",
          paper="2509.21240",
          equation=r"A_l = \frac{R_l - \operatorname{mean}_{P(l)} R}{\operatorname{std}_{P(l)} R + \epsilon} + "
                   r"\frac{R_l - \operatorname{mean}_{\mathcal{T}(l)} R}{\operatorname{std}_{\mathcal{T}(l)} R + "
                   r"\epsilon},\quad A_{i,t} = \operatorname{mean}_{l \in L(n(i,t))} A_l",
          symbols="l: a leaf (finished episode); P(l): every leaf of every tree of its prompt (inter-tree); T(l): "
                  "the leaves of its own tree (intra-tree); trees: M = group size, each from one sampled episode, "
                  "L = 1 round forking N = 2 chains per tree after uniformly drawn nodes; std unbiased; eps = 1e-6; "
                  "L(n(i,t)): the leaves below the node of episode i's turn t (the reference gives every turn A_i)")
def tree_grpo(rollouts: Rollouts, *, env=None, policy=None, hidden_states=None, rounds: int = 1, n: int = 2,
              credit: str = "subtree", eps: float = 1e-6, seed: int = 0) -> Credit:
    """Tree-GRPO (Ji et al. 2025, arXiv:2509.21240): M agent-step trees per prompt, each leaf's advantage normalised inside its tree and across the prompt's trees.

    Inputs:
        rollouts: ``rewards`` (the outcome), ``turn_ids``, ``group_ids`` (a task group is one
        prompt), ``mask``.
        ``env`` (env), ``policy`` (policy), ``hidden_states`` (hidden_states): a ToolWorld, the
        policy that sampled the batch and ``rollouts.truth["hidden_states"]``; a fork restores
        the hidden state after a node's turn and the policy plays on to the end.

    Formula:
        Trees: a node is one complete agent step (thought, action, tool answer: one ToolWorld
        turn), a leaf a finished episode. Each sampled episode is the first chain of its own
        tree, so a prompt (task group) has M = group size trees. ``rounds`` (L) times, in every
        tree ``n`` (N) nodes are drawn uniformly (with replacement) among the root and the inner
        nodes, and from each a new chain is played on to the end (after the node's turn: the new
        branch is its child; from the root: a fresh episode of the task). Each leaf l with
        outcome R_l gets

            A_l = (R_l - mean_P R) / (std_P R + eps) + (R_l - mean_T(l) R) / (std_T(l) R + eps)

        the inter-tree advantage (P: every leaf of the prompt's M trees) plus the intra-tree one
        (T(l): the leaves of l's tree), each GRPO's. ``credit`` says what a turn t of a sampled
        episode i takes:

            "subtree" (default): the mean A over the leaves below turn t's node (its own
                       and its forks'), a lower-variance reading of the same advantages
            "leaf" (the reference's): A_i on every turn
            "difference": that mean minus the same mean at the parent node (the tree's root
                          for turn 0), a per-node value difference

    Defaults:
        rounds (L) = 1, n (N) = 2 (the reference scripts' l = 1, n = 2; their m = 2 trees per
        prompt are here the group's episodes), credit = "subtree" (ours: on the bench's ToolWorld
        batches it ranks turns closer to the exact advantage than "leaf", which matches GRPO
        there), eps = 1e-6, seed = 0.

    Degenerate input:
        with rounds = 0 (or n = 0) no fork is made (no cost): every tree is one leaf, whose
        intra-tree term is its raw outcome (the group-of-one rule), so A = GRPO's advantage +
        R on every turn (under "subtree" too: a one-leaf tree's nodes have that leaf only); a group of one is also normalised by that rule. An all-equal prompt gives 0. Under
        "difference" a turn whose node has one child gets 0. Turns off the mask get 0.

    Deviations from the reference:
        ADAPTATION: the reference grows its trees while sampling; the lab grows them from the
        finished batch, each sampled episode one tree's first chain, restoring the simulator's
        saved hidden state to fork. The reference samples k leaves per tree afterwards and trains
        on all of them; here every leaf enters the normalisations but only the sampled episodes
        take credit (the bench scores the sampled batch). The default "subtree" and
        "difference" are the lab's per-turn readings of the tree; the reference gives every
        token of a trajectory its leaf's advantage ("leaf").

    Returns:
        credit at level "turn"; ``info``: ``leaf_advantages`` (B,) A_i of the sampled episodes,
        ``subtree_values`` (B, N) the mean A below each turn's node, ``n_chains``,
        ``fork_parents`` / ``fork_turns`` (the chain and the turn each fork restarts at),
        ``chain_returns``, ``chain_trees``, ``credit``.

    Cost:
        every fork: one ``env_resets``, and one ``env_steps``, ``policy_forwards`` and
        ``policy_tokens`` per turn it plays (the shared prefix is not replayed).
    """
    rounds = check_int("rounds", rounds, low=0)
    n = check_int("n", n, low=0)
    check_choice("credit", credit, TREE_GRPO_CREDITS)
    eps = check_number("eps", eps, low=0.0)
    seed = check_int("seed", seed)
    present, N = _turns(rollouts)
    B = rollouts.batch_size
    forest = _Forest(env, policy, rollouts, hidden_states, torch.arange(B), seed=seed)
    g = torch.Generator().manual_seed(seed)
    for _ in range(rounds if n else 0):
        c, t = forest.inner_nodes()
        parents, forks = [], []
        for tree in range(B):
            inside = forest.tree[c] == tree
            cand_c = torch.cat([torch.tensor([tree]), c[inside]])
            # the root: a fresh episode from the tree's start state (fork at turn 0)
            cand_f = torch.cat([torch.zeros(1, dtype=torch.long), t[inside] + 1])
            pick = torch.randint(cand_c.numel(), (n,), generator=g)
            parents.append(cand_c[pick])
            forks.append(cand_f[pick])
        forest.grow(torch.cat(parents), torch.cat(forks))
    R = forest.returns
    A = (group_normalize(R, forest.group, eps=eps).normalized
         + group_normalize(R, forest.tree, eps=eps).normalized)
    sub, sub_root = forest.leaf_mean(A)
    node_v = forest.row_turns(sub, N)
    if credit == "leaf":
        out = A[:B, None].expand(B, N)
    elif credit == "subtree":
        out = node_v
    else:
        pids = forest.parent_ids()[:B, :N]
        allv = torch.cat([sub, sub_root])
        out = node_v - torch.where(pids >= 0, allv[pids.clamp(min=0)], 0.0)
    out = torch.where(present, out, 0.0)
    return Credit.from_level(rollouts, out, "turn", "tree_grpo", cost=forest.cost, leaf_advantages=A[:B].clone(),
                             subtree_values=torch.where(present, node_v, 0.0), credit=credit, **forest.info())
