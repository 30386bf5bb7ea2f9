"""Judge-based credit: MAPPA (per-action scores), LLM-MCA (per-agent credit), CAPO (step verdicts)
and QLLM (a credit function written as code).

MAPPA and LLM-MCA ask a large language model to read a multi-agent transcript and score each
action (MAPPA) or each agent (LLM-MCA); CAPO asks one to flag the wrong steps of a reasoning
chain; QLLM asks one to write the function that mixes the agents' own values and the state into
credit. The estimators take the judge's output as a tensor or a callable ``rollouts -> tensor``,
so a real judge plugs in directly; the lab's STAND-IN judges (exact quantities plus seeded noise)
live in ``labkit.learn.judges``.
"""
from __future__ import annotations

import math
from typing import Callable, Union

import torch

from labkit.core.agents import agent_rewards, n_agents_of
from labkit.core.checks import (as_tensor, check_choice, check_finite, check_number, check_shape, resolve_input,
                                trajectory_totals)
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_normalize, whiten
from labkit.credit.registry import register

JudgeOutput = Union[torch.Tensor, Callable[[Rollouts], torch.Tensor]]


def _judge(rollouts: Rollouts, output, name: str, shape: tuple[int, ...]) -> tuple[torch.Tensor, bool]:
    output, called = resolve_input(name, output, rollouts,
                                   expected=f"a tensor of shape {shape} or a callable rollouts -> {shape}")
    x = as_tensor(name, output)
    check_shape(name, x, shape)
    x = x.to(torch.float64)
    return x, called


MAPPA_NORMS = ("global", "none")


@register("mappa", level="token", inputs={"judge_scores": "action_scores"}, status="stand-in", paper="2601.23228",
          replaces="the LLM coach's 0-10 score of every action: an exact per-action quality plus seeded noise",
          equation=r"A_{b,t} = \frac{r_{b,t} - \operatorname{mean}(r)}{\sqrt{\operatorname{var}(r) + "
                   r"\epsilon}},\quad r_{b,t} = c_{b,t} + w \, s_b",
          symbols="c_{b,t}: coach's score of action t (noisy oracle); mean, population var over the batch; w = "
                  "outcome_weight = 0; eps = 1e-8")
def mappa(rollouts: Rollouts, *, judge_scores: JudgeOutput = None, normalize: str = "global",
          outcome_weight: float = 0.0, eps: float = 1e-8) -> Credit:
    """MAPPA (Li et al. 2026, arXiv:2601.23228): per-action process rewards from AI feedback, batch-whitened.

    Inputs:
        rollouts: ``mask`` (each generated position is one action), ``rewards`` (the outcome s_b,
        for ``outcome_weight``).
        ``judge_scores`` (action_scores): the coach's score of the action at every generated
        position, (B, T) or a callable rollouts -> (B, T) (read only where ``mask`` is True;
        MAPPA's coach gives 0..10 after seeing the agent's role, input, action and the tool /
        environment feedback).

    Formula:
        Each action is its own training sample with reward s_{b,t}; MAPPA trains with
        REINFORCE++, whose advantage is the reward whitened over the whole batch (no task
        groups: agents downstream of others see different inputs, so a group of identical
        prompts does not exist):

        r_{b,t} = s_{b,t} + outcome_weight * s_b              (s_b = trajectory b's total reward)
        A_{b,t} = (r_{b,t} - mean r) / sqrt(var r + eps)      over all generated positions
                                                              normalize="global" (default)
        A_{b,t} = r_{b,t}                                     normalize="none"

        Credit is per position (each TeamTask position is one action). The 0..10 scale does
        not matter after whitening.

    Defaults:
        normalize = "global", outcome_weight = 0, eps = 1e-8. Whitening follows REINFORCE++
        (OpenRLHF): biased (population) variance, eps = 1e-8 inside the square root, the same
        ``labkit.core.stats.whiten`` that ``reinforce_pp`` uses.

    Degenerate input:
        a batch with one action, or all-equal rewards, gives 0 (0 / sqrt(eps)); a batch with no
        action gives 0.

    Deviations from the reference:
        the per-action-sample reading and the batch-wide whitening are our reading of the paper
        (REINFORCE++ with global normalisation), not checked against its code. In MAPPA the
        outcome reaches the actions only through the coach (it sees the final result when
        scoring the last action); ``outcome_weight`` (default 0) is labkit's explicit knob for
        mixing it in. STAND-IN: the coach is an LLM in the paper; in labkit ``judge_scores``
        usually comes from ``noisy_oracle`` applied to an exact per-action quality. Not
        modelled: REINFORCE++'s KL term.

    Returns:
        credit at level "token"; ``info``: ``scores`` s (B, T), ``reward`` r (B, T).

    Cost:
        a callable judge costs one ``aux_calls`` per scored action; a tensor costs nothing here.
    """
    check_choice("normalize", normalize, MAPPA_NORMS)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    eps = check_number("eps", eps, low=0.0, low_open=True)
    s, called = _judge(rollouts, judge_scores, "judge_scores", (rollouts.batch_size, rollouts.horizon))
    m = rollouts.mask
    check_finite("judge_scores", torch.where(m, s, 0.0))
    s = torch.where(m, s, 0.0)
    r = torch.where(m, s + outcome_weight * rollouts.scores.to(torch.float64)[:, None], 0.0)
    if normalize == "global":
        adv = whiten(r, m, eps)
    else:
        adv = r
    cost = Cost(aux_calls=int(m.sum())) if called else Cost()
    return Credit.from_tokens(rollouts, adv, "mappa", cost=cost, scores=s, reward=r)


