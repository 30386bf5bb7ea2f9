"""Exercises of notebook 00_map: 00a, the reward-to-go, the credit every method of the map refines;
00b (find the bug), the returns of a rollout buffer holding episodes back to back; 00c (run and
interpret), a count read off the method inventory at filters the notebook does not print.

00a and 00b are graded against ``Rollouts.returns``, 00c against ``labkit.survey``'s own filter;
``reveal_solution("00a")`` (or "00b", "00c") prints the lab's solution: ``reward_to_go`` and
``buffer_returns`` in labkit/course/solutions/ex00_map.py, 00c's ``measure`` here.
"""
from __future__ import annotations

import torch

from labkit import survey
from labkit.course.exercises.cases import rand, randint, random_gamma, random_prefix_mask
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import OFF_MASK, ZERO_DISCOUNT, looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
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


# --------------------------------------------------------------------------- 00b: find the bug
def _buffer_reference(rewards, dones, gamma):
    """The lab's ``Rollouts.returns`` on the buffer cut into its episodes, one row each."""
    ends = dones.clone()
    ends[-1] = True  # a buffer that stops mid-episode: its last episode ends there (no bootstrap)
    stops = ends.nonzero().flatten().tolist()
    starts = [0] + [s + 1 for s in stops[:-1]]
    T = max(b - a + 1 for a, b in zip(starts, stops))
    rows = torch.zeros(len(stops), T, dtype=F64)
    mask = torch.zeros(len(stops), T, dtype=torch.bool)
    for i, (a, b) in enumerate(zip(starts, stops)):
        rows[i, : b - a + 1] = rewards[a: b + 1]
        mask[i, : b - a + 1] = True
    G = one_token_rollouts(rows, mask).returns(gamma)
    return torch.cat([G[i, : b - a + 1] for i, (a, b) in enumerate(zip(starts, stops))])


def _buffer_cases(gen):
    cases = []
    for i in range(5):
        n = randint(gen, 6, 10)
        dones = rand(gen, n) < 0.3
        dones[-1] = bool(i % 2)  # every other buffer stops mid-episode
        dones[randint(gen, 1, n - 3)] = True  # at least one boundary inside the buffer
        # an outcome on every episode's last step, sometimes a small reward before it
        rewards = torch.where(dones, (rand(gen, n) < 0.6).to(F64), 0.0)
        rewards = torch.where(~dones & (rand(gen, n) < 0.3),
                              torch.round(torch.randn(n, generator=gen, dtype=F64), decimals=1), rewards)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, dones=dones, gamma=random_gamma(gen))))
    cases += [
        Case("two episodes", dict(rewards=torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0], dtype=F64),
                                  dones=torch.tensor([False, True, False, False, True]), gamma=0.5)),
        # the edges, graded once the cases above pass
        Case("one step", dict(rewards=torch.tensor([1.0], dtype=F64), dones=torch.tensor([True]), gamma=0.9),
             frozenset({"single_step"})),
        Case("every step ends an episode", dict(rewards=torch.tensor([1.0, 0.0, 0.5], dtype=F64),
                                                dones=torch.tensor([True, True, True]), gamma=0.9),
             frozenset({"all_done"})),
        Case("gamma = 1", dict(rewards=torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], dtype=F64),
                               dones=torch.tensor([False, False, True, False, False, True]), gamma=1.0),
             frozenset({"gamma1"})),
        Case("gamma = 0", dict(rewards=torch.tensor([0.5, 0.0, 1.0, 0.0], dtype=F64),
                               dones=torch.tensor([False, True, False, True]), gamma=0.0), frozenset({"gamma0"})),
    ]
    return cases


def _buffer_variant(how):
    """Typical mistakes in a buffer's backward loop: each step's return stored before its own
    reward is added (the bug planted in 00b), the episode boundary handled one step late, no
    boundary at all, and each reward discounted once too often."""
    def variant(rewards, dones, gamma):
        out = torch.zeros(len(rewards), dtype=F64)
        running = 0.0
        for t in reversed(range(len(rewards))):
            if dones[t] and how != "reset_late" and how != "no_reset":
                running = 0.0
            if how == "shifted":
                out[t] = running
                running = float(rewards[t]) + gamma * running
                continue
            running = gamma * (float(rewards[t]) + running) if how == "late_discount" else \
                float(rewards[t]) + gamma * running
            out[t] = running
            if dones[t] and how == "reset_late":
                running = 0.0
        return out
    return variant


