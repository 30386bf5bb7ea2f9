"""Exercises 05a-05c (notebook 05_why_agents_harder): returns discounted once per turn, not per
token (05a); the per-episode mean loss's token weights with a planted mistake to find (05b); how
much of the outcome is luck at a tool noise and horizon the notebook does not print (05c, a reading).

05a is graded against ``labkit.credit.td.turn_gae`` with V = 0 and lam = 1 (its values are then
the turn returns), 05b against the gradient of ``labkit.learn.loop.policy_loss`` (kind "grpo");
``reveal_solution("05a")`` and ``reveal_solution("05b")`` print the reference solutions in
labkit/course/solutions/ex05_why_agents_harder.py. 05c is graded against the lab's own run,
``measure_luck_share`` below.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import ZERO_DISCOUNT, any_of, looks_like, nonzero_where_false, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import td


def _reference(rewards, turn_ids, gamma):
    ids = turn_ids.long()[None]
    mask = ids >= 0
    r = one_token_rollouts(rewards.to(F64)[None], mask, turn_ids=ids)
    n = int(ids.max()) + 1
    return td.turn_gae(r, values=torch.zeros(1, n, dtype=F64), gamma=gamma, lam=1.0).values[0]


def _cases(gen):
    cases = []
    for i in range(6):
        ids = []
        n_turns = randint(gen, 2, 4)
        for k in range(n_turns):
            ids += [k] * randint(gen, 1, 3)
            if k < n_turns - 1 and rand(gen, 1) < 0.7:
                ids += [-1] * randint(gen, 1, 2)  # the tool's answer between two turns
        ids = torch.tensor(ids + [-1] * randint(gen, 0, 2))  # padding
        rewards = torch.where((ids >= 0) & (rand(gen, len(ids)) < 0.4),
                              torch.round(torch.randn(len(ids), generator=gen, dtype=F64), decimals=1), 0.0)
        last = int((ids >= 0).nonzero().max())
        rewards[last] = 1.0
        gamma = round(0.5 + 0.45 * float(rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, turn_ids=ids, gamma=gamma)))
    ids = torch.tensor([0, 0, 0, -1, -1, 1, 1, -1, 2, 2])
    rew = torch.tensor([0.0, -0.1, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0], dtype=F64)
    cases += [
        Case("three turns, tool output between", dict(rewards=rew, turn_ids=ids, gamma=0.9)),
        # the edges, graded once the cases above pass
        Case("one turn", dict(rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64), turn_ids=torch.tensor([0, 0, 0]), gamma=0.9),
             frozenset({"one_turn"})),
        Case("gamma = 0", dict(rewards=rew, turn_ids=ids, gamma=0.0), frozenset({"gamma0"})),
        Case("gamma = 1", dict(rewards=rew, turn_ids=ids, gamma=1.0), frozenset({"gamma1"})),
    ]
    return cases


def _variant(how, where="first"):
    def variant(rewards, turn_ids, gamma):
        ids = turn_ids.long()
        r = rewards.to(F64)
        n = int(ids.max()) + 1
        if how in ("token", "position"):
            keep = ids >= 0 if how == "token" else torch.ones_like(ids, dtype=torch.bool)
            g, out = 0.0, torch.zeros(len(r), dtype=F64)
            for t in range(len(r) - 1, -1, -1):
                if keep[t]:
                    g = float(r[t]) + gamma * g
                    out[t] = g
            pos = [int((ids == k).nonzero().min() if where == "first" else (ids == k).nonzero().max()) for k in range(n)]
            return out[pos]
        per_turn = torch.zeros(n, dtype=F64)
        for k in range(n):
            sel = (ids == k).nonzero().flatten()
            per_turn[k] = r[sel[-1]] if how == "last_only" else r[sel].sum()
        if how == "forward":
            return torch.stack([sum(gamma ** (k - j) * per_turn[j] for j in range(k + 1)) for k in range(n)])
        if how == "absolute":
            return torch.stack([sum(gamma ** j * per_turn[j] for j in range(k, n)) for k in range(n)])
        return torch.stack([sum(gamma ** (j - k) * per_turn[j] for j in range(k, n)) for k in range(n)])
    return variant


EXERCISE = register(Exercise(
    notebook="05", name="turn_returns", title="Returns discounted per turn",
    signature="turn_returns(rewards, turn_ids, gamma) -> tensor (n_turns,)",
    prompt=(
        "Write the return of every turn of one agent episode, discounted once per TURN (the turn-level\n"
        "MDP of POAD, arXiv 2405.15821, and Turn-PPO, arXiv 2512.17008), not once per token.\n"
        "  rewards: (T,) float tensor, the reward after each position\n"
        "  turn_ids: (T,) long tensor, the turn of each generated token (0, 1, 2, ...), -1 for tool output / padding\n"
        "  gamma: float in [0, 1]\n"
        "Return the (n_turns,) returns, n_turns = max(turn_ids) + 1:\n"
        "  r_k = sum of the rewards inside turn k,   G_k = r_k + gamma * G_{k+1},   G after the last turn = 0"),
    cases=_cases, reference=_reference,
    rules=(
        Rule("your values are discounted per token, not per turn: a turn of several tokens is ONE step of the "
             "turn-level MDP and is discounted once",
             any_of(*(looks_like(_variant(h, w)) for h in ("token", "position") for w in ("first", "last"))),
             every=True),
        Rule("a turn's reward is the sum of every reward inside it, not just its last token's",
             looks_like(_variant("last_only")), every=True),
        Rule("a return sums the rewards from turn k to the END, G_k = r_k + gamma * G_{k+1}, not those before it",
             looks_like(_variant("forward")), every=True),
        Rule("discount relative to turn k: gamma^(j - k) for turn j, not gamma^j", looks_like(_variant("absolute")), every=True),
        ZERO_DISCOUNT,
    ),
))


# --------------------------------------------------------------------------- 05b: find the bug in the loss weights
def _weights_reference(advantages, attention_mask, tool_mask):
    from labkit.learn.loop import policy_loss

    mask = attention_mask.bool() & ~tool_mask.bool()
    logp = torch.zeros(advantages.shape, dtype=F64, requires_grad=True)
    # on-policy (ratio 1): the surrogate's gradient in logp is what the loss weights each token by
    loss, _ = policy_loss(logp, logp.detach(), advantages.to(F64), mask, kind="grpo")
    (grad,) = torch.autograd.grad(loss, logp, allow_unused=True)
    return torch.zeros_like(logp) if grad is None else -grad


def _agent_batch(gen, rows, empty_row=None):
    """``rows`` padded episodes: turns of 1 to 3 generated tokens, each but the last followed by 1
    or 2 tokens of tool output, then padding; advantages everywhere (broadcast over the row, tool
    output and padding included), one decimal. ``empty_row``: that episode is padding only."""
    episodes = []
    for b in range(rows):
        kinds = []
        if b != empty_row:
            n_turns = randint(gen, 1, 3)
            for k in range(n_turns):
                kinds += ["gen"] * randint(gen, 1, 3)
                if k < n_turns - 1:
                    kinds += ["tool"] * randint(gen, 1, 2)
        episodes.append(kinds)
    T = max(len(e) for e in episodes) + randint(gen, 0, 2)
    attention = torch.zeros(rows, T, dtype=torch.bool)
    tool = torch.zeros(rows, T, dtype=torch.bool)
    for b, kinds in enumerate(episodes):
        attention[b, :len(kinds)] = True
        tool[b, :len(kinds)] = torch.tensor([k == "tool" for k in kinds], dtype=torch.bool)
    adv = torch.round(torch.randn(rows, T, generator=gen, dtype=F64), decimals=1)
    adv = torch.where(adv == 0, 0.5, adv)
    return adv, attention, tool


def _weights_cases(gen):
    cases = []
    for i in range(6):
        adv, attention, tool = _agent_batch(gen, randint(gen, 2, 4))
        cases.append(Case(f"random #{i}", dict(advantages=adv, attention_mask=attention, tool_mask=tool)))
    attention = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    tool = torch.tensor([[0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]], dtype=F64)
    none = torch.zeros(1, 7, dtype=torch.bool)  # an episode slot that holds padding only
    cases += [
        Case("two episodes, one calls a tool", dict(advantages=adv, attention_mask=attention, tool_mask=tool)),
        # the edges, graded once the cases above pass
        Case("one episode", dict(advantages=adv[:1], attention_mask=attention[:1], tool_mask=tool[:1]),
             frozenset({"one_episode"})),
        Case("an episode with no generated token", dict(
            advantages=torch.cat([adv, adv[:1]]), attention_mask=torch.cat([attention, none]),
            tool_mask=torch.cat([tool, none])), frozenset({"empty"})),
    ]
    adv, attention, tool = _agent_batch(gen, 3, empty_row=1)
    cases.append(Case("a random batch with an empty episode", dict(advantages=adv, attention_mask=attention,
                                                                    tool_mask=tool), frozenset({"empty"})))
    return cases


def _nonzero_on(arg):
    """A rule test: the answer is not 0 somewhere the case's bool argument ``arg`` is True."""
    def broken(case, got, want):
        return bool((got[case.args[arg].bool()].abs() > 1e-12).any())
    return broken