LLM_MCA_RESCALE = ("none", "team")


@register("llm_mca", level="agent", needs=("agents",), inputs={"judge_credit": "agent_credit"}, status="stand-in",
          paper="2502.16863",
          replaces="the centralised LLM critic's per-agent credit: the exact Shapley value plus seeded noise",
          equation=r"A_{b,i} = c_{b,i}\quad \left(\text{rescale: } \frac{c_{b,i} \, R_b}{\sum_j c_{b,j}}\right)",
          symbols="c_{b,i}: critic's reported credit of agent i (noisy exact Shapley; an LLM in the paper); R_b: "
                  "team reward; default no rescale")
def llm_mca(rollouts: Rollouts, *, judge_credit: JudgeOutput = None, rescale: str = "none",
            team_reward=None) -> Credit:
    """LLM-MCA (Nagpal et al. 2025, arXiv:2502.16863): per-agent credit from a centralised LLM critic.

    Inputs:
        rollouts: ``agent_ids``, ``rewards`` (which agents acted; the team reward for
        rescale="team").
        ``judge_credit`` (agent_credit): the critic's reported contribution c_{b,i} of agent i in
        trajectory b, (B, n) or a callable rollouts -> (B, n).

    Formula:
        The paper's critic reads all agents' trajectories and the team reward and numerically
        decomposes that reward into per-agent rewards, which then train each agent's policy in
        place of the shared reward.

        A_{b,i} = c_{b,i}                                     rescale="none" (default)
        A_{b,i} = c_{b,i} * R_b / sum_j c_{b,j}               rescale="team": force the report to
                                                              add up to the team reward R_b

        Every position of agent i gets A_{b,i}.

    Defaults:
        rescale = "none". ``team_reward`` (B,) is used by rescale="team" (default: each
        trajectory's total reward, ``rollouts.scores``; labkit never reads ``rollouts.truth``).

    Degenerate input:
        with rescale="team", a row whose reported credits sum to 0 cannot be rescaled and keeps
        its raw report (listed in ``info["unscaled_rows"]``). Agents absent from a trajectory get
        0.

    Deviations from the reference:
        whether the paper forces the report to add up to the team reward is not settled by our
        reading; the default keeps the report as is, rescale="team" enforces it. Where labkit
        differs: the paper's critic gives per-timestep credit and the agents are trained with a
        MARL algorithm on it; here one number per agent per trajectory, used as the advantage.
        STAND-IN: the critic is an LLM in the paper; here ``judge_credit`` usually comes from
        ``noisy_oracle`` applied to the exact Shapley values of each trajectory.

    Returns:
        credit at level "agent"; ``info``: ``report`` c (B, n), ``unscaled_rows`` (the rows kept
        raw).

    Cost:
        a callable judge costs one ``aux_calls`` per trajectory; a tensor costs nothing here.
    """
    check_choice("rescale", rescale, LLM_MCA_RESCALE)
    n = n_agents_of(rollouts)
    B = rollouts.batch_size
    c, called = _judge(rollouts, judge_credit, "judge_credit", (B, n))
    check_finite("judge_credit", c)
    _, present = agent_rewards(rollouts, n)
    unscaled = []
    if rescale == "team":
        team = trajectory_totals("team_reward", team_reward, rollouts.scores)
        total = torch.where(present, c, 0.0).sum(1)
        ok = total.abs() > 1e-12
        unscaled = (~ok).nonzero().flatten().tolist()
        c_out = torch.where(ok[:, None], c * team[:, None] / torch.where(ok, total, 1.0)[:, None], c)
    else:
        c_out = c
    c_out = torch.where(present, c_out, 0.0)
    return Credit.from_level(rollouts, c_out, "agent", "llm_mca", cost=Cost(aux_calls=B) if called else Cost(),
                             report=c, unscaled_rows=unscaled)


