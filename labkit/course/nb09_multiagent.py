"""Notebook 09, multi-agent credit: when a team shares one reward, how much did each agent
contribute? Exact and sampled Shapley against leave-one-out on designed games, estimators
(SHARP, M-GRPO, Dr. MAS, stand-in judges) against exact per-trajectory Shapley, written credit
functions in QLLM's form (the agents' own utilities and the state in, no coalition value),
Dr. MAS's per-agent normalisation of the gradient, and Shapley over an LM's reasoning segments
(SCAR).

Runners on ``TeamTask``: coalition values v(S) by enumeration, the exact team success J and its
exact gradient per agent, so each comparison is against the truth of the policies that produced
the data, not against another estimate. Every runner is seeded and returns a DataFrame (or a
dict of them).
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from labkit.core.checks import check_choice, check_int, check_number
from labkit.core.games import exact_shapley, least_core, leave_one_out_values, sampled_shapley
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.credit import judge as judging
from labkit.credit import multiagent as ma
from labkit.bench.suite import teamtask_credit_rule
from labkit.envs.teamtask import PRESET_STORIES, PRESETS, TeamLearner, TeamTask
from labkit.learn import judges
from labkit.learn.loop import policy_loss, train
from labkit.scoring import difference_interval, first_error_hit_rate, pearson, sign_agreement
from labkit.viz import credit_panels


DESIGNED_CASES = ("redundancy", "complementarity", "free_riding", "sabotage")


# --------------------------------------------------------------------------- designed games
def coalition_names(env: TeamTask) -> list[str]:
    """'{planner, solver 1}' style names of the 2**n coalitions, in bitmask order."""
    masks = env.coalition_masks()
    return ["{" + ", ".join(n for n, m in zip(env.agent_names, row) if m) + "}" for row in masks.tolist()]


def coalition_table(env: TeamTask, values: torch.Tensor) -> pd.DataFrame:
    """One row per coalition: its members and v(S) (a (2**n,) table, e.g. ``truth.values``)."""
    values = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    if values.numel() != env.n_coalitions:
        raise ValueError(f"values: expected {env.n_coalitions} coalition values, got {values.numel()}")
    return pd.DataFrame({"coalition": coalition_names(env), "size": env.coalition_masks().sum(1).tolist(),
                         "v": values.tolist()})


def game_credit(env: TeamTask, policies, *, case: str = "") -> pd.DataFrame:
    """Exact Shapley and leave-one-out credit of every agent in the expected game of ``policies``.

    Columns: case, agent, role, shapley, loo, v_full (= J), v_empty.
    """
    values = env.truth(policies).values
    phi, loo = _clean(exact_shapley(values)), _clean(leave_one_out_values(values))
    out = pd.DataFrame({"case": case, "agent": env.agent_names, "role": list(env.roles),
                        "shapley": phi.tolist(), "loo": loo.tolist(), "v_full": float(values[-1]),
                        "v_empty": float(values[0])})
    out.attrs["games"] = {case: (list(env.agent_names), values.tolist())}   # plain lists: pandas compares attrs
    return out


def _clean(x: torch.Tensor, tol: float = 1e-12) -> torch.Tensor:
    """Round-off below ``tol`` to exactly 0 (a null player prints 0.000, not -0.000)."""
    return torch.where(x.abs() < tol, torch.zeros((), dtype=x.dtype), x)


def designed_games(cases: Sequence[str] = DESIGNED_CASES, *, strength: float = 12.0, **overrides) -> pd.DataFrame:
    """Shapley vs leave-one-out on the presets, each played by the competent scripted team
    (``scripted_policies(strength)``: the designed action with probability ~1 at strength 12).
    ``overrides`` go to every preset (e.g. ``sabotage=0.8``). One row per (case, agent);
    ``attrs["games"]`` holds {case: (agent names, coalition table)}."""
    strength = check_number("strength", strength)
    frames = []
    for case in cases:
        check_choice("cases", case, tuple(PRESETS))
        env = TeamTask.preset(case, **overrides)
        frames.append(game_credit(env, env.scripted_policies(strength), case=case))
    out = pd.concat(frames, ignore_index=True)
    # the coalition tables travel with the frame, so later sections reuse them without recomputing
    out.attrs["games"] = {k: g for f in frames for k, g in f.attrs["games"].items()}
    return out


def credit_long(df: pd.DataFrame) -> pd.DataFrame:
    """The ``game_credit`` / ``designed_games`` table in long form for a grouped bar chart:
    columns case, agent, method ("Shapley" / "leave-one-out"), credit."""
    out = df.melt(id_vars=["case", "agent"], value_vars=["shapley", "loo"], var_name="method", value_name="credit")
    out["method"] = out.method.map({"shapley": "Shapley", "loo": "leave-one-out"})
    return out


def efficiency_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per case: v(N), the sum of the Shapley values (= v(N) - v(empty), efficiency) and the sum
    of the leave-one-out credits (which can be anything), plus the largest per-agent gap."""
    g = df.groupby("case", sort=False)
    out = pd.DataFrame({"v_full": g.v_full.first(), "sum_shapley": g.shapley.sum(), "sum_loo": g.loo.sum(),
                        "max_gap": g.apply(lambda d: float((d.shapley - d.loo).abs().max()), include_groups=False)})
    out["story"] = [PRESET_STORIES.get(c, "") for c in out.index]
    return out.reset_index()


