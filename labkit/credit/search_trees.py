"""Monte Carlo forks, trees and process labels: OmegaPRM's binary search, TreeRL's entropy-forked
tree, APPO's branching score, SCRL's verifiable subproblems and PRIME's implicit process rewards.

The Monte Carlo estimators here fork continuations at positions they choose, through the same
sampler SPO uses (``value_fn(rollouts, cuts, k) -> (values (B, T), Cost)``, input kind
``cut_vines``: V of the prefix that ends just before every marked position, the mean reward of k
continuations; ``ArithmeticLM.cut_value_fn`` and ``BifurcationChain.cut_value_fn`` give one), and
count what it reports. ``labkit.bench.later_inputs`` builds the inputs the benchmark hands them.
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.core.checks import (as_tensor, check_bool, check_choice, check_finite, check_int, check_number,
                                check_shape, per_position, resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize, whiten
from labkit.credit.registry import register

__all__ = ["omegaprm", "treerl", "appo", "scrl", "prime", "subproblem_verdicts", "OMEGAPRM_MODES"]

CutValueFn = Callable[[Rollouts, torch.Tensor, int], tuple[torch.Tensor, Cost]]
OMEGAPRM_MODES = ("soft", "hard")


def _sampler(value_fn) -> CutValueFn:
    if not callable(value_fn):
        raise TypeError("fork_value_fn: expected a callable (rollouts, cuts, k) -> (values (B, T), Cost)")
    return value_fn


def _forked_values(rollouts: Rollouts, value_fn: CutValueFn, cuts: torch.Tensor, k: int) -> tuple[torch.Tensor, Cost]:
    """V before every position ``cuts`` marks (0 elsewhere) and the sampler's cost, checked (errors
    name ``fork_value_fn``); nothing is sampled (and nothing is paid) when no position is marked."""
    cuts = cuts & rollouts.mask
    if not bool(cuts.any()):
        return torch.zeros(cuts.shape, dtype=torch.float64), Cost()
    result = value_fn(rollouts, cuts.clone(), k)
    if not isinstance(result, tuple) or len(result) != 2 or not isinstance(result[1], Cost):
        raise TypeError("fork_value_fn: must return (values (B, T), Cost)")
    values = as_tensor("fork_value_fn result", result[0]).to(torch.float64)
    check_shape("fork_value_fn result", values, tuple(cuts.shape))
    values = torch.where(cuts, values, 0.0)
    check_finite("fork_value_fn result", values)
    return values, result[1]


def _step_starts(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) column of every step's first generated position, and which steps are present."""
    cols = torch.arange(rollouts.horizon).expand_as(rollouts.mask).double()
    first, present = rollouts.view(cols, "step", "first")
    return first.long(), present


def _top_positions(score: torch.Tensor, allowed: torch.Tensor, n: int) -> torch.Tensor:
    """(B, T) bool: the ``n`` allowed positions of every row with the highest score (ties: the
    earlier position)."""
    B, T = score.shape
    out = torch.zeros(B, T, dtype=torch.bool)
    if T == 0:
        return out
    # a tiny position penalty breaks ties towards the earlier position, deterministically
    key = torch.where(allowed, score.double() - 1e-9 * torch.arange(T, dtype=torch.float64), -torch.inf)
    top = key.topk(min(n, T), dim=1).indices
    out.scatter_(1, top, True)
    return out & allowed


# --------------------------------------------------------------------------- OmegaPRM
@register("omegaprm", level="step", inputs={"fork_value_fn": "cut_vines"}, status="implemented", paper="2406.06592",
          equation=r"e_i = \min\{m : \hat{V}(x_{1:m}) = 0\}\ \text{(binary search)},\quad "
                   r"\ell_{i,s} = \hat{V}(x_{1:s+1})\ (s + 1 < e_i),\quad \ell_{i,s} = 0\ (s + 1 \ge e_i)",
          symbols="x_{1:m}: the first m steps; V^: mean reward of K = 8 continuations; e_i: first wrong step "
                  "(1-based), found with about log2(S) probes; soft labels carry the nearest probed value")
