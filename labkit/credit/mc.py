"""Monte Carlo credit: values measured by sampling continuations ("vines") instead of learned.

Both estimators here need V at the start of every step: the expected final reward of a prefix,
estimated as the mean reward of k fresh continuations of it. That sampler is an explicit
argument, ``value_fn(rollouts, k) -> (V, cost)``, where V is (B, S) — V[b, i] estimates the value
of trajectory b's prefix just before its step i — and cost is a ``Cost`` of the sampling.
The environment or model supplies it: ``BifurcationChain.vine_value_fn`` (re-runs the chain
from a state), ``labkit.envs.tabular.Truth.step_value_fn`` (exact values, zero cost), and later the
tiny LM's forked continuations.
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.core.checks import as_tensor, check_bool, check_choice, check_finite, check_int, check_number, check_shape
from labkit.credit.registry import register
from labkit.core.stats import group_normalize, step_advantage, whiten
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.segments import segment_broadcast, segment_reduce

ValueFn = Callable[[Rollouts, int], tuple[torch.Tensor, Cost]]


def _checked_values(result, where: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, Cost]:
    """A value function's ``(values, cost)``, checked: values of ``where``'s shape, finite where
    asked for (and set to 0 elsewhere), and a ``Cost``; errors name ``value_fn``."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise TypeError("value_fn: must return (values, Cost)")
    values, cost = result
    values = as_tensor("value_fn result", values).to(dtype)
    check_shape("value_fn result", values, tuple(where.shape))
    check_finite("value_fn result", torch.where(where, values, 0))
    if not isinstance(cost, Cost):
        raise TypeError("value_fn: must return (values, Cost)")
    return torch.where(where, values, 0), cost


def _step_values(rollouts: Rollouts, value_fn: ValueFn, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Cost]:
    """Run value_fn; return V at step starts, V after each step (0 past the end), step rewards, cost."""
    if not callable(value_fn):
        raise TypeError("value_fn: expected a callable (rollouts, k) -> (values, cost)")
    k = check_int("k", k, low=1)
    r_step, present = rollouts.view(rollouts.rewards, "step", "sum")
    v_start, cost = _checked_values(value_fn(rollouts, k), present, r_step.dtype)
    # the value after step i is the value before step i + 1; after the last step the episode is over
    v_next = torch.cat([v_start[:, 1:], torch.zeros_like(v_start[:, :1])], dim=1)
    v_next = torch.where(torch.cat([present[:, 1:], torch.zeros_like(present[:, :1])], dim=1), v_next, 0)
    return v_start, v_next, r_step, cost


@register("vineppo", level="step", inputs={"value_fn": "step_vines"}, status="implemented", paper="2410.01679",
          equation=r"A_{i,k} = r_{i,k} + \gamma \hat{V}_{i,k+1} - \hat{V}_{i,k},\quad \hat{V}_{i,k} = \frac{1}{K} "
                   r"\sum_{j=1}^{K} R^{(j)}_{i,k}",
          symbols="k: step; R^(j): reward of j-th of K = 9 continuations from the prefix before step k; V^ = 0 "
                  "after the last step; gamma = 1")