def core_beside_shapley(games: Mapping[str, tuple[Sequence[str], torch.Tensor]]) -> pd.DataFrame:
    """Exact Shapley against the least core's nucleolus (``labkit.core.games.least_core``, the
    split ``core_credit`` gives) in each game of ``games`` ({case: (agent names, (2**n,) coalition
    table)}, e.g. ``designed_games(...).attrs["games"]``).

    One row per (case, agent): case, agent, shapley, core, diff (core - shapley), e (the case's
    least-core value: the most any coalition is short of what it earns alone).
    """
    if not isinstance(games, Mapping) or not games:
        raise TypeError(f"games: expected a non-empty dict case -> (agent names, coalition table), got {games!r}")
    frames = []
    for case, pair in games.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"games: {case!r} needs an (agent names, coalition table) pair")
        names, values = list(pair[0]), torch.as_tensor(pair[1], dtype=torch.float64).reshape(-1)
        if values.numel() != 2 ** len(names):
            raise ValueError(f"games: {case!r} has {len(names)} agents but {values.numel()} coalition values")
        phi = _clean(exact_shapley(values))
        x, e = least_core(values)
        x = _clean(x)
        frames.append(pd.DataFrame({"case": case, "agent": names, "shapley": phi.tolist(), "core": x.tolist(),
                                    "diff": _clean(x - phi, 1e-9).tolist(), "e": float(_clean(e, 1e-9))}))
    return pd.concat(frames, ignore_index=True)


def core_differences(df: pd.DataFrame, *, tol: float = 1e-9) -> tuple[pd.DataFrame, list[str]]:
    """Split a ``core_beside_shapley`` table: the rows of the cases where some agent's share
    differs by more than ``tol``, and the names of the cases where the two coincide."""
    tol = check_number("tol", tol, low=0.0)
    differs = df.groupby("case", sort=False)["diff"].apply(lambda d: bool((d.abs() > tol).any()))
    return (df[df.case.map(differs)].reset_index(drop=True), [c for c, d in differs.items() if not d])


# --------------------------------------------------------------------------- your own credit function (QLLM)
def vdn_credit(q: dict, state: dict, agents: list) -> dict:
    """Naive credit function: each agent's own utility is its credit (VDN's mixer, Q_tot = sum_i
    Q_i, which is exactly Shapley when the team's value is the sum of its members' utilities)."""
    return {a: q[a] for a in agents}


def equal_split_credit(q: dict, state: dict, agents: list) -> dict:
    """Naive credit function: the team outcome split equally (what a shared reward says, scaled to add up)."""
    return {a: state["team_reward"] / len(agents) for a in agents}


#: The naive credit functions the notebook scores beside the written rule.
NAIVE_CREDIT_FUNCTIONS = {"VDN (own utility)": vdn_credit, "equal split of the outcome": equal_split_credit}
#: The lab's written rule (the benchmark's stand-in author): effects read off the state, mixed with the utilities.
PROVIDED_CREDIT_FUNCTION = teamtask_credit_rule


def _written_credit(ro: Rollouts, states: list, fn, name: str) -> torch.Tensor:
    """``fn``'s credit on ``ro`` through the registered estimator (utilities from the batch, the
    ``states`` of ``TeamTask.global_states``), (B, n); an error names the credit function."""
    try:
        return get_estimator("credit_function")(ro, fn=fn, states=states).values
    except (ValueError, TypeError) as err:
        raise type(err)(f"{err} (credit function {name!r})") from err.__cause__


def score_credit_functions(fns: Mapping[str, judging.CreditFunction], *,
                           cases: Sequence[str] = DESIGNED_CASES + ("mixed",), strength: float = 2.0,
                           seeds: Sequence[int] = tuple(range(5)), n_tasks: int = 32,
                           group_size: int = 8) -> pd.DataFrame:
    """Written credit functions scored against the exact per-episode Shapley value.

    QLLM (arXiv 2504.12961) has a language model write the mixer of a value-decomposition critic;
    here each ``fns[name]`` (``fn(q, state, agents) -> {agent: credit}``) is run by
    ``labkit.credit.judge.credit_function`` on what QLLM's mixer has: every agent's utility
    (the batch's mean team outcome given its own observation and action) and the episode's state
    (``TeamTask.global_states``), never a coalition value. Each case's preset is played by
    ``scripted_policies(strength)`` (2: the designed action is likely, not certain, so episodes
    differ) for each seed. One row per (case, method, seed): ``corr`` (Pearson over all episode x
    agent entries), ``mae`` (mean |credit - Shapley|), ``sign_agree`` (``sign_agreement``),
    ``efficiency_gap`` (mean over episodes of |sum of credits - v_b(N)|, 0 for Shapley).
    """
    strength = check_number("strength", strength)
    if not isinstance(fns, Mapping) or not fns:
        raise TypeError(f"fns: expected a non-empty dict name -> credit function, got {type(fns).__name__}")
    rows = []
    for case in cases:
        check_choice("cases", case, tuple(PRESETS))
        env = TeamTask.preset(case)
        pol = env.scripted_policies(strength)
        for seed in seeds:
            seed = check_int("seeds", seed, low=0)
            ro = env.sample(pol, n_tasks, group_size=group_size, seed=seed)
            values = env.coalition_values(ro)
            phi = _clean(exact_shapley(values))
            every = torch.ones_like(phi, dtype=torch.bool)
            states = env.global_states(ro)
            for name, fn in fns.items():
                c = _clean(_written_credit(ro, states, fn, name))
                rows.append({"case": case, "method": name, "seed": seed, "corr": pearson(c, phi),
                             "mae": float((c - phi).abs().mean()), "sign_agree": sign_agreement(c, phi, every),
                             "efficiency_gap": float((c.sum(1) - (values[:, -1] - values[:, 0])).abs().mean())})
    return pd.DataFrame(rows)