CAPO_VOTES = ("majority", "intersection", "average")


@register("capo", level="step", inputs={"verdicts": "step_verdicts"}, status="stand-in", paper="2508.02298",
          replaces="the LLM generative verifier's step critiques: the exact step correctness, each verdict flipped "
                   "at a seeded error rate",
          equation=r"A_{i,t} = W_o \, \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in "
                   r"g(i)} s_j + \epsilon} - W_p \, f_{i,s(t)}",
          symbols="f: 1 if the verifier's critiques (majority vote) flag step s(t) as wrong; W_o = 2, W_p = 1; std "
                  "unbiased; eps = 1e-6")
def capo(rollouts: Rollouts, *, verdicts: JudgeOutput = None, vote: str = "majority", outcome_weight: float = 2.0,
         process_weight: float = 1.0, normalize_std: bool = True, eps: float = 1e-6) -> Credit:
    """CAPO (Xie et al. 2025, arXiv:2508.02298): outcome credit minus a penalty on the tokens of steps a generative verifier flags.

    Inputs:
        rollouts: ``rewards`` (the outcome rv), ``group_ids``, ``step_ids``.
        ``verdicts`` (step_verdicts): a verifier's judgement of every step, 1 = correct, 0 =
        wrong: (B, S) or (V, B, S) in [0, 1], or a callable rollouts -> that, e.g.
        ``labkit.learn.judges.stand_in_step_verifier``.

    Formula:
        CAPO asks an off-the-shelf LLM, used as a generative process reward model, to critique
        all steps of a response in one pass, judging each step only by its own correctness.
        With several critiques (V, B, S) they are combined by a vote, giving the flag f_s in
        [0, 1]:

            majority:     f_s = 1 if more than half of the critiques call step s wrong
            intersection: f_s = 1 if every critique calls it wrong
            average:      f_s = share of critiques that call it wrong

        CAPO's token reward is R_{i,t} = W_whole * rv_i - W_process * f_{s(t)} (rv: the rule-based
        outcome reward); labkit turns it into an advantage with GRPO on the outcome part and
        the penalty kept on the flagged step's tokens:

            A_{i,t} = W_whole * (rv_i - mean_g rv) / (std_g rv + eps) - W_process * f_{i,s(t)}

        With W_whole > W_process a right answer with a flagged step still beats a wrong answer
        (CAPO's asymmetric weighting, balancing outcome and process).

    Defaults:
        vote = "majority", outcome_weight W_whole = 2, process_weight W_process = 1 (the
        asymmetric setting as we read the paper), normalize_std = True (GRPO), eps = 1e-6.

    Degenerate input:
        a group of one gets its raw outcome term (GRPO's group-of-one rule), so only the
        penalty distinguishes its steps; a group with equal outcomes has outcome term 0 and
        only flagged steps move. With one critique every vote is that critique. Absent steps
        get 0.

    Deviations from the reference:
        how the token reward becomes an advantage (group-normalising the outcome term and adding
        the raw penalty) is our reading; the paper's exact normalisation was not checked against
        code (none was public). STAND-IN: the verifier is a large LLM in CAPO; in labkit
        ``verdicts`` usually comes from ``stand_in_step_verifier``: the task's exact step
        correctness with each verdict flipped at a seeded error rate.

    Returns:
        credit at level "step"; ``info``: ``flags`` f (B, S), ``outcome_advantage`` (B,),
        ``n_critiques``.

    Cost:
        a callable verifier costs one ``aux_calls`` per trajectory per critique (one pass
        critiques all steps); a tensor costs nothing here.
    """
    check_choice("vote", vote, CAPO_VOTES)
    outcome_weight = check_number("outcome_weight", outcome_weight)
    process_weight = check_number("process_weight", process_weight)
    eps = check_number("eps", eps, low=0.0)
    _, present = rollouts.view(rollouts.rewards, "step", "sum")
    verdicts, called = resolve_input("verdicts", verdicts, rollouts, expected="(B, S) or (V, B, S) step verdicts "
                                     "in [0, 1] or a callable rollouts -> that")
    v = as_tensor("verdicts", verdicts).to(torch.float64)
    if v.dim() == 2:
        v = v[None]
    check_shape("verdicts", v, (None, *present.shape))
    if v.shape[0] < 1:
        raise ValueError("verdicts: need at least one critique")
    inside = v[:, present]
    check_finite("verdicts", inside)
    if bool(((inside < 0) | (inside > 1)).any()):
        raise ValueError("verdicts: must be in [0, 1] (1 = step judged correct, 0 = judged wrong)")
    wrong = 1.0 - v
    if vote == "majority":
        flags = (wrong.mean(0) > 0.5).to(torch.float64)
    elif vote == "intersection":
        flags = wrong.min(0).values
    else:
        flags = wrong.mean(0)
    flags = torch.where(present, flags, 0.0)
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    step_adv = torch.where(present, outcome_weight * outcome[:, None] - process_weight * flags, 0.0)
    cost = Cost(aux_calls=rollouts.batch_size * v.shape[0]) if called else Cost()
    return Credit.from_level(rollouts, step_adv, "step", "capo", cost=cost, flags=flags,
                             outcome_advantage=outcome, n_critiques=int(v.shape[0]))