def buggy_buffer_returns(rewards, dones, gamma):
    """Discounted return of every step of a rollout buffer that holds episodes back to back.

    rewards[t] is the reward of step t, dones[t] is True on the last step of an episode.
    Returns G with G[t] = rewards[t] + gamma * G[t + 1] inside an episode.
    """
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if dones[t]:
            running = 0.0  # the step after t belongs to the next episode
        returns[t] = running
        running = rewards[t] + gamma * running
    return returns


EXERCISE_B = register(Exercise(
    notebook="00", letter="b", kind="debug", path="deep dive",
    name="buffer_returns", title="Returns in a rollout buffer",
    signature="buffer_returns(rewards, dones, gamma) -> tensor (N,)",
    prompt=(
        "Find the bug. The function below should compute the discounted reward-to-go (Williams 1992;\n"
        "the return REINFORCE++, arXiv 2501.03262, starts from) of every step of a rollout buffer\n"
        "that holds several episodes back to back.\n"
        "  rewards: (N,) float tensor; rewards[t] arrives right after step t\n"
        "  dones: (N,) bool tensor, True on the last step of an episode\n"
        "  gamma: float in [0, 1]\n"
        "Inside an episode G_t = r_t + gamma * G_{t+1}; on a step whose done is True, G_t = r_t (nothing\n"
        "flows back from the next episode). A buffer may stop mid-episode: its last step then ends the\n"
        "episode (no bootstrap). The code has exactly one planted mistake, of the kind people make in\n"
        "real RL code; fix it and check."),
    cases=_buffer_cases, reference=_buffer_reference, buggy=buggy_buffer_returns,
    rules=(
        Rule("each step's return must include its own reward: G_t = r_t + gamma * G_{t+1}, and yours is "
             "the return of the step AFTER t",
             looks_like(_buffer_variant("shifted")), every=True),
        Rule("the episode boundary is handled one step late: on a step whose done is True, restart the "
             "running return BEFORE adding that step's reward (the next step belongs to another episode)",
             looks_like(_buffer_variant("reset_late")), every=True),
        Rule("your returns flow across episodes: restart the running return at every done",
             looks_like(_buffer_variant("no_reset")), every=True),
        Rule("each reward is discounted once too often: r_t counts in full at step t (gamma ** 0 = 1), "
             "G_t = r_t + gamma * G_{t+1}", looks_like(_buffer_variant("late_discount")), every=True),
        Rule("when every step ends an episode, each step's return is its own reward", wrong, frozenset({"all_done"})),
        ZERO_DISCOUNT,
    ),
))


# --------------------------------------------------------------------------- 00c: run and interpret
def step_methods_only_mapped():
    """How many step-level methods of the whole inventory the lab only maps (status concept-only):
    the Explore dashboard's count with granularity "step" and status "concept-only"."""
    methods = survey.load_methods()
    return len(survey.filter_methods(methods, granularity="step", status="concept-only"))


def _count(**only):
    return lambda: len(survey.filter_methods(survey.load_methods(), **only))


EXERCISE_C = register(Reading(
    notebook="00", letter="c", name="mapped_only", title="What the lab leaves on the map",
    prompt=(
        "Read it off the inventory (the survey: arXiv 2604.09459). In the Explore dashboard of this\n"
        "notebook (or with survey.filter_methods), set granularity to `step` and status to\n"
        "`concept-only`, leave search, setting and family as they are (empty, any, any), and read how\n"
        "many methods match: the step-level methods of the whole inventory (the survey's 47 and the\n"
        "later additions) that the lab puts on the map but does not build. Enter that count; it must\n"
        "be exact (tolerance 0.5)."),
    measure=step_methods_only_mapped, tolerance=0.5,
    hint="read it again: in the Explore dashboard set granularity `step` and status `concept-only` (search "
         "empty, setting and family on any) and read the total in the chart's title",
    misreadings=(
        Misreading(_count(granularity="step"), "that is every step-level method: set status to `concept-only` too"),
        Misreading(_count(granularity="step", status="implemented"),
                   "that is the step-level methods the lab implements; the question asks for those it only maps "
                   "(status `concept-only`)"),
        Misreading(lambda: len(survey.filter_methods(survey.load_methods(), granularity="step", status="concept-only",
                                                     collection="survey_snapshot")),
                   "that counts the survey's 47 only (the taxonomy chart's default); the Explore dashboard "
                   "searches the whole inventory, later additions included"),
        Misreading(lambda: int(survey.taxonomy_counts(survey.load_methods(), collection="survey_snapshot")
                               .groupby("granularity")["count"].sum()["step"]),
                   "that is the printed number of step-level methods in the survey's 47, any status: filter the "
                   "whole inventory by granularity and status in the Explore dashboard"),
    ),
))