def credit_function_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (case, method): mean, std, min and max over seeds of ``corr`` and ``mae``, the mean
    ``sign_agree`` and ``efficiency_gap``, and the number of seeds."""
    g = scores.groupby(["case", "method"], sort=False)
    corr, mae = g["corr"], g["mae"]   # g.corr is DataFrame.corr
    out = pd.DataFrame({"corr_mean": corr.mean(), "corr_std": corr.std(), "corr_min": corr.min(),
                        "corr_max": corr.max(), "mae_mean": mae.mean(), "mae_std": mae.std(),
                        "mae_min": mae.min(), "mae_max": mae.max(), "sign_agree": g["sign_agree"].mean(),
                        "efficiency_gap": g["efficiency_gap"].mean(), "seeds": g["seed"].nunique()})
    return out.reset_index()


def credit_function_difference(scores: pd.DataFrame, a: str, b: str, *, metric: str = "mae") -> pd.DataFrame:
    """Per case: mean ``metric`` of method ``a`` minus that of ``b`` over the seeds, with
    ``labkit.scoring.difference_interval``'s 95 % bootstrap interval (seeds are independent batches)."""
    check_choice("metric", metric, ("corr", "mae", "sign_agree", "efficiency_gap"))
    for name, m in (("a", a), ("b", b)):
        if m not in set(scores.method):
            raise ValueError(f"{name}: {m!r} is not a scored method; known: {sorted(set(scores.method))}")
    rows = []
    for case, d in scores.groupby("case", sort=False):
        iv = difference_interval(d[d.method == a][metric], d[d.method == b][metric])
        rows.append({"case": case, "diff": iv["diff"], "low": iv["low"], "high": iv["high"], "seeds": iv["n_a"]})
    return pd.DataFrame(rows)


def additivity_gap(values: torch.Tensor) -> float:
    """How far a game is from additive: max over coalitions S of |v(S) - v(empty) - sum over i in S
    of (v({i}) - v(empty))|. 0 exactly when every coalition is worth the sum of its members'
    solo contributions, the one case where each agent's own contribution is its Shapley value."""
    values = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    n = int(round(np.log2(values.numel())))
    if 2 ** n != values.numel():
        raise ValueError(f"values: expected 2**n coalition values, got {values.numel()}")
    masks = (torch.arange(2 ** n)[:, None] >> torch.arange(n)[None, :]) & 1
    solo = values[2 ** torch.arange(n)] - values[0]
    return float((values - values[0] - masks.to(torch.float64) @ solo).abs().max())


def additive_game(utilities) -> torch.Tensor:
    """The game v(S) = sum of the utilities of S's members, (2**n,) in bitmask order: the one kind
    of team where every agent's own utility is exactly its Shapley value."""
    u = torch.as_tensor(utilities, dtype=torch.float64).reshape(-1)
    n = check_int("utilities", u.numel(), low=1, high=16)
    masks = (torch.arange(2 ** n)[:, None] >> torch.arange(n)[None, :]) & 1
    return masks.to(torch.float64) @ u


def designed_credit_table(fns: Mapping[str, judging.CreditFunction], *, cases: Sequence[str] = DESIGNED_CASES,
                          strength: float = 12.0, n_tasks: int = 8, group_size: int = 8, seed: int = 0) -> pd.DataFrame:
    """The textbook games (each preset's competent team at ``strength``, as ``designed_games``):
    per (case, agent) the exact Shapley value of the expected game and every credit function's
    mean credit over a sampled batch; ``attrs["additivity_gap"]``: {case: ``additivity_gap`` of
    its expected game}."""
    strength = check_number("strength", strength)
    frames, gaps = [], {}
    for case in cases:
        check_choice("cases", case, tuple(PRESETS))
        env = TeamTask.preset(case)
        pol = env.scripted_policies(strength)
        values = env.truth(pol).values
        gaps[case] = additivity_gap(values)
        ro = env.sample(pol, n_tasks, group_size=group_size, seed=seed)
        df = pd.DataFrame({"case": case, "agent": env.agent_names, "shapley": _clean(exact_shapley(values)).tolist()})
        states = env.global_states(ro)
        for name, fn in fns.items():
            df[name] = _clean(_written_credit(ro, states, fn, name).mean(0), 1e-9).tolist()
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out.attrs["additivity_gap"] = gaps
    return out