def _weights_variant(how):
    def variant(advantages, attention_mask, tool_mask):
        generated = attention_mask.bool() & ~tool_mask.bool()
        m = generated.to(F64)
        if how == "token_mean":
            return advantages.to(F64) * m / m.sum().clamp(min=1)
        if how == "tool_in_denominator":
            n = attention_mask.to(F64).sum(1, keepdim=True)
        else:  # "padded_length"
            n = torch.full((len(m), 1), float(m.shape[1]), dtype=F64)
        has = m.sum(1) > 0
        return advantages.to(F64) * m / n.clamp(min=1) / has.sum().clamp(min=1)
    return variant


def episode_mean_weights_buggy(advantages, attention_mask, tool_mask):
    """The weight each position's log-probability gets in the per-episode mean policy-gradient
    loss, L = -sum_bt w_bt log pi_bt: A_bt / n_b / (episodes with a token). Returns tensor (B, T)."""
    loss_mask = attention_mask.bool()
    n_tokens = loss_mask.sum(dim=1, keepdim=True)
    n_episodes = (n_tokens > 0).sum()
    weights = advantages * loss_mask / n_tokens.clamp(min=1)
    return weights / n_episodes.clamp(min=1)


WEIGHTS_EXERCISE = register(Exercise(
    notebook="05", letter="b", kind="debug", path="deep dive", buggy=episode_mean_weights_buggy,
    name="episode_mean_weights", title="The per-episode mean's token weights",
    signature="episode_mean_weights(advantages, attention_mask, tool_mask) -> tensor (B, T)",
    prompt=(
        "Find the bug in the token weights of the per-episode mean policy-gradient loss (GRPO's loss,\n"
        "Shao et al. 2024, arXiv 2402.03300; the loss the echo-trap section follows into the safe loop),\n"
        "for a batch of agent episodes. It has exactly one planted mistake, of the kind people make in\n"
        "real RL code. What it should compute:\n"
        "  advantages: (B, T) float, each position's advantage (broadcast over the whole row)\n"
        "  attention_mask: (B, T) bool, True on every real position (agent's tokens, tool output), False on padding\n"
        "  tool_mask: (B, T) bool, True on the tokens a tool returned (the agent did not write them)\n"
        "The loss is L = -(1/B') sum_b (1/n_b) sum_t A_bt log pi_bt over the agent's generated tokens\n"
        "t of episode b, n_b of them, and B' episodes that have at least one. Return the (B, T) weight\n"
        "w_bt = -dL/dlog pi_bt:\n"
        "  w_bt = A_bt / (n_b B') on a generated token, 0 on tool output and padding"),
    cases=_weights_cases, reference=_weights_reference,
    rules=(
        Rule("tool output is in your loss: its tokens got a weight, so the agent would be trained to write "
             "what the tool wrote. The agent's tokens are attention_mask AND NOT tool_mask",
             _nonzero_on("tool_mask")),
        Rule("padding got a weight: only real positions (attention_mask True) can be the agent's tokens",
             nonzero_where_false("attention_mask")),
        Rule("that is the token mean (PPO-clip's loss): the per-episode mean divides each episode by its own "
             "n_b, then averages over the episodes", looks_like(_weights_variant("token_mean")), every=True),
        Rule("n_b counts the episode's generated tokens only: tool output and padding are not in the "
             "denominator", any_of(looks_like(_weights_variant("tool_in_denominator")),
                                   looks_like(_weights_variant("padded_length"))), every=True),
        Rule("an episode with no generated token adds nothing and does not count: B' is the number of episodes "
             "with at least one generated token (and 0 / 0 must not reach the answer)", wrong, frozenset({"empty"})),
    ),
))


