"""Multi-agent credit: who in a team deserves the team's outcome?

Estimators registered here turn a team's cooperative game (its coalition values, or the agents'
own rewards) into per-agent ``Credit`` on multi-agent ``Rollouts`` (one position per agent
action, ``agent_ids`` = acting agent, each agent's own reward on its last position): ``shapley``,
``leave_one_out``, ``sharp``, ``dr_mas``, ``m_grpo``, ``scar`` (Shapley over reasoning steps
instead of agents) and ``core_credit`` (the least core's nucleolus instead of Shapley). The game maths lives in ``labkit.core.games``, the per-agent views of a batch
in ``labkit.core.agents``.
"""
from __future__ import annotations

import torch

from labkit.core.agents import (CoalitionValues, agent_rewards, agent_step_counts, coalition_table, group_index,
                                n_agents_of, normalize_pools)
from labkit.core.checks import (as_tensor, check_bool, check_choice, check_finite, check_int, check_number, check_shape,
                                trajectory_totals)
from labkit.core.games import MAX_PLAYERS, exact_shapley, least_core, leave_one_out_values, sampled_shapley
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit.registry import register


# --------------------------------------------------------------------------- estimators
@register("shapley", level="agent", needs=("agents",), inputs={"coalition_values": "agent_coalition_values"},
          status="implemented", paper="Shapley 1953",
          equation=r"A_{b,i} = \sum_{S \subseteq N \setminus \{i\}} \frac{|S|! \, (n - |S| - 1)!}{n!} \left(v_b(S "
                   r"\cup \{i\}) - v_b(S)\right)",
          symbols="i: agent; n = |N|; v_b(S): team value of trajectory b with only the agents in S; "
                  "method='sampled': mean over random orderings")
def shapley(rollouts: Rollouts, *, coalition_values: CoalitionValues = None, method: str = "exact",
            n_permutations: int = 200, seed: int = 0, antithetic: bool = False) -> Credit:
    """Shapley credit over agents (Shapley 1953; survey Sec. 6, e.g. SHARP arXiv:2602.08335): Shapley values.

    Inputs:
        rollouts: ``agent_ids`` (n = ``info["n_agents"]`` or the largest agent id + 1).
        ``coalition_values`` (agent_coalition_values): (B, 2**n), v_b(S) for trajectory b,
        column = bitmask of the agents kept (absent agents replaced by a default, as the
        environment defines), or a callable rollouts -> (B, 2**n).

    Formula:
        phi_{b,i} = sum_{S subset N\\{i}} |S|!(n-|S|-1)!/n! (v_b(S+i) - v_b(S))      method="exact"
        phi_{b,i} ~ mean over P random orderings of v_b(pred + i) - v_b(pred)     method="sampled"

        Every position of agent i in trajectory b gets phi_{b,i}. Efficient:
        sum_i phi_{b,i} = v_b(N) - v_b(empty), so the team outcome is split, not copied.
        No group baseline and no normalisation (use ``sharp`` for that).

    Defaults:
        method = "exact"; sampled uses ``n_permutations=200``, ``seed=0``, no antithetic pairs.

    Degenerate input:
        a one-agent team gets v(N) - v(empty); an agent absent from a trajectory has no
        position, so its phi is kept in ``values`` but painted nowhere. Groups play no role.

    Deviations from the reference:
        none: the textbook definition; method="sampled" is permutation sampling (Castro et al.
        2009, ``labkit.core.games.sampled_shapley``).

    Returns:
        credit at level "agent"; ``info``: ``phi`` (B, n), ``n_evaluations`` per trajectory,
        ``method_detail`` (the method).

    Cost:
        ``env_steps`` = coalition values the method reads, summed over trajectories (2**n per
        trajectory when exact; the distinct coalitions the sampled orderings visit otherwise) —
        one re-executed team episode per coalition value, whether the table is given or computed.
    """
    check_choice("method", method, ("exact", "sampled"))
    n = n_agents_of(rollouts)
    v = coalition_table(rollouts, coalition_values, n)
    if method == "exact":
        phi, evals = exact_shapley(v), 2 ** n
    else:
        phi, evals = sampled_shapley(v, n_permutations=n_permutations, seed=seed, antithetic=antithetic)
    cost = Cost(env_steps=evals * rollouts.batch_size)
    return Credit.from_level(rollouts, phi, "agent", "shapley", cost=cost, phi=phi,
                             n_evaluations=evals, method_detail=method)


