"""Experiment runners for the agentic notebooks (05 why agents are harder, 06 GiGPO) on ToolWorld.

Each runner is seeded and returns plain data (DataFrames, dicts of tensors); notebooks call them
in one line and chart the result. Exact quantities come from ``ToolWorld.truth`` (dynamic
programming over the hidden state), so every comparison here is against the true advantage of the
policy that produced the batch, not against another estimate.
"""
from __future__ import annotations

from functools import partial
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.checks import check_int, check_number
from labkit.credit import get_estimator
from labkit.credit.group import anchor_groups, starpo_filter
from labkit.envs.toolworld import ToolLearner, ToolWorld, turn_labels  # noqa: F401  (ax.turn_labels)
from labkit.core.rollouts import Credit, Rollouts
from labkit.scoring import pearson
from labkit.learn.loop import train


# --------------------------------------------------------------------------- worlds and policies
def noisy_world(noise: float = 0.2, max_turns: int = 30, *, n_files: int = 5, **kw) -> ToolWorld:
    """A ToolWorld whose three unreliable tools share one noise level: search misleads, a file
    read misjudges and the test suite flips, each with probability ``noise``."""
    noise = check_number("noise", noise, low=0.0, high=1.0)
    return ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise, **kw)


def exact_credit(env: ToolWorld, policy) -> callable:
    """An oracle estimator: every turn gets its exact advantage A_t(s_t, a_t) under the current
    policy (recomputed by DP at every call, so it follows the policy during training). It sees
    the hidden bug location, which no real agent's critic can: an upper bound, not a method."""
    def exact(rollouts: Rollouts) -> Credit:
        adv = env.truth(policy).advantage(rollouts).to(rollouts.rewards.dtype)
        return Credit.from_tokens(rollouts, adv, "exact")
    exact.__name__ = "exact"
    return exact


# --------------------------------------------------------------------------- notebook 05
def credit_vs_truth(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0,
                    estimators: Sequence[str] = ("grpo",)) -> dict:
    """Sample a batch, compute each estimator's credit and the exact per-turn truth.

    Returns ``rollouts``, ``truth`` (ToolTruth), ``exact`` (B, T) exact advantages, ``skill`` and
    ``luck`` (B, T), ``credit`` {name: (B, T)} and ``stats``: one row per estimator with the
    correlation of its credit with the exact advantage over all played turns (``corr_exact``),
    the share of turns whose credit has the sign of the exact advantage (``sign_agree``; turns
    with |A| < 1e-9 skipped) and the same two numbers for the decisive turns only.
    """
    rollouts = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    truth = env.truth(policy)
    skill, luck = truth.skill_luck(rollouts)
    m = rollouts.mask
    decisive = rollouts.truth["decisive"]
    credit, rows = {}, []
    for name in estimators:
        c = get_estimator(name)(rollouts).token
        credit[name] = c
        row = {"estimator": name}
        for tag, sel in (("", m), ("_decisive", decisive & m)):
            nz = sel & (skill.abs() > 1e-9)
            row[f"corr_exact{tag}"] = pearson(c[sel], skill[sel])
            row[f"sign_agree{tag}"] = float((torch.sign(c[nz]) == torch.sign(skill[nz])).double().mean()) \
                if bool(nz.any()) else float("nan")
        rows.append(row)
    return {"rollouts": rollouts, "truth": truth, "exact": skill, "skill": skill, "luck": luck,
            "credit": credit, "stats": pd.DataFrame(rows)}


def luck_summary(rollouts: Rollouts, skill: torch.Tensor, luck: torch.Tensor) -> dict[str, float]:
    """How much of the spread of outcomes is luck: per trajectory the return is
    V_0 + sum skill + sum luck; ``luck_share`` = var(sum luck) / (var(sum skill) + var(sum luck)),
    plus the mean |skill| and |luck| per turn and the mean number of turns."""
    m = rollouts.mask
    s, l_ = skill.sum(1), luck.sum(1)
    vs, vl = float(s.var()), float(l_.var())
    return {"luck_share": vl / (vs + vl) if vs + vl > 0 else float("nan"),
            "mean_abs_skill": float(skill[m].abs().mean()), "mean_abs_luck": float(luck[m].abs().mean()),
            "mean_turns": float(m.sum(1).double().mean()), "success": float(rollouts.truth["success"].double().mean())}


