"""Exercise 06 (notebook 06_gigpo): GiGPO's step term, each turn against its anchor-state group.

Graded against ``labkit.credit.group.gigpo``'s ``info["step_term"]`` (norm "mean_norm");
``reveal_solution(6)`` prints the reference solution, ``gigpo_step_term`` in
labkit/course/solutions/ex06_gigpo.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like, nonzero_where_false
from labkit.course.exercises.references import one_token_rollouts, pad_turns, prefix_ids
from labkit.credit import group


def _reference(turn_rewards, present, anchors, gamma):
    present = present.bool()
    keys = [[int(k) for k in anchors[b][present[b]]] for b in range(len(present))]
    r = one_token_rollouts(turn_rewards.to(F64), present, turn_ids=prefix_ids(present), anchor_keys=keys)
    step = group.gigpo(r, gamma=gamma, norm="mean_norm").info["step_term"]
    return pad_turns(step, present.shape, F64)


def _random_anchors(gen, present: torch.Tensor) -> torch.Tensor:
    """Anchor states 0 to 2 for a (B, N) table, every episode starting from state 0, drawn again
    until every anchor group holds two or more present turns (a group of one is an edge case)."""
    while True:
        anchors = torch.randint(0, 3, present.shape, generator=gen)
        anchors[:, 0] = 0  # every episode starts from the same observation
        if all(len(members) > 1 for members in _anchor_groups(present, anchors)):
            return anchors


def _cases(gen):
    cases = []
    for i in range(6):
        present = random_prefix_mask(gen, (2, 4), (3, 5))
        B, N = present.shape
        anchors = _random_anchors(gen, present)
        rewards = torch.zeros(B, N, dtype=F64)
        for b in range(B):
            n = int(present[b].sum())
            rewards[b, :n] = -0.1 * (rand(gen, n) < 0.3)  # an occasional step cost
            rewards[b, n - 1] += float(rand(gen, 1) < 0.5)
        gamma = [0.95, 0.9, 0.8][i % 3]
        cases.append(Case(f"random #{i}", dict(turn_rewards=rewards, present=present, anchors=anchors, gamma=gamma)))
    present = torch.tensor([[True, True, True], [True, True, False]])
    cases += [
        Case("a state visited twice in one episode", dict(turn_rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=F64),
                                                          present=present, anchors=torch.tensor([[0, 1, 0], [0, 1, 0]]), gamma=0.9)),
        # the edges, graded once the cases above pass
        Case("every anchor group a singleton", dict(turn_rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                    present=present, anchors=torch.tensor([[0, 1, 2], [3, 4, 5]]), gamma=0.95),
             frozenset({"singleton"})),
        Case("anchor groups of one beside larger ones", dict(turn_rewards=torch.tensor([[0.0, -0.1, 1.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                             present=present, anchors=torch.tensor([[0, 1, 2], [0, 3, 9]]),
                                                             gamma=0.9), frozenset({"singleton"})),
        Case("equal returns in an anchor group", dict(turn_rewards=torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                      present=present, anchors=torch.tensor([[0, 1, 2], [0, 1, 9]]), gamma=0.9),
             frozenset({"equal"})),
        Case("gamma = 1", dict(turn_rewards=torch.tensor([[0.0, -0.1, 1.0], [-0.1, 1.0, 0.0]], dtype=F64),
                               present=present, anchors=torch.tensor([[0, 1, 1], [0, 1, 7]]), gamma=1.0), frozenset({"gamma1"})),
    ]
    return cases


def _anchor_groups(present: torch.Tensor, anchors: torch.Tensor) -> list[list[tuple[int, int]]]:
    """The (episode, turn) positions of every present turn, grouped by the anchor state it starts from."""
    groups: dict[int, list] = {}
    for b, k in present.bool().nonzero().tolist():
        groups.setdefault(int(anchors[b, k]), []).append((b, k))
    return list(groups.values())


def _variant(how):
    def variant(turn_rewards, present, anchors, gamma):
        present = present.bool()
        r = torch.where(present, turn_rewards.to(F64), 0.0)
        g = 1.0 if how == "undiscounted" else gamma
        R = r.clone()
        if how != "reward":
            for k in range(r.shape[1] - 2, -1, -1):
                R[:, k] = r[:, k] + g * R[:, k + 1]
        out = torch.zeros_like(R)
        for members in _anchor_groups(present, anchors):
            if len(members) < 2:
                continue
            vals = torch.stack([R[b, k] for b, k in members])
            d = vals - vals.mean()
            if how == "std":
                d = d / (vals.std() + 1e-6)
            for (b, k), x in zip(members, d):
                out[b, k] = x
        return out
    return variant


def _singleton_broken(case, got, want):
    groups = _anchor_groups(case.args["present"], case.args["anchors"])
    return any(len(m) == 1 and abs(float(got[m[0]])) > 1e-6 for m in groups)


def _sum_broken(case, got, want):
    groups = _anchor_groups(case.args["present"], case.args["anchors"])
    return any(len(m) > 1 and abs(float(sum(got[b, k] for b, k in m))) > 1e-5 for m in groups)


EXERCISE = register(Exercise(
    notebook="06", name="gigpo_step_term", title="GiGPO's anchor-group step term",
    signature="gigpo_step_term(turn_rewards, present, anchors, gamma) -> tensor (B, N)",
    prompt=(
        "Write GiGPO's step term for the B episodes of ONE task (Feng et al. 2025, arXiv 2505.10978).\n"
        "  turn_rewards: (B, N) float tensor, the reward of each turn;  present: (B, N) bool (turns played)\n"
        "  anchors: (B, N) long tensor, the observation each turn starts from (its anchor state)\n"
        "  gamma: float in [0, 1]\n"
        "Return the (B, N) step terms (GiGPO's default norm, 'mean_norm'):\n"
        "  R_k = r_k + gamma * R_{k+1}  (per episode, R after the last turn = 0)\n"
        "  A^S_k = R_k - mean of R over every present turn (any episode, repeat visits included)\n"
        "          with the same anchor\n"
        "An anchor group of one has nothing to compare with: 0. Absent turns: 0."),
    cases=_cases, reference=_reference,
    rules=(
        Rule("absent turns (padding) must get 0", nonzero_where_false("present")),
        NOT_FINITE,
        Rule("your step terms do not sum to zero within an anchor group: subtract the mean over the turns that "
             "share the anchor state, not over the episode or the batch", _sum_broken),
        Rule("an anchor group of one should get step term 0 (nothing to compare with, verl-agent's convention), "
             "not its raw return", _singleton_broken, frozenset({"singleton"})),
        Rule("compare discounted returns R_k = r_k + gamma * R_{k+1} (from turn k to the end), not the turn's own reward",
             looks_like(_variant("reward")), every=True),
        Rule("discount the returns by gamma once per turn: R_k = r_k + gamma * R_{k+1}",
             looks_like(_variant("undiscounted")), every=True),
        Rule("GiGPO's default step term is mean-normalised only (norm='mean_norm'): do not divide by the std",
             looks_like(_variant("std")), every=True),
    ),
))


# --------------------------------------------------------------------------- 06b: find the bug
def _reference_advantage(turn_rewards, present, anchors, gamma, omega):
    present = present.bool()
    keys = [[int(k) for k in anchors[b][present[b]]] for b in range(len(present))]
    r = one_token_rollouts(turn_rewards.to(F64), present, turn_ids=prefix_ids(present), anchor_keys=keys)
    credit = group.gigpo(r, gamma=gamma, omega=omega, norm="mean_std_norm").token
    return pad_turns(credit, present.shape, F64)


def gigpo_advantage_buggy(turn_rewards, present, anchors, gamma, omega):
    """GiGPO's turn advantage for the B episodes of one task, both terms divided by their std."""
    B, N = turn_rewards.shape
    present = present.bool()
    r = torch.where(present, turn_rewards.double(), 0.0)
    # the return of every turn, discounted once per turn
    R = torch.zeros_like(r)
    running = torch.zeros(B, dtype=torch.float64)
    for k in reversed(range(N)):
        running = r[:, k] + gamma * running
        R[:, k] = running
    # episode term: each episode's score against the task group
    scores = r.sum(1)
    episode = (scores - scores.mean()) / (scores.std() + 1e-6)
    # step term: each turn's return against the turns that start from the same observation
    step = torch.zeros_like(R)
    for key in anchors[present].unique():
        members = present & (anchors == key)
        returns = R[members]
        step[members] = (returns - returns.mean()) / (returns.std() + 1e-6)
    return torch.where(present, episode[:, None] + omega * step, 0.0)