@register("leave_one_out", level="agent", needs=("agents",), inputs={"coalition_values": "agent_coalition_values"},
          status="implemented", paper="Wolpert & Tumer 2002",
          equation=r"A_{b,i} = v_b(N) - v_b(N \setminus \{i\})",
          symbols="i: agent; N: all agents; v_b(S): team value of trajectory b with only the agents in S")
def leave_one_out_credit(rollouts: Rollouts, *, coalition_values: CoalitionValues = None) -> Credit:
    """Leave-one-out / difference-reward credit over agents (Wolpert & Tumer 2002; C3's
    leave-one-out, arXiv:2603.06859 as catalogued by the survey): d_i = v(N) - v(N \\ {i}).

    Inputs:
        rollouts: ``agent_ids``.
        ``coalition_values`` (agent_coalition_values): as in ``shapley`` (only the grand coalition
        and the n coalitions with one agent removed are read).

    Formula:
        d_{b,i} = v_b(N) - v_b(N \\ {i})

        Not efficient: redundant agents all get 0 (each is replaceable), complementary agents
        each get the whole team value. Every position of agent i in trajectory b gets d_{b,i}.

    Defaults:
        no options besides ``coalition_values``. No normalisation.

    Degenerate input:
        a one-agent team gets v(N) - v(empty). Groups play no role.

    Deviations from the reference:
        none: the definition of the difference reward.

    Returns:
        credit at level "agent"; ``info``: ``loo`` (B, n).

    Cost:
        ``env_steps`` = (n + 1) per trajectory (the coalition values read, as in ``shapley``).
    """
    n = n_agents_of(rollouts)
    v = coalition_table(rollouts, coalition_values, n)
    d = leave_one_out_values(v)
    return Credit.from_level(rollouts, d, "agent", "leave_one_out",
                             cost=Cost(env_steps=(n + 1) * rollouts.batch_size), loo=d)


DR_MAS_NORMS = ("agent", "global")
POOL_UNITS = ("step", "trajectory")


@register("dr_mas", level="agent", needs=("agents",), status="implemented", paper="2602.08847",
          equation=r"A_{b,i} = \frac{R_{b,i} - \mu_{g,i}}{\sigma_{g,i} + \epsilon}",
          symbols="R_{b,i}: agent i's reward in trajectory b; mu, sigma: mean, unbiased std of agent i's rewards "
                  "in task group g, once per action; eps = 1e-6")
def dr_mas(rollouts: Rollouts, *, normalize: str = "agent", unit: str = "step", eps: float = 1e-6,
           normalize_std: bool = True) -> Credit:
    """Dr. MAS (Feng et al. 2026, arXiv:2602.08847): agent-wise advantage normalisation.

    Inputs:
        rollouts: ``rewards`` (each agent's own, on its positions), ``agent_ids``, ``group_ids``
        (task groups), ``mask``.

    Formula:
        R_{b,i} = agent i's reward in trajectory b (the rewards on agent i's positions, summed).

        normalize="agent" (Dr. MAS):   A_{b,i} = (R_{b,i} - mu_{g,i}) / (sigma_{g,i} + eps)
        normalize="global" (baseline): A_{b,i} = (R_{b,i} - mu_g) / (sigma_g + eps)

        mu_{g,i}, sigma_{g,i}: mean and unbiased std of agent i's rewards over the trajectories of
        task group g; mu_g, sigma_g: over every agent of every trajectory of g (the plain
        multi-agent GRPO the paper fixes: one baseline for agents whose reward distributions
        differ, so one agent's advantages are all shifted one way and its gradient norm
        inflates). ``unit="step"`` (the paper's Eq. 5): statistics are over agent i's actions,
        so a trajectory where agent i acted k times counts k times; ``unit="trajectory"``: once.
        Every position of agent i in trajectory b gets A_{b,i}.

    Defaults:
        normalize = "agent", unit = "step", eps = 1e-6, unbiased std (as ``grpo``).
        ``normalize_std=False`` drops the division.

    Degenerate input:
        ``grpo``'s rule: a pool with one sample gets mean 0 and std 1 (its raw reward /
        (1 + eps)); a pool whose rewards are all equal gives 0, also with eps = 0 (not 0 / 0:
        ``labkit.core.stats.group_normalize``). With ``unit="step"`` a sample is
        an action: in a task group of one trajectory, an agent that acted there k >= 2 times
        forms a pool of k equal samples and gets 0, one that acted once gets its raw reward /
        (1 + eps). Agents that did not act in a trajectory get nothing.

    Deviations from the reference:
        the step pooling is our reading of Eq. 5, where the pool of agent k is its set of
        actions Y_k.

    Returns:
        credit at level "agent" (method "dr_mas", or "ma_grpo" for normalize="global");
        ``info``: ``agent_rewards`` R, ``pool_mean``, ``pool_std`` (B, n), ``normalize``.

    Cost:
        none beyond the sampled batch.
    """
    check_choice("normalize", normalize, DR_MAS_NORMS)
    check_choice("unit", unit, POOL_UNITS)
    eps = check_number("eps", eps, low=0.0)
    n = n_agents_of(rollouts)
    R, present = agent_rewards(rollouts, n)
    g = group_index(rollouts)[:, None].expand(-1, n)
    pool = g * n + torch.arange(n) if normalize == "agent" else g
    weight = agent_step_counts(rollouts, n) if unit == "step" else None
    adv, mean, std = normalize_pools(R, present, pool, weight, eps, normalize_std)
    return Credit.from_level(rollouts, adv, "agent", "dr_mas" if normalize == "agent" else "ma_grpo",
                             agent_rewards=R, pool_mean=mean, pool_std=std, normalize=normalize)