# --------------------------------------------------------------------------- QLLM: the credit function as code
#: A written credit function: ``fn(q, state, agents) -> {agent: credit}``.
CreditFunction = Callable[[dict, dict, list], dict]
#: The per-trajectory states a credit function reads: a list of dicts or a callable rollouts -> that.
States = Union[list, Callable[[Rollouts], list]]


def _team_outcome(rollouts: Rollouts, team_reward, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(team outcome (B,), which agents acted (B, n)): ``team_reward`` if given, else the mean of
    the acting agents' rewards (the team reward when every agent is paid the team's outcome)."""
    R, present = agent_rewards(rollouts, n)
    count = present.sum(1)
    default = torch.where(count > 0, torch.where(present, R, 0.0).sum(1) / count.clamp(min=1), 0.0)
    return trajectory_totals("team_reward", team_reward, default), present


def _agent_keys(rollouts: Rollouts, n: int) -> list[list[tuple]]:
    """What agent i saw and did in trajectory b: the (observation, action) pairs of its positions
    in order (observation None where the batch carries no states); [b][i], () if it did not act."""
    tokens, mask, ids = rollouts.tokens.tolist(), rollouts.mask.tolist(), rollouts.agent_ids.tolist()
    states = rollouts.states.tolist() if rollouts.states is not None else None
    keys = []
    for b in range(rollouts.batch_size):
        row: list[list] = [[] for _ in range(n)]
        for t, (m, a) in enumerate(zip(mask[b], ids[b])):
            if m and 0 <= a < n:
                row[a].append((None if states is None else states[b][t], tokens[b][t]))
        keys.append([tuple(k) for k in row])
    return keys


def agent_utilities(rollouts: Rollouts, *, team_reward=None) -> torch.Tensor:
    """Each agent's utility Q_i(o_i, a_i) read off the batch, (B, n) float64: the mean team outcome
    over the batch's trajectories in which agent i saw the same observations and took the same
    actions as in trajectory b (a tabular per-agent critic fitted on this batch: the value an
    independent learner gives its own action, blind to what the others did). ``team_reward``
    (B,) defaults to the mean of the acting agents' rewards. An agent that did not act gets 0."""
    n = n_agents_of(rollouts)
    team, present = _team_outcome(rollouts, team_reward, n)
    keys = _agent_keys(rollouts, n)
    q = torch.zeros(rollouts.batch_size, n, dtype=torch.float64)
    for i in range(n):
        groups: dict = {}
        for b in range(rollouts.batch_size):
            if keys[b][i]:
                groups.setdefault(keys[b][i], []).append(b)
        for rows in groups.values():
            q[rows, i] = team[rows].mean()
    return torch.where(present, q, 0.0)


def _default_states(rollouts: Rollouts, names: list, team: torch.Tensor) -> list[dict]:
    """The state every batch shows: each agent's observation and action ids (an int for one
    position, a tuple for several, None if it did not act), the roles if ``info`` names them, and
    the team outcome."""
    keys = _agent_keys(rollouts, len(names))
    roles = rollouts.info.get("roles")
    roles = dict(zip(names, roles)) if roles is not None and len(roles) == len(names) else None

    def one(pairs, j):
        if not pairs:
            return None
        vals = tuple(p[j] for p in pairs)
        return vals[0] if len(vals) == 1 else vals

    out = []
    for b, row in enumerate(keys):
        state = {"observations": {nm: one(k, 0) for nm, k in zip(names, row)},
                 "actions": {nm: one(k, 1) for nm, k in zip(names, row)}, "team_reward": float(team[b])}
        if roles is not None:
            state["roles"] = dict(roles)
        out.append(state)
    return out