def _advantage_cases(gen):
    cases = []
    for i in range(6):
        present = random_prefix_mask(gen, (3, 5), (3, 5))
        B, N = present.shape
        anchors = torch.randint(0, 4, present.shape, generator=gen)
        anchors[:, 0] = 0  # every episode starts from the same observation
        # a small cost or bonus on every turn and a success on some last turns: returns rarely tie
        rewards = torch.round(0.6 * rand(gen, B, N) - 0.3, decimals=2)
        for b in range(B):
            rewards[b, int(present[b].sum()) - 1] += float(rand(gen, 1) < 0.5)
        rewards = torch.where(present, rewards, 0.0)
        gamma, omega = [0.95, 0.9, 0.8][i % 3], [1.0, 0.5, 2.0][i % 3]
        cases.append(Case(f"random #{i}", dict(turn_rewards=rewards, present=present, anchors=anchors, gamma=gamma,
                                               omega=omega)))
    present = torch.tensor([[True, True, True], [True, True, False], [True, True, True]])
    rewards = torch.tensor([[0.0, -0.1, 1.0], [0.2, 0.0, 0.0], [0.0, 0.3, 0.0]], dtype=F64)
    cases += [
        Case("a turn alone in its anchor group", dict(turn_rewards=rewards, present=present,
                                                      anchors=torch.tensor([[0, 1, 2], [0, 1, 0], [0, 3, 1]]),
                                                      gamma=0.9, omega=1.0)),
        # the edges, graded once the cases above pass
        Case("every anchor group a singleton", dict(turn_rewards=rewards, present=present,
                                                    anchors=torch.tensor([[0, 1, 2], [3, 4, 0], [5, 6, 7]]),
                                                    gamma=0.95, omega=1.0), frozenset({"singleton"})),
        Case("equal returns in an anchor group", dict(turn_rewards=torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0],
                                                                                 [0.0, 0.0, 0.5]], dtype=F64),
                                                      present=present, anchors=torch.tensor([[0, 1, 2], [0, 1, 0], [0, 1, 2]]),
                                                      gamma=0.9, omega=1.0), frozenset({"equal"})),
        Case("equal scores across the task group", dict(turn_rewards=torch.tensor([[0.0, 0.0, 1.0], [0.5, 0.5, 0.0],
                                                                                   [1.0, 0.0, 0.0]], dtype=F64),
                                                        present=present, anchors=torch.tensor([[0, 1, 2], [0, 1, 0], [0, 1, 2]]),
                                                        gamma=0.9, omega=0.5), frozenset({"equal"})),
        Case("omega = 0", dict(turn_rewards=rewards, present=present, anchors=torch.tensor([[0, 1, 2], [0, 1, 0], [0, 1, 1]]),
                               gamma=0.9, omega=0.0), frozenset({"omega0"})),
    ]
    return cases


