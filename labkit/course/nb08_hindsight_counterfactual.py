"""Notebook 08, hindsight and counterfactuals: in a noisy world, outcome-based credit (GRPO) pays
an action for the luck that followed it. How much of that luck does each hindsight /
counterfactual / privileged method remove? ToolWorld's exact truth splits every turn into

    skill_t = A_t(s_t, a_t)                       what the choice was worth (exact advantage)
    luck_t  = r_t + V_{t+1}(s_{t+1}) - Q_t(s_t, a_t)   what the tool's random answer added

(``ToolTruth.skill_luck``; per trajectory V_0 + sum_t (skill_t + luck_t) = the return), so the
question has a number: ``labkit.scoring.luck_regression`` (its docstring defines it precisely).

The world and agent are ``labkit.course.presets.scripted_agent_setup``'s. The runners:
``fit_models`` (every learned model, fitted on a history batch of the same agent),
``all_credits`` (every method on one batch), ``c3_luck_by_batch`` / ``c3_luck_summary`` /
``c3_paired_difference`` (C3's fixed-continuation replay against its re-sampling ablation over
several batches, with intervals), ``cost_table``, ``critic_ranking`` (SWEET-RL's
critic with and without the hidden state), ``transcript_table`` / ``lucky_row`` (a lucky
episode turn by turn), ``turn_panels`` (heatmaps), ``noise_view`` (the noise slider) and ``noise_prompt_answers`` (its prediction block). All
seeded. The cached off-policy, inverse-RL and training-schedule runs
(``scripts/build_offpolicy_irl.py``, ``scripts/build_schedules.py``) are read here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
import torch

from labkit import scoring
from labkit.core.cache import read_cache, read_meta
from labkit.core.checks import check_int, check_number
from labkit.core.paths import data_path
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.course.presets import scripted_agent_setup
from labkit.credit import get_estimator
from labkit.envs.toolworld import exact_hindsight
from labkit.envs.toolworld.belief import belief_truth
from labkit.learn.critics import BTCritic, LearnedHindsight, TurnQCritic
from labkit.learn.judges import stand_in_judge
from labkit.scoring import (information_luck_regression, information_luck_share, luck_regression, luck_share,
                            rank_correlation, sign_agreement)
from labkit.viz import credit_panels


# display name -> (short name for tables, what it needs beyond the rollouts)
METHODS = {
    "GRPO": ("GRPO", "nothing"),
    "HCA, exact h": ("HCA exact", "oracle h from the DP (hidden state)"),
    "HCA, learned h": ("HCA learned", "h counted on past rollouts (observation, outcome)"),
    "HCAPO, learned h (stand-in critic)": ("HCAPO", "STAND-IN for the LLM post-hoc critic: learned h"),
    "C3, fixed continuation": ("C3 fixed", "env reset + replays sharing the episode's random numbers"),
    "C3, re-sampled (ablation)": ("C3 resampled", "env reset + fresh replays of a fresh action (the earlier reading)"),
    "C3, learned Q": ("C3 learned", "TurnQCritic fitted on past rollouts"),
    "CCPO, re-execution": ("CCPO", "env reset + replays of every action"),
    "SWEET-RL, privileged critic": ("SWEET priv", "critic keyed by the hidden state (training only)"),
    "SWEET-RL, observation critic": ("SWEET obs", "same critic keyed by the observation"),
    "CriticSearch (stand-in judge)": ("CriticSearch", "STAND-IN judge: sign of exact A, seeded errors"),
}


def fit_models(env, policy, *, n_tasks: int = 256, group_size: int = 8, seed: int = 1000) -> dict:
    """Every learned model, fitted on one history batch of ``policy`` (sampling seed ``seed``):

    ``hindsight`` (``LearnedHindsight`` on the observation and the outcome), ``q_critic``
    (``TurnQCritic``, TD on the history, evaluating pi), ``critic_privileged`` and
    ``critic_observation`` (``BTCritic`` keyed by hidden state / observation), and ``history``.
    The hidden states go to the privileged critic only, explicitly.
    """
    hist = env.sample(policy, check_int("n_tasks", n_tasks, low=1), group_size=group_size, seed=seed)
    pi = policy.probs().detach()
    return {"history": hist,
            "hindsight": LearnedHindsight(pi).fit(hist),
            "q_critic": TurnQCritic(env.n_obs, env.n_actions).fit(hist, pi=pi),
            "critic_privileged": BTCritic.for_env(env, privileged=True).fit(hist, hist.truth["hidden_states"]),
            "critic_observation": BTCritic.for_env(env, privileged=False).fit(hist)}


def all_credits(env, policy, rollouts: Rollouts, models: Mapping, truth, *, n_continuations: int = 8,
                judge_error: float = 0.1, seed: int = 0,
                methods: Sequence[str] | None = None) -> dict[str, Credit]:
    """Every method of ``METHODS`` (or the listed ones) on ``rollouts``, as {display name: Credit}.

    Privileged inputs are passed explicitly: ``truth["hidden_states"]`` to the re-execution
    methods (the simulator's save-state), to the exact h and to the privileged critic; the exact
    advantage to the stand-in judge (error rate ``judge_error``, seed ``seed``). C3 runs its
    default, fixed-continuation replay at the paper's fan-out (one sibling action from the policy,
    4 continuations each, shared with the taken action); its re-sampling ablation and CCPO take
    ``n_continuations`` replays per turn (CCPO: per action).
    """
    names = list(METHODS) if methods is None else list(methods)
    for n in names:
        if n not in METHODS:
            raise ValueError(f"methods: unknown method {n!r}; known: {list(METHODS)}")
    H = rollouts.truth["hidden_states"]
    pi = policy.probs().detach()
    est = get_estimator
    make = {
        "GRPO": lambda: est("grpo")(rollouts),
        "HCA, exact h": lambda: est("hca")(rollouts, hindsight=exact_hindsight(env, policy, rollouts, H)),
        "HCA, learned h": lambda: est("hca")(rollouts, hindsight=models["hindsight"]),
        "HCAPO, learned h (stand-in critic)": lambda: est("hcapo")(rollouts, hindsight=models["hindsight"]),
        "C3, fixed continuation": lambda: est("c3")(rollouts, env=env, policy=policy, hidden_states=H, seed=seed),
        "C3, re-sampled (ablation)": lambda: est("c3")(rollouts, mode="resample", env=env, policy=policy,
                                                       hidden_states=H, n_continuations=n_continuations, seed=seed),
        "C3, learned Q": lambda: est("c3")(rollouts, mode="learned", critic=models["q_critic"], policy=policy),
        "CCPO, re-execution": lambda: est("ccpo")(rollouts, env=env, policy=policy, hidden_states=H,
                                                  n_continuations=n_continuations, seed=seed),
        "SWEET-RL, privileged critic": lambda: est("sweet_rl")(rollouts, critic=models["critic_privileged"],
                                                               hidden_states=H, pi=pi),
        "SWEET-RL, observation critic": lambda: est("sweet_rl")(rollouts, critic=models["critic_observation"], pi=pi),
        "CriticSearch (stand-in judge)": lambda: est("critic_search")(
            rollouts, verdicts=stand_in_judge(rollouts, advantage=truth.advantage(rollouts),
                                              error_rate=judge_error, seed=seed)),
    }
    return {n: make[n]() for n in names}


# --------------------------------------------------------------------------- luck vs skill
def sign_by_outcome(rollouts: Rollouts, truth, credits: Mapping[str, Credit]) -> pd.DataFrame:
    """Sign agreement of each method's turn credit with the exact advantage, on won and on lost
    episodes apart: where a method's ``sign_agree`` in ``labkit.scoring.luck_regression`` comes from.

    Columns: ``sign_agree`` (all played turns), ``sign_agree_won`` and ``sign_agree_lost``
    (``labkit.scoring.sign_agreement``, the course's one definition, restricted to the turns of
    successful / failed episodes; NaN where the batch has no such episode) and ``zero_on_lost``,
    the share of the played turns of failed episodes whose credit is 0 up to round-off
    (|credit| < 1e-12: credit that pushes neither way, which sign agreement counts as wrong).
    HCA's (1 - pi/h) * Z with a 0/1 outcome Z is 0 on every turn of a failed episode:
    ``zero_on_lost`` 1, ``sign_agree_lost`` 0.
    """
    if not credits:
        raise ValueError("credits: need at least one method's credit to score")
    skill, _ = truth.skill_luck(rollouts)
    m = rollouts.mask
    won = rollouts.truth["success"].bool()[:, None] & m
    lost = ~rollouts.truth["success"].bool()[:, None] & m
    rows = []
    for name, credit in credits.items():
        c = credit.token
        # zero "up to round-off": a difference of replayed means (CCPO's Q - V) can land on 1e-17
        # on one CPU and on 0 on another
        rows.append({"method": name, "sign_agree": sign_agreement(c, skill, m),
                     "sign_agree_won": sign_agreement(c, skill, won) if bool(won.any()) else float("nan"),
                     "sign_agree_lost": sign_agreement(c, skill, lost) if bool(lost.any()) else float("nan"),
                     "zero_on_lost": float((c[lost].abs() < 1e-12).double().mean()) if bool(lost.any()) else float("nan")})
    return pd.DataFrame(rows)


def cost_table(credits: Mapping[str, Credit], rollouts: Rollouts) -> pd.DataFrame:
    """What each method spent beyond the batch (its ``Credit.cost``), per played turn too, and
    what it needs (``METHODS``)."""
    n = int(rollouts.mask.sum())
    rows = []
    for name, credit in credits.items():
        c = credit.cost
        rows.append({"method": name, "env_resets": c.env_resets, "env_steps": c.env_steps,
                     "env_steps_per_turn": c.env_steps / n, "aux_calls": c.aux_calls,
                     "needs": METHODS.get(name, ("", ""))[1]})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- SWEET-RL's critic
def critic_ranking(rollouts: Rollouts, truth, critics: Mapping[str, BTCritic], *, min_gap: float = 1e-6) -> pd.DataFrame:
    """How well each critic ranks the candidate actions at the turns of ``rollouts``.

    At every played turn, for every pair of actions whose exact advantages A(s_t, .) differ by
    more than ``min_gap``, does the critic order them the same way (ties count 1/2)?
    ``pairwise_acc`` is that share over all pairs of all turns (0.5 = chance); ``pref_correct``
    is the share of turns whose SWEET-RL preference pair (critic's best vs worst candidate)
    has exact A(best) > A(worst); ``top1`` the share of turns where the critic's best candidate
    is an exactly best action. The hidden states go to privileged critics explicitly.
    """
    H = rollouts.truth["hidden_states"]
    hs, present = rollouts.view(H, "turn", "first")
    hs = hs.long().clamp(min=0)
    n_obs = truth.n_obs
    b, f, o = hs // (2 * n_obs), (hs // n_obs) % 2, hs % n_obs
    t = torch.arange(present.shape[1]).expand_as(hs)
    exact = (truth.Q[t, b, f] - truth.V[t, b, f, o][..., None])[present]       # (n, A)
    rows = []
    for name, critic in critics.items():
        vals, _, _ = critic.scores(rollouts, H if critic.privileged else None)
        v = vals[present]
        dA = exact[:, :, None] - exact[:, None, :]
        dv = v[:, :, None] - v[:, None, :]
        pairs = dA > min_gap
        agree = torch.where(dv > 0, 1.0, torch.where(dv == 0, 0.5, 0.0))
        best, worst = v.argmax(-1), v.argmin(-1)
        eb, ew = exact.gather(1, best[:, None])[:, 0], exact.gather(1, worst[:, None])[:, 0]
        rows.append({"critic": name, "privileged": critic.privileged, "turns": int(present.sum()),
                     "pairwise_acc": float(agree[pairs].mean()),
                     "pref_correct": float((eb > ew + min_gap).double().mean()),
                     "top1": float((eb >= exact.max(-1).values - min_gap).double().mean()),
                     "bt_pairs": critic.n_pairs})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- transcripts
def lucky_row(rollouts: Rollouts, truth, *, skill_below: float = -0.01) -> tuple[int, int]:
    """(row, turn) of a successful episode with a bad action (exact A < ``skill_below``) that was
    followed by good luck: among such turns the one with the largest luck_after. Raises a
    ValueError if the batch has none."""
    skill, luck = truth.skill_luck(rollouts)
    luck_after = scoring.luck_after(luck)
    ok = rollouts.mask & (skill < skill_below) & rollouts.truth["success"][:, None]
    if not bool(ok.any()):
        raise ValueError("rollouts: no successful episode with a bad action in this batch")
    score = torch.where(ok, luck_after, torch.tensor(-float("inf"), dtype=luck_after.dtype))
    flat = int(score.flatten().argmax())
    return flat // rollouts.horizon, flat % rollouts.horizon


def transcript_table(rollouts: Rollouts, truth, credits: Mapping[str, Credit], row: int) -> pd.DataFrame:
    """One trajectory turn by turn: the turn text, exact skill, luck and luck_after, and each
    method's credit (columns named by ``METHODS``' short names)."""
    row = check_int("row", row, low=0, high=rollouts.batch_size - 1)
    skill, luck = truth.skill_luck(rollouts)
    luck_after = scoring.luck_after(luck)
    n = int(rollouts.mask[row].sum())
    df = pd.DataFrame({"turn": range(n), "what happened": rollouts.text[row][:n],
                       "skill (exact A)": skill[row, :n].numpy(), "luck": luck[row, :n].numpy(),
                       "luck from here on": luck_after[row, :n].numpy()})
    for name, credit in credits.items():
        df[METHODS.get(name, (name,))[0]] = credit.token[row, :n].to(torch.float64).numpy()
    return df


def turn_panels(rollouts: Rollouts, truth, credits: Mapping[str, Credit], rows: Sequence[int]) -> dict:
    """{title: (len(rows), T)} for ``viz.compare_heatmaps``: exact A first, then every method."""
    return credit_panels(credits, truth=truth.advantage(rollouts), truth_title="exact advantage A (skill)",
                         rows=rows, dtype=torch.float64)


# --------------------------------------------------------------------------- C3: fixed continuation vs re-sampling
# display name -> c3 options: the default at the paper's fan-out, the same replay with only the
# episode's own continuation, and the re-sampling ablation at the replays it used to take
C3_ARMS = {
    "C3, fixed continuation (M = 4, default)": {},
    "C3, fixed continuation (M = 1)": {"n_continuations": 1},
    "C3, re-sampled (ablation, 8 replays)": {"mode": "resample", "n_continuations": 8},
}


def c3_luck_by_batch(env, policy, truth, *, seeds: Sequence[int] = tuple(range(1, 9)), n_tasks: int = 32,
                     group_size: int = 8) -> pd.DataFrame:
    """``luck_regression`` of GRPO and of every arm of ``C3_ARMS`` on one fresh batch of
    ``policy`` (``n_tasks`` x ``group_size`` episodes) per seed in ``seeds`` (the batch's sampling
    seed and the replays' seed). Returns the stacked tables with a ``seed`` column and C3's
    replay cost per played turn (``resets_per_turn``)."""
    seeds = [check_int("seeds", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one batch seed")
    n_tasks = check_int("n_tasks", n_tasks, low=1)
    group_size = check_int("group_size", group_size, low=1)
    c3 = get_estimator("c3")
    parts = []
    for s in seeds:
        ro = env.sample(policy, n_tasks, group_size=group_size, seed=s)
        H = ro.truth["hidden_states"]
        credits = {"GRPO": get_estimator("grpo")(ro)}
        credits.update({name: c3(ro, env=env, policy=policy, hidden_states=H, seed=s, **kw)
                        for name, kw in C3_ARMS.items()})
        df = luck_regression(ro, truth, credits)
        df["resets_per_turn"] = [c.cost.env_resets / int(ro.mask.sum()) for c in credits.values()]
        df.insert(0, "seed", s)
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- information luck
def information_luck(env, truth, rollouts: Rollouts, credits: Mapping[str, Credit]) -> dict:
    """What the exact advantage given the hidden file counts as skill that the agent could not have
    known (``labkit.envs.toolworld.belief``): ``share`` = sum (A - A_info)^2 / sum A^2 over the
    played turns (``scoring.information_luck_share``); the luck share of the outcomes counted from
    the hidden side (``luck_share_hidden``, tool luck only) and from the agent's side
    (``luck_share_agent``, tool and information luck); ``table``, per method of ``credits``, the
    fit of ``scoring.information_luck_regression`` (``info_luck_per_skill``: 1 pays the hidden
    file's luck as skill, 0 credits only what the agent could know)."""
    belief = belief_truth(env, truth, rollouts)
    skill, luck = truth.skill_luck(rollouts)
    agent_skill, agent_luck = belief.skill_luck()
    return {"share": information_luck_share(belief.hidden_advantage, belief.advantage, rollouts.mask),
            "luck_share_hidden": luck_share(skill, luck), "luck_share_agent": luck_share(agent_skill, agent_luck),
            "table": information_luck_regression(rollouts, truth, belief, credits)}


def information_luck_by_batch(env, policy, truth, *, seeds: Sequence[int] = tuple(range(1, 9)), n_tasks: int = 32,
                              group_size: int = 8) -> pd.DataFrame:
    """``information_luck``'s three shares on one fresh batch per seed in ``seeds`` (no credits
    needed): columns seed, share, luck_share_hidden, luck_share_agent."""
    seeds = [check_int("seeds", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one batch seed")
    rows = []
    for s in seeds:
        ro = env.sample(policy, check_int("n_tasks", n_tasks, low=1), group_size=check_int("group_size", group_size, low=1),
                        seed=s)
        out = information_luck(env, truth, ro, {})
        rows.append({"seed": s, **{k: out[k] for k in ("share", "luck_share_hidden", "luck_share_agent")}})
    return pd.DataFrame(rows)


def seed_interval(values, *, level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` (one per batch seed) and the ``level`` percentile
    bootstrap interval of that mean (the seeds resampled with replacement ``n_boot`` times, numpy
    generator seeded ``seed``). NaN values are left out; all NaN gives NaNs."""
    import numpy as np

    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    m = scoring.mean_interval(x, level=level, n_boot=n_boot, seed=seed)
    return m["mean"], m["low"], m["high"]


def c3_luck_summary(per_seed: pd.DataFrame, columns: Sequence[str] = ("luck_per_skill", "luck_removed", "corr_exact"),
                    *, level: float = 0.95) -> pd.DataFrame:
    """One row per method of ``c3_luck_by_batch``'s table: for each of ``columns`` the mean over
    the batch seeds and its bootstrap interval (``seed_interval``: columns ``<name>``,
    ``<name>_low``, ``<name>_high``), the number of seeds and the replay cost per turn."""
    missing = [c for c in ("method", "seed", "resets_per_turn", *columns) if c not in per_seed.columns]
    if missing:
        raise ValueError(f"per_seed: missing columns {missing}; pass c3_luck_by_batch's table")
    rows = []
    for name, part in per_seed.groupby("method", sort=False):
        row = {"method": name, "seeds": int(part.seed.nunique())}
        for col in columns:
            m, lo, hi = seed_interval(part[col], level=level)
            row.update({col: m, f"{col}_low": lo, f"{col}_high": hi})
        row["resets_per_turn"] = float(part.resets_per_turn.mean())
        rows.append(row)
    return pd.DataFrame(rows)


def interval_text(summary: pd.DataFrame, columns: Sequence[str] = ("luck_per_skill", "luck_removed", "corr_exact"),
                  *, decimals: int = 3) -> pd.DataFrame:
    """``c3_luck_summary``'s table for reading: one column per name in ``columns`` holding
    "mean [low, high]" rounded to ``decimals``, plus ``resets_per_turn``; indexed by method."""
    decimals = check_int("decimals", decimals, low=0)
    f = f"{{:.{decimals}f}}"
    out = pd.DataFrame(index=summary["method"])
    for col in columns:
        if col not in summary.columns:
            raise ValueError(f"columns: {col!r} is not a column of the summary")
        out[col] = [f"{f.format(m)} [{f.format(lo)}, {f.format(hi)}]" for m, lo, hi in
                    zip(summary[col], summary[f"{col}_low"], summary[f"{col}_high"])]
    out["resets_per_turn"] = summary["resets_per_turn"].round(1).to_numpy()
    return out


def c3_paired_difference(per_seed: pd.DataFrame, a: str, b: str, column: str = "luck_removed", *,
                         level: float = 0.95) -> dict[str, float]:
    """``column`` of method ``a`` minus that of ``b`` on the same batches (paired by seed), with
    the bootstrap interval of the mean difference (``seed_interval``). Keys: diff, low, high, seeds."""
    wide = per_seed.pivot(index="seed", columns="method", values=column)
    for name in (a, b):
        if name not in wide.columns:
            raise ValueError(f"a: no method {name!r} in per_seed (has {list(wide.columns)})")
    m, lo, hi = seed_interval((wide[a] - wide[b]).to_numpy(), level=level)
    return {"diff": m, "low": lo, "high": hi, "seeds": len(wide)}


# --------------------------------------------------------------------------- the noise slider and sweep
def _world_batch(noise, n_tasks, group_size, history_tasks, n_continuations, seed, methods, setup_kw):
    """A fresh world at ``noise``, models fitted on a history (seed + 1000), a batch (seed) and
    every method's credit on it: what the slider and the sweep both start from."""
    env, policy = scripted_agent_setup(noise, **setup_kw)
    truth = env.truth(policy)
    models = fit_models(env, policy, n_tasks=history_tasks, seed=seed + 1000)
    ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    credits = all_credits(env, policy, ro, models, truth, n_continuations=n_continuations, seed=seed,
                          methods=methods)
    return env, policy, truth, ro, credits


def noise_view(noise: float, *, methods: Sequence[str], n_tasks: int = 4, group_size: int = 4,
               history_tasks: int = 64, show: int = 6, n_continuations: int = 4, seed: int = 0, **setup_kw) -> dict:
    """Everything the noise slider redraws: a fresh world at ``noise``, models fitted on a small
    history, a small batch (``n_tasks`` x ``group_size``), the ``methods``' credits, the first
    ``show`` rows' panels and ``luck_regression`` on the batch. Returns a dict with ``env``,
    ``rollouts``, ``truth``, ``credits``, ``panels``, ``rows``, ``stats``. Works at noise 0 (no
    luck: the luck coefficients are NaN) and at noise 1."""
    env, policy, truth, ro, credits = _world_batch(noise, n_tasks, group_size, history_tasks, n_continuations,
                                                   seed, methods, setup_kw)
    rows = list(range(min(show, ro.batch_size)))
    return {"env": env, "rollouts": ro, "truth": truth, "credits": credits, "rows": rows,
            "panels": turn_panels(ro, truth, credits, rows),
            "stats": luck_regression(ro, truth, credits) if "GRPO" in credits else None}


def noise_prompt_answers(stats_by_noise: Mapping[float, pd.DataFrame], *, start: float = 0.3) -> dict:
    """What the noise slider's prediction block asks about, read off the views the slider computed.

    ``stats_by_noise``: noise level -> ``noise_view(...)["stats"]`` (``luck_regression``'s table,
    one row per method) for every level of the slider; ``start`` is the slider's start value (one
    of those levels). Returns a dict: ``corr`` (DataFrame, method x noise: each method's
    correlation with the exact advantage), ``ranking`` (Series: the methods at ``start``, best
    first), ``best`` (the best method's name at ``start``), ``low`` / ``high`` (the smallest and
    largest level) and ``leader_at_high`` (the best method at ``high``). A method with no
    correlation at a level (NaN: its credit was constant there) ranks last and never leads."""
    if not isinstance(stats_by_noise, Mapping) or not stats_by_noise:
        raise ValueError("stats_by_noise: need a non-empty mapping noise -> luck_regression table")
    levels = sorted(check_number("stats_by_noise", float(x), low=0.0, high=1.0) for x in stats_by_noise)
    start = check_number("start", start, low=0.0, high=1.0)
    if start not in levels:
        raise ValueError(f"start: {start} is not one of the computed noise levels {levels}")
    cols = {}
    for x, stats in stats_by_noise.items():
        if not isinstance(stats, pd.DataFrame) or not {"method", "corr_exact"} <= set(stats.columns):
            raise ValueError(f"stats_by_noise: the table at noise {x} needs columns 'method' and 'corr_exact'")
        cols[float(x)] = stats.set_index("method")["corr_exact"]
    corr = pd.DataFrame(cols)[levels]
    corr.columns.name = "noise"
    # a method whose credit is constant on a batch has no correlation (NaN): it ranks last
    ranking = corr[start].sort_values(ascending=False, na_position="last")
    low, high = levels[0], levels[-1]
    for x in (start, high):
        if corr[x].isna().all():
            raise ValueError(f"stats_by_noise: no method has a correlation at noise {x} (every credit constant)")
    return {"corr": corr, "ranking": ranking, "best": str(ranking.index[0]), "low": low, "high": high,
            "leader_at_high": str(corr[high].idxmax())}


def noise_sweep(noises: Sequence[float] = (0.1, 0.3, 0.5), *, n_tasks: int = 16, group_size: int = 8,
                history_tasks: int = 256, n_continuations: int = 4, seed: int = 0,
                methods: Sequence[str] | None = None, **setup_kw) -> pd.DataFrame:
    """``luck_regression`` at several tool-noise levels: one fresh world, history fit and batch
    (``n_tasks`` x ``group_size``, seed ``seed``) per level; the rows of every level stacked, with
    a ``noise`` column and the level's ``luck_share`` (var of summed luck / var of summed
    skill + luck per trajectory: ``labkit.scoring.luck_share``, notebook 05's)."""
    noises = [check_number("noises", x, low=0.0, high=1.0) for x in noises]
    if not noises:
        raise ValueError("noises: need at least one noise level")
    parts = []
    for x in noises:
        env, policy, truth, ro, credits = _world_batch(x, n_tasks, group_size, history_tasks, n_continuations,
                                                       seed, methods, setup_kw)
        df = luck_regression(ro, truth, credits)
        df.insert(0, "luck_share", scoring.luck_share(*truth.skill_luck(ro)))
        df.insert(0, "noise", x)
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- beyond hindsight: the other agentic families
NB08_TRAIN_ITERATIONS = 30  # GRPO batches that turn the scripted agent into "the policy" ITPO compares with its start

# display name -> (family, what it needs beyond the rollouts)
MORE_METHODS = {
    "GRPO": ("episode", "nothing"),
    "ITPO": ("implicit", "the policy's and its starting point's log-probs"),
    "iStar": ("implicit", "a step reward model fitted by DPO on trajectory pairs"),
    "SPA-RL": ("redistribution", "a progress table fitted so each episode's contributions sum to its outcome"),
    "SPA-RL + GRPO": ("redistribution", "the same, added to the group advantage"),
    "TARL (stand-in judge)": ("judge", "STAND-IN judge: sign of exact A, 10 % of grades wrong"),
    "LaRe (stand-in features)": ("judge", "STAND-IN for the LLM's latent reward: hand-made turn features + least squares"),
    "SCRIBE-style templates": ("judge", "hand-written skill templates grading each turn"),
    "Turn-Level Reward Design": ("process", "the world's checkable turn signals (tests pass, hinted file opened, ...)"),
    "StepAgent (DP expert)": ("implicit", "expert demonstrations + a step discriminator (inverse RL)"),
}
OFFPOLICY_DIR = data_path("offpolicy_irl")


def trained_agent(env, start, *, iterations: int = NB08_TRAIN_ITERATIONS, seed: int = 0):
    """A copy of ``start`` trained with GRPO for ``iterations`` batches of 8 tasks x 8 episodes:
    the policy whose implicit rewards are read against ``start`` (its reference)."""
    import copy

    from labkit.envs.toolworld.learner import ToolLearner
    from labkit.learn.loop import train

    policy = copy.deepcopy(start)
    train(ToolLearner(env, policy, n_tasks=8, group_size=8), "grpo", kind="grpo",
          iterations=check_int("iterations", iterations, low=0), seed=seed, progress=False, label="warm-up")
    return policy


def dp_expert(env):
    """The DP-optimal observation-only ToolWorld policy (StepAgent's expert), rebuilt from the
    actions ``scripts/build_offpolicy_irl.py`` cached (finding it live takes seconds)."""
    from labkit.learn.irl import policy_from_actions

    meta = read_meta(OFFPOLICY_DIR / "meta.json", script="build_offpolicy_irl.py", what="cached DP expert")
    return policy_from_actions(env, meta["step_agent"]["dp_expert"]["actions"])


def fit_turn_models(env, policy, history: Rollouts, *, expert=None, n_demos: int = 256, seed: int = 123) -> dict:
    """The learned turn models of the other families, fitted on ``history`` (episodes of
    ``policy``): iStar's implicit step reward model, SPA-RL's progress table, LaRe's stand-in
    decoder (least squares of the return on hand-made turn features) and StepAgent's step
    discriminator, fitted on ``n_demos`` episodes of ``expert`` (default ``dp_expert(env)``)."""
    from labkit.envs.toolworld.features import FEATURE_NAMES, turn_features
    from labkit.learn.irl import StepRewardIRL
    from labkit.learn.judges import LatentRewardRegressor
    from labkit.learn.turn_models import ImplicitStepRewardModel, ProgressEstimator

    expert = dp_expert(env) if expert is None else expert
    demos = env.sample(expert, check_int("n_demos", n_demos, low=1), group_size=1, seed=seed)
    present = history.view(history.mask, "turn", "first")[1]
    return {"istar": ImplicitStepRewardModel.for_policy(policy).fit(history),
            "spa_rl": ProgressEstimator.for_env(env).fit(history),
            "lare": LatentRewardRegressor(feature_names=FEATURE_NAMES).fit(turn_features(env, history),
                                                                          history.scores, present),
            "step_agent": StepRewardIRL.for_env(env).fit(demos, policy.probs().detach(), seed=1)}


def more_credits(env, policy, reference, rollouts: Rollouts, models: Mapping, truth, *,
                 judge_error: float = 0.1, seed: int = 0) -> dict[str, Credit]:
    """Every method of ``MORE_METHODS`` on ``rollouts`` of ``policy`` ({display name: Credit});
    ``reference`` is the policy before training (ITPO's pi_ref), ``models`` ``fit_turn_models``'s;
    the stand-in TARL judge reads the exact advantage with ``judge_error`` of its grades wrong."""
    from functools import partial

    from labkit.envs.toolworld.features import template_grades, turn_features, verifiable_turn_rewards
    from labkit.learn.judges import stand_in_turn_grades
    from labkit.learn.turn_models import policy_logprobs

    est = get_estimator
    lp, lp_ref = policy_logprobs(policy, rollouts), policy_logprobs(reference, rollouts)
    def lare_rewards(r):  # the stand-in "LLM" reads every trajectory once: a callable, so lare counts the calls
        return models["lare"].step_rewards(turn_features(env, r), r.view(r.mask, "turn", "first")[1])

    grades = partial(stand_in_turn_grades, advantage=truth.advantage(rollouts), error_rate=judge_error, seed=seed)
    return {"GRPO": est("grpo")(rollouts),
            "ITPO": est("itpo")(rollouts, logprobs=lp, ref_logprobs=lp_ref),
            "iStar": est("istar")(rollouts, step_rewards=models["istar"]),
            "SPA-RL": est("spa_rl")(rollouts, contributions=models["spa_rl"]),
            "SPA-RL + GRPO": est("spa_rl")(rollouts, contributions=models["spa_rl"], outcome_weight=1.0),
            "TARL (stand-in judge)": est("tarl")(rollouts, grades=grades),
            "LaRe (stand-in features)": est("lare")(rollouts, step_rewards=lare_rewards),
            "SCRIBE-style templates": est("tarl")(rollouts, grades=partial(template_grades, env)),
            "Turn-Level Reward Design": est("turn_reward_design")(rollouts,
                                                                  turn_rewards=partial(verifiable_turn_rewards, env)),
            "StepAgent (DP expert)": est("step_agent")(rollouts, reward=models["step_agent"])}


def load_offpolicy_results(path: Path | None = None) -> dict:
    """``scripts/build_offpolicy_irl.py``'s cached training results in ``path`` (default
    ``data/offpolicy_irl``): ``sorl`` (per staleness and arm: final exact success over the 3 main
    seeds, clipping shares), ``sorl_check`` (the same arms on 8 further seeds), ``step_agent``
    (StepAgent training curves) and ``meta`` (settings). Raises if the cache is missing or foreign."""
    return _read_tables(path if path is not None else OFFPOLICY_DIR, "build_offpolicy_irl.py",
                        {"sorl": "sorl_summary.csv", "sorl_check": "sorl_check.csv",
                         "step_agent": "step_agent_curves.csv"})


def _read_tables(folder: Path, script: str, tables: Mapping[str, str]) -> dict:
    """{key: DataFrame} of a script's cached CSV files ({key: file name}) plus its ``meta``."""
    meta, files = read_cache(folder, script=script, files=list(tables.values()), what="cached results")
    return {**{key: pd.read_csv(files[name]) for key, name in tables.items()}, "meta": meta}


def family_scores(rollouts: Rollouts, truth, credits: Mapping[str, Credit]) -> pd.DataFrame:
    """``luck_regression`` plus Spearman's rank correlation with the exact turn advantage and the
    cost each method reported, one row per method."""
    df = luck_regression(rollouts, truth, credits)
    adv = truth.advantage(rollouts)
    df["rank_corr"] = [rank_correlation(c, adv, rollouts.mask) for c in credits.values()]
    df["aux_calls"] = [c.cost.aux_calls for c in credits.values()]
    df["env_steps"] = [c.cost.env_steps for c in credits.values()]
    df["family"] = [MORE_METHODS.get(n, ("", ""))[0] for n in credits]
    return df


def judge_error_curve(env, policy, rollouts: Rollouts, truth, *, score=None,
                      error_rates: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.5), seeds: Sequence[int] = (0, 1, 2),
                      fit_rollouts: Rollouts | None = None, tolerance: float = 0.02,
                      grade_weight: float = 1.0) -> pd.DataFrame:
    """How credit quality falls as the stand-in judge errs more often: one row per (method, error_rate, seed).

    For every ``error_rate`` and ``seed``:

    * ``tarl``: grades from ``stand_in_turn_grades`` (that error rate, that seed) fed to
      ``labkit.credit.judge.tarl`` with ``grade_weight``;
    * ``lare``: the hand-made ``turn_features`` with every 0/1 factor flipped at that rate
      (``corrupt_features``), a ``LatentRewardRegressor`` fitted on ``fit_rollouts`` (default:
      ``rollouts`` themselves) with the same corruption, its step rewards fed to
      ``labkit.credit.judge.lare``.

    ``score(credit_token (B, T), exact_advantage (B, T), mask (B, T)) -> float`` is the agreement
    measure (default ``labkit.scoring.rank_correlation``). Returns a DataFrame with columns
    method, error_rate, seed, score. The exact advantage is ``truth.advantage(rollouts)``.
    """
    from labkit.envs.toolworld.features import FEATURE_NAMES, turn_features
    from labkit.learn.judges import LatentRewardRegressor, corrupt_features, stand_in_turn_grades

    score = rank_correlation if score is None else score
    if not callable(score):
        raise TypeError("score: a callable (credit, exact, mask) -> float, e.g. labkit.scoring.rank_correlation")
    rates = [check_number("error_rates", r, low=0.0, high=1.0) for r in error_rates]
    seeds = [check_int("seeds", s) for s in seeds]
    if not rates or not seeds:
        raise ValueError("error_rates: need at least one error rate and one seed")
    exact = truth.advantage(rollouts)
    m = rollouts.mask
    fit_ro = rollouts if fit_rollouts is None else fit_rollouts
    feats, present = turn_features(env, rollouts), rollouts.view(rollouts.mask, "turn", "first")[1]
    fit_feats, fit_present = turn_features(env, fit_ro), fit_ro.view(fit_ro.mask, "turn", "first")[1]
    tarl, lare = get_estimator("tarl"), get_estimator("lare")
    rows = []
    for rate in rates:
        for s in seeds:
            grades = stand_in_turn_grades(rollouts, advantage=exact, error_rate=rate, tolerance=tolerance, seed=s)
            c = tarl(rollouts, grades=grades, grade_weight=grade_weight)
            rows.append({"method": "tarl", "error_rate": rate, "seed": s, "score": score(c.token, exact, m)})
            reg = LatentRewardRegressor(feature_names=FEATURE_NAMES).fit(
                corrupt_features(fit_feats, error_rate=rate, seed=s + 10_000, present=fit_present),
                fit_ro.scores, fit_present)
            r_hat = reg.step_rewards(corrupt_features(feats, error_rate=rate, seed=s, present=present), present)
            c = lare(rollouts, step_rewards=r_hat)
            rows.append({"method": "lare", "error_rate": rate, "seed": s, "score": score(c.token, exact, m)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- training schedules: PilotRL and PRS (stand-ins)
SCHEDULES_DIR = data_path("schedules")
SCHEDULE_PANELS = {
    "PRS: dense checks, phased out or kept on": ["outcome only (GRPO)", "shaping kept on (w=0.1)", "PRS (w=0.1)",
                                                 "shaping kept on (w=0.5)", "PRS (w=0.5)"],
    "PilotRL: episode credit, then turn credit": ["outcome only (GRPO)", "GiGPO throughout", "PilotRL (GRPO -> GiGPO)"],
}


def load_schedule_results(path: Path | None = None) -> dict:
    """``scripts/build_schedules.py``'s cached runs (``labkit.learn.schedules``: PilotRL and PRS
    stand-ins on an eight-file ToolWorld) in ``path`` (default ``data/schedules``): ``curves``
    (exact success every 10 batches per arm and seed), ``summary`` (final success mean / std /
    range, area under the curve, effect against outcome-only GRPO and its standard error),
    ``hacking`` (what the trained policies do), ``credit_scores`` (each stage's credit against the
    exact advantage) and ``meta``. Raises if the cache is missing or foreign."""
    return _read_tables(path if path is not None else SCHEDULES_DIR, "build_schedules.py",
                        {"curves": "curves.csv", "summary": "summary.csv", "hacking": "hacking.csv",
                         "credit_scores": "credit_scores.csv"})


def schedule_table(results: Mapping) -> pd.DataFrame:
    """One row per arm: final exact success (mean, std, min, max over seeds), the area under the
    curve (mean success over the run), and what the trained policies do with the shaped checks
    (checks fired and time-outs per episode, chance of re-running the tests after "tests pass")."""
    summary, hack = results["summary"], results["hacking"]
    habits = hack[hack.seed >= 0].groupby("label", sort=False)[["checks_per_episode", "timeout_share",
                                                                  "p_rerun_after_pass"]].mean()
    table = summary.set_index("arm")[["seeds", "final_mean", "final_std", "final_min", "final_max", "auc_mean"]]
    return table.join(habits).rename_axis("arm").reset_index()


def schedule_verdicts(results: Mapping, *, z: float = 2.0) -> list[str]:
    """One sentence per arm, computed from the cached numbers: the difference of mean final
    success against outcome-only GRPO, and whether it exceeds ``z`` standard errors of that
    difference (the seeds' spread)."""
    z = check_number("z", z, low=0.0, low_open=True)

    def verdict(d: float, se: float, measurably: str) -> str:
        return f"{measurably}{'better' if d > 0 else 'worse'}" if abs(d) > z * se else "no measurable effect"

    lines = []
    for _, r in results["summary"].iterrows():
        if r.arm == "outcome only (GRPO)":
            continue
        d, se = float(r.final_effect), float(r.final_se)
        line = (f"{r.arm}: {verdict(d, se, 'measurably ')} ({d:+.3f} final success vs outcome-only GRPO; "
                f"{z:g} SE = {z * se:.3f})")
        if "final_effect_vs_gigpo" in r and r.final_effect_vs_gigpo == r.final_effect_vs_gigpo:  # not NaN
            d2, se2 = float(r.final_effect_vs_gigpo), float(r.final_se_vs_gigpo)
            line += f"; vs GiGPO throughout: {verdict(d2, se2, '')} ({d2:+.3f}; {z:g} SE = {z * se2:.3f})"
        lines.append(line)
    return lines


def schedule_chart(results: Mapping):
    """Learning curves with the seeds' range as a band, one panel per method (``SCHEDULE_PANELS``)."""
    from labkit import viz
    from labkit.learn.loop import curve_band

    band = curve_band(results["curves"])
    charts = [viz.line_chart(band[band.label.isin(arms)], "iteration", "mean", color="label", band=("min", "max"),
                             title=title, x_title="training batch", y_title="exact success (seed range shaded)")
              for title, arms in SCHEDULE_PANELS.items()]
    return charts[0] & charts[1]