@register("sharp", level="agent", needs=("agents",), inputs={"coalition_values": "agent_coalition_values"},
          status="implemented", paper="2602.08335",
          equation=r"A_{b,i} = \frac{r_{b,i} - \operatorname{mean}_{g,i} r}{\operatorname{std}_{g,i} r + "
                   r"\epsilon},\quad r_{b,i} = w_g R_b + w_s \phi_{b,i} + w_p p_{b,i}",
          symbols="R_b: team reward v_b(N); phi: agent's Shapley value; p: process reward (0 if none); weights 1; "
                  "stats over group g rows where i acted")
def sharp(rollouts: Rollouts, *, coalition_values: CoalitionValues = None, process_rewards=None,
          team_reward=None, w_global: float = 1.0, w_shapley: float = 1.0, w_process: float = 1.0,
          method: str = "exact", n_permutations: int = 200, seed: int = 0, eps: float = 1e-6,
          normalize: bool = True) -> Credit:
    """SHARP, Shapley-based hierarchical attribution (Li et al. 2026, arXiv:2602.08335): per-agent credit.

    Inputs:
        rollouts: ``agent_ids``, ``group_ids`` (task groups), ``rewards`` (which agents acted).
        ``coalition_values`` (agent_coalition_values): as in ``shapley``.

    Formula:
        Each agent's reward has three parts, then advantages are normalised per agent:

        r_{b,i} = w_global * R_b + w_shapley * phi_{b,i} + w_process * p_{b,i}
        A_{b,i} = (r_{b,i} - mean_{g,i} r) / (std_{g,i} r + eps)     over the trajectories of task
                                                                     group g in which agent i acted

        R_b: the team outcome ("global broadcast-accuracy reward"), by default the
        grand-coalition column v_b(N) of ``coalition_values``; pass ``team_reward`` (B,) to
        override (labkit never reads ``rollouts.truth``). phi_{b,i}: exact (or
        permutation-sampled) Shapley value of agent i in v_b ("marginal-credit reward").
        p_{b,i}: ``process_rewards`` (B, n) (the paper's tool-process reward for execution
        efficiency); None = no process term. Identities: with w_shapley = w_process = 0 this is
        Dr. MAS (``dr_mas(unit="trajectory")``) on the team reward broadcast to every agent;
        with normalize=False and w_global = w_process = 0 it is ``shapley``.

    Defaults:
        all three weights 1, exact Shapley (``n_permutations=200``, ``seed=0`` when sampled),
        eps = 1e-6, unbiased std, normalize = True.

    Degenerate input:
        ``grpo``'s rule: a (group, agent) pool of one trajectory gets mean 0, std 1; an
        all-equal pool gives 0. Agents that did not act in a trajectory get nothing.

    Deviations from the reference:
        the paper estimates phi from a handful of masked-agent re-runs and its weights are
        tuned per benchmark; here phi comes from the given coalition table, and the weights are
        plain arguments.

    Returns:
        credit at level "agent"; ``info``: ``reward`` r, ``phi``, ``pool_mean``, ``pool_std``
        (B, n), ``team_reward`` (B,).

    Cost:
        as ``shapley``: ``env_steps`` = coalition values read, summed over trajectories.
    """
    for name, w in (("w_global", w_global), ("w_shapley", w_shapley), ("w_process", w_process)):
        check_number(name, w)
    eps = check_number("eps", eps, low=0.0)
    check_choice("method", method, ("exact", "sampled"))
    n = n_agents_of(rollouts)
    B = rollouts.batch_size
    v = coalition_table(rollouts, coalition_values, n)
    if method == "exact":
        phi, evals = exact_shapley(v), 2 ** n
    else:
        phi, evals = sampled_shapley(v, n_permutations=n_permutations, seed=seed)
    team = trajectory_totals("team_reward", team_reward, v[:, -1])
    if process_rewards is None:
        proc = torch.zeros(B, n, dtype=torch.float64)
    else:
        proc = as_tensor("process_rewards", process_rewards).to(torch.float64)
        check_shape("process_rewards", proc, (B, n))
        check_finite("process_rewards", proc)
    r = float(w_global) * team[:, None] + float(w_shapley) * phi + float(w_process) * proc
    _, present = agent_rewards(rollouts, n)
    if check_bool("normalize", normalize):
        pool = group_index(rollouts)[:, None] * n + torch.arange(n)
        adv, mean, std = normalize_pools(r, present, pool, None, eps)
    else:
        adv, mean, std = torch.where(present, r, 0), torch.zeros_like(r), torch.ones_like(r)
    return Credit.from_level(rollouts, adv, "agent", "sharp", cost=Cost(env_steps=evals * B),
                             reward=r, phi=phi, team_reward=team, pool_mean=mean, pool_std=std)