def mixed_team_credit(*, sabotage: float = 0.5, catch: float = 0.8, p_plan: float = 0.9,
                      unchecked_pass: float = 0.6, strength: float = 4.0) -> pd.DataFrame:
    """The six-role team (preset "mixed") with the given knobs, played by ``scripted_policies``:
    exact Shapley and leave-one-out per agent (for the notebook's slider)."""
    env = TeamTask.preset("mixed", sabotage=sabotage, catch=catch, p_plan=p_plan, unchecked_pass=unchecked_pass)
    return game_credit(env, env.scripted_policies(strength), case="mixed")


#: the mixed team's slider moves the prediction block asks about: (knob, from, to), the other knobs at their start
MIXED_TEAM_MOVES = (("sabotage", 0.0, 1.0), ("catch", 0.0, 1.0), ("unchecked_pass", 0.0, 1.0))


def mixed_team_moves(moves: Sequence[tuple[str, float, float]] = MIXED_TEAM_MOVES, **start) -> pd.DataFrame:
    """The mixed team at both ends of each slider move: for each ``(knob, from, to)`` in ``moves``
    (knob one of sabotage, catch, p_plan, unchecked_pass; the others at ``mixed_team_credit``'s
    defaults unless given in ``start``), ``mixed_team_credit`` at ``from`` and at ``to``. One row
    per (knob, value): ``v_full`` (the team's value v(N)), ``sum_shapley``, ``sum_loo`` (the two
    credits added up), and the saboteur's and the checker's credit under each (``saboteur_shapley``,
    ``saboteur_loo``, ``checker_shapley``, ``checker_loo``)."""
    knobs = ("sabotage", "catch", "p_plan", "unchecked_pass")
    for name in start:
        check_choice("start", name, knobs)
    rows = []
    for move in moves:
        if not isinstance(move, (tuple, list)) or len(move) != 3:
            raise ValueError(f"moves: each move is (knob, from, to), got {move!r}")
        knob = check_choice("moves", move[0], knobs)
        for value in move[1:]:
            value = check_number("moves", value, low=0.0, high=1.0)
            df = mixed_team_credit(**{**start, knob: value}).set_index("agent")
            rows.append({"knob": knob, "value": value, "v_full": float(df.v_full.iloc[0]),
                         "sum_shapley": float(df.shapley.sum()), "sum_loo": float(df.loo.sum()),
                         "saboteur_shapley": float(df.loc["saboteur", "shapley"]),
                         "saboteur_loo": float(df.loc["saboteur", "loo"]),
                         "checker_shapley": float(df.loc["checker", "shapley"]),
                         "checker_loo": float(df.loc["checker", "loo"])})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- sampled Shapley
def sampled_shapley_error(values: torch.Tensor, budgets: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
                          *, seeds: Sequence[int] = tuple(range(10)), antithetic: bool = False) -> pd.DataFrame:
    """Permutation-sampled Shapley against exact Shapley, per budget and seed.

    ``values`` (2**n,) or (B, 2**n) games. Rows: budget (orderings), seed, ``n_evaluations``
    (distinct coalitions the orderings visited, what a caller without the table pays),
    ``mae`` (mean |phi_sampled - phi_exact| over agents and games), ``max_err``, ``efficiency_gap``
    (|sum phi_sampled - sum phi_exact|, 0 up to rounding: every ordering is efficient).
    """
    values = torch.as_tensor(values, dtype=torch.float64)
    exact = exact_shapley(values)
    rows = []
    for budget in budgets:
        budget = check_int("budgets", budget, low=1)
        for seed in seeds:
            phi, evals = sampled_shapley(values, n_permutations=budget, seed=int(seed), antithetic=antithetic)
            err = (phi - exact).abs()
            rows.append({"budget": budget, "seed": int(seed), "n_evaluations": evals, "mae": float(err.mean()),
                         "max_err": float(err.max()),
                         "efficiency_gap": float((phi.sum(-1) - exact.sum(-1)).abs().max())})
    return pd.DataFrame(rows)


def error_summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Mean and spread over seeds of the sampled-Shapley error, per budget."""
    g = errors.groupby("budget")
    out = pd.DataFrame({"n_evaluations": g.n_evaluations.mean(), "mae_mean": g.mae.mean(), "mae_std": g.mae.std(),
                        "mae_min": g.mae.min(), "mae_max": g.mae.max(), "max_err": g.max_err.max()})
    return out.reset_index()


# --------------------------------------------------------------------------- comparing credit
def agent_credit(rollouts: Rollouts, credit: Credit, n: int) -> torch.Tensor:
    """An estimator's credit per (trajectory, agent), (B, n): its agent-level values, or the
    mean credit over the agent's positions for a token-level estimator."""
    if credit.level == "agent":
        vals = credit.values
    else:
        vals = credit.at(rollouts, "agent", "mean")[0]
    out = torch.zeros(rollouts.batch_size, n, dtype=torch.float64)
    out[:, :vals.shape[1]] = vals.double()[:, :n]
    return out