def _call_credit_function(fn: CreditFunction, q: list, state, names: list) -> list[float]:
    """``fn(q, state, agents)`` on one trajectory (``q`` in ``names`` order, plain floats), its
    answer checked: one finite number per agent, in ``names`` order. Errors name ``fn``."""
    if not isinstance(state, dict):
        raise TypeError(f"states: expected one dict per trajectory (its state), got {type(state).__name__}")
    try:
        out = fn(dict(zip(names, q)), state, list(names))
    except Exception as err:  # a reader's or a model's code: say where it failed, keep the traceback
        raise ValueError(f"fn: raised {type(err).__name__}: {err}") from err
    if not isinstance(out, dict) or set(out) != set(names):
        raise ValueError(f"fn: must return a dict with one credit per agent {names}, got {out!r}")
    try:
        credit = [float(out[n]) for n in names]
    except (TypeError, ValueError):
        raise ValueError(f"fn: credits must be numbers, got {out!r}") from None
    if not all(math.isfinite(c) for c in credit):
        raise ValueError(f"fn: returned a non-finite credit: {out!r}")
    return credit


def apply_credit_function(fn: CreditFunction, utilities, state: dict, names) -> torch.Tensor:
    """Call a written credit function on one trajectory: ``fn(q, state, agents) -> {agent:
    credit}`` with ``q[agent]`` the agent's utility (``utilities``, (n,), in ``names`` order) and
    ``state`` the trajectory's state dict. Returns the credits in ``names`` order, (n,) float64;
    any failure of ``fn`` or a wrong answer raises a ValueError naming ``fn``."""
    if not callable(fn):
        raise TypeError(f"fn: expected a function (q, state, agents) -> {{agent: credit}}, got {type(fn).__name__}")
    names = list(names)
    q = as_tensor("utilities", utilities).to(torch.float64).reshape(-1)
    if q.numel() != len(names):
        raise ValueError(f"utilities: expected one utility per agent ({len(names)}), got {q.numel()}")
    check_finite("utilities", q)
    return torch.tensor(_call_credit_function(fn, q.tolist(), state, names), dtype=torch.float64)


def effect_mixer(utilities, effects) -> torch.Tensor:
    """The lab's written mixer, of the form of QLLM's generated functions (Q_tot = sum_i w_i(s) Q_i
    with weights read off the state): agent i's credit is w_i * Q_i with

        w_i = e_i / h,    h = number of agents with e_i = +1

    where ``effects`` e_i in {+1, 0, -1} says what the state shows agent i's action did (helped,
    did nothing that matters, acted against the team). Helpers share the team's value, a null
    action gets 0, a harmful one is charged its utility / h; with no helper everyone gets 0
    (nothing to share, nothing to break). ``utilities`` and ``effects``: (..., n). Returns the
    credits (..., n) float64; their sum is the mixer's team value Q_tot."""
    q = as_tensor("utilities", utilities).to(torch.float64)
    e = as_tensor("effects", effects)
    check_shape("effects", e, tuple(q.shape))
    check_finite("utilities", q)
    e = e.to(torch.float64)
    if not bool(((e == 1) | (e == 0) | (e == -1)).all()):
        raise ValueError("effects: must be +1 (helped), 0 (did nothing that matters) or -1 (acted against the team)")
    h = (e == 1).sum(-1, keepdim=True).to(torch.float64)
    return torch.where(h > 0, e * q / h.clamp(min=1.0), torch.zeros((), dtype=torch.float64))


@register("credit_function", level="agent", needs=("agents",), inputs={"fn": "credit_function"}, status="stand-in",
          paper="2504.12961",
          replaces="the LLM that writes QLLM's training-free credit assignment function: a function the reader "
                   "writes (notebook 09) or the lab's written rule; the per-agent Q-networks: a tabular batch estimate",
          equation=r"A_{b,i} = \operatorname{fn}(Q_b, s_b, N)_i,\quad Q_{b,i} = \operatorname{mean}\{R_{b'} : "
                   r"(o, a)_{b',i} = (o, a)_{b,i}\}",
          symbols="fn: credit function written as code (by the reader; an LLM in QLLM); Q_{b,i}: agent i's utility, "
                  "the batch's mean team outcome R over trajectories where agent i saw and did the same; s_b: "
                  "trajectory b's state (observations, actions, team outcome); N: the agents")
