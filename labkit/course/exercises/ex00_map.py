"""Exercise 00 (notebook 00_map): the reward-to-go, the credit every method of the map refines.

Graded against ``Rollouts.returns``; ``reveal_solution(0)`` prints the reference solution,
``reward_to_go`` in labkit/course/solutions/ex00_map.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint, random_gamma, random_prefix_mask
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import OFF_MASK, ZERO_DISCOUNT, looks_like, wrong
from labkit.course.exercises.references import one_token_rollouts


def _reference(rewards, mask, gamma):
    return one_token_rollouts(rewards, mask).returns(gamma)


def _cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (4, 7), tool_output=True)
        B, T = mask.shape
        # an outcome on the last generated token, sometimes an intermediate reward before it
        rewards = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            on = mask[b].nonzero().flatten()
            rewards[b, on[-1]] = float(randint(gen, 0, 1))
            if rand(gen, 1).item() < 0.5:
                rewards[b, on[0]] = round(float(torch.randn(1, generator=gen, dtype=F64)), 1)
        gamma = random_gamma(gen)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, mask=mask, gamma=gamma)))
    m3 = torch.tensor([[True, True, False, True, False, False]])
    r3 = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=F64)
    cases += [
        Case("tool output inside", dict(rewards=r3, mask=m3, gamma=0.5)),
        # the edges, graded once the cases above pass
        Case("single-token trajectory", dict(rewards=torch.tensor([[1.0]], dtype=F64), mask=torch.tensor([[True]]),
                                             gamma=0.9), frozenset({"single_token"})),
        Case("outcome only, gamma = 1", dict(rewards=torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=F64),
                                             mask=torch.tensor([[True, True, True, True]]), gamma=1.0),
             frozenset({"gamma1"})),
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                  mask=torch.tensor([[False, False, False], [True, True, False]]),
                                                  gamma=0.9), frozenset({"empty_row"})),
        Case("gamma = 0", dict(rewards=torch.tensor([[0.5, 0.0, 1.0]], dtype=F64), mask=torch.tensor([[True, True, True]]),
                               gamma=0.0), frozenset({"gamma0"})),
    ]
    return cases


def _variant(how):
    """Typical mistakes: summing the past instead of the future, discounting through tool output,
    counting the reward of t itself one step late."""
    def variant(rewards, mask, gamma):
        B, T = rewards.shape
        out = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            cols = range(T) if how == "forward" else range(T - 1, -1, -1)
            running = 0.0
            for t in cols:
                if how == "per_column":   # every column discounts, tool output included
                    running = float(rewards[b, t]) + gamma * running
                    out[b, t] = running if mask[b, t] else 0.0
                    continue
                if not mask[b, t]:
                    continue
                if how == "exclusive":    # G_t = gamma * G_{t'}: the reward of t itself left out
                    out[b, t] = gamma * running
                    running = float(rewards[b, t]) + gamma * running
                else:                     # "forward": the past, not the future
                    running = float(rewards[b, t]) + gamma * running
                    out[b, t] = running
        return out
    return variant


EXERCISE = register(Exercise(
    notebook="00", name="reward_to_go", title="Reward-to-go, the credit every method refines",
    signature="reward_to_go(rewards, mask, gamma) -> tensor (B, T)",
    prompt=(
        "Write the reward-to-go (Williams 1992), the credit each token gets before any method refines it.\n"
        "(REINFORCE weighs every token by it; REINFORCE++, arXiv 2501.03262, whitens it over the batch.)\n"
        "  rewards: (B, T) float tensor; rewards[b, t] arrives right after token t (an outcome sits on the last token)\n"
        "  mask: (B, T) bool, True where the policy generated the token (False: tool output, padding)\n"
        "  gamma: float in [0, 1]\n"
        "Walk backwards over the generated positions of each row:\n"
        "  G_t = r_t + gamma * G_{t'}\n"
        "t' is the next GENERATED position (tool output in between does not discount); after the last one\n"
        "G = 0. Return G, with 0 off the mask."),
    cases=_cases, reference=_reference,
    rules=(
        OFF_MASK,
        Rule("you summed the rewards BEFORE each token; reward-to-go sums those from t onwards (walk backwards)",
             looks_like(_variant("forward")), every=True),
        Rule("you left out the token's own reward: G_t = r_t + gamma * G_{t'}, and r_t arrives right after token t",
             looks_like(_variant("exclusive")), every=True),
        Rule("tool output is not a step: discount once per GENERATED position (t' skips tool output)",
             looks_like(_variant("per_column")), every=True),
        Rule("with gamma = 1 and only an outcome, every generated token gets the outcome itself",
             wrong, frozenset({"gamma1"})),
        ZERO_DISCOUNT,
    ),
))
