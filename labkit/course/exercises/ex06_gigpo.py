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
