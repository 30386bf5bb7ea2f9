"""Process-reward credit: step-level credit from scores of the reasoning steps themselves.

* ``pure``: PURE's min-form credit over a process reward model's step scores (and the sum-form
  credit it replaces);
* ``spro``: SPRO's self-guided process rewards, the policy's log-ratio to a reference model summed
  along the response, compared at every position with the other responses to the same prompt.

The step scorer (a PRM) and the reference log-probabilities are explicit arguments: a tensor, or
for ``pure`` a callable ``rollouts -> (B, S)`` such as
``labkit.learn.reward_models.ProcessRewardModel.step_scores``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from labkit.core.checks import (as_tensor, check_choice, check_finite, check_number, check_shape, log_probabilities,
                                resolve_input)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize, group_stats
from labkit.credit.registry import register

StepScores = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]
PURE_FORMS = ("min", "sum")
TURN_BASELINES = ("turn_index", "return_to_go")


def _step_scores(rollouts: Rollouts, step_scores, present: torch.Tensor) -> tuple[torch.Tensor, bool]:
    step_scores, called = resolve_input("step_scores", step_scores, rollouts,
                                        expected="a (B, S) tensor of PRM scores in [0, 1] or a callable rollouts "
                                                 "-> (B, S) (e.g. ProcessRewardModel.step_scores)")
    p = as_tensor("step_scores", step_scores).to(torch.float64)
    check_shape("step_scores", p, tuple(present.shape))
    inside = p[present]
    check_finite("step_scores", inside)
    if bool(((inside < 0) | (inside > 1)).any()):
        raise ValueError("step_scores: PRM scores must be probabilities in [0, 1] (p(step is good))")
    return torch.where(present, p, 0.0), called


@register("pure", level="step", inputs={"step_scores": "prm_step_scores"}, status="implemented", paper="2504.08662",
          equation=r"A_{i,k} = G_{i,k} - \operatorname{mean}_{j \in g(i), j \ne i} G_{j,0},\quad G_{i,k} = \sum_{l "
                   r"\ge k} \operatorname{softmax}_l\left(-\frac{r_{i,l}}{T}\right) r_{i,l} + s_i",
          symbols="k: step; r = 2p - 1, p: PRM prob that step is good; softmax over the response's steps; T = 0.1; "
                  "group of one: baseline 0")
def pure(rollouts: Rollouts, *, step_scores: StepScores = None, form: str = "min", temperature: float = 0.1,
         verifiable_weight: float = 1.0) -> Credit:
    """PURE (Cheng et al. 2025, arXiv:2504.08662): min-form credit, a step is worth the worst step still to come.

    Inputs:
        rollouts: ``rewards`` (the verifiable reward R, inside the last step), ``step_ids``,
        ``group_ids``.
        ``step_scores`` (prm_step_scores): p_s, the PRM's probability that step s is good, a
        (B, S) tensor in [0, 1] or a callable rollouts -> (B, S), e.g.
        ``ProcessRewardModel.load().step_scores``.

    Formula:
        The PRM's step reward is r_s = p(+) - p(-) = 2 p_s - 1 in [-1, 1]. form="min" (PURE)
        reweights the rewards of a response with a soft minimum over its steps, form="sum"
        keeps them (the usual sum-form credit PURE argues against):

            w_s  = softmax_s(-r_s / T)          (over the response's own steps)
            r'_s = w_s * r_s                    form="min"
            r'_s = r_s                          form="sum"

        The verifiable (outcome) reward R, received inside the last step, is added there with
        weight ``verifiable_weight`` (the environment reward of every step is added to that step
        with this weight; with an outcome-only reward that is R on the last step); returns are reverse sums (gamma = 1) and a leave-one-out
        (RLOO) baseline over the other responses to the same prompt is subtracted:

            G_s = sum_{s' >= s} r'_{s'} + verifiable_weight * R
            b_i = mean_{j != i in the group} G_{j,0}
            A_s = G_s - b_i                     (every token of step s takes A_s)

        Sum form: a response padded with extra harmless steps (r > 0) collects more return;
        min form: the weights concentrate on the lowest step, so sum_s r'_s ~ min_s r_s and
        padding adds almost nothing.

    Defaults:
        form = "min", temperature T = 0.1 (PURE's setting), verifiable_weight = 1 (PURE's
        ``verifiable_reward_coef``).

    Degenerate input:
        a group of one has no other response: its baseline is 0 and it gets its raw returns
        (verl's scalar RLOO convention). A one-step response has w = 1 (min and sum agree).
        T -> 0 gives the hard minimum: all weight on the lowest step, so steps up to it get the
        global minimum as return and steps after it about 0 (PURE's approximation; its separate
        "strict min-form", G_s = min over s' >= s, is not implemented). T -> infinity gives
        w = 1 / n, the mean step reward. Ties in the lowest score share the weight. Absent steps
        (padding) get 0; a response with no generated token gets no credit. Scores outside
        [0, 1] are refused.

    Deviations from the reference:
        PURE's RLOO baseline (verl ``compute_rloo_outcome_advantage``) is the other responses'
        returns summed over all tokens and divided by (n - 1) x the padded response length, a
        per-token average that depends on padding; labkit uses the other responses' total return
        G_0 (the standard RLOO baseline), so advantages here do not depend on the batch's padding.
        PURE puts a step's reward on its last token and computes token returns; every token of a
        step then has the step's return only after the step's reward token, so labkit gives the
        whole step the return from its own reward on (level "step"). No KL penalty, no
        advantage whitening (PURE's ``adv_norm`` is off by default).

    Returns:
        credit at level "step" (method "pure_min" or "pure_sum"); ``info``: ``step_rewards`` r
        (B, S), ``weighted_rewards`` r', ``weights`` w, ``returns`` G, ``baseline`` b (B,),
        ``temperature``.

    Cost:
        a callable ``step_scores`` costs one ``aux_calls`` per trajectory (one PRM forward pass
        scores all its steps); a tensor costs nothing here.
    """
    check_choice("form", form, PURE_FORMS)
    T = check_number("temperature", temperature, low=0.0, low_open=True)
    verifiable_weight = check_number("verifiable_weight", verifiable_weight)
    r_out, present = rollouts.view(rollouts.rewards.to(torch.float64), "step", "sum")
    p, called = _step_scores(rollouts, step_scores, present)
    r = torch.where(present, 2 * p - 1, 0.0)
    if form == "min":
        # softmax over present steps only; a row with no step gets all-zero weights (no NaN)
        logits = torch.where(present, -r / T, -torch.inf)
        has = present.any(1, keepdim=True)
        w = torch.where(has, torch.softmax(torch.where(has, logits, 0.0), dim=1), 0.0)
        w = torch.where(present, w, 0.0)
    else:
        w = present.to(torch.float64)
    shaped = w * r + verifiable_weight * r_out
    G = torch.where(present, shaped.flip(1).cumsum(1).flip(1), 0.0)
    g0 = G[:, 0]
    mean, _, size = group_stats(g0, rollouts.group_ids)
    # mean of the others = (n * mean - own) / (n - 1); a group of one has none: baseline 0
    baseline = torch.where(size > 1, (size * mean - g0) / (size - 1).clamp(min=1), 0.0)
    adv = torch.where(present, G - baseline[:, None], 0.0)
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_level(rollouts, adv, "step", f"pure_{form}", cost=cost, step_rewards=r,
                             weighted_rewards=torch.where(present, w * r, 0.0), weights=w, returns=G,
                             baseline=baseline, temperature=T)


@register("spro", level="token", needs=("logprobs",), inputs={"ref_logprobs": "ref_logprobs"}, status="implemented",
          paper="2507.01551",
          equation=r"A_{i,t} = A^{\text{grpo}}_i + \mathrm{CPR}_{i,t} - \operatorname{mean}_{k \in g(i), t < |y_k|} "
                   r"\mathrm{CPR}_{k,t},\quad \mathrm{CPR}_{i,t} = \beta \sum_{j \le t} \log "
                   r"\frac{\pi(y_j)}{\pi_{\text{ref}}(y_j)}",
          symbols="mean over the group's responses still generating at t; pi(y_j): prob of token j given its "
                  "prefix; beta = 0.05; A^grpo: grpo credit")
def spro(rollouts: Rollouts, *, ref_logprobs=None, logprobs=None, beta: float = 0.05,
         normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """SPRO (Fei et al. 2025, arXiv:2507.01551): self-guided cumulative process rewards with a masked step advantage.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``mask``, ``logprobs`` (the
        policy's, unless ``logprobs`` is given).
        ``ref_logprobs`` (ref_logprobs): (B, T) log pi_ref of every generated token (e.g. the
        frozen initial model's ``labkit.policies.lm.sequence_logprobs``).

    Formula:
        Every token t of response i earns an implicit process reward, the policy's log-ratio to
        a reference model, and the cumulative process reward (CPR) sums it along the response:

            CPR_{i,t} = beta * sum_{j <= t} (log pi(y_j | prefix) - log pi_ref(y_j | prefix))

        The masked step advantage (MSA) compares CPR at the same position t with the other
        responses to the same prompt that are still generating at t (the "mask": shorter
        responses drop out of the baseline once they have ended):

            MSA_{i,t} = CPR_{i,t} - mean_{k in group(i), t < len_k} CPR_{k,t}

        and the outcome enters as GRPO's group-normalised score:

            A_{i,t} = (R_i - mean_g R) / (std_g R + eps) + MSA_{i,t}

    Defaults:
        beta = 0.05 (the implicit-reward scale of PRIME, on which SPRO builds; not checked
        against SPRO's own configuration), normalize_std = True (GRPO), eps = 1e-6,
        logprobs = None (``rollouts.logprobs``, the sampling policy's).

    Degenerate input:
        when policy = reference (ref_logprobs equal to logprobs) CPR = 0 and SPRO is exactly
        GRPO. A group of one gets its raw outcome (GRPO's group-of-one rule) and MSA = 0 (it is
        its own baseline); so does any position where only one response of the group is still
        generating. Positions off the mask get 0.

    Deviations from the reference:
        the survey describes SPRO's credit as the drop in success probability when a step is
        removed (a leave-one-step-out counterfactual); the paper's abstract and method (and the
        summaries we checked) describe something else: process rewards derived from the policy
        itself (log pi / pi_ref, the policy read as a soft Q-function) accumulated into CPR, and
        a masked group baseline at every token position ("masked" = only responses still
        active at that position). labkit implements the paper's version. How MSA and the
        outcome advantage are combined (a plain sum, outcome term group-normalised) is our
        reading; no public code was found to check it. A "step" in SPRO is a token (a
        token-level MDP), so credit is per token.
        At tool output inside a response the cumulative process reward carries across it
        (``labkit.credit.tool_spans``), but responses are compared at the same column among
        those generating there, so tool outputs of different lengths change which tokens are
        compared.

    Returns:
        credit at level "token"; ``info``: ``cpr`` (B, T), ``msa`` (B, T), ``outcome_advantage``
        (B,), ``beta``.

    Cost:
        none here beyond the caller's reference forward pass that produced ``ref_logprobs``
        (one sequence per trajectory through the reference model), which this function cannot see.
    """
    beta = check_number("beta", beta, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    m = rollouts.mask
    if ref_logprobs is None:
        raise ValueError("ref_logprobs: required, (B, T) log-probabilities of the generated tokens under the "
                         "reference policy")
    ref = log_probabilities("ref_logprobs", ref_logprobs, m)
    if logprobs is None:
        if rollouts.logprobs is None:
            raise ValueError("rollouts.logprobs: SPRO needs the policy's log-probabilities (or pass logprobs=)")
        lp = rollouts.logprobs.to(torch.float64)
    else:
        lp = log_probabilities("logprobs", logprobs, m)
    ratio = torch.where(m, lp - ref, 0.0)
    cpr = torch.where(m, beta * ratio.cumsum(1), 0.0)
    # masked group baseline per position: sum and count of active responses of the same group
    _, inverse = torch.unique(rollouts.group_ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1
    mf = m.to(torch.float64)
    total = torch.zeros(n_groups, m.shape[1], dtype=torch.float64).index_add_(0, inverse, cpr)
    count = torch.zeros(n_groups, m.shape[1], dtype=torch.float64).index_add_(0, inverse, mf)
    base = total[inverse] / count[inverse].clamp(min=1)
    msa = torch.where(m, cpr - base, 0.0)
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    adv = torch.where(m, outcome[:, None] + msa, 0.0)
    return Credit.from_tokens(rollouts, adv, "spro", cost=Cost(), cpr=cpr, msa=msa, outcome_advantage=outcome,
                              beta=beta)


# --------------------------------------------------------------------------- Turn-Level Reward Design (MT-GRPO)
@register("turn_reward_design", level="turn", needs=("turns",), inputs={"turn_rewards": "verifiable_turn_rewards"},
          status="implemented", paper="2505.11821",
          equation=r"A_{i,n} = \sum_{k \ge n} \frac{v_{i,k} - \operatorname{mean}_{j \in g(i)} "
                   r"v_{j,k}}{\operatorname{std}_{j \in g(i)} v_{j,k} + \epsilon} + \frac{s_i - "
                   r"\operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} s_j + \epsilon}",
          symbols="v_{i,k}: verifiable reward of turn k; j: group members that reach turn k; turn_weight = "
                  "outcome_weight = 1; eps = 1e-6")
def turn_reward_design(rollouts: Rollouts, *, turn_rewards=None, turn_weight: float = 1.0,
                       outcome_weight: float = 1.0, normalize_std: bool = True, eps: float = 1e-6,
                       baseline: str = "turn_index") -> Credit:
    """Turn-Level Reward Design (Wei et al. 2025, arXiv:2505.11821): verifiable turn rewards mixed with the outcome, MT-GRPO style.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``turn_ids``.
        ``turn_rewards`` (verifiable_turn_rewards): v_{i,n}, a checkable reward of turn n of
        trajectory i (the paper's verifiable turn rewards: a tool call that executed, a
        retrieved passage that contains the answer; on ToolWorld the tests passing after a run,
        opening the file search named), (B, N) with N the batch's largest number of turns, or a
        callable rollouts -> (B, N), e.g.
        ``functools.partial(labkit.envs.toolworld.features.verifiable_turn_rewards, env)``.

    Formula:
        Each turn reward is group-normalised against the other trajectories of the same task
        *at the same turn index* (the trajectories still playing there), and a turn is credited
        with the normalised turn rewards from itself to the end plus the normalised outcome:

            T_{i,k} = (v_{i,k} - mean_{j in g, k < len_j} v_{j,k}) / (std_{same} + eps)
            O_i     = (R_i - mean_g R) / (std_g R + eps)
            A_{i,n} = turn_weight * sum_{k >= n} T_{i,k} + outcome_weight * O_i

        (MT-GRPO's two-turn form, A_1 = T_1 + lambda O and A_2 = O, written for any number of
        turns with the outcome on every turn.)

        baseline = "return_to_go" (not the paper's; see Deviations) compares whole returns
        from turn n instead of normalised turn rewards, against the other trajectories of the
        task still playing at turn n (leave-one-out):

            G_{i,n} = turn_weight * sum_{k >= n} v_{i,k} + outcome_weight * R_i
            b_{i,n} = mean_{j in g, j != i, n < len_j} G_{j,n}       (0 if there is no such j)
            A_{i,n} = (G_{i,n} - b_{i,n}) / (std_{j in g, n < len_j} G_{j,n} + eps)

        (without the division when normalize_std is False or i plays turn n alone).

    Defaults:
        turn_weight = 1, outcome_weight = 1, normalize_std = True, eps = 1e-6 (labkit's choices;
        the paper tunes the mix per task), baseline = "turn_index" (the paper's construction).

    Degenerate input:
        a turn index that only one trajectory of its group reaches has no one to compare with:
        it keeps its raw turn reward (GRPO's singleton rule), as does a group of one, whose
        outcome term is its raw outcome. Turn rewards that are equal across the group at an
        index give 0 there; all-zero turn rewards give plain GRPO (times outcome_weight).
        Absent turns get 0.

    Deviations from the reference:
        the paper's MT-GRPO is written for a fixed small number of turns (search, then answer)
        and samples a tree of rollouts so that the trajectories compared at a turn share their
        past; labkit compares the group's trajectories at the same turn index without a tree,
        so turns at equal indices may have different pasts (ToolWorld episodes vary in length).
        The cumulative sum of later normalised turn rewards is our reading of the multi-turn
        generalisation, not checked against code. The paper's LLM-as-judge turn rewards are
        not part of this estimator (``tarl`` and ``critic_search`` cover judged turns).
        With episodes whose length the policy decides, the default construction is biased: the
        turn-index means it subtracts from turn n on, sum_{n <= k < len_i} mean_k v, have as
        many terms as the trajectory has turns left, so the baseline depends on the actions
        that decide whether to go on, and it moves the gradient by about sum_k mean_k v per
        turn not taken (a turn reward shared by every trajectory, such as a cost per turn,
        cancels out of T entirely and never reaches the gradient). baseline = "return_to_go"
        is labkit's repair, not from the paper: the baseline of turn n is a mean over the
        other trajectories only, so it does not depend on the trajectory's own actions, and
        without std normalisation the policy gradient is unbiased (leave-one-out); dividing
        by the turn index's std (which counts the trajectory itself) rescales it, as GRPO's
        std does.

    Returns:
        credit at level "turn"; ``info``: ``turn_rewards`` v (B, N), ``turn_term`` T (B, N),
        ``outcome_advantage`` O (B,), ``baseline`` (the name). With baseline = "return_to_go"
        ``turn_term`` holds the returns G (B, N), ``outcome_advantage`` the first-turn
        advantage A_{i,0}, and ``info["subtracted"]`` b (B, N).

    Cost:
        a callable costs one ``aux_calls`` per trajectory (the checks run once over the
        transcript, no model); a tensor costs nothing here.
    """
    turn_weight = check_number("turn_weight", turn_weight)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    eps = check_number("eps", eps, low=0.0)
    check_choice("baseline", baseline, TURN_BASELINES)
    present = rollouts.view(rollouts.mask, "turn", "first")[1]
    turn_rewards, called = resolve_input("turn_rewards", turn_rewards, rollouts,
                                         expected="a (B, N) tensor of verifiable turn rewards or a callable rollouts "
                                                  "-> (B, N) (e.g. labkit.envs.toolworld.features"
                                                  ".verifiable_turn_rewards)")
    v = as_tensor("turn_rewards", turn_rewards).to(torch.float64)
    check_shape("turn_rewards", v, tuple(present.shape))
    check_finite("turn_rewards", v[present])
    v = torch.where(present, v, 0.0)
    B, N = v.shape
    cost = Cost(aux_calls=B) if called else Cost()
    if baseline == "return_to_go":
        return _return_to_go_credit(rollouts, v, present, turn_weight, outcome_weight, normalize_std, eps, cost)
    term = torch.zeros_like(v)
    if bool(present.any()):
        # one pool per (task group, turn index): key = group * N + index
        _, gid = torch.unique(rollouts.group_ids, return_inverse=True)
        key = (gid[:, None] * N + torch.arange(N)[None, :])[present]
        term[present] = group_normalize(v[present], key, eps=eps, normalize_std=normalize_std).normalized
    later = term.flip(1).cumsum(1).flip(1)
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    adv = torch.where(present, turn_weight * later + outcome_weight * outcome[:, None], 0.0)
    return Credit.from_level(rollouts, adv, "turn", "turn_reward_design", cost=cost, turn_rewards=v, turn_term=term,
                             outcome_advantage=outcome, baseline="turn_index")


def _return_to_go_credit(rollouts: Rollouts, v: torch.Tensor, present: torch.Tensor, turn_weight: float,
                         outcome_weight: float, normalize_std: bool, eps: float, cost: Cost) -> Credit:
    """``turn_reward_design`` with baseline="return_to_go": each turn's return against the mean
    return of the task's other trajectories still playing at that turn index."""
    B, N = v.shape
    score = rollouts.scores.to(torch.float64)
    G = torch.where(present, turn_weight * v.flip(1).cumsum(1).flip(1) + outcome_weight * score[:, None], 0.0)
    sub = torch.zeros_like(G)
    adv = torch.zeros_like(G)
    if bool(present.any()):
        _, gid = torch.unique(rollouts.group_ids, return_inverse=True)
        key = (gid[:, None] * N + torch.arange(N)[None, :])[present]
        g = G[present]
        mean, std, size = group_stats(g, key)
        # leave-one-out: the others' mean is (m * mean - own) / (m - 1); alone at an index, 0
        others = torch.where(size > 1, (size * mean - g) / (size - 1).clamp(min=1), 0.0)
        a = g - others
        if normalize_std:
            a = torch.where(size > 1, a / (std + eps), a)
        sub[present] = others
        adv[present] = a
    return Credit.from_level(rollouts, adv, "turn", "turn_reward_design", cost=cost, turn_rewards=v, turn_term=G,
                             outcome_advantage=adv[:, 0].clone(), baseline="return_to_go", subtracted=sub)