# --------------------------------------------------------------------------- 05c: a reading off the dashboard
def measure_luck_share(noise=0.35, max_turns=15):
    """The share of the outcome variance that is luck, as the noise-and-horizon dashboard shows it
    at tool noise 0.35 and 15 turns: one seeded batch of 8 tasks x 8 episodes of the half-trained
    agent, split exactly into skill and luck."""
    from labkit.course.presets import noisy_world
    from labkit.scoring import luck_share

    world = noisy_world(noise=noise, max_turns=max_turns)
    agent = world.scripted_policy(3.0)
    episodes = world.sample(agent, 8, group_size=8, seed=0)
    skill, luck = world.truth(agent).skill_luck(episodes)
    return luck_share(skill, luck)


def _dashboard(noise, max_turns, what):
    """A zero-argument function: another number of the dashboard's line (J, or GRPO's correlation
    with the exact advantage) at tool noise ``noise`` and ``max_turns`` turns."""
    def value():
        from labkit.course.presets import noisy_world
        from labkit.credit import get_estimator
        from labkit.scoring import pearson

        world = noisy_world(noise=noise, max_turns=max_turns)
        agent = world.scripted_policy(3.0)
        if what == "J":
            return world.truth(agent).J
        episodes = world.sample(agent, 8, group_size=8, seed=0)
        skill, _ = world.truth(agent).skill_luck(episodes)
        m = episodes.mask
        return pearson(get_estimator("grpo")(episodes).token[m], skill[m])
    return value