def omegaprm(rollouts: Rollouts, *, fork_value_fn: CutValueFn, k: int = 8, mode: str = "soft") -> Credit:
    """OmegaPRM (Luo et al. 2024, arXiv:2406.06592): step labels from a Monte Carlo binary search for the first wrong step.

    Inputs:
        rollouts: ``rewards`` (the outcome), ``step_ids`` (the steps), ``mask``.
        ``fork_value_fn`` (cut_vines): ``fn(rollouts, cuts, k) -> (values (B, T), Cost)``, V of the
        prefix ending just before every marked position (``ArithmeticLM.cut_value_fn``,
        ``BifurcationChain.cut_value_fn``).

    Formula:
        A rollout whose outcome is wrong (score <= 0) has a first wrong step. OmegaPRM finds it
        by binary search over the number m of steps kept: lo = 0 (the question, taken as
        solvable), hi = S (the whole wrong response); while hi - lo > 1, probe m = (lo + hi) // 2:
        V(x_{1:m}) = mean reward of k continuations of the first m steps; if V > 0 some
        continuation still succeeds and the error lies later (lo = m), otherwise it lies in the
        first m steps (hi = m). The first wrong step is e = hi (1-based), found with about
        log2(S) probes instead of the S - 1 a label per step costs (Math-Shepherd).

        Step labels (the value of the prefix that ends with step s, what OmegaPRM trains its PRM
        on), used directly as credit:

            hard: 1 for the steps before e, 0 for step e and every later step
            soft: before e, the Monte Carlo value of the nearest probed prefix that ends with or
                  after step s and still succeeds (the probe at lo, at the latest); 0 from e on

        A rollout with a right answer is not searched (OmegaPRM searches wrong rollouts only):
        every step is labelled with its outcome.

    Defaults:
        k = 8 continuations per probe (the paper's k for Math-Shepherd-style estimates is not
        checked; 8 matches ``math_shepherd`` so that the costs compare), mode = "soft".

    Degenerate input:
        a one-step wrong rollout needs no probe: its only step is the wrong one (label 0). When
        every probe fails the first step is blamed. A rollout with no generated token gets 0.
        Absent steps (padding) get 0. Groups play no role.

    Deviations from the reference:
        OmegaPRM runs the binary search inside a Monte Carlo tree search over many rollouts per
        question (selecting which rollout to search by a UCT-like score on the tree's values)
        and trains a PRM on every probed prefix; the lab searches each rollout of the batch
        once and uses the labels themselves as credit, what a perfect PRM fit would output (as
        ``math_shepherd``). The value of the question itself is not probed (OmegaPRM keeps
        questions that its policy sometimes solves).

    Returns:
        credit at level "step" (method "omegaprm_soft" or "omegaprm_hard"); ``info``:
        ``first_error`` (B,) 0-based step index (-1: not searched), ``probes`` (B,) prefixes
        probed, ``probed_values`` (B, S) the Monte Carlo value of the prefix ending with each
        probed step (NaN-free, 0 where not probed), ``probed`` (B, S) bool, ``k``.

    Cost:
        what ``fork_value_fn`` reports, summed over the search's rounds: k continuations per probe,
        about log2(S) probes per wrong rollout (``policy_forwards``, ``policy_tokens``).
    """
    value_fn = _sampler(fork_value_fn)
    k = check_int("k", k, low=1)
    check_choice("mode", mode, OMEGAPRM_MODES)
    starts, present = _step_starts(rollouts)
    B, S = present.shape
    n_steps = present.sum(1)
    scores = rollouts.scores.to(torch.float64)
    wrong = (scores <= 0) & (n_steps > 0)
    lo = torch.zeros(B, dtype=torch.long)
    hi = n_steps.clone()
    probed_v = torch.zeros(B, S, dtype=torch.float64)
    probed = torch.zeros(B, S, dtype=torch.bool)
    cost = Cost()
    rows = torch.arange(B)
    while True:
        active = wrong & (hi - lo > 1)
        if not bool(active.any()):
            break
        mid = (lo + hi) // 2
        # the prefix of m steps ends just before step m's first token
        cuts = torch.zeros_like(rollouts.mask)
        cuts[rows[active], starts[rows[active], mid[active]]] = True
        values, c = _forked_values(rollouts, value_fn, cuts, k)
        cost = cost + c
        v = values[rows, starts[rows, mid.clamp(max=S - 1)]]
        probed_v[rows[active], mid[active] - 1] = v[active]
        probed[rows[active], mid[active] - 1] = True
        ok = v > 0
        lo = torch.where(active & ok, mid, lo)
        hi = torch.where(active & ~ok, mid, hi)
    first_error = torch.where(wrong, hi - 1, -1)
    step_idx = torch.arange(S)[None, :]
    before = step_idx < first_error[:, None]
    if mode == "hard":
        label = before.to(torch.float64)
    else:
        # nearest probed successful prefix at or after step s: a right-to-left scan
        label = torch.zeros(B, S, dtype=torch.float64)
        carry = torch.zeros(B, dtype=torch.float64)
        for s in range(S - 1, -1, -1):
            hit = probed[:, s] & (probed_v[:, s] > 0)
            carry = torch.where(hit, probed_v[:, s], carry)
            label[:, s] = carry
        label = torch.where(before, label, 0.0)
    label = torch.where(wrong[:, None], label, scores[:, None])
    label = torch.where(present, label, 0.0)
    return Credit.from_level(rollouts, label, "step", f"omegaprm_{mode}", cost=cost, first_error=first_error,
                             probes=probed.sum(1), probed_values=probed_v, probed=probed, k=k)