def credit_methods(env: TeamTask, *, judge_noise: float = 0.3, seed: int = 0) -> dict[str, Callable]:
    """Every multi-agent estimator of the comparison, as ``rollouts -> Credit`` on TeamTask.

    Exact ingredients: ``coalition_values`` = ``env.coalition_values`` (exact v_b(S)).
    STAND-INS for the LLM judges (``labkit.credit.judge.noisy_oracle``, noise ``judge_noise``):
    MAPPA's per-action coach scores the action's local quality (``truth["action_ok"]``: right
    plan / method, review, cooperate; 0.5 for the free rider) on a 0..10 scale; LLM-MCA's
    critic reports the exact per-trajectory Shapley values plus noise. SHARP's process term is
    the role's process score (``truth["process"]``), M-GRPO's main agent is agent 0.
    """
    cv = env.coalition_values
    n = env.n_agents

    def mappa(ro):
        scores = judges.noisy_oracle(10 * ro.truth["action_ok"], noise=10 * judge_noise, seed=seed,
                                     low=0.0, high=10.0, levels=11)
        return get_estimator("mappa")(ro, judge_scores=scores)

    def llm_mca(ro):
        phi = exact_shapley(cv(ro))
        return get_estimator("llm_mca")(ro, judge_credit=judges.noisy_oracle(phi, noise=judge_noise, seed=seed))

    return {
        "Shapley (exact)": lambda ro: get_estimator("shapley")(ro, coalition_values=cv),
        "Shapley (sampled, 8 orderings)": lambda ro: get_estimator("shapley")(ro, coalition_values=cv, method="sampled",
                                                                              n_permutations=8, seed=seed),
        "leave-one-out": lambda ro: get_estimator("leave_one_out")(ro, coalition_values=cv),
        "SHARP": lambda ro: get_estimator("sharp")(ro, coalition_values=cv, process_rewards=ro.truth["process"][:, :n]),
        "M-GRPO": lambda ro: get_estimator("m_grpo")(ro, main_agent=0),
        "Dr. MAS": lambda ro: get_estimator("dr_mas")(ro, normalize="agent"),
        "GRPO (team reward)": lambda ro: get_estimator("grpo")(ro.with_(rewards=_team_on_last(ro))),
        "MAPPA (stand-in judge)": mappa,
        "LLM-MCA (stand-in critic)": llm_mca,
    }


def _team_on_last(ro: Rollouts) -> torch.Tensor:
    r = torch.zeros_like(ro.rewards)
    r[:, -1] = ro.truth["team_reward"].to(r.dtype)
    return r


def agent_credit_agreement(env: TeamTask, policies, *, n_tasks: int = 32, group_size: int = 8, seed: int = 0,
                           judge_noise: float = 0.3, methods: Mapping[str, Callable] | None = None) -> dict:
    """Each estimator's per-agent credit against the exact per-trajectory Shapley value.

    Returns ``rollouts``, ``phi`` (B, n) exact Shapley, ``credit`` {method: (B, n)} and
    ``stats``: per method ``corr_pooled`` (Pearson over all (trajectory, agent) entries),
    ``corr_within_agent`` (Pearson across trajectories inside each agent's column, averaged over
    agents whose Shapley column varies: insensitive to per-agent baselines and scales, i.e. what a
    per-agent-normalised policy gradient keeps), ``sign_agree`` (the course's one definition,
    ``labkit.scoring.sign_agreement`` at its default threshold: the share of entries with
    |phi| > 0.05 whose credit has phi's sign) and the mean credit per agent (``mean_<agent>``).
    """
    ro = env.sample(policies, n_tasks, group_size=group_size, seed=seed)
    n = env.n_agents
    phi = _clean(exact_shapley(env.coalition_values(ro)))
    methods = credit_methods(env, judge_noise=judge_noise, seed=seed) if methods is None else methods
    credit, rows = {}, []
    varying = [i for i in range(n) if float(phi[:, i].std()) > 1e-9]
    every = torch.ones_like(phi, dtype=torch.bool)
    for name, fn in methods.items():
        c = _clean(agent_credit(ro, fn(ro), n))
        credit[name] = c
        within = [pearson(c[:, i], phi[:, i]) for i in varying]
        within = [w for w in within if w == w]
        row = {"method": name, "corr_pooled": pearson(c, phi),
               "corr_within_agent": float(np.mean(within)) if within else float("nan"),
               "sign_agree": sign_agreement(c, phi, every)}
        means = _clean(c.mean(0), 1e-9)   # group-normalised credit: mean 0 up to ~1e-11
        row.update({f"mean_{a}": float(means[i]) for i, a in enumerate(env.agent_names)})
        rows.append(row)
    return {"rollouts": ro, "phi": phi, "credit": credit, "stats": pd.DataFrame(rows)}