M_GRPO_SUB_GROUPS = ("agent", "pooled")


@register("m_grpo", level="agent", needs=("agents",), status="implemented", paper="2511.13288",
          equation=r"A_{b,i} = \frac{R_{b,i} - \operatorname{mean}_{P} R}{\operatorname{std}_{P} R + \epsilon}",
          symbols="R_{b,i}: agent i's reward; P: pool = task group x agent (default); pooled: all sub-agent calls, "
                  "aligned to D per rollout; eps = 1e-6")
def m_grpo(rollouts: Rollouts, *, main_agent: int = 0, sub_groups: str = "agent",
           d_max: int | None = None, seed: int = 0, eps: float = 1e-6) -> Credit:
    """M-GRPO, hierarchical group-relative advantages for a main agent and its sub-agents
    (Hong et al. 2025, arXiv:2511.13288): per-agent GRPO credit.

    Inputs:
        rollouts: ``rewards`` (each agent's own), ``agent_ids``, ``group_ids`` (task groups).

    Formula:
        With R_{b,i} the per-agent reward (agent i's rewards in trajectory b, summed):

        main agent m:  A_{b,m} = (R_{b,m} - mean_g R_m) / (std_g R_m + eps)   over task group g
        sub-agents:    A_{b,i} = (R_{b,i} - mean_P R)  / (std_P R + eps)      over a sub-agent pool P

        ``sub_groups="agent"``: P = the trajectories of group g in which sub-agent i acted, one
        pool per (task, sub-agent) — each role is its own sub-agent model. Then the main agent is
        normalised like any other agent and the credit equals ``dr_mas(unit="trajectory")``: the
        hierarchy only matters when the sub-agent calls share one pool.
        ``sub_groups="pooled"``: the paper's setting of ONE sub-agent model invoked a variable
        number of times per rollout. All sub-agent invocations of task g form one pool, after
        the paper's trajectory alignment: every rollout contributes exactly D invocations
        (D = ``d_max``, default the largest count in the group) — rollouts with fewer duplicate
        randomly chosen invocations of their own, rollouts with more randomly drop the excess
        (``seed``). Dropped invocations are not trained on (credit 0); duplicates only reweight
        the pool. In labkit an "invocation" is a sub-agent that acted in the row (one reward
        each).

    Defaults:
        main_agent = 0, sub_groups = "agent", d_max = None, seed = 0, eps = 1e-6, unbiased std.

    Degenerate input:
        ``grpo``'s rule: a pool of one sample gets mean 0, std 1; an all-equal pool gives 0; a
        row with no sub-agent adds nothing to the sub-agent pool.

    Deviations from the reference:
        the alignment rule (duplicate / drop at random to a fixed D) is our reading of the
        paper's Sec. 3, not checked against its code. Simplified here: the paper's sub-agent
        reward mixes format, the main agent's final correctness and an expert (LLM) score of the
        sub-agent's output, and its main-agent reward mixes format and correctness; labkit takes
        both from the per-agent rewards in ``rollouts`` (mix them upstream if wanted). The
        decoupled multi-server training (shared statistics store) is not modelled.

    Returns:
        credit at level "agent"; ``info``: ``agent_rewards``, ``pool_mean``, ``pool_std``,
        ``dropped`` (B, n) bool (invocations dropped by the alignment), ``main_agent``,
        ``sub_groups``.

    Cost:
        none beyond the sampled batch.
    """
    check_choice("sub_groups", sub_groups, M_GRPO_SUB_GROUPS)
    eps = check_number("eps", eps, low=0.0)
    seed = check_int("seed", seed)
    n = n_agents_of(rollouts)
    main_agent = check_int("main_agent", main_agent, low=0, high=n - 1)
    if d_max is not None:
        d_max = check_int("d_max", d_max, low=1)
    R, present = agent_rewards(rollouts, n)
    B = rollouts.batch_size
    g = group_index(rollouts)
    is_main = torch.arange(n)[None, :] == main_agent
    dropped = torch.zeros(B, n, dtype=torch.bool)
    if sub_groups == "agent":
        pool = g[:, None] * n + torch.arange(n)
        adv, mean, std = normalize_pools(R, present, pool, None, eps)
    else:
        # main agent: its own pool per task; sub-agents: one pool per task, aligned counts
        pool = torch.where(is_main, g[:, None] * 2, g[:, None] * 2 + 1)
        sub = present & ~is_main
        weight = torch.zeros(B, n, dtype=torch.long)
        weight[present & is_main] = 1
        gen = torch.Generator().manual_seed(seed)
        counts = sub.sum(1)
        for grp in torch.unique(g):
            rows = (g == grp).nonzero().flatten()
            D = int(counts[rows].max()) if d_max is None else check_int("d_max", d_max, low=1)
            for b in rows.tolist():
                idx = sub[b].nonzero().flatten()
                d = idx.numel()
                if d == 0:
                    continue
                if d >= D:   # keep D at random, drop the rest
                    keep = idx[torch.randperm(d, generator=gen)[:D]]
                    weight[b, keep] = 1
                    dropped[b, idx] = True
                    dropped[b, keep] = False
                else:        # every invocation once, plus D - d random duplicates
                    weight[b, idx] = 1
                    extra = idx[torch.randint(d, (D - d,), generator=gen)]
                    weight[b].index_add_(0, extra, torch.ones_like(extra))
        used = present & ~dropped
        adv, mean, std = normalize_pools(R, used, pool, weight, eps)
    return Credit.from_level(rollouts, adv, "agent", "m_grpo", agent_rewards=R, pool_mean=mean,
                             pool_std=std, dropped=dropped, main_agent=main_agent, sub_groups=sub_groups)


