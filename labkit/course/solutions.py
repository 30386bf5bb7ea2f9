"""Reference solutions to the course's exercises (``labkit.course.exercises``), one per notebook.

Kept apart from the chapters on purpose: try the exercise first, then compare. Each solution is
written the way a reader would write it (a loop where a loop is clearer, the formula next to the
code), not the way the lab's vectorised estimators are; ``check(solution, exercise)`` passes for
every one (tests/test_exercises.py).

    >>> from labkit.course import solutions
    >>> from labkit.course.exercises import check
    >>> check(solutions.grpo_advantage, "01")
"""
from __future__ import annotations

import math

import torch

__all__ = ["reward_to_go", "grpo_advantage", "gae", "vineppo_advantage", "pure_min_form", "turn_returns", "gigpo_step_term",
           "carl_select", "hca_credit", "shapley3", "rank_correlation", "no_gradient_rows", "SOLUTIONS"]


def reward_to_go(rewards, mask, gamma):
    """00 · Reward-to-go (Williams 1992): the credit an outcome reward gives each generated token.

    Formula:
        G_t = r_t + gamma * G_{t'},  t' the next generated position (tool output does not discount);
        G = 0 after the last generated position; 0 off the mask.

    Defaults:
        none: gamma is given.

    Degenerate input:
        a row with nothing generated gets all zeros; gamma = 0 leaves each token its own reward.

    Deviations from the reference:
        none: equal to ``Rollouts.returns(gamma)`` (checked by ``check(reward_to_go, "00")``).

    Cost:
        none beyond the rewards.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    B, T = rewards.shape
    G = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0                      # G after the last generated token
        for t in reversed(range(T)):
            if mask[b, t]:                 # tool output and padding: skipped, no discount step
                running = float(rewards[b, t]) + gamma * running
                G[b, t] = running
    return G


def grpo_advantage(scores, group_ids, eps=1e-6):
    """01 · GRPO advantage (Shao et al. 2024, arXiv 2402.03300): each score against its group's.

    Formula:
        A_i = (s_i - mean_group) / (std_group + eps)      (std unbiased, torch.std's default)

    Defaults:
        eps = 1e-6 (verl's).

    Degenerate input:
        a group of one gets mean 0 and std 1 (its raw score / (1 + eps)); an all-equal group gets 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.grpo`` (checked by ``check(grpo_advantage, "01")``).

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    adv = torch.zeros_like(scores)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        if len(s) == 1:
            mean, std = 0.0, 1.0  # the group-of-one rule
        else:
            mean, std = s.mean(), s.std()  # torch.std is the unbiased one (n - 1)
        adv[members] = (s - mean) / (std + eps)
    return adv


def gae(rewards, values, mask, gamma, lam):
    """02 · GAE's backward loop (Schulman et al. 2016, arXiv 1506.02438): discounted TD errors.

    Formula:
        delta_t = r_t + gamma V_{t'} - V_t,   A_t = delta_t + gamma lam A_{t'}
        t' the next generated position (tool output skipped).

    Defaults:
        none: gamma and lam are arguments.

    Degenerate input:
        V = A = 0 after the last generated token (no bootstrap past the end), so a one-token
        trajectory gets r - V; positions off the mask get 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.gae`` (no whitening).

    Cost:
        none beyond the critic's values.
    """
    B, T = rewards.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        next_value, next_adv = 0.0, 0.0  # nothing after the end: no bootstrap
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue  # tool output / padding: skipped, gets no credit
            delta = rewards[b, t] + gamma * next_value - values[b, t]
            adv[b, t] = delta + gamma * lam * next_adv
            next_value, next_adv = values[b, t], adv[b, t]
    return adv


def vineppo_advantage(vine_outcomes, rewards):
    """03 · VinePPO step advantage (Kazemnejad et al. 2024, arXiv 2410.01679): values from vines.

    Formula:
        V_i = mean outcome of the K vines from the prefix before step i,   A_i = r_i + V_{i+1} - V_i

    Defaults:
        gamma = 1 (the paper's).

    Degenerate input:
        V = 0 after the final step, so a one-step answer gets r - V_0; K = 1 is allowed (noisy).

    Deviations from the reference:
        none: equal to ``labkit.credit.vineppo`` without whitening.

    Cost:
        K continuations per step (already sampled: ``vine_outcomes``).
    """
    V = vine_outcomes.double().mean(dim=1)
    V_next = torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])
    return rewards + V_next - V