def judge_noise_sweep(env: TeamTask, policies, noises: Sequence[float] = (0.0, 0.1, 0.3, 1.0), *,
                      n_tasks: int = 32, group_size: int = 8, seed: int = 0) -> pd.DataFrame:
    """Agreement with exact Shapley of the two stand-in judges as their noise grows."""
    rows = []
    for noise in noises:
        noise = check_number("noises", noise, low=0.0)
        allm = credit_methods(env, judge_noise=noise, seed=seed)
        pick = {k: v for k, v in allm.items() if "stand-in" in k}
        st = agent_credit_agreement(env, policies, n_tasks=n_tasks, group_size=group_size, seed=seed, methods=pick)["stats"]
        st.insert(0, "noise", noise)
        rows.append(st[["noise", "method", "corr_pooled", "corr_within_agent", "sign_agree"]])
    return pd.concat(rows, ignore_index=True)


# --------------------------------------------------------------------------- Dr. MAS
def per_agent_gradients(learner: TeamLearner, rollouts: Rollouts, advantages: torch.Tensor) -> list[torch.Tensor]:
    """The REINFORCE gradient estimate (1/B) sum_b A_b,i grad log pi_i(a_b,i | o_b,i) of every agent's
    logits (ascent direction), from ``advantages`` (B, T)."""
    params = [p.logits for p in learner.policies]
    logp = learner.logprobs(rollouts, torch.arange(rollouts.batch_size))
    loss, _ = policy_loss(logp, rollouts.logprobs, advantages, rollouts.mask, "reinforce")
    grads = torch.autograd.grad(loss, params)
    return [-g.detach() for g in grads]


def gradient_scales(env: TeamTask, policies, *, normalizations: Sequence[str] = ("global", "agent"),
                    n_batches: int = 50, n_tasks: int = 8, group_size: int = 8, seed: int = 0) -> pd.DataFrame:
    """Per agent and normalisation: how big and how well aimed the batch policy gradient is.

    ``n_batches`` batches of the policies (fixed, no update); Dr. MAS credit with
    ``normalize`` = "global" (one baseline and std over all agents of a task group) or "agent".
    Rows (normalize, agent): ``grad_norm`` mean per-batch norm of the agent's gradient estimate,
    ``grad_norm_cv`` its coefficient of variation over batches, ``exact_norm`` ||dJ/dlogits_i||,
    ``norm_over_exact`` = grad_norm / exact_norm (the step an agent takes per unit of true
    gradient: equal across agents when the scale is calibrated),
    ``cosine`` cosine between the batch-mean gradient and the exact gradient (is the signal
    there on average?), ``batch_cosine`` mean per-batch cosine with the exact gradient (how much
    of one batch's gradient points the right way), ``reward_mean`` / ``reward_std`` of the agent.
    """
    n_batches = check_int("n_batches", n_batches, low=2)
    truth = env.truth(policies)
    learner = TeamLearner(env, policies, n_tasks=n_tasks, group_size=group_size, track_grads=False)
    dr = get_estimator("dr_mas")
    batches = [env.sample(policies, n_tasks, group_size=group_size, seed=seed * 100_003 + k) for k in range(n_batches)]
    rows = []
    for norm in normalizations:
        grads = [[] for _ in policies]
        for ro in batches:
            adv = dr(ro, normalize=norm).token
            for i, g in enumerate(per_agent_gradients(learner, ro, adv)):
                grads[i].append(g.flatten())
        for i, name in enumerate(env.agent_names):
            G = torch.stack(grads[i])                     # (batches, params)
            exact = truth.grads[i].flatten()
            norms = G.norm(dim=1)
            en = float(exact.norm())
            cos = lambda a: float((a @ exact) / (a.norm() * en)) if en > 1e-12 and float(a.norm()) > 1e-12 else float("nan")
            per_batch = [cos(g) for g in G]
            per_batch = [c for c in per_batch if c == c]
            R = torch.cat([ro.rewards[:, i] for ro in batches])
            rows.append({"normalize": norm, "agent": name, "role": env.roles[i], "grad_norm": float(norms.mean()),
                         "grad_norm_cv": float(norms.std() / norms.mean()) if float(norms.mean()) > 0 else float("nan"),
                         "exact_norm": en,
                         "norm_over_exact": float(norms.mean()) / en if en > 1e-12 else float("nan"),
                         "cosine": cos(G.mean(0)),
                         "batch_cosine": float(np.mean(per_batch)) if per_batch else float("nan"),
                         "reward_mean": float(R.mean()), "reward_std": float(R.std())})
    return pd.DataFrame(rows)


def scale_summary(scales: pd.DataFrame) -> pd.DataFrame:
    """Per normalisation, over the agents with a non-zero exact gradient: the spread of
    ``norm_over_exact`` (largest / smallest: 1 = every agent's step in proportion to its true
    gradient) and the mean, min and max per-batch cosine with the exact gradient."""
    d = scales[scales.exact_norm > 1e-12]
    g = d.groupby("normalize", sort=False)
    out = pd.DataFrame({"scale_spread": g.norm_over_exact.max() / g.norm_over_exact.min(),
                        "batch_cosine_mean": g.batch_cosine.mean(), "batch_cosine_min": g.batch_cosine.min(),
                        "batch_cosine_max": g.batch_cosine.max()})
    return out.reset_index()