@register("scar", level="step", inputs={"coalition_values": "step_coalition_values"}, status="implemented",
          paper="2505.20417",
          equation=r"A_{b,k} = \sum_{S \subseteq [m] \setminus \{k\}} \frac{|S|! \, (m - |S| - 1)!}{m!} \left(v_b(S "
                   r"\cup \{k\}) - v_b(S)\right)",
          symbols="k: step (a player); m: number of steps of trajectory b; v_b(S): value (success rate) with only "
                  "the steps in S kept")
def scar(rollouts: Rollouts, *, coalition_values: CoalitionValues = None, method: str = "exact",
         n_permutations: int = 200, seed: int = 0) -> Credit:
    """SCAR (Cao et al. 2025, arXiv:2505.20417): Shapley credit over the reasoning segments of a trajectory.

    Inputs:
        rollouts: ``step_ids`` (the segments are the players; M = the batch's largest number of
        steps).
        ``coalition_values`` (step_coalition_values): (B, 2**M) or a callable rollouts ->
        (B, 2**M): v_b(S) = the value (reward-model score / success probability) of trajectory b
        when only the segments in bitmask S are kept.

    Formula:
        For a row with m_b < M steps, bits >= m_b are absent players: labkit reads
        v_b(S & (2**m_b - 1)) — the columns that differ only in absent bits are ignored — so
        absent segments are null players and get exactly 0.

        phi_{b,k} = sum_{S subset [m_b] \\ {k}} |S|!(m_b-|S|-1)!/m_b! (v_b(S+k) - v_b(S))

        Credit of step k = phi_{b,k}, the dense reward SCAR puts on segment k; the segment
        rewards add up to v_b(all) - v_b(none) (efficiency), so with v_b(none) = 0 they
        redistribute the sequence reward exactly (the paper's potential-based-shaping argument
        for an unchanged optimal policy). No baseline or normalisation here; feed phi as rewards
        to a return/advantage estimator if wanted.

    Defaults:
        method = "exact"; ``method="sampled"`` uses ``n_permutations=200`` orderings, ``seed=0``.

    Degenerate input:
        a one-step row gets v(all) - v(none); rows with no step get nothing. Groups play no
        role. More than 24 segments (``MAX_PLAYERS``) are refused: their table would not fit.

    Deviations from the reference:
        the paper segments adaptively (tokens, spans, sentences) and uses Owen values (a
        hierarchical approximation) to stay cheap; labkit takes given segments and computes
        exact (or permutation-sampled) Shapley values. The paper's value is a reward model
        scoring the partial text; in the lab it is the verifier's success rate of the tiny LM's
        continuations (``ArithmeticLM.segment_coalition_values``, notebook 09).

    Returns:
        credit at level "step"; ``info``: ``phi`` (B, M), ``n_steps`` (B,).

    Cost:
        ``aux_calls`` = coalition values read (2**m_b per row when exact; the distinct
        coalitions visited when sampled) — one value-model evaluation per coalition.
    """
    check_choice("method", method, ("exact", "sampled"))
    n_steps = rollouts.n_steps.clamp(min=0)
    M = int(n_steps.max())
    if M > MAX_PLAYERS:
        raise ValueError(f"coalition_values: {M} segments need a 2**{M} table; at most {MAX_PLAYERS}")
    v = coalition_table(rollouts, coalition_values, M)
    full = (1 << n_steps) - 1                                      # (B,) the row's grand coalition
    proj = torch.arange(2 ** M)[None, :] & full[:, None]           # drop absent players' bits
    v_row = v.gather(1, proj)
    if method == "exact":
        phi = exact_shapley(v_row)
        evals = int((1 << n_steps).sum())
    else:
        phi, per = sampled_shapley(v_row, n_permutations=n_permutations, seed=seed)
        evals = int(torch.minimum(torch.full_like(n_steps, per), 1 << n_steps).sum())
    phi = torch.where(torch.arange(M)[None, :] < n_steps[:, None], phi, 0.0)
    return Credit.from_level(rollouts, phi, "step", "scar", cost=Cost(aux_calls=evals), phi=phi,
                             n_steps=n_steps)