def noise_horizon_sweep(noises: Iterable[float] = (0.0, 0.1, 0.2, 0.3, 0.4),
                        horizons: Iterable[int] = (10, 20, 30, 50), *, strength: float = 3.0,
                        n_tasks: int = 16, group_size: int = 8, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """GRPO credit against the exact advantage, and the luck share, over tool noise x horizon.

    The agent is ``scripted_policy(strength)`` (a half-trained agent: the sensible action is the
    most likely one but far from certain), the same at every setting; one batch per setting.
    """
    strength = check_number("strength", strength)
    grid = [(float(n), check_int("horizons", h, low=1)) for n in noises for h in horizons]
    if not grid:
        raise ValueError("noises, horizons: need at least one value each")
    rows = []
    for noise, T in tqdm(grid, desc="settings", disable=not progress, leave=False):
        env = noisy_world(noise, T)
        res = credit_vs_truth(env, env.scripted_policy(strength), n_tasks=n_tasks, group_size=group_size, seed=seed)
        st = res["stats"].iloc[0]
        rows.append({"noise": noise, "max_turns": T, "grpo_corr": st.corr_exact, "grpo_sign_agree": st.sign_agree,
                     **luck_summary(res["rollouts"], res["skill"], res["luck"])})
    return pd.DataFrame(rows)


ECHO_WORLD = dict(n_files=6, max_turns=40, mislead=0.4, noise=0.3, flaky=0.3, wrong_submit=3.0)


def echo_world(**overrides) -> ToolWorld:
    """The echo-trap setting: noisy tools and a broken build (-3) for a wrong submit, so doing
    nothing until time runs out (0) is *safe* and trying is risky (+1 or -3)."""
    kw = {**ECHO_WORLD, **overrides}
    n = kw.pop("n_files")
    return ToolWorld(n, **kw)


def repeat_share(rollouts: Rollouts) -> float:
    """Share of played turns that repeat an (observation, action) pair already played earlier in
    the same episode: a memoryless agent that repeats one is going round in a loop."""
    B = rollouts.batch_size
    n_act = int(rollouts.tokens.max()) + 1
    pair = rollouts.states * n_act + rollouts.tokens
    repeats, total = 0, 0
    for b, n in enumerate(rollouts.mask.sum(1).tolist()):
        seen = set()
        for p in pair[b, :n].tolist():
            repeats += p in seen
            seen.add(p)
        total += n
    return repeats / max(total, 1)


def echo_trap_runs(*, seeds: Sequence[int] = (0, 1, 2), iterations: int = 100, lr: float = 0.3,
                   keep: float = 0.25, n_tasks: int = 8, group_size: int = 8, eval_every: int = 10,
                   world: dict | None = None, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train a uniform agent in ``echo_world`` with GRPO, GRPO on StarPO-filtered batches
    (``keep``) and the exact-advantage oracle, same seeds, same iterations (equal env steps
    sampled: the filter discards what it drops).

    Returns ``(curves, final)``: the stacked ``train`` curves (with ``reward_spread`` and
    ``zero_spread_share`` of each sampled batch) and one row per run with the final exact J,
    the final policy's entropy, timeout share, repeat share (``repeat_share``) and success
    rate on a fresh batch of 256 episodes.
    """
    iterations = check_int("iterations", iterations, low=1)
    env = echo_world(**(world or {}))
    runs = {"GRPO": dict(estimator="grpo"),
            f"GRPO + StarPO filter (keep {keep:g})": dict(estimator="grpo", batch_filter=partial(starpo_filter, keep=keep)),
            "exact advantage (oracle)": dict(estimator="exact")}
    curves, final = [], []
    bar = tqdm(total=len(runs) * len(seeds), desc="runs", disable=not progress)
    for label, spec in runs.items():
        for s in seeds:
            policy = env.make_policy()
            learner = ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size,
                                  batch_filter=spec.get("batch_filter"))
            est = exact_credit(env, policy) if spec["estimator"] == "exact" else spec["estimator"]
            curve = train(learner, est, iterations=iterations, kind="grpo", lr=lr, eval_every=eval_every,
                          seed=s, label=label, progress=False)
            curves.append(curve)
            ro = env.sample(policy, 32, group_size=8, seed=10_000 + s)
            final.append({"label": label, "seed": s, "J": curve.success.iloc[-1],
                          "entropy": float(ro.entropies[ro.mask].mean()),
                          "timeout_share": float(ro.truth["timeout"].double().mean()),
                          "success_rate": float(ro.truth["success"].double().mean()),
                          "repeat_share": repeat_share(ro),
                          "zero_spread_share_last10": float(curve.zero_spread_share.iloc[-10:].mean())})
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True), pd.DataFrame(final)


# --------------------------------------------------------------------------- notebook 06
def anchor_statistics(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0) -> dict:
    """Anchor groups of one sampled batch: the ``anchor_groups`` table, a size histogram
    (``sizes``: size, groups, turns), the singleton share of groups and of turns."""
    ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    groups = anchor_groups(ro)
    hist = groups.groupby("size").size().rename("groups").reset_index()
    hist["turns"] = hist["size"] * hist["groups"]
    return {"rollouts": ro, "groups": groups, "sizes": hist,
            "singleton_share": float((groups["size"] == 1).mean()),
            "singleton_turn_share": float(hist.loc[hist["size"] == 1, "turns"].sum() / hist.turns.sum())}


def gigpo_terms_vs_truth(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0,
                         omega: float = 1.0, gamma: float = 0.95, norm: str = "mean_norm") -> dict:
    """Correlation with the exact advantage of GiGPO's episode term, its step term and their sum,
    and of GRPO's credit, over every played turn of one batch (and over turns in anchor groups
    of two or more only, where the step term exists)."""
    ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    exact = env.truth(policy).advantage(ro)
    g = get_estimator("gigpo")(ro, omega=omega, gamma=gamma, norm=norm)
    m = ro.mask
    # one position per turn in ToolWorld: turn-level info (B, N) pads to the positions (B, T)
    def pad(x):
        return torch.nn.functional.pad(x, (0, m.shape[1] - x.shape[1]))
    shared = m & (pad(g.info["turn_anchor_size"]) > 1)
    step = pad(g.info["step_term"])
    episode = g.info["episode_term"][:, None].expand_as(step)
    terms = {"GiGPO step term": step, "GiGPO episode term": episode, "GiGPO (episode + omega x step)": g.token,
             "GRPO": get_estimator("grpo")(ro).token}
    rows = [{"credit": k, "corr_all_turns": pearson(v[m], exact[m]), "corr_shared_anchors": pearson(v[shared], exact[shared])}
            for k, v in terms.items()]
    return {"rollouts": ro, "exact": exact, "terms": terms, "table": pd.DataFrame(rows),
            "shared_turn_share": float(shared.sum() / m.sum())}


def success_at_budget(curves: pd.DataFrame, budget: float) -> pd.DataFrame:
    """Exact success of every (label, seed) run at ``budget`` env steps, by linear interpolation
    between its evaluation points (a run that stopped short of the budget gives NaN)."""
    budget = check_number("budget", budget, low=0.0)
    rows = []
    for (label, seed), run in curves.dropna(subset=["success"]).groupby(["label", "seed"]):
        x, y = run.env_steps.to_numpy(float), run.success.to_numpy(float)
        rows.append({"label": label, "seed": seed,
                     "success": float(np.interp(budget, x, y)) if budget <= x.max() else float("nan")})
    return pd.DataFrame(rows)


def grpo_vs_gigpo_runs(env: ToolWorld, *, seeds: Sequence[int] = (0, 1, 2, 3, 4), iterations: int = 60,
                       lr: float = 0.1, n_tasks: int = 8, group_size: int = 8, eval_every: int = 5,
                       kind: str = "grpo", gigpo_kwargs: dict | None = None, progress: bool = True) -> pd.DataFrame:
    """GRPO and GiGPO from the same uniform agent, same seeds, same batch shape and loss ``kind``
    (``train``'s: "grpo" averages within each episode then over episodes, "ppo_clip" over all
    turns of the batch); stacked curves. Compare them against ``env_steps``: GiGPO's shorter
    episodes sample fewer steps per batch."""
    runs = {"GRPO": get_estimator("grpo"),
            "GiGPO": partial(get_estimator("gigpo"), **(gigpo_kwargs or {}))}
    curves = []
    bar = tqdm(total=len(runs) * len(seeds), desc="runs", disable=not progress)
    for label, est in runs.items():
        for s in seeds:
            learner = ToolLearner(env, env.make_policy(), n_tasks=n_tasks, group_size=group_size)
            curves.append(train(learner, est, iterations=iterations, kind=kind, lr=lr, eval_every=eval_every,
                                seed=s, label=label, progress=False))
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True)


def env_step_band(curves: pd.DataFrame, *, points: int = 20) -> pd.DataFrame:
    """Mean, min and max over seeds of exact success on a common env-step grid, per label (for a
    line chart with a band); the grid stops where the shortest run of the label stops."""
    points = check_int("points", points, low=2)
    out = []
    for label, runs in curves.dropna(subset=["success"]).groupby("label"):
        top = runs.groupby("seed").env_steps.max().min()
        grid = np.linspace(0, top, points)
        ys = np.stack([np.interp(grid, r.env_steps, r.success) for _, r in runs.groupby("seed")])
        out.append(pd.DataFrame({"label": label, "env_steps": grid.round(), "mean": ys.mean(0),
                                 "min": ys.min(0), "max": ys.max(0)}))
    return pd.concat(out, ignore_index=True)