def _advantage_variant(how):
    """GiGPO's advantage with one known mistake ``how`` (every anchor group of one handled)."""
    def variant(turn_rewards, present, anchors, gamma, omega):
        present = present.bool()
        r = torch.where(present, turn_rewards.to(F64), 0.0)
        R = r.clone()
        for k in range(r.shape[1] - 2, -1, -1):
            R[:, k] = r[:, k] + gamma * R[:, k + 1]
        eps = 0.0 if how == "no_eps" else 1e-6

        def standardise(x):
            if len(x) < 2:
                return torch.zeros_like(x)
            std = x.std(unbiased=how != "biased")
            return (x - x.mean()) / (std + eps)
        scores = r.sum(1)
        episode = scores - scores.mean() if how == "episode_mean_only" else standardise(scores)
        step = torch.zeros_like(R)
        for members in _anchor_groups(present, anchors):
            idx = tuple(torch.tensor(members).T)
            step[idx] = standardise(R[idx])
        w = 1.0 if how == "omega" else omega
        return torch.where(present, episode[:, None] + w * step, 0.0)
    return variant


def _singleton_not_finite(case, got, want):
    groups = _anchor_groups(case.args["present"], case.args["anchors"])
    return any(len(m) == 1 and not bool(torch.isfinite(got[m[0]])) for m in groups)