CORE_CONSTRAINTS = ("all", "sampled")
CORE_MAX_PLAYERS = 8  # 254 coalition constraints; the LP sequence grows fast beyond that


@register("core_credit", level="agent", needs=("agents",), inputs={"coalition_values": "agent_coalition_values"},
          status="adaptation", paper="2605.06920",
          replaces="the in-context contributors whose value a generated output is divided among (items placed in "
                   "the model's context, valued by model calls on sub-contexts): the team's agents, valued by the "
                   "exact coalition table of the environment",
          equation=r"A_{b,i} = x_{b,i},\; x_b = \operatorname{nucleolus}\{x : \sum_i x_i = v_b(N),\; "
                   r"\sum_{i \in S} x_i \ge v_b(S) - e^*\;\forall S\},\; e^* = \min e",
          symbols="i: agent; S: proper non-empty coalition (all, or the singletons plus a random sample); "
                  "v_b(S): team value of trajectory b with only the agents in S, minus v_b(empty); e: least-core value")
def core_credit(rollouts: Rollouts, *, coalition_values: CoalitionValues = None, constraints: str = "all",
                n_sampled: int = 8, seed: int = 0) -> Credit:
    """In-context core credit (arXiv:2605.06920, "In-Context Credit Assignment via the Core"):
    each agent gets its share of the team value in the least core (its nucleolus point).

    Inputs:
        rollouts: ``agent_ids`` (n = ``info["n_agents"]`` or the largest agent id + 1, n <= 8).
        ``coalition_values`` (agent_coalition_values): as in ``shapley``, (B, 2**n) or a
        callable rollouts -> (B, 2**n).

    Formula:
        With w_b(S) = v_b(S) - v_b(empty), the least core of trajectory b's game is

            e*_b = min e   s.t.   sum_i x_i = w_b(N),   sum_{i in S} x_i >= w_b(S) - e
                                  for every proper non-empty coalition S

        (no coalition is short of what it could earn alone by more than e*). It is a set; the
        point returned is its nucleolus (lexicographically smallest sorted excesses, the
        canonical unique point inside it, ``labkit.core.games.least_core``), and every
        position of agent i in trajectory b gets x_{b,i}. Efficient like Shapley (the shares
        sum to v_b(N) - v_b(empty)), but where Shapley averages marginal contributions over
        orderings, the core gives everything to players that every winning coalition needs
        (a veto player) and nothing to those that are only useful in surplus.

        constraints="sampled" ("few model calls"): only the n singletons and ``n_sampled``
        random other proper coalitions are constraints; the result is the nucleolus of that
        relaxed LP (equal to the exact one when the sample holds the binding coalitions).

    Defaults:
        constraints = "all" (exact); sampled: ``n_sampled=8`` coalitions, ``seed=0`` (the same
        sample for every trajectory). No group baseline, no normalisation.

    Degenerate input:
        a one-agent team gets v(N) - v(empty) and e* = -inf (no proper coalition); an agent
        absent from a trajectory has no position (its share is kept in ``info`` but painted
        nowhere). Groups play no role. Identical games in a batch are solved once.

    Deviations from the reference:
        the paper's players are the items a model reads in its context and its coalition values
        are model calls on sub-contexts; here the players are TeamTask's agents and the values
        the environment's exact coalition table (adaptation). The choice of the nucleolus as
        the point in the least core, the zero-normalisation by v(empty), the LP solver (a
        dense two-phase simplex, exact to rounding) and the constraint sampling scheme
        (singletons always kept so the LP stays bounded) are labkit's: the paper's text was
        not available, and these follow the catalogue's description only.

    Returns:
        credit at level "agent"; ``info``: ``x`` (B, n) the shares, ``e`` (B,) the least-core
        value, ``n_evaluations`` per trajectory, ``n_lps`` the LPs solved, ``constraints``.

    Cost:
        ``env_steps`` = coalition values read, summed over trajectories: 2**n per trajectory
        when exact, 2 + n + n_sampled (empty, grand, singletons, sample) when sampled — one
        re-executed team episode per value, as in ``shapley``. The LPs cost no model call.
    """
    check_choice("constraints", constraints, CORE_CONSTRAINTS)
    n_sampled = check_int("n_sampled", n_sampled, low=0)
    seed = check_int("seed", seed)
    n = n_agents_of(rollouts)
    if n > CORE_MAX_PLAYERS:
        raise ValueError(f"rollouts: core_credit solves exact LPs over 2**n coalitions, n <= {CORE_MAX_PLAYERS}; "
                         f"the team has {n} agents")
    v = coalition_table(rollouts, coalition_values, n)
    if constraints == "all":
        x, e, n_lps = least_core(v, return_lps=True)
        evals = 2 ** n
    else:
        n_other = max(2 ** n - 2 - n, 0)
        k = min(n_sampled, n_other)
        x, e, n_lps = least_core(v, n_sampled=k, seed=seed, return_lps=True)
        evals = min(2 + n + k, 2 ** n)
    return Credit.from_level(rollouts, x, "agent", "core_credit", cost=Cost(env_steps=evals * rollouts.batch_size),
                             x=x, e=e, n_evaluations=evals, n_lps=n_lps, constraints=constraints)