def drmas_training(*, seeds: Sequence[int] = (0, 1, 2, 3, 4), iterations: int = 40, lr: float = 1.0,
                   n_tasks: int = 8, group_size: int = 8, normalizations: Sequence[str] = ("global", "agent"),
                   optimizer: str = "sgd", max_grad_norm: float | None = None, eval_every: int = 5,
                   env: TeamTask | None = None, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train the mixed team with heterogeneous rewards under global vs agent-wise normalisation.

    Every run starts from uniform policies; same seeds, same batches per seed (8 tasks x 8
    episodes per iteration), REINFORCE loss, plain SGD (so each agent's step is proportional
    to its gradient, the scale Dr. MAS is about) without gradient clipping unless
    ``max_grad_norm``. Returns ``(curves, grads)``: the ``train`` curves (label = normalize),
    and per backward pass the per-agent gradient norm (``TeamLearner.grad_log``).
    """
    env = TeamTask(reward="heterogeneous") if env is None else env
    dr = get_estimator("dr_mas")
    curves, grads = [], []
    runs = [(norm, int(s)) for norm in normalizations for s in seeds]
    for norm, s in progress_bar(runs, desc="runs", enabled=progress, leave=False):
        check_choice("normalizations", norm, ma.DR_MAS_NORMS)
        learner = TeamLearner(env, env.make_policies(), n_tasks=n_tasks, group_size=group_size)
        c = train(learner, partial(dr, normalize=norm), iterations=iterations, kind="reinforce", lr=lr,
                  optimizer=optimizer, max_grad_norm=max_grad_norm, eval_every=eval_every, seed=s,
                  label=norm, progress=False)
        curves.append(c)
        g = learner.grad_log()
        g.insert(0, "normalize", norm)
        g.insert(1, "seed", s)
        grads.append(g)
    return pd.concat(curves, ignore_index=True), pd.concat(grads, ignore_index=True)


def drmas_summary(curves: pd.DataFrame, grads: pd.DataFrame, *, spike: float = 3.0) -> pd.DataFrame:
    """One row per normalisation: exact J at the start (mean over seeds) and at the end (mean,
    std, min, max over seeds), total grad
    norm statistics over all iterations and seeds (median, max / median, std, share of
    iterations above ``spike`` x the run's median), and the per-agent gradient imbalance
    (largest / smallest median per-agent grad norm, agents with a zero gradient excluded)."""
    last = curves[curves.iteration == curves.groupby(["label", "seed"]).iteration.transform("max")]
    first = curves[curves.iteration == 0]
    it = curves[curves.iteration > 0]
    rows = []
    for norm, d in it.groupby("label", sort=False):
        med = d.groupby("seed").grad_norm.transform("median")
        J = last[last.label == norm].success
        ga = grads[grads.normalize == norm].groupby("agent").grad_norm.median()
        ga = ga[ga > 1e-12]
        rows.append({"normalize": norm, "J_start": float(first[first.label == norm].success.mean()),
                     "J_final_mean": float(J.mean()), "J_final_std": float(J.std()),
                     "J_final_min": float(J.min()), "J_final_max": float(J.max()),
                     "grad_norm_median": float(d.grad_norm.median()),
                     "grad_norm_max_over_median": float((d.grad_norm / med).max()),
                     "grad_norm_std": float(d.grad_norm.std()),
                     "spike_share": float((d.grad_norm > spike * med).mean()),
                     "agent_grad_imbalance": float(ga.max() / ga.min()) if len(ga) else float("nan"),
                     "seeds": int(d.seed.nunique())})
    return pd.DataFrame(rows)


def agent_grad_table(grads: pd.DataFrame) -> pd.DataFrame:
    """Median per-agent gradient norm per normalisation (rows: agent, columns: normalisation)."""
    order = list(dict.fromkeys(grads.agent))
    t = grads.groupby(["agent", "normalize"]).grad_norm.median().unstack("normalize")
    return t.reindex(order)


# --------------------------------------------------------------------------- display helpers
def short_labels(rollouts: Rollouts) -> list[list[str]]:
    """Compact, space-free cell labels for a TeamTask heatmap (from ``rollouts.text``): "plan:A",
    a solver's method with ✓ / ✗ for its draft, "review", "approve" (✗ if the unreviewed answer
    slipped), the free rider's move, "cooperate", "sabotage" / "sabotage!" (broke the answer) /
    "caught"."""
    if rollouts.text is None:
        raise ValueError("rollouts.text: this Rollouts carries no texts")
    swaps = [("method ", ""), ("plan ", "plan:"), (" (draft correct)", "✓"), (" (draft wrong)", "✗"),
             ("sabotage (broke it)", "sabotage!"), ("sabotage (caught)", "caught"), (" (no effect)", ""),
             (" (passed)", ""), (" (slipped)", "✗")]
    out = []
    for row in rollouts.text:
        cells = []
        for s in row:
            s = s.split(": ", 1)[-1]
            for a, b in swaps:
                s = s.replace(a, b)
            cells.append(s)
        out.append(cells)
    return out


def heatmap_panels(result: dict, methods: Sequence[str], rows: Sequence[int]) -> dict[str, torch.Tensor]:
    """(len(rows), n) panels for ``viz.compare_heatmaps`` from a ``agent_credit_agreement`` result:
    exact Shapley first, then the named methods."""
    for m in methods:
        if m not in result["credit"]:
            raise ValueError(f"methods: {m!r} is not in this result; known: {list(result['credit'])}")
    return credit_panels({m: result["credit"][m] for m in methods}, truth=result["phi"],
                         truth_title="exact Shapley", rows=rows)


# --------------------------------------------------------------------------- segments as players (SCAR, on notebook 02's tiny LM)
def _segment_roles(rollouts: Rollouts) -> torch.Tensor:
    """Each step's role in its completion, (B, S) long: 0 first step, 1 middle, 2 last
    computation step, 3 the answer (the final segment); -1 where there is no step."""
    n = rollouts.n_steps
    S = int(n.max())
    idx = torch.arange(S).expand(len(n), S)
    roles = torch.full((len(n), S), 1, dtype=torch.long)
    roles[idx == 0] = 0
    roles[idx == (n - 2)[:, None]] = 2
    roles[idx == (n - 1)[:, None]] = 3
    return torch.where(idx < n[:, None], roles, -1)


SEGMENT_ROLE_NAMES = ("first step", "middle step", "last step", "answer")


def segment_shapley_study(env, rollouts: Rollouts, *, k: int = 8, games: Sequence[str] = ("resample", "delete"),
                          seed: int = 0) -> dict:
    """SCAR on the tiny LM: exact Shapley over the reasoning segments of ``rollouts`` (from
    ``load_reference``, which carries the 256-vine step values) for each segment ``game``
    (see ``ArithmeticLM.segment_coalition_values``), next to segment leave-one-out and the
    Monte Carlo step advantage (``truth_step_advantage``, VinePPO's formula with cached values).

    Returns a dict: ``summary`` (one row per game and method: correlation with the truth over all
    steps (0 for a constant credit), first-wrong-step hit rate, ``efficiency_gap`` = the largest
    |sum of a row's credit - (reward - v(empty))| (0 for Shapley, not for leave-one-out), cost
    in sampled sequences and token positions, seconds), ``by_role`` (mean credit per segment role:
    first / middle / last computation step / answer, per game and method, and the truth),
    ``credits`` ({"shapley <game>": (B, T), "leave-one-out <game>": (B, T), "MC advantage": (B, T)})
    and ``values`` ({game: (B, 2**M)}).
    """
    import time

    from labkit.credit import estimate
    from labkit.envs.arithmetic.truth import truth_step_advantage  # the tiny LM's truth: loads transformers

    k = check_int("k", k, low=1)
    truth = truth_step_advantage(rollouts)
    truth_steps, present = rollouts.view(truth, "step", "mean")
    roles = _segment_roles(rollouts)
    credits, values, rows = {"MC advantage": truth}, {}, []
    by_role = [{"method": "MC advantage", "game": "-",
                **{name: float(truth_steps[roles == r].mean()) for r, name in enumerate(SEGMENT_ROLE_NAMES)}}]

    for game in games:
        start = time.perf_counter()
        table, cost = env.segment_coalition_values(rollouts, k, game=game, seed=seed)
        seconds = time.perf_counter() - start
        values[game] = table
        phi = estimate("scar", rollouts, coalition_values=table)
        n_steps = int(rollouts.n_steps.max())
        loo = leave_one_out_values(table)[:, :n_steps]
        loo = torch.where(present, loo, 0)
        for method, step_credit in (("shapley", phi.values[:, :n_steps]), ("leave-one-out", loo)):
            token = rollouts.broadcast(step_credit, "step")
            credits[f"{method} {game}"] = token
            rows.append({"game": game, "method": method, "corr_with_truth": pearson(step_credit[present], truth_steps[present], constant=0.0),
                         "first_error_hit": first_error_hit_rate(token, rollouts)["hit_rate"],
                         "efficiency_gap": float((torch.where(present, step_credit, 0).sum(1)
                                                   - (table[:, -1] - table[:, 0])).abs().max()),
                         "sequences": cost.policy_forwards, "token_positions": cost.policy_tokens,
                         "seconds": seconds})
            by_role.append({"method": method, "game": game,
                            **{name: float(step_credit[roles == r].mean()) for r, name in enumerate(SEGMENT_ROLE_NAMES)}})
    summary = pd.DataFrame(rows)
    truth_hits = first_error_hit_rate(truth, rollouts)
    summary.attrs.update(truth_first_error_hit=truth_hits["hit_rate"], chance_first_error_hit=truth_hits["chance"],
                         rollouts_with_error=truth_hits["rollouts"])
    return {"summary": summary, "by_role": pd.DataFrame(by_role), "credits": credits, "values": values}
