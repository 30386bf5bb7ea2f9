"""Notebook 06_gigpo's exercises.

* 06a (implement): GiGPO's step term, each turn against its anchor-state group, graded against
  ``labkit.credit.group.gigpo``'s ``info["step_term"]`` (norm "mean_norm");
* 06b (find the bug): GiGPO's advantage with norm "mean_std_norm", whose anchor groups of one get
  NaN, graded against ``labkit.credit.group.gigpo(..., norm="mean_std_norm")``;
* 06c (capstone): the PPO-clip policy loss with GRPO's and verl's aggregations, graded (its value
  and its gradient) against ``labkit.learn.loop.policy_loss``; the notebook then trains GRPO and
  GiGPO with it.

``reveal_solution("06a")`` ... prints a reference solution (labkit/course/solutions/ex06_gigpo.py).
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, randint, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, close, register
from labkit.course.exercises.mistakes import any_of, looks_like, nonzero_where_false
from labkit.course.exercises.references import one_token_rollouts, pad_turns, prefix_ids
from labkit.credit import group
from labkit.learn import loop


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
        "  turn_rewards: (B, N) float tensor, the reward of each turn\n"
        "  present: (B, N) bool, the turns played\n"
        "  anchors: (B, N) long tensor, the observation each turn starts from\n"
        "  gamma, omega: floats\n"
        "What it should return, (B, N), 0 on absent turns:\n"
        "  s_i = sum of episode i's rewards;  A^E_i = (s_i - mean s) / (std s + 1e-6)\n"
        "  R_k = r_k + gamma * R_{k+1};  A^S_k = (R_k - mean R) / (std R + 1e-6)\n"
        "  with mean and std over the present turns with the same anchor (any episode);\n"
        "  an anchor group of one gets A^S = 0\n"
        "  A_k = A^E + omega * A^S_k;  both stds unbiased (n - 1)"),
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


# --------------------------------------------------------------------------- 06c: capstone, the policy loss
#: the aggregations the capstone asks for, and the lab's loss kind that computes each
AGGREGATIONS = {"token-mean": "ppo_clip", "seq-mean-token-mean": "grpo"}
CLIP_EPS = 0.2


def graded_loss(fn, args: dict) -> torch.Tensor:
    """What 06c grades of a loss function ``fn``: its value and its gradient with respect to
    ``logp``, one float64 vector [loss, d loss / d logp flattened]. ``fn`` is called on a copy of
    ``logp`` that requires grad; a loss that does not depend on it has gradient 0. Returns what
    ``fn`` returned instead when that is no tensor (the grader then says so)."""
    logp = args["logp"].clone().requires_grad_(True)
    loss = fn(logp, args["old_logp"], args["advantages"], args["mask"], args["aggregation"])
    if not isinstance(loss, torch.Tensor):
        return loss
    if loss.numel() != 1:
        raise ValueError(f"policy_loss should return one number (a 0-d tensor), got shape {tuple(loss.shape)}")
    if loss.requires_grad:
        grad, = torch.autograd.grad(loss.reshape(()), logp, allow_unused=True)
    else:
        grad = None
    grad = torch.zeros_like(logp) if grad is None else grad
    return torch.cat([loss.detach().reshape(1).to(F64), grad.detach().flatten().to(F64)])


def _lab_loss(logp, old_logp, advantages, mask, aggregation):
    return loop.policy_loss(logp, old_logp, advantages, mask, AGGREGATIONS[aggregation], clip_eps=CLIP_EPS)[0]


def _reference_loss(**args):
    return graded_loss(_lab_loss, args)


def _loss_case(gen, mask, aggregation, name, tags=frozenset(), log_ratio=None):
    """A minibatch on ``mask``: old probabilities 0.05 to 0.55, ratios about 0.6 to 1.7 (inside and
    outside [0.8, 1.2]), advantages of both signs; padding holds numbers too (a real batch's
    padding is not zero), which a correct loss ignores."""
    B, T = mask.shape
    old = torch.log(0.05 + 0.5 * rand(gen, B, T))
    if log_ratio is None:
        log_ratio = torch.log(0.6 + 1.1 * rand(gen, B, T))
    logp = torch.round(old + log_ratio, decimals=3)
    old = torch.round(old, decimals=3)
    adv = torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=2)
    return Case(name, dict(logp=logp, old_logp=old, advantages=adv, mask=mask, aggregation=aggregation), tags)


def _loss_cases(gen):
    cases = []
    for i in range(6):
        mask = random_prefix_mask(gen, (3, 4), (3, 6), tool_output=True)
        if i % 3 == 2:
            mask[randint(gen, 0, len(mask) - 1)] = False  # a row with no generated token
        cases.append(_loss_case(gen, mask, list(AGGREGATIONS)[i % 2], f"random #{i}"))
    # one token in each corner of the clip: ratio above / below the range, advantage + / -
    ratio = torch.tensor([[1.5, 0.6, 1.5, 0.6], [1.0, 1.1, 0.9, 1.0], [0.7, 1.3, 1.0, 1.0]], dtype=F64)
    short = torch.tensor([[True, True, True, True], [True, True, True, False], [True, False, False, False]])
    empty = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    for agg in AGGREGATIONS:
        case = _loss_case(gen, short, agg, f"ratios on both sides of the clip, {agg}", log_ratio=ratio.log())
        case.args["advantages"][0] = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=F64)
        cases.append(case)
        cases.append(_loss_case(gen, empty, agg, f"a row with no generated token, {agg}"))
    # the edges, graded once the cases above pass
    nothing = torch.zeros(2, 3, dtype=torch.bool)
    one = torch.tensor([[False, True, False], [False, False, False]])
    for agg in AGGREGATIONS:
        cases.append(_loss_case(gen, nothing, agg, f"no generated token in the batch, {agg}", frozenset({"empty_batch"})))
        cases.append(_loss_case(gen, one, agg, f"one generated token, {agg}", frozenset({"one_token"})))
        cases.append(_loss_case(gen, torch.ones(2, 3, dtype=torch.bool), agg, f"on-policy (ratio 1), {agg}",
                                frozenset({"on_policy"}), log_ratio=torch.zeros(2, 3, dtype=F64)))
    return cases


def _loss_variant(how):
    """A policy loss with one known mistake ``how``, graded as ``graded_loss`` grades."""
    loss = _loss_with_mistake(how)
    return lambda **args: graded_loss(loss, args)


def _loss_with_mistake(how):
    """The policy loss with one known mistake ``how`` (the reader's signature)."""
    def loss(logp, old_logp, advantages, mask, aggregation):
        m = mask.to(F64)
        ratio = torch.exp(logp - old_logp)
        low, high = 1 - CLIP_EPS, 1 + CLIP_EPS
        unclipped, clipped = ratio * advantages, ratio.clamp(low, high) * advantages
        objective = {"no_clip": unclipped, "clip_only": clipped, "max": torch.maximum(unclipped, clipped)}.get(
            how, torch.minimum(unclipped, clipped))
        per_token = -objective
        agg = {"always_token": "token-mean", "always_seq": "seq-mean-token-mean"}.get(how, aggregation)
        if agg == "token-mean":
            if how == "all_positions":
                return (per_token * m).sum() / m.numel()
            if how == "unmasked_mean":
                return per_token.mean()
            return (per_token * m).sum() / (m.sum() if how == "unguarded" else m.sum().clamp(min=1))
        lengths = m.sum(1)
        has = lengths > 0
        sums = (per_token * m).sum(1)
        if how == "all_positions":
            per_seq = sums / m.shape[1]
        elif how == "unmasked_mean":
            per_seq = per_token.mean(1)
        elif how == "seq_sum":
            per_seq = sums
        else:
            per_seq = sums / lengths.clamp(min=1)
        if how == "empty_rows_counted":
            return per_seq.sum() / len(per_seq)
        if how == "unguarded":
            return per_seq[has].sum() / has.sum() if agg != "token-mean" else None
        return per_seq[has].sum() / has.sum().clamp(min=1)

    return loss


def _empty_rows_counted(case, got, want):
    """A row with no generated token was counted among the sequences (or gave NaN)."""
    mask = case.args["mask"]
    # a row without tokens beside rows with some (an empty batch is the edge case of its own)
    has_empty = case.args["aggregation"] == "seq-mean-token-mean" and bool((~mask.any(1)).any()) and bool(mask.any())
    return has_empty and (not bool(torch.isfinite(got).all()) or looks_like(_loss_variant("empty_rows_counted"))(case, got, want))


def _no_gradient(case, got, want):
    """The loss is there but no gradient reaches logp (detached, .item(), a new tensor)."""
    return bool(want[1:].ne(0).any()) and not bool(got[1:].ne(0).any()) and bool(got[:1].ne(0).all())


def _graded_rule(hint, how, **kw):
    return Rule(hint, looks_like(_loss_variant(how)), every=True, **kw)


register(Exercise(
    notebook="06", letter="c", kind="capstone", path="deep dive",
    name="policy_loss", title="The policy loss, both aggregations",
    signature="policy_loss(logp, old_logp, advantages, mask, aggregation) -> scalar tensor",
    prompt=(
        "Write the clipped PPO policy loss that trains GRPO and GiGPO (Schulman et al. 2017, arXiv 1707.06347).\n"
        "It has the two ways of averaging that notebook 06 compares (Dr. GRPO, arXiv 2503.20783).\n"
        "  logp, old_logp: (B, T) log-probabilities of the sampled tokens, now and when the batch was sampled\n"
        "  advantages: (B, T) credit per token\n"
        "  mask: (B, T) bool, the generated tokens (padding and tool output are False)\n"
        "  aggregation: 'token-mean' or 'seq-mean-token-mean'\n"
        "Per token, with eps = 0.2 and no KL term:\n"
        "  rho = exp(logp - old_logp);   l_t = -min(rho A_t, clip(rho, 1 - eps, 1 + eps) A_t)\n"
        "Return one number, a 0-d tensor that keeps logp's gradient:\n"
        "  'token-mean': the mean of l_t over every generated token of the batch\n"
        "  'seq-mean-token-mean': the mean of l_t within each sequence, then over the sequences that have one\n"
        "A batch with no generated token has loss 0. The check grades the loss AND its gradient with respect\n"
        "to logp: a failing case shows yours as one list, [loss, then d loss / d logp row by row]. Then train\n"
        "with it: the cell after the check runs GRPO and GiGPO with your loss."),
    cases=_loss_cases, reference=_reference_loss, call=graded_loss,
    sign_note="the loss is MINUS the clipped objective (an optimiser minimises it)",
    rules=(
        Rule("your loss does not carry logp's gradient (all 0): compute it from logp with torch operations, "
             "without .detach(), .item() or torch.tensor(...) on the way", _no_gradient, every=True),
        Rule("a row with no generated token must not count as a sequence: average over the sequences that have "
             "tokens (its 0 / 0 is NaN, and counting it as 0 shrinks the mean)", _empty_rows_counted),
        _graded_rule("your loss ignores aggregation: 'token-mean' averages over every generated token of the batch, "
                     "'seq-mean-token-mean' within each sequence first, then over sequences", "always_token"),
        _graded_rule("your loss ignores aggregation: 'token-mean' averages over every generated token of the batch, "
                     "'seq-mean-token-mean' within each sequence first, then over sequences", "always_seq"),
        Rule("average over the generated tokens only (mask True): dividing by every position of the table, or "
             "averaging the padding's values in, weighs rows by their padding",
             any_of(looks_like(_loss_variant("all_positions")), looks_like(_loss_variant("unmasked_mean"))),
             every=True),
        _graded_rule("within a sequence take the MEAN over its generated tokens, not the sum (the sum makes long "
                     "sequences weigh more: that is token-mean's behaviour, not GRPO's)", "seq_sum"),
        _graded_rule("no clipping: the loss must be -min(rho A, clip(rho, 1 - eps, 1 + eps) A), not -rho A; without "
                     "the clip one batch can push the ratio arbitrarily far", "no_clip"),
        _graded_rule("clipping the ratio alone is not PPO: take the min of the unclipped and the clipped objective, "
                     "so a ratio that moved the wrong way (rho A below the clipped value) keeps its gradient",
                     "clip_only"),
        _graded_rule("take the MIN of rho A and clip(rho) A (a pessimistic bound), not the max", "max"),
        Rule("a batch with no generated token has loss 0 and gradient 0: guard the divisions by the token count and "
             "the sequence count (e.g. .clamp(min=1)), 0 / 0 is NaN", lambda c, g, w: not close(g, w, 1e-5),
             frozenset({"empty_batch"})),
        NOT_FINITE,
    ),
))