def pure_min_form(step_scores, outcome, temperature):
    """04 · PURE min-form returns (Cheng et al. 2025, arXiv 2504.08662): a response is worth its worst step.

    Formula:
        r_s = 2 p_s - 1,   w = softmax(-r / T),   G_s = sum_{s' >= s} w_{s'} r_{s'} + R

    Defaults:
        none: the temperature T is an argument (PURE uses 0.1).

    Degenerate input:
        one step: w = 1; ties in the worst score share the weight; a tiny T needs torch.softmax
        (a plain exp overflows).

    Deviations from the reference:
        one response, so no RLOO baseline: these are ``labkit.credit.pure``'s returns.

    Cost:
        one PRM pass per response (already done: ``step_scores``).
    """
    r = 2 * step_scores.double() - 1
    w = torch.softmax(-r / temperature, dim=0)
    shaped = w * r
    shaped[-1] = shaped[-1] + outcome  # the verifiable reward arrives with the last step
    return shaped.flip(0).cumsum(0).flip(0)  # reverse cumulative sum: from step s to the end


def turn_returns(rewards, turn_ids, gamma):
    """05 · Returns discounted per turn (POAD, Wen et al. 2024, arXiv 2405.15821; Turn-PPO, arXiv 2512.17008).

    Formula:
        r_k = sum of the rewards inside turn k,   G_k = r_k + gamma G_{k+1}

    Defaults:
        none: gamma is an argument.

    Degenerate input:
        G = 0 after the last turn; tool output and padding (turn id -1) carry no reward and no discount.

    Deviations from the reference:
        none: equal to ``labkit.credit.turn_gae`` with V = 0 and lam = 1.

    Cost:
        none beyond the episode.
    """
    n_turns = int(turn_ids.max()) + 1
    r = torch.zeros(n_turns, dtype=torch.float64)
    for t, k in enumerate(turn_ids.tolist()):
        if k >= 0:
            r[k] += rewards[t]
    G = torch.zeros(n_turns, dtype=torch.float64)
    running = 0.0
    for k in reversed(range(n_turns)):
        running = r[k] + gamma * running
        G[k] = running
    return G