# --------------------------------------------------------------------------- TreeRL
def _path_tree(rollouts: Rollouts, points: torch.Tensor, fork_v: torch.Tensor, k: int):
    """Every rollout's path through its tree: the segment of each position (between fork points),
    each segment's leaf count and value, its parent's value, and the root value of its group.

    A fork at p copies the response before p and resamples from p on, so the k forks at p sit
    below every segment that ends at or before p and beside the segment that starts at p."""
    mask = rollouts.mask
    B, T = mask.shape
    R = rollouts.scores.to(torch.float64)
    seg = torch.where(mask, points.long().cumsum(1), -1)  # segment j starts at the j-th fork point
    n_points = points.sum(1)
    Nseg = int(n_points.max()) + 1 if B else 1
    # forks below segment j: those at fork points j+1.. (the j-th point's forks are its siblings)
    point_sums = torch.zeros(B, Nseg + 1, dtype=torch.float64)
    for b in range(B):
        cols = points[b].nonzero().flatten()
        point_sums[b, 1:len(cols) + 1] = fork_v[b, cols] * k
    after_sum = point_sums.flip(1).cumsum(1).flip(1)          # sum over points >= j
    j = torch.arange(Nseg)[None, :]
    below_sum = after_sum[:, 1:Nseg + 1]                        # forks at points j+1..
    below_n = (n_points[:, None] - j).clamp(min=0) * k
    leaves = 1 + below_n
    seg_v = (R[:, None] + below_sum) / leaves
    # the root: every sequence sampled from the prompt of the group (rollouts and all their forks)
    total = R + after_sum[:, 1]
    count = 1.0 + n_points.double() * k
    _, inv = torch.unique(rollouts.group_ids, return_inverse=True)
    G = int(inv.max()) + 1 if B else 0
    root_total = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, total)
    root_count = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, count)
    root_v = (root_total / root_count.clamp(min=1))[inv]
    # segment 0 is empty when a fork point sits at the response start: the next segment's parent
    # is then the root
    has0 = (mask & (seg == 0)).any(1)
    parent_v = torch.cat([root_v[:, None], seg_v[:, :-1]], 1)
    if Nseg > 1:
        parent_v[:, 1] = torch.where(has0, parent_v[:, 1], root_v)
    return seg, seg_v, leaves.double(), parent_v, root_v


@register("treerl", level="token", needs=("entropies",), inputs={"fork_value_fn": "cut_vines"}, status="implemented",
          paper="2506.11902",
          equation=r"A_{i,t} = \frac{\left(V(s) - V(\text{root})\right) + \left(V(s) - V(p(s))\right)}"
                   r"{\sqrt{|L(s)|}},\quad s = s(t)",
          symbols="s(t): tree node (segment between fork points) holding token t; forks at the N = 2 "
                  "highest-entropy tokens, T = 2 each; V: mean outcome of the leaves L(s) below s; p(s): parent")