register(Exercise(
    notebook="06", letter="b", kind="debug", path="deep dive", buggy=gigpo_advantage_buggy,
    name="gigpo_advantage", title="GiGPO's advantage, std-normalised",
    signature="gigpo_advantage(turn_rewards, present, anchors, gamma, omega) -> tensor (B, N)",
    prompt=(
        "Find the bug. This function should compute GiGPO's turn advantage for the B >= 2 episodes of ONE\n"
        "task (Feng et al. 2025, arXiv 2505.10978) with norm 'mean_std_norm', the paper's variant that\n"
        "divides both terms by their std. It has exactly one planted mistake, of the kind people make in\n"
        "real RL code: fix it so the check passes.\n"
        "  turn_rewards: (B, N) float tensor, the reward of each turn;  present: (B, N) bool (turns played)\n"
        "  anchors: (B, N) long tensor, the observation each turn starts from;  gamma, omega: floats\n"
        "What it should return, (B, N), 0 on absent turns:\n"
        "  s_i = sum of episode i's rewards;  A^E_i = (s_i - mean s) / (std s + 1e-6)  (unbiased std)\n"
        "  R_k = r_k + gamma * R_{k+1};  A^S_k = (R_k - mean R) / (std R + 1e-6) over the present turns\n"
        "          with the same anchor (any episode); an anchor group of one gets A^S = 0\n"
        "  A_k = A^E + omega * A^S_k"),
    cases=_advantage_cases, reference=_reference_advantage, tolerance=1e-4,
    rules=(
        Rule("absent turns (padding) must get 0", nonzero_where_false("present")),
        Rule("a turn alone in its anchor group gets NaN: the std of one value is NaN (torch.std divides by n - 1 = 0), "
             "and NaN + 1e-6 is still NaN. Such a group has nothing to compare with: give it step term 0 "
             "(verl-agent's rule), and keep the unbiased std for the other groups", _singleton_not_finite),
        Rule("use the unbiased std (torch.std's default, n - 1): a biased std (unbiased=False / correction=0) changes "
             "every standardised term", looks_like(_advantage_variant("biased"), 1e-4), every=True),
        Rule("with norm 'mean_std_norm' the episode term is divided by the std of the scores too, not only centred",
             looks_like(_advantage_variant("episode_mean_only"), 1e-4), every=True),
        Rule("weight the step term by omega: A = A^E + omega * A^S", looks_like(_advantage_variant("omega"), 1e-4), every=True),
        Rule("divide by (std + 1e-6), not by the std alone: a group whose values are all equal has std 0, and "
             "the 1e-6 turns its 0 / 0 (NaN) into a term of 0", looks_like(_advantage_variant("no_eps"), 1e-4),
             every=True),
        NOT_FINITE,
    ),
))