def gigpo_step_term(turn_rewards, present, anchors, gamma):
    """06 · GiGPO's step term (Feng et al. 2025, arXiv 2505.10978): a turn against its anchor group.

    Formula:
        R_k = r_k + gamma R_{k+1},   A^S_k = R_k - mean of R over the turns with the same anchor

    Defaults:
        norm = "mean_norm" (no std division), as GiGPO's default.

    Degenerate input:
        an anchor group of one gets 0; absent turns get 0; repeat visits in one episode count.

    Deviations from the reference:
        none: equal to ``labkit.credit.gigpo``'s ``info["step_term"]`` for one task group.

    Cost:
        none beyond the batch.
    """
    B, N = turn_rewards.shape
    R = torch.zeros(B, N, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for k in reversed(range(N)):
            if present[b, k]:
                running = turn_rewards[b, k] + gamma * running
                R[b, k] = running
    groups = {}
    for b in range(B):
        for k in range(N):
            if present[b, k]:
                groups.setdefault(int(anchors[b, k]), []).append((b, k))
    out = torch.zeros(B, N, dtype=torch.float64)
    for members in groups.values():
        if len(members) == 1:
            continue  # nothing to compare with
        mean = sum(R[b, k] for b, k in members) / len(members)
        for b, k in members:
            out[b, k] = R[b, k] - mean
    return out


def carl_select(entropies, present, fraction):
    """07 · CARL's critical-turn selection (Shen et al. 2025, arXiv 2512.04949): the most uncertain turns.

    Formula:
        keep the ceil(fraction * n) present turns with the largest entropy, n = present turns in the batch

    Defaults:
        none: fraction is an argument (CARL's setting in the lab: 0.3).

    Degenerate input:
        at least one turn is kept; ties go to the earlier turn (row-major); padding is never kept.

    Deviations from the reference:
        none: equal to ``labkit.credit.carl``'s ``info["kept"]``.

    Cost:
        none: the entropies come with the sampled batch.
    """
    present = present.bool()
    turns = [(float(entropies[b, k]), b, k) for b, k in present.nonzero().tolist()]  # row-major order
    n_keep = max(1, math.ceil(fraction * len(turns) - 1e-9))  # - 1e-9: 0.3 * 10 is 3.0000000000000004
    turns.sort(key=lambda e: -e[0])  # Python's sort is stable: equal entropies keep row-major order
    keep = torch.zeros_like(present)
    for _, b, k in turns[:n_keep]:
        keep[b, k] = True
    return keep


def hca_credit(pi, h, z):
    """08 · HCA's hindsight ratio (Harutyunyan et al. 2019, arXiv 1912.02503): return-conditioned credit.

    Formula:
        credit_t = (1 - pi(a_t | s_t) / h(a_t | s_t, Z)) * Z

    Defaults:
        none.

    Degenerate input:
        a failed episode (Z = 0) gets 0 on every turn, even where h = 0.

    Deviations from the reference:
        none: equal to ``labkit.credit.hca`` (no ratio clipping).

    Cost:
        none beyond the hindsight model's probabilities.
    """
    if z == 0:
        return torch.zeros(len(pi), dtype=torch.float64)
    return (1 - pi / h) * z


def shapley3(v):
    """09 · Exact Shapley for 3 players (Shapley 1953): each player's average marginal contribution.

    Formula:
        phi_i = sum_{S not containing i} |S|! (n - |S| - 1)! / n! * (v(S + {i}) - v(S))

    Defaults:
        n = 3 players, 0, 1 and 2.

    Degenerate input:
        a null player gets 0; interchangeable players get equal credit; the credits sum to
        v(N) - v(empty) even when v(empty) is not 0.

    Deviations from the reference:
        none: equal to ``labkit.core.games.exact_shapley``.

    Cost:
        all 2^n coalition values (8 here).
    """
    players = [0, 1, 2]
    n = len(players)
    phi = []
    for i in players:
        others = [p for p in players if p != i]
        total = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for S in _subsets_of_size(others, size):
                total += weight * (v[S | {i}] - v[S])
        phi.append(total)
    return torch.tensor(phi, dtype=torch.float64)


def _subsets_of_size(items, size):
    if size == 0:
        return [frozenset()]
    return [frozenset([items[j]]) | rest for j in range(len(items))
            for rest in _subsets_of_size(items[j + 1:], size - 1)]


def rank_correlation(credit, truth, mask):
    """10 · The benchmark's rank correlation (Spearman 1904; the survey's benchmark, arXiv 2604.09459).

    Formula:
        rho = Pearson correlation of the ranks of credit[mask] and truth[mask]

    Defaults:
        tied values share their average rank.

    Degenerate input:
        a constant side (or a single position) ranks nothing: 0.0, not NaN.

    Deviations from the reference:
        none: equal to ``labkit.scoring.rank_correlation``.

    Cost:
        none.
    """
    def ranks(x):
        # average rank: how many are smaller, plus half of the others equal to it
        return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).double()

    a, b = ranks(credit[mask].double()), ranks(truth[mask].double())
    a, b = a - a.mean(), b - b.mean()
    denom = a.norm() * b.norm()
    return 0.0 if float(denom) == 0 else float(a @ b / denom)


#: notebook -> its solution
def no_gradient_rows(scores, group_ids):
    """11 · Trajectories GRPO learns nothing from (Shao et al. 2024, arXiv 2402.03300).

    Formula:
        marked_i = |group(i)| >= 2  and  max_{j in group(i)} s_j == min_{j in group(i)} s_j

    Defaults:
        none.

    Degenerate input:
        a group of one is never marked (GRPO's group-of-one rule gives it its raw score).

    Deviations from the reference:
        none: equal to ``labkit.core.stats.constant_groups`` (checked by ``check(no_gradient_rows, "11")``).

    Cost:
        none beyond the scores.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    group_ids = torch.as_tensor(group_ids)
    marked = torch.zeros(len(scores), dtype=torch.bool)
    for g in torch.unique(group_ids):
        members = group_ids == g
        s = scores[members]
        marked[members] = len(s) >= 2 and bool(s.max() == s.min())  # exactly equal: every advantage is 0
    return marked


SOLUTIONS = {"00": reward_to_go, "01": grpo_advantage, "02": gae, "03": vineppo_advantage, "04": pure_min_form, "05": turn_returns,
             "06": gigpo_step_term, "07": carl_select, "08": hca_credit, "09": shapley3, "10": rank_correlation,
             "11": no_gradient_rows}