def treerl(rollouts: Rollouts, *, fork_value_fn: CutValueFn, n_points: int = 2, k: int = 2, reweight: bool = True
           ) -> Credit:
    """TreeRL (Hou et al. 2025, arXiv:2506.11902): entropy-guided forks, global plus local advantages from the tree's values.

    Inputs:
        rollouts: ``rewards`` (the outcome), ``mask``, ``entropies`` (where to fork),
        ``group_ids`` (a group shares the tree's root).
        ``fork_value_fn`` (cut_vines): ``fn(rollouts, cuts, k) -> (values (B, T), Cost)``, the mean
        outcome of k continuations forked just before every marked position.

    Formula:
        EPTree, one expansion round: in every rollout the ``n_points`` generated tokens with the
        highest entropy are fork points, and ``k`` continuations are forked at each (the
        response before the token is kept, the uncertain token and all after it resampled). The
        rollout and its forks form a tree; a node is a segment of the rollout between fork
        points, a leaf a finished sequence; the root is the prompt, shared by the group's
        trees. V(node) = mean outcome of the leaves below it, so for segment j of a rollout
        with outcome R and fork means m_{j+1}, ... at the later fork points

            V(s_j) = (R + k * sum_{j' > j} m_{j'}) / (1 + k * (#points after j)),

        the last segment's value is R, and V(root) is the mean over every sequence the group
        sampled (rollouts and forks). Every token of segment s takes

            A = [(V(s) - V(root)) + (V(s) - V(parent(s)))] / sqrt(|L(s)|)

        (global advantage plus local advantage, reweighted by the number of leaves below s so
        that early segments, shared by many leaves, do not dominate).

    Defaults:
        n_points = 2 fork points per rollout, k = 2 continuations per point, one round (small
        settings of ours; the paper tunes its (M, N, L, T)), reweight = True (the 1/sqrt(|L|)
        factor; False drops it).

    Degenerate input:
        a rollout with one generated token has one fork point at most; a segment with no fork
        below it has V = R. With n_points = 0 no fork is made (no cost): a rollout is one
        segment and gets (R - mean of the group's outcomes) twice over (GRPO-like, no std), 0 for a group
        of one. A fork point at the response start leaves segment 0 empty; the next segment
        hangs from the root. Ties in entropy go to the earlier token.

    Deviations from the reference:
        one expansion round (L = 1) from the batch's rollouts only; forks are not forked again,
        and only the rollouts take credit (the forks give values). Forks resample the
        high-entropy token itself; whether the reference keeps that token and forks after it
        was not checked. No advantage whitening or clipping (training-loop choices).

    Returns:
        credit at level "token"; ``info``: ``fork_points`` (B, T) bool, ``fork_values`` (B, T),
        ``segment_ids`` (B, T), ``segment_values`` (B, N), ``leaves`` (B, N), ``root_values``
        (B,), ``n_points``, ``k``.

    Cost:
        what ``fork_value_fn`` reports: k continuations per fork point (``policy_forwards``,
        ``policy_tokens``).
    """
    value_fn = _sampler(fork_value_fn)
    n_points = check_int("n_points", n_points, low=0)
    k = check_int("k", k, low=1)
    reweight = check_bool("reweight", reweight)
    if rollouts.entropies is None:
        raise ValueError("rollouts.entropies: treerl forks at the highest-entropy tokens")
    ent = per_position("rollouts.entropies", rollouts.entropies, rollouts.mask)
    points = _top_positions(ent, rollouts.mask, n_points) if n_points else torch.zeros_like(rollouts.mask)
    fork_v, cost = _forked_values(rollouts, value_fn, points, k)
    seg, seg_v, leaves, parent_v, root_v = _path_tree(rollouts, points, fork_v, k)
    adv = (seg_v - root_v[:, None]) + (seg_v - parent_v)
    if reweight:
        adv = adv / leaves.sqrt()
    token = torch.where(rollouts.mask, adv.gather(1, seg.clamp(min=0)), 0.0)
    return Credit.from_tokens(rollouts, token, "treerl", cost=cost, fork_points=points, fork_values=fork_v,
                              segment_ids=seg, segment_values=seg_v, leaves=leaves, root_values=root_v,
                              n_points=n_points, k=k)