def credit_function(rollouts: Rollouts, *, fn: CreditFunction = None, utilities=None, states: States = None,
                    team_reward=None) -> Credit:
    """A written credit function over per-agent utilities and the state (QLLM, Jiang et al. 2025, arXiv:2504.12961): agent credit as code.

    Inputs:
        rollouts: ``agent_ids``, ``rewards`` (the team outcome), ``states`` and ``tokens`` (what
        each agent saw and did), ``info["agent_names"]`` (else "agent 0", ...) and
        ``info["roles"]`` when present.
        ``fn`` (credit_function): ``fn(q, state, agents) -> {agent: credit}``, with ``q[agent]``
        the agent's utility and ``state`` the trajectory's state (a dict).
        ``utilities``: (B, n) per-agent utilities or a callable rollouts -> (B, n).
        ``states``: one dict per trajectory or a callable rollouts -> that list (e.g.
        ``TeamTask.global_states``, which names the task, roles, observations and actions).

    Formula:
        QLLM has a language model write the mixing function of a value-decomposition critic:
        Q_tot = f(Q_1, ..., Q_n, s), the team's value from the agents' own Q-values and the
        global state, in the published functions a weighted sum sum_i w_i(s) Q_i with weights
        computed from the state. Agent i's credit is its term. Here, for trajectory b,

            c_b = fn(Q_b, s_b, agents)        Q_{b,i} = mean of R_{b'} over the b' where agent i
                                              saw and did what it did in b

        and every position of agent i gets c_{b,i}; Q_tot,b = sum_i c_{b,i}. The function never
        sees a coalition value: whatever it knows of the interactions between agents it must
        read off the state.

    Defaults:
        ``utilities``: ``agent_utilities`` (the batch estimate above). ``states``: each agent's
        observation and action ids (an int per position, a tuple for several), the roles when
        ``info`` names them and ``team_reward``. ``team_reward`` (B,): the mean of the acting
        agents' rewards (the team reward when it is shared).

    Degenerate input:
        an agent that did not act gets utility 0 and credit 0 whatever ``fn`` says. A function
        that fails, returns a missing agent, a non-number or a non-finite credit is reported
        with the batch row it failed on.

    Deviations from the reference:
        QLLM's function returns Q_tot and sits inside a critic whose per-agent Q-networks are
        trained by TD through it; here it returns the per-agent terms directly, the utilities
        are a tabular batch estimate from the team outcome (no network, no bootstrapping: one-shot
        episodes), and there is no coder-evaluator loop. STAND-IN: the author is the reader
        (notebook 09) or the lab's written rule (the benchmark), not a language model.

    Returns:
        credit at level "agent"; ``info``: ``credit`` (B, n), ``utilities`` Q (B, n), ``q_tot``
        (B,) = the sum of the credits.

    Cost:
        nothing: the function is written once and runs without a model or a re-execution.
    """
    if fn is None:
        raise ValueError("fn: required, a function (q, state, agents) -> {agent: credit}")
    if not callable(fn):
        raise TypeError(f"fn: expected a function (q, state, agents) -> {{agent: credit}}, got {type(fn).__name__}")
    n = n_agents_of(rollouts)
    B = rollouts.batch_size
    team, present = _team_outcome(rollouts, team_reward, n)
    names = list(rollouts.info.get("agent_names") or [f"agent {i}" for i in range(n)])
    if len(names) != n:
        raise ValueError(f"rollouts.info['agent_names']: expected {n} names, got {len(names)}")
    if utilities is None:
        q = agent_utilities(rollouts, team_reward=team)
    else:
        q, _ = resolve_input("utilities", utilities, rollouts, expected=f"a ({B}, {n}) tensor or a callable")
        q = as_tensor("utilities", q)
        check_shape("utilities", q, (B, n))
        q = torch.where(present, q.to(torch.float64), 0.0)
        check_finite("utilities", q)
    if states is None:
        rows_state = _default_states(rollouts, names, team)
    else:
        rows_state, _ = resolve_input("states", states, rollouts, expected="a list of one dict per trajectory")
        if not isinstance(rows_state, (list, tuple)):
            raise TypeError(f"states: expected a list of {B} dicts (one per trajectory), got {type(rows_state).__name__}")
        if len(rows_state) != B:
            raise ValueError(f"states: expected {B} dicts (one per trajectory), got {len(rows_state)}")
    rows = []
    for b, q_row in enumerate(q.tolist()):
        try:
            rows.append(_call_credit_function(fn, q_row, rows_state[b], names))
        except (ValueError, TypeError) as err:
            raise type(err)(f"{err} (trajectory {b})") from err.__cause__
    credit = torch.tensor(rows, dtype=torch.float64).reshape(B, n)
    credit = torch.where(present, credit, 0.0)
    return Credit.from_level(rollouts, credit, "agent", "credit_function", cost=Cost(), credit=credit,
                             utilities=q, q_tot=credit.sum(1))


# --------------------------------------------------------------------------- TARL and LaRe (agentic turn judges)
def _turn_presence(rollouts: Rollouts) -> torch.Tensor:
    """(B, N) which turns exist (N = the batch's largest number of turns)."""
    return rollouts.view(rollouts.mask, "turn", "first")[1]


TARL_GRADE_VALUES = (-1.0, 0.0, 1.0)