def vineppo(rollouts: Rollouts, *, value_fn: ValueFn, k: int = 9, gamma: float = 1.0,
            whiten_advantages: bool = False) -> Credit:
    """VinePPO (Kazemnejad et al. 2024, arXiv:2410.01679): step credit from Monte Carlo values of prefixes.

    Inputs:
        rollouts: ``rewards``, ``step_ids`` (the steps), ``mask``.
        ``value_fn`` (step_vines): the continuation sampler, ``value_fn(rollouts, k) -> (V, Cost)``
        with V (B, S) the mean reward of k continuations from the prefix before every step (see
        the module docstring).

    Formula:
        V_i = mean reward of k continuations sampled from the prefix before step i,  V_S = 0
        A_i = r_i + gamma * V_{i+1} - V_i         (r_i: reward received inside step i)

        and every token of step i takes A_i. Unbiased values make A_i an unbiased (noisy)
        estimate of the step's true advantage, with no critic to learn.

    Defaults:
        as the paper: k = 9, gamma = 1 (applied per step); whiten_advantages = False.

    Degenerate input:
        a one-step trajectory gets r - V_0; with k = 1 values are single-sample and very noisy
        (the notebook's K slider shows how noisy). Absent steps (padding) get 0. With
        ``whiten_advantages=True`` a batch with one generated token (or all-equal advantages)
        gets 0 everywhere (0 / sqrt(eps)). Groups play no role.

    Deviations from the reference:
        VinePPO whitens advantages over the batch; labkit does only with ``whiten_advantages=True``.

    Returns:
        credit at level "step" (level "token" when whitened); ``info``: ``step_values`` (B, S), the
        V_i estimates, and ``k``.

    Cost:
        whatever ``value_fn`` reports (k continuations per step); an exact value_fn costs nothing.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    v_start, _, r_step, cost = _step_values(rollouts, value_fn, k)
    adv = step_advantage(v_start, r_step, rollouts.view(rollouts.rewards, "step", "sum")[1], gamma=gamma)
    credit = Credit.from_level(rollouts, adv, "step", "vineppo", cost=cost, step_values=v_start, k=k)
    if check_bool("whiten_advantages", whiten_advantages):
        credit = Credit.from_tokens(rollouts, whiten(credit.token, rollouts.mask), "vineppo",
                                    cost=cost, step_values=v_start, k=k)
    return credit


@register("math_shepherd", level="step", inputs={"value_fn": "step_vines"}, status="implemented", paper="2312.08935",
          equation=r"A_{i,k} = r_{i,k} + \hat{V}_{i,k+1},\quad \hat{V}_{i,k+1} = \frac{1}{K} \sum_{j=1}^{K} "
                   "R^{(j)}_{i,k}",
          symbols="k: step; R^(j): reward of j-th of K = 8 continuations after step k; V^ = 0 after the last step; "
                  "mode='hard': 1[A > 0]")
def math_shepherd(rollouts: Rollouts, *, value_fn: ValueFn, k: int = 8, mode: str = "soft") -> Credit:
    """Math-Shepherd step labels (Wang et al. 2024, arXiv:2312.08935), used directly as credit.

    Inputs:
        rollouts: ``rewards``, ``step_ids`` (the steps), ``mask``.
        ``value_fn`` (step_vines): the continuation sampler, as ``vineppo``'s.

    Formula:
        Step i is judged by what happens after it: k continuations are sampled from the prefix
        that ends with step i, and

            soft label_i = fraction of them that reach the right answer  (= r_i + V_{i+1})
            hard label_i = 1 if any of them does, else 0                (the paper's "HE" rule)

        The final step's label is the reward received inside that step (the trajectory's outcome
        when, as in every task of the lab, only the end is rewarded). Labels are probabilities of
        success, not advantages: a correct step of a weak policy can score low.

    Defaults:
        k = 8 continuations per step boundary, mode = "soft".

    Degenerate input:
        A one-step trajectory gets its own outcome as the label (no continuation is sampled
        after the last step). With k = 1 the soft label is a single 0/1 sample. Absent steps
        (padding) get 0. mode = "hard" needs outcome rewards in {0, 1} (it thresholds the
        estimate at > 0, which equals "any continuation succeeded" only for 0/1 rewards) and
        refuses any other reward on a generated position (``rollouts.rewards``).

    Deviations from the reference:
        Math-Shepherd trains a PRM on these labels; the lab skips the PRM and uses the labels
        themselves (what a perfect PRM fit would output).

    Returns:
        credit at level "step" (method "math_shepherd_soft" or "math_shepherd_hard"); ``info``:
        ``k``.

    Cost:
        What ``value_fn`` reports: k continuations per step boundary (``policy_forwards``,
        ``policy_tokens``); an exact value_fn costs nothing.
    """
    check_choice("mode", mode, ("soft", "hard"))
    if mode == "hard":
        r = rollouts.rewards[rollouts.mask]
        bad = r[(r != 0) & (r != 1)]
        if bad.numel():
            raise ValueError(f"rollouts.rewards: math_shepherd mode='hard' needs rewards in {{0, 1}} (success or not), "
                             f"got {sorted(set(bad.tolist()))[:5]}; use mode='soft' or binarise the rewards")
    _, v_next, r_step, cost = _step_values(rollouts, value_fn, k)
    label = r_step + v_next
    if mode == "hard":
        label = (label > 0).to(label.dtype)
    present = rollouts.view(rollouts.rewards, "step", "sum")[1]
    label = torch.where(present, label, 0)
    return Credit.from_level(rollouts, label, "step", f"math_shepherd_{mode}", cost=cost, k=k)


# --------------------------------------------------------------------------- segments and trees
CutValueFn = Callable[[Rollouts, torch.Tensor, int], tuple[torch.Tensor, Cost]]
TreeLeaf = tuple[int, int, list[int], float]
TreeFn = Callable[[Rollouts, int], tuple[list[TreeLeaf], Cost]]
SPO_CUTS = ("prob", "interval")
SPO_CREDIT_ON = ("low_prob", "all")
TEMPO_NODE_VALUES = ("unbiased", "all_leaves")


# SPO thinks in segments, but a segment is not one of the rollouts' own units (steps, turns): its
# cuts are SPO's, and inside a segment only the low-probability tokens take the segment's
# advantage. The credit it returns varies token by token, so its level is "token".
@register("spo", level="token", needs=("logprobs",), inputs={"value_fn": "cut_vines"}, status="implemented",
          paper="2505.23564",
          equation=r"A_t = \mathbf{1}[p_t < \tau] \, A_{j(t)},\quad A_j = r_j + \hat{V}(c_{j+1}) - \hat{V}(c_j)",
          symbols="j(t): segment of token t, starting at cut c_j (every 5th token with p_t < tau = 0.9); V^: mean "
                  "of K = 9 continuations; 0 after the end")
def spo(rollouts: Rollouts, *, value_fn: CutValueFn, k: int = 9, cut: str = "prob", threshold: float = 0.9,
        interval: int = 5, credit_on: str | None = None) -> Credit:
    """SPO-chain (Guo et al. 2025, arXiv:2505.23564): segment credit from Monte Carlo values at cut points.

    Inputs:
        rollouts: ``rewards``, ``mask``, ``logprobs`` (the sampled tokens' probabilities, for
        ``cut="prob"`` or ``credit_on="low_prob"``).
        ``value_fn`` (cut_vines): ``fn(rollouts, cuts, k) -> (values (B, T), Cost)`` with V of
        the prefix before each position where ``cuts`` is True (``ArithmeticLM.cut_value_fn``).

    Formula:
        Cut points (segment starts). ``cut="prob"`` (the paper's rule): the generated tokens
        whose sampled probability p_t = exp(logprob_t) is below ``threshold`` are candidates,
        and every ``interval``-th of them (the 1st, (1+interval)-th, ...) starts a segment, so a
        segment holds ``interval`` low-probability tokens. ``cut="interval"`` (a dial, not the
        paper's): a segment starts every ``interval`` generated tokens (0, interval, ...).
        Tokens before the first cut form a head segment that starts at the response start.

        Values: V(c) = mean reward of k continuations sampled from the prefix that ends just
        BEFORE the cut token c (``value_fn``); the head segment's start is the response start.
        Segment j, from c_j up to the next cut c_{j+1}, gets

            A_j = r_j + V(c_{j+1}) - V(c_j)       (r_j: reward inside the segment; after the
                                                   last segment V = 0, so the last segment
                                                   gets outcome - V(c_last))

        Which tokens take A_j (``credit_on``): "low_prob" (the paper's probability mask) gives
        it only to the segment's tokens with p_t < threshold (the cut token itself and any
        skipped candidates) and 0 to confident tokens, whose gradient would be near zero and
        mostly noise; "all" gives every token of the segment A_j.

    Defaults:
        as SPO-chain on GSM8K: threshold = 0.9, interval = 5 ("int5": a cut every 5th
        low-probability token), k = 9 continuations per cut; ``credit_on`` None means
        "low_prob" with ``cut="prob"`` and "all" with ``cut="interval"``.

    Degenerate input:
        a rollout with no cut point is one segment (the whole response): with "low_prob" it has
        no credited token and gets 0 (as the reference), with "all" every token gets
        outcome - V(response start). A cut on every token (``cut="interval"``, interval = 1,
        or threshold near 1) makes every token its own segment: A_t = r_t + V(t+1) - V(t), a
        per-token VinePPO. A one-token response gets outcome - V(start) when its token is
        credited. Groups play no role. ``cut="prob"`` on rollouts without ``logprobs`` is
        refused.

    Deviations from the reference:
        the reference never samples V at the response start: with its probability mask the head
        segment (before the first low-probability token) has no credited token. labkit samples
        it only when the head has a credited token (``credit_on="all"`` or ``cut="interval"``),
        so the cost equals the reference's in its own setting. Probabilities are those of the
        sampling policy (``rollouts.logprobs``) rather than a separate actor forward pass. No
        advantage whitening or PPO clipping (those belong to the training loop).

    Returns:
        credit at level "token" (it varies inside a segment); ``info``: ``cuts`` (B, T) bool,
        ``segment_ids`` (B, T), ``segment_values`` (B, N) V at each segment start,
        ``segment_valued`` (B, N) whether it was sampled, ``segment_advantages`` (B, N),
        ``credited`` (B, T) bool (tokens that take their segment's A_j), and the settings ``k``,
        ``cut``, ``threshold``, ``interval``, ``credit_on``.

    Cost:
        what ``value_fn`` reports: k continuations per distinct prefix at a cut (plus the
        response start when needed), as ``policy_forwards`` and ``policy_tokens``.
    """
    if not callable(value_fn):
        raise TypeError("value_fn: expected a callable (rollouts, cuts, k) -> (values, cost)")
    k = check_int("k", k, low=1)
    check_choice("cut", cut, SPO_CUTS)
    threshold = check_number("threshold", threshold, low=0.0, high=1.0, low_open=True)
    interval = check_int("interval", interval, low=1)
    if credit_on is None:
        credit_on = "low_prob" if cut == "prob" else "all"
    check_choice("credit_on", credit_on, SPO_CREDIT_ON)
    mask = rollouts.mask
    rank = mask.long().cumsum(1) - 1  # index of each generated token within its response
    needs_probs = cut == "prob" or credit_on == "low_prob"
    if needs_probs and rollouts.logprobs is None:
        raise ValueError(f"rollouts: spo with cut={cut!r}, credit_on={credit_on!r} needs rollouts.logprobs "
                         "(the sampled tokens' log-probabilities)")
    low = mask & (rollouts.logprobs.exp() < threshold) if needs_probs else torch.zeros_like(mask)
    if cut == "prob":
        nth_low = low.long().cumsum(1) - 1
        cuts = low & (nth_low % interval == 0)
    else:
        cuts = mask & (rank % interval == 0)
    credited = low if credit_on == "low_prob" else mask.clone()
    first = mask & (rank == 0)
    seg_ids = torch.where(mask, (cuts | first).long().cumsum(1) - 1, -1)
    # the head segment (before the first cut) is valued only if one of its tokens takes credit
    head = mask & (seg_ids == 0) & ~cuts.long().cumsum(1).bool()
    head_needed = (head & credited).any(1)
    query = cuts | (first & head_needed[:, None])

    values, cost = _checked_values(value_fn(rollouts, query.clone(), k), query, torch.float64)

    N = max(int(seg_ids.max()) + 1, 1)  # at least one column, so an all-empty batch still broadcasts
    v_start, present = segment_reduce(seg_ids, values, "first", n_segments=N)
    valued, _ = segment_reduce(seg_ids, query.double(), "first", n_segments=N)
    valued = valued.bool() & present
    r_seg, _ = segment_reduce(seg_ids, rollouts.rewards.to(torch.float64), "sum", n_segments=N)
    nxt = torch.cat([present[:, 1:], torch.zeros_like(present[:, :1])], 1)
    v_next = torch.where(nxt, torch.cat([v_start[:, 1:], torch.zeros_like(v_start[:, :1])], 1), 0)
    adv = torch.where(valued, r_seg + v_next - v_start, 0)
    token = torch.where(credited, segment_broadcast(seg_ids, adv), 0)
    return Credit.from_tokens(rollouts, token, "spo", cost=cost, cuts=cuts, segment_ids=seg_ids,
                              segment_values=v_start, segment_valued=valued, segment_advantages=adv,
                              credited=credited, k=k, cut=cut, threshold=threshold, interval=interval,
                              credit_on=credit_on)


def _check_leaves(leaves, responses: list[list[int]]) -> list[TreeLeaf]:
    """Validate a tree sampler's extra leaves against the rollouts they hang from."""
    if isinstance(leaves, (str, bytes)) or not hasattr(leaves, "__iter__"):
        raise TypeError("tree_fn: must return (leaves, Cost) with leaves a list of (row, fork_len, response_ids, reward)")
    out = []
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, (tuple, list)) or len(leaf) != 4:
            raise TypeError(f"tree_fn: leaf {i} is not a (row, fork_len, response_ids, reward) tuple")
        row, fork_len, ids, reward = leaf
        row = check_int("tree_fn leaf row", row, low=0, high=len(responses) - 1)
        fork_len = check_int("tree_fn leaf fork_len", fork_len, low=0, high=len(responses[row]))
        ids = [int(t) for t in ids]
        if ids[:fork_len] != responses[row][:fork_len]:
            raise ValueError(f"tree_fn: leaf {i} does not start with the first {fork_len} response tokens of row {row}")
        out.append((row, fork_len, ids, check_number("tree_fn leaf reward", reward)))
    return out


@register("tempo", level="token", needs=("groups",), status="implemented", paper="2509.18314",
          equation=r"A_{i,t} = A^{\text{grpo}}_i + \mathbf{1}\left[|\operatorname{ch}(n_t)| \ge 2\right] "
                   r"\left(V(n_{t+1}) - V(n_t)\right)",
          symbols="n_t: prefix-tree node before token t; ch: its children; V(n): mean outcome of the leaves below "
                  "n; A^grpo: grpo credit")
def tempo(rollouts: Rollouts, *, tree_fn: TreeFn | None = None, branching: int = 4, eps: float = 1e-6,
          normalize_std: bool = True, node_values: str = "unbiased") -> Credit:
    """TEMPO (Tran et al. 2025, arXiv:2509.18314): GRPO plus branch-gated TD credit from a prefix tree.

    Inputs:
        rollouts: ``tokens``, ``mask``, ``rewards`` (the outcome), ``group_ids`` (a group's
        responses share one tree).

    Formula:
        The responses of a group (same prompt), and any extra leaves ``tree_fn`` forks, are
        merged into a token prefix tree (Prefix-to-Tree): a node is a response prefix, a leaf a
        finished response with its outcome. A node's value is the mean outcome of the leaves
        below it (P2T's nonparametric V). For rollout i and its token t, leading from node
        n_t to node n_{t+1},

            A_{i,t} = A_i^GRPO + 1[n_t has >= 2 children] * (V(n_{t+1}) - V(n_t))

        with A_i^GRPO = (s_i - mean) / (std + eps) over the sequences sampled from the prompt
        (the group's rollouts, plus any forks drawn at the response start). Where the tree
        does not branch the TD term is zero and TEMPO is GRPO; at a branching token it is the
        change in success rate that choosing this child made.

        Two ways to get a tree: (a) ``tree_fn=None``: the group's own rollouts (e.g. 8 per
        prompt) and their shared prefixes, no extra sampling; (b) ``tree_fn`` (e.g.
        ``ArithmeticLM.tree_fn``): ``fn(rollouts, branching) -> (leaves, Cost)`` forks
        ``branching`` continuations at fork points of every rollout; a leaf is ``(row,
        fork_len, response_ids, reward)``, its first ``fork_len`` tokens copied from rollout
        ``row``. ``node_values="unbiased"`` (default) averages, at a node of depth d, only the
        leaves below it that were sampled from depth <= d (fork_len <= d): each is then an
        unbiased draw of the node's value, whereas a fork made deeper down was forced through
        the node and follows the rollout's later choices. With (a) every leaf is sampled from
        the prompt and both rules are P2T's mean. ``"all_leaves"`` averages every leaf below.

    Defaults:
        tree_fn = None (mode (a)), branching = 4 forks per fork point (used only with
        ``tree_fn``), eps = 1e-6 and normalize_std = True as GRPO
        (``labkit.credit.episode.grpo``), node_values = "unbiased".

    Degenerate input:
        a group of one without ``tree_fn`` is a single path: no branch, TD = 0, and it gets
        GRPO's group-of-one rule (its raw score; ``labkit.core.stats.group_normalize``). A
        group whose outcomes are all equal gets 0 everywhere (every node has that value). A
        one-token response branches at most at its only token. Identical responses share one
        path. Leaves from ``tree_fn`` that do not start with their rollout's tokens are refused.

    Deviations from the reference:
        the paper builds trees only from a GRPO group (mode (a)); forking explicit trees (mode
        (b)) and the "unbiased" leaf rule for them are labkit's, so that rollouts in groups of
        one get a tree. V averages raw outcomes (the paper's summary describes normalised
        rewards; for 0/1 outcomes this changes only the scale of the TD term relative to the
        GRPO term). No token-level loss weighting or clipping (training-loop choices).

    Returns:
        credit at level "token"; ``info``: ``node_values`` / ``next_values`` (B, T) V(n_t) /
        V(n_{t+1}), ``branch`` (B, T) bool, ``n_children`` (B, T), ``td`` (B, T),
        ``group_advantage`` (B,), ``tree_leaves`` (B,) leaves in each rollout's tree,
        ``branching`` (0 without ``tree_fn``) and ``node_rule`` (the ``node_values`` setting).

    Cost:
        (a): none beyond the sampled batch. (b): what ``tree_fn`` reports (``policy_forwards``
        = forked sequences, ``policy_tokens`` = positions processed).
    """
    if tree_fn is not None and not callable(tree_fn):
        raise TypeError("tree_fn: expected None or a callable (rollouts, branching) -> (leaves, cost)")
    branching = check_int("branching", branching, low=1)
    eps = check_number("eps", eps, low=0.0)
    check_choice("node_values", node_values, TEMPO_NODE_VALUES)
    mask = rollouts.mask
    B, T = mask.shape
    responses = [rollouts.tokens[b][mask[b]].tolist() for b in range(B)]
    scores = rollouts.scores.to(torch.float64)
    extra: list[TreeLeaf] = []
    cost = Cost()
    if tree_fn is not None:
        leaves, cost = tree_fn(rollouts, branching)
        if not isinstance(cost, Cost):
            raise TypeError("tree_fn: must return (leaves, Cost)")
        extra = _check_leaves(leaves, responses)

    # every sequence of the forest: (group, fork_len, ids, outcome); rollouts first
    groups = rollouts.group_ids.tolist()
    seqs = [(groups[b], 0, responses[b], float(scores[b])) for b in range(B)]
    seqs += [(groups[row], f, ids, r) for row, f, ids, r in extra]

    # the trie: node ids from (parent, token); one root per group
    child: dict[tuple[int, int], int] = {}
    roots: dict[int, int] = {}
    total: list[float] = []
    count: list[int] = []
    # children per node, counted as they are created (the distinct next tokens seen after it): no
    # set per node, since a million empty sets are half a gigabyte on a sample of long texts
    kids: list[int] = []

    def new_node() -> int:
        total.append(0.0), count.append(0), kids.append(0)
        return len(total) - 1

    paths = []
    leaves_per_group: dict[int, int] = {}
    for g, f, ids, r in seqs:
        node = roots[g] if g in roots else roots.setdefault(g, new_node())
        path = [node]
        for tok in ids:
            nxt = child.get((node, tok))
            if nxt is None:
                kids[node] += 1
                nxt = child[(node, tok)] = new_node()
            node = nxt
            path.append(node)
        for d, n in enumerate(path):
            if node_values == "all_leaves" or f <= d:
                total[n] += r
                count[n] += 1
        paths.append(path)
        leaves_per_group[g] = leaves_per_group.get(g, 0) + 1

    value = torch.tensor([t / max(c, 1) for t, c in zip(total, count)], dtype=torch.float64)
    n_kids = torch.tensor(kids, dtype=torch.long)
    node_v = torch.zeros(B, T, dtype=torch.float64)
    next_v = torch.zeros(B, T, dtype=torch.float64)
    n_children = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        cols = mask[b].nonzero().flatten()
        path = torch.tensor(paths[b], dtype=torch.long)
        node_v[b, cols] = value[path[:-1]]
        next_v[b, cols] = value[path[1:]]
        n_children[b, cols] = n_kids[path[:-1]]
    branch = mask & (n_children >= 2)
    td = torch.where(branch, next_v - node_v, 0)

    # GRPO over what was sampled from the prompt: the group's rollouts and forks at the response start
    root_vals = [r for (g, f, _, r) in seqs if f == 0]
    root_groups = [g for (g, f, _, _) in seqs if f == 0]
    norm = group_normalize(torch.tensor(root_vals, dtype=torch.float64), torch.tensor(root_groups),
                           eps=eps, normalize_std=normalize_std)
    group_adv = norm.normalized[:B]  # rollouts come first (fork_len 0)
    token = torch.where(mask, group_adv[:, None] + td, 0)
    tree_leaves = torch.tensor([leaves_per_group[g] for g in groups])
    return Credit.from_tokens(rollouts, token, "tempo", cost=cost, node_values=node_v, next_values=next_v,
                              branch=branch, n_children=n_children, td=td, group_advantage=group_adv,
                              tree_leaves=tree_leaves, branching=branching if tree_fn is not None else 0,
                              node_rule=node_values)