# --------------------------------------------------------------------------- APPO
def _window_mean(x: torch.Tensor, mask: torch.Tensor, w: int, after: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of ``x`` over the (up to) ``w`` generated positions after (or before) each position,
    and how many there were."""
    xs = torch.where(mask, x, 0.0)
    ms = mask.double()
    B, T = x.shape
    total = torch.zeros(B, T, dtype=torch.float64)
    count = torch.zeros(B, T, dtype=torch.float64)
    for d in range(1, w + 1):
        if d >= T:
            break
        if after:
            total[:, :-d] += xs[:, d:]
            count[:, :-d] += ms[:, d:]
        else:
            total[:, d:] += xs[:, :-d]
            count[:, d:] += ms[:, :-d]
    return total / count.clamp(min=1), count


@register("appo", level="token", needs=("entropies", "logprobs"), inputs={"fork_value_fn": "cut_vines"},
          status="adaptation", paper="2606.12384",
          replaces="the agent's tool-call procedures and the paper's rescaling rule (paper not readable here): "
                   "procedures are the spans between fork points of a reasoning response, each advantage divided "
                   "by its branch's outcome spread",
          equation=r"b_t = H_t + \lambda \left(\overline{\log \pi}_{(t, t+w]} - \overline{\log \pi}_{[t-w, t)}\right),"
                   r"\quad A_j = \frac{\hat{V}(c_{j+1}) - \hat{V}(c_j)}{\sqrt{\hat{V}(c_j)(1 - \hat{V}(c_j))} + "
                   r"\epsilon}",
          symbols="c_j: the response start and the N = 2 positions of highest branching score b_t; V^: mean of "
                  "K = 4 forks there, the outcome after the last; w = 4, lambda = 1, eps = 0.1")
def appo(rollouts: Rollouts, *, fork_value_fn: CutValueFn, n_points: int = 2, k: int = 4, window: int = 4,
         weight: float = 1.0, eps: float = 0.1) -> Credit:
    """APPO (arXiv:2606.12384): fork where a branching score is high, advantages rescaled per branched procedure.

    Inputs:
        rollouts: ``rewards`` (the outcome), ``mask``, ``entropies`` and ``logprobs`` (the
        sampling policy's, for the branching score).
        ``fork_value_fn`` (cut_vines): ``fn(rollouts, cuts, k) -> (values (B, T), Cost)``, the mean
        outcome of k continuations forked just before every marked position.

    Formula:
        Branching score of generated token t: its uncertainty plus the rise of the policy's
        likelihood of what follows it,

            b_t = H_t + weight * (mean log pi over the next ``window`` tokens
                                  - mean log pi over the previous ``window`` tokens)

        (a token after which the policy grows confident is a decision point). The ``n_points``
        tokens of highest score (the first token excluded) are fork points c_1 < ... < c_N; with
        the response start c_0 they cut the response into branched procedures j = [c_j,
        c_{j+1}). k continuations forked just before c_j estimate V(c_j); after the last
        procedure V = R, the outcome. Each procedure's advantage is its change of value,
        rescaled by the spread of outcomes at its branch:

            A_j = (V(c_{j+1}) - V(c_j)) / (sqrt(V(c_j) * (1 - V(c_j))) + eps)

        (sqrt(V(1 - V)) is the standard deviation of a 0/1 outcome with success rate V, the
        group-normalisation of the branch's own forks), and every token of procedure j takes A_j.

    Defaults:
        n_points = 2, k = 4, window = 4, weight = 1, eps = 0.1: ours (the paper's values could
        not be read).

    Degenerate input:
        with n_points = 0 (or a one-token response) the whole response is one procedure: A =
        (R - V(start)) / (sqrt(V(start)(1 - V(start))) + eps). A branch whose forks all agree
        (V = 0 or 1) has spread 0 and its procedure's change is scaled by 1 / eps. A position
        with no generated token before (after) it has a before (after) mean of 0. For rewards
        outside [0, 1] the spread term is clamped at 0 (it is the 0/1 outcome's spread).

    Deviations from the reference:
        paper not readable here; follows the catalog's description: "picks where to fork extra
        continuations with a branching score (token uncertainty plus how much the policy's
        likelihood of what follows rises), then rescales advantages per branched procedure".
        The windowed form of the likelihood rise, the procedures as spans between fork points,
        the value-difference advantage and the rescaling by the branch's outcome spread are our
        reading. APPO is an agentic method (procedures inside tool-using turns); the lab runs
        it on reasoning responses.

    Returns:
        credit at level "token"; ``info``: ``branch_scores`` (B, T), ``fork_points`` (B, T)
        bool (c_1..c_N), ``fork_values`` (B, T) V at c_0..c_N, ``procedure_ids`` (B, T),
        ``procedure_advantages`` (B, N + 1), ``n_points``, ``k``.

    Cost:
        what ``fork_value_fn`` reports: k continuations per fork point and at the response start
        (``policy_forwards``, ``policy_tokens``).
    """
    value_fn = _sampler(fork_value_fn)
    n_points = check_int("n_points", n_points, low=0)
    k = check_int("k", k, low=1)
    window = check_int("window", window, low=1)
    weight = check_number("weight", weight)
    eps = check_number("eps", eps, low=0.0, low_open=True)
    mask = rollouts.mask
    if rollouts.entropies is None or rollouts.logprobs is None:
        raise ValueError("rollouts.entropies: appo's branching score needs the sampling policy's entropies and "
                         "log-probabilities (rollouts.entropies, rollouts.logprobs)")
    ent = per_position("rollouts.entropies", rollouts.entropies, mask)
    lp = per_position("rollouts.logprobs", rollouts.logprobs, mask)
    after, _ = _window_mean(lp, mask, window, after=True)
    before, _ = _window_mean(lp, mask, window, after=False)
    score = torch.where(mask, ent + weight * (after - before), 0.0)
    rank = mask.long().cumsum(1) - 1
    first = mask & (rank == 0)
    points = _top_positions(score, mask & ~first, n_points) if n_points else torch.zeros_like(mask)
    cuts = points | first
    values, cost = _forked_values(rollouts, value_fn, cuts, k)
    proc = torch.where(mask, cuts.long().cumsum(1) - 1, -1)
    N = int(proc.max()) + 1 if proc.numel() and int(proc.max()) >= 0 else 1
    v_start = torch.zeros(rollouts.batch_size, N, dtype=torch.float64)
    exists = torch.zeros(rollouts.batch_size, N, dtype=torch.bool)
    for b, t in cuts.nonzero().tolist():
        v_start[b, proc[b, t]] = values[b, t]
        exists[b, proc[b, t]] = True
    R = rollouts.scores.to(torch.float64)
    nxt = torch.cat([v_start[:, 1:], torch.zeros_like(v_start[:, :1])], 1)
    nxt_exists = torch.cat([exists[:, 1:], torch.zeros_like(exists[:, :1])], 1)
    v_next = torch.where(nxt_exists, nxt, R[:, None])
    spread = (v_start * (1 - v_start)).clamp(min=0).sqrt()
    adv = torch.where(exists, (v_next - v_start) / (spread + eps), 0.0)
    token = torch.where(mask, adv.gather(1, proc.clamp(min=0)), 0.0)
    return Credit.from_tokens(rollouts, token, "appo", cost=cost, branch_scores=score, fork_points=points,
                              fork_values=values, procedure_ids=proc, procedure_advantages=adv,
                              n_points=n_points, k=k)


# --------------------------------------------------------------------------- SCRL
@register("scrl", level="step", inputs={"subproblem_scores": "step_verdicts"}, status="adaptation", paper="2605.22074",
          replaces="subproblems built from reference solutions: the arithmetic task's own steps, each an "
                   "intermediate sum checked against the true partial sum; the curriculum is left out",
          equation=r"A_{i,s} = \frac{v_{i,s} - \operatorname{mean}_{j \in g(i)} v_{j,s}}"
                   r"{\operatorname{std}_{j \in g(i)} v_{j,s} + \epsilon}",
          symbols="v_{i,s}: verifier's score of the part of response i answering subproblem s (step s); g(i): "
                  "responses to i's prompt that reach step s; std unbiased; eps = 1e-6")
def scrl(rollouts: Rollouts, *, subproblem_scores=None, normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """SCRL (arXiv:2605.22074): every part of a response that answers a verifiable subproblem gets its own group-normalised score.

    Inputs:
        rollouts: ``step_ids`` (the parts: one per subproblem, the final answer included),
        ``group_ids`` (responses to the same prompt answer the same subproblems), ``mask``.
        ``subproblem_scores`` (step_verdicts): (B, S) scores in [0, 1] of every step as the answer to
        its subproblem, or a callable rollouts -> that (e.g. ``subproblem_verdicts``).

    Formula:
        SCRL turns a reasoning chain's intermediate results into smaller questions with known
        answers. In the arithmetic task each step ``a+b=c`` states one intermediate result (the
        sum of the first s + 2 operands) and the final ``#n`` the answer, so step s is the part
        of the response answering subproblem s, checked by the verifier: v_{i,s} in [0, 1].
        Its score is group-normalised among the group's responses that reach step s:

            A_{i,s} = (v_{i,s} - mean_g v_{., s}) / (std_g v_{., s} + eps)

        and every token of step s takes it.

    Defaults:
        normalize_std = True (GRPO), eps = 1e-6.

    Degenerate input:
        a group of one gets its raw scores (GRPO's group-of-one rule,
        ``labkit.core.stats.group_normalize``); a step every response of the group got right
        (or wrong) gets 0. A step only one response of the group reaches gets its raw score.
        Absent steps get 0.

    Deviations from the reference:
        paper not readable here; follows the catalog's description: "converts reasoning chains
        into verifiable subproblems and assigns normalized advantages to corresponding answer
        spans". The subproblems are the task's own steps (checked against the true partial
        sums) rather than questions built from reference solutions, and SCRL's curriculum over
        subproblems (a training schedule, not credit) is left out. Whether SCRL adds an
        outcome term to the answer span was not read; here the final answer is one more
        subproblem.

    Returns:
        credit at level "step"; ``info``: ``subproblem_scores`` (B, S) the scores used.

    Cost:
        a callable verifier costs one ``aux_calls`` per trajectory; a tensor costs nothing here.
    """
    eps = check_number("eps", eps, low=0.0)
    normalize_std = check_bool("normalize_std", normalize_std)
    _, present = rollouts.view(rollouts.rewards, "step", "sum")
    v, called = resolve_input("subproblem_scores", subproblem_scores, rollouts,
                              expected="(B, S) subproblem scores in [0, 1] or a callable rollouts -> that")
    v = as_tensor("subproblem_scores", v).to(torch.float64)
    check_shape("subproblem_scores", v, tuple(present.shape))
    inside = v[present]
    check_finite("subproblem_scores", inside)
    if bool(((inside < 0) | (inside > 1)).any()):
        raise ValueError("subproblem_scores: must be in [0, 1] (1 = the subproblem answered right)")
    adv = torch.zeros(present.shape, dtype=torch.float64)
    for s in range(present.shape[1]):
        rows = present[:, s]
        if bool(rows.any()):
            adv[rows, s] = group_normalize(v[rows, s], rollouts.group_ids[rows], eps=eps,
                                           normalize_std=normalize_std).normalized
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_level(rollouts, adv, "step", "scrl", cost=cost, subproblem_scores=torch.where(present, v, 0.0))


def subproblem_verdicts(env, rollouts: Rollouts) -> torch.Tensor:
    """The arithmetic task's steps as verifiable subproblems, (B, S) float64: step s (``a+b=c``)
    scores 1 when its result c is the true sum of the first s + 2 operands (the intermediate
    result a reference solution states there), the final ``#n`` 1 when n is the answer; 0
    otherwise. ``env`` is an ``ArithmeticLM`` (its ``grade`` and the rollouts' problems)."""
    problems = env._problems(rollouts)
    _, present = rollouts.view(rollouts.rewards, "step", "sum")
    out = torch.zeros(present.shape, dtype=torch.float64)
    for b, problem in enumerate(problems):
        verdict = env.grade(problem, rollouts.tokens[b][rollouts.mask[b]].tolist())
        ops = problem.operands
        for s, step in enumerate(verdict.steps[:present.shape[1]]):
            if step.kind == "step":
                ok = s + 1 < len(ops) and step.result == sum(ops[:s + 2])
            elif step.kind == "answer":
                ok = step.result == problem.answer
            else:
                ok = False
            out[b, s] = float(ok)
    return torch.where(present, out, 0.0)


# --------------------------------------------------------------------------- PRIME
@register("prime", level="token", inputs={"implicit_rewards": "implicit_step_rewards"}, status="adaptation",
          paper="2502.01456",
          replaces="the implicit PRM updated online on outcome labels: the lab's DPO-tuned copy of the tiny LM, "
                   "trained once offline on verifier preference pairs",
          equation=r"A_{i,t} = \sum_{s \ge t} \gamma^{s-t} \left(r_{i,s} - \frac{1}{n-1} \sum_{j \ne i} "
                   r"\bar{r}_j\right) + \gamma^{|y_i| - t} \left(R_i - \frac{1}{n-1} \sum_{j \ne i} R_j\right)",
          symbols="r_{i,s} = beta log pi_prm(y_s) / pi_ref(y_s): implicit process reward; r-bar_j: its mean over "
                  "response j; R: outcome; n: group size (a group of one: baselines 0, outcome term 0); gamma = 1")
def prime(rollouts: Rollouts, *, implicit_rewards=None, process_weight: float = 1.0, outcome_weight: float = 1.0,
          gamma: float = 1.0, whiten_advantages: bool = False) -> Credit:
    """PRIME (Cui et al. 2025, arXiv:2502.01456): implicit process rewards and outcome rewards, each with a leave-one-out baseline, summed into returns.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``mask``.
        ``implicit_rewards`` (implicit_step_rewards): (B, T) implicit process reward of every
        generated token, r_t = beta * (log pi_prm(y_t | prefix) - log pi_ref(y_t | prefix)), or
        a callable rollouts -> that (``labkit.bench.later_inputs`` builds it from the DPO-tuned copy).

    Formula:
        The implicit PRM is a language model trained as an outcome reward model; its per-token
        log-ratio to the reference is a process reward. PRIME applies RLOO to each reward source
        inside a prompt's group of n responses:

            process:  r~_{i,t} = r_{i,t} - 1/(n-1) * sum_{j != i} mean_t r_{j,t}
            outcome:  o~_i     = R_i - 1/(n-1) * sum_{j != i} R_j      (on the last token)

        and the advantage is the return of the combined rewards (gamma = 1 in the paper):

            A_{i,t} = process_weight * sum_{s >= t} gamma^(s-t) r~_{i,s}
                      + outcome_weight * gamma^(|y_i| - 1 - t) * o~_i

    Defaults:
        process_weight = outcome_weight = 1 (equal weights; the reference's coefficients were
        not checked), gamma = 1, whiten_advantages = False.

    Degenerate input:
        a group of one has no other response: both baselines are 0 (the process term is the
        plain return of r, the outcome term is 0, as the lab's ``rloo``); an all-equal group
        gets outcome term 0. Implicit rewards all 0 (PRM = reference) make PRIME RLOO's
        outcome credit on every token. With ``whiten_advantages=True`` a batch with one
        generated token (or all-equal advantages) gets 0. Positions off the mask get 0.

    Deviations from the reference:
        ADAPTATION: PRIME updates its implicit PRM online on every batch's outcome labels (a
        cross-entropy loss on the summed log-ratio); the lab's implicit PRM is the DPO-tuned
        copy of the tiny LM, trained once offline (``data/implicit_lm``), and the reference
        model is the base LM. The reference code's RLOO on the process reward scales a token's
        reward by n/(n-1) and subtracts every response's mean (its own included) / (n-1), which
        differs from the paper's leave-one-out form by (r_t - mean of its own response) / (n-1);
        labkit follows the paper. The reference whitens the advantages over the batch; labkit
        does only with ``whiten_advantages=True``.

    Returns:
        credit at level "token"; ``info``: ``process_rewards`` (B, T) r~, ``outcome_advantage``
        (B,) o~.

    Cost:
        a callable implicit PRM costs one ``aux_calls`` per trajectory; the forward passes that
        produced a tensor (PRM and reference) are the caller's, which this function cannot see.
    """
    process_weight = check_number("process_weight", process_weight)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    m = rollouts.mask
    r, called = resolve_input("implicit_rewards", implicit_rewards, rollouts,
                              expected="(B, T) implicit process rewards beta * log pi_prm / pi_ref, or a callable "
                                       "rollouts -> that")
    r = per_position("implicit_rewards", r, m)
    length = m.sum(1)
    seq_mean = r.sum(1) / length.clamp(min=1)
    R = rollouts.scores.to(torch.float64)
    _, inv, counts = torch.unique(rollouts.group_ids, return_inverse=True, return_counts=True)
    n = counts[inv].double()
    G = counts.numel()

    def others_mean(x):
        total = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, x)[inv]
        return torch.where(n > 1, (total - x) / (n - 1).clamp(min=1), 0.0)
    proc = torch.where(m, r - others_mean(seq_mean)[:, None], 0.0)
    out = torch.where(n > 1, R - others_mean(R), 0.0)
    # returns over generated positions (tool output inside a response is skipped, not discounted)
    ret = torch.zeros_like(proc)
    run = torch.zeros(m.shape[0], dtype=torch.float64)
    after = torch.zeros(m.shape[0], dtype=torch.float64)  # generated positions after t
    outcome_part = torch.zeros_like(proc)
    for t in range(m.shape[1] - 1, -1, -1):
        here = m[:, t]
        run = torch.where(here, proc[:, t] + gamma * run, run)
        ret[:, t] = run
        outcome_part[:, t] = out * gamma ** after
        after = after + here.double()
    adv = torch.where(m, process_weight * ret + outcome_weight * outcome_part, 0.0)
    if check_bool("whiten_advantages", whiten_advantages):
        adv = whiten(adv, m)
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_tokens(rollouts, adv, "prime", cost=cost, process_rewards=proc, outcome_advantage=out)