# SCRIBE's skill-template grades enter through TARL's estimator, so it names both papers.
@register("tarl", level="turn", inputs={"grades": "turn_grades"}, status="stand-in", paper="2509.14480; 2601.03555",
          replaces="the LLM judge's turn grades: the sign of the exact turn advantage with a seeded error rate "
                   "(for SCRIBE: hand-written skill templates)",
          equation=r"A_{i,k} = \frac{s_i - \operatorname{mean}_{j \in g(i)} s_j}{\operatorname{std}_{j \in g(i)} "
                   r"s_j + \epsilon} + w \, q_{i,k}",
          symbols="q_{i,k} in {-1, 0, +1}: judge's grade of turn k (noisy sign of exact advantage); w = "
                  "grade_weight = 1; eps = 1e-6")
def tarl(rollouts: Rollouts, *, grades: JudgeOutput = None, grade_weight: float = 1.0, normalize_std: bool = True,
         eps: float = 1e-6) -> Credit:
    """TARL (Tan et al. 2025, arXiv:2509.14480): an LLM judge grades every turn -1 / 0 / +1, added to the outcome credit.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``group_ids``, ``turn_ids``.
        ``grades`` (turn_grades): g_{i,n} in {-1, 0, +1}, the judge's verdict on turn n of
        trajectory i, (B, N) with N the batch's largest number of turns, or a callable
        rollouts -> (B, N), e.g. ``functools.partial(labkit.learn.judges.stand_in_turn_grades,
        advantage=A)``.

    Formula:
        TARL's judge reads the whole interaction and marks each turn as harmful, neutral or
        helpful. The turn's credit is the trajectory's group-normalised outcome (GRPO) plus the
        graded turn reward:

            A_{i,n} = (R_i - mean_g R) / (std_g R + eps) + grade_weight * g_{i,n}

        Every position of turn n takes A_{i,n}.

    Defaults:
        grade_weight = 1 (labkit's choice: one grade step weighs about one outcome standard
        deviation), normalize_std = True (GRPO), eps = 1e-6.

    Degenerate input:
        a group of one gets its raw outcome (GRPO's singleton rule) plus its grades; a group
        with equal outcomes has outcome term 0, so only the grades move its turns; all-zero
        grades give plain GRPO. Absent turns get 0. Grades outside {-1, 0, +1} are refused.

    Deviations from the reference:
        the three-level grades are the paper's; how they enter the advantage (added to the
        group-normalised outcome on the graded turn, with weight ``grade_weight``) is labkit's
        reading of its summary, not checked against code or equations. STAND-IN: TARL's judge
        is a large LLM; in labkit the grades usually come from
        ``labkit.learn.judges.stand_in_turn_grades``: the sign of the exact turn advantage
        (with a dead zone) and a known error rate. Not modelled: TARL's mixed-task (math)
        curriculum, which targets exploration, not credit.

    Returns:
        credit at level "turn"; ``info``: ``grades`` (B, N), ``outcome_advantage`` (B,),
        ``grade_weight``.

    Cost:
        a callable judge costs one ``aux_calls`` per trajectory (the judge reads the whole
        interaction once and grades every turn); a tensor costs nothing here.
    """
    grade_weight = check_number("grade_weight", grade_weight)
    eps = check_number("eps", eps, low=0.0)
    present = _turn_presence(rollouts)
    g, called = _judge(rollouts, grades, "grades", tuple(present.shape))
    inside = g[present]
    check_finite("grades", inside)
    if not bool(torch.isin(inside, torch.tensor(TARL_GRADE_VALUES, dtype=torch.float64)).all()):
        raise ValueError("grades: TARL grades must be -1 (harmful), 0 (neutral) or +1 (helpful)")
    g = torch.where(present, g, 0.0)
    outcome = group_normalize(rollouts.scores.to(torch.float64), rollouts.group_ids, eps=eps,
                              normalize_std=normalize_std).normalized
    adv = torch.where(present, outcome[:, None] + grade_weight * g, 0.0)
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_level(rollouts, adv, "turn", "tarl", cost=cost, grades=g, outcome_advantage=outcome,
                             grade_weight=grade_weight)


LARE_TARGETS = ("reward_to_go", "reward")


# The paper read is arXiv 2412.11120; the survey's catalog files LaRe under 2412.16989.
@register("lare", level="turn", inputs={"step_rewards": "judged_turn_rewards"}, status="stand-in",
          paper="2412.11120; 2412.16989",
          replaces="the LLM-written latent reward and its neural decoder: hand-written turn features and a "
                   "least-squares decoder",
          equation=r"A_{i,n} = G_{i,n} - \operatorname{mean}_{j \in g(i)} G_{j,0},\quad G_{i,n} = \sum_{k \ge n} "
                   r"\gamma^{k-n} \hat{r}_{i,k}",
          symbols="r^_{i,k}: proxy turn reward decoded from hand-written latent features (LLM code in paper); n, "
                  "k: turns; gamma = 1")