LUCK_READING = register(Reading(
    notebook="05", letter="c", name="luck_share_035", title="How much is luck at noise 0.35",
    prompt=(
        "How much of an agent's outcome is luck when its tools mislead more often but its episodes are\n"
        "short? (The survey, arXiv 2604.09459, section 4, lists stochastic tools among what makes agentic\n"
        "credit hard.) On the noise-and-horizon dashboard set tool noise = 0.35 and turns = 15, and read\n"
        "the luck share of outcome variance off the line under the charts. Enter it as a number;\n"
        "tolerance 0.005."),
    measure=measure_luck_share,
    tolerance=0.005,
    hint="read the luck share of outcome variance at tool noise 0.35 and 15 turns (both sliders moved)",
    misreadings=(
        Misreading(lambda: measure_luck_share(0.2, 30), "that is the dashboard where it starts (tool noise 0.2, "
                                                        "30 turns): move both sliders"),
        Misreading(lambda: measure_luck_share(0.35, 30), "that is tool noise 0.35 at 30 turns: set turns to 15 too"),
        Misreading(lambda: measure_luck_share(0.2, 15),
                   "that is 15 turns at tool noise 0.2: set tool noise to 0.35 too"),
        Misreading(lambda: 1 - measure_luck_share(), "that is the skill share, 1 - luck share: enter the luck share"),
        Misreading(_dashboard(0.35, 15, "J"), "that is J, the agent's success probability: read the luck share"),
        Misreading(_dashboard(0.35, 15, "corr"), "that is GRPO's correlation with the exact advantage: read the luck "
                                                 "share"),
    ),
))