def lare(rollouts: Rollouts, *, step_rewards: JudgeOutput = None, target: str = "reward_to_go",
         gamma: float = 1.0) -> Credit:
    """LaRe (Qu et al. 2025, arXiv:2412.11120): proxy step rewards decoded from an LLM-written latent reward, as turn credit.

    Inputs:
        rollouts: ``group_ids``, ``turn_ids``.
        ``step_rewards`` (judged_turn_rewards): r_hat_{i,n}, the proxy reward of turn n, (B, N)
        with N the batch's largest number of turns, or a callable rollouts -> (B, N); in labkit
        ``LatentRewardRegressor.step_rewards(turn_features(env, rollouts))``
        (``labkit.learn.judges``, ``labkit.envs.toolworld.features``).

    Formula:
        r_hat = f(phi(s_n, a_n)), where phi is LaRe's latent reward (interpretable evaluation
        factors of the step, written by an LLM as code) and f a decoder trained so that each
        episode's proxy rewards add up to its return (return decomposition). The proxy rewards
        replace the sparse episodic reward in the policy update; with no learned critic here,
        the credit is the proxy return from the turn on, with the group's mean predicted episode
        return as baseline:

            G_{i,n} = sum_{k >= n} gamma^(k - n) r_hat_{i,k}
            A_{i,n} = G_{i,n} - mean_{j in group(i)} G_{j,0}           target="reward_to_go"
            A_{i,n} = r_hat_{i,n} - mean of r_hat over the group's turns    target="reward"

    Defaults:
        target = "reward_to_go", gamma = 1.

    Degenerate input:
        a group of one has itself as baseline: with target="reward_to_go" its first turn gets
        0 and later turns the negative of the proxy reward already collected; a one-turn
        trajectory gets its own proxy reward minus the baseline. All-zero proxy rewards give 0.
        Absent turns get 0.

    Deviations from the reference:
        STAND-IN: LaRe's latent reward is code written by an LLM (with self-verification);
        labkit's is ``turn_features``, factors of a ToolWorld turn written by hand, and the
        decoder is a linear least-squares fit (``LatentRewardRegressor``) instead of LaRe's
        neural decoder. LaRe trains its agents with standard RL on the proxy rewards (a learned
        critic); the group-mean baseline here is labkit's substitute. The survey describes
        LaRe as textual per-step justifications turned into scalars; the paper's mechanism is
        the code-written latent reward plus a return-decomposing decoder, which labkit follows.
        The arXiv id in the lab's inventory (2412.16989) differs from the paper's (2412.11120,
        AAAI 2025).

    Returns:
        credit at level "turn" (method "lare_reward_to_go" or "lare_reward"); ``info``:
        ``step_rewards`` (B, N), ``returns`` G (B, N), ``baseline``, ``gamma``.

    Cost:
        a callable costs one ``aux_calls`` per trajectory (one pass of the latent-reward code
        and decoder); a tensor costs nothing here. Writing the features (an LLM call per task in
        LaRe, once by hand here) is not counted.
    """
    check_choice("target", target, LARE_TARGETS)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    present = _turn_presence(rollouts)
    r, called = _judge(rollouts, step_rewards, "step_rewards", tuple(present.shape))
    check_finite("step_rewards", r[present])
    r = torch.where(present, r, 0.0)
    N = r.shape[1]
    # reverse discounted sum: G_n = r_n + gamma * G_{n+1}
    G = torch.zeros_like(r)
    running = torch.zeros(r.shape[0], dtype=torch.float64)
    for n in range(N - 1, -1, -1):
        running = r[:, n] + gamma * running
        G[:, n] = running
    if target == "reward_to_go":
        baseline = group_normalize(G[:, 0], rollouts.group_ids, normalize_std=False, singleton="zero").mean
        adv = G - baseline[:, None]
    else:
        ids = rollouts.group_ids[:, None].expand_as(r)[present]
        baseline = torch.zeros_like(r)
        if bool(present.any()):
            baseline[present] = group_normalize(r[present], ids, normalize_std=False, singleton="zero").mean
        adv = r - baseline
    adv = torch.where(present, adv, 0.0)
    cost = Cost(aux_calls=rollouts.batch_size) if called else Cost()
    return Credit.from_level(rollouts, adv, "turn", f"lare_{target}", cost=cost, step_rewards=r, returns=G,
                             baseline=baseline, gamma=gamma)
