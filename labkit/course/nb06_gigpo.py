"""Notebook 06, GiGPO: do anchor-state groups (turns that start from the same observation) give a
better turn credit than GRPO's one number per episode, and does it train faster per env step?

Runners on ToolWorld (the world: ``presets.NB06_WORLD``, built with ``presets.noisy_world``):
anchor-group statistics, GiGPO's episode and step terms against the exact advantage,
GRPO-vs-GiGPO learning curves compared at equal env steps. Each runner is seeded and returns
plain data.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from labkit.core.checks import check_int, check_number
from labkit.course.gigpo_runs import grpo_vs_gigpo_runs, success_at_budget
from labkit.credit import get_estimator
from labkit.credit.group import anchor_groups
from labkit.envs.toolworld import ToolLearner, ToolWorld
from labkit.learn.loop import train
from labkit.scoring import pearson


# --------------------------------------------------------------------------- anchor groups
def size_histogram(sizes: pd.Series) -> pd.DataFrame:
    """Groups and turns per group size (``size``, ``groups``, ``turns``), one row for every size
    from 1 to the largest, a size no group has included with 0 groups: a bar chart of it shows
    the gap as an empty bar instead of an axis that jumps from 4 to 6."""
    if len(sizes) and not (sizes >= 1).all():
        raise ValueError(f"sizes: every group has at least one turn, got sizes {sorted(set(sizes[sizes < 1]))}")
    largest = int(sizes.max()) if len(sizes) else 0
    counts = sizes.value_counts().reindex(range(1, largest + 1), fill_value=0)
    hist = pd.DataFrame({"size": counts.index.to_numpy(), "groups": counts.to_numpy()})
    hist["turns"] = hist["size"] * hist["groups"]
    return hist


def anchor_statistics(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0) -> dict:
    """Anchor groups of one sampled batch: the ``anchor_groups`` table, a size histogram
    (``sizes``: size, groups, turns; every size from 1 to the largest, see ``size_histogram``),
    the singleton share of groups and of turns."""
    ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    groups = anchor_groups(ro)
    hist = size_histogram(groups["size"])
    return {"rollouts": ro, "groups": groups, "sizes": hist,
            "singleton_share": float((groups["size"] == 1).mean()),
            "singleton_turn_share": float(hist.loc[hist["size"] == 1, "turns"].sum() / hist.turns.sum())}


def anchor_answers(env: ToolWorld, settings: Sequence[tuple[int, float]], *, n_tasks: int = 8, seed: int = 0,
                   known: dict | None = None) -> pd.DataFrame:
    """What the anchor-group dashboard shows at each (episodes per task, agent skill) of
    ``settings``: one row per setting, in order, with ``group_size``, ``strength`` (0: the uniform
    agent ``env.make_policy()``, else ``env.scripted_policy(strength)``), the
    ``singleton_share`` of groups and of turns (``singleton_turn_share``) and the mean
    ``turns_per_episode`` of the batch (``anchor_statistics`` with ``n_tasks`` and ``seed``).
    ``known``: ``anchor_statistics`` results already in hand, by (group_size, strength); those are
    read, not sampled again."""
    known = dict(known or {})
    rows = []
    for group_size, strength in settings:
        group_size = check_int("settings", group_size, low=1)
        strength = check_number("settings", strength, low=0.0)
        if (group_size, strength) in known:
            a = known[(group_size, strength)]
        else:
            agent = env.make_policy() if strength == 0 else env.scripted_policy(strength)
            a = anchor_statistics(env, agent, n_tasks=n_tasks, group_size=group_size, seed=seed)
        rows.append({"group_size": group_size, "strength": strength, "singleton_share": a["singleton_share"],
                     "singleton_turn_share": a["singleton_turn_share"],
                     "turns_per_episode": float(a["rollouts"].mask.sum(1).double().mean())})
    if not rows:
        raise ValueError("settings: need at least one (group_size, strength) pair")
    return pd.DataFrame(rows)


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


# --------------------------------------------------------------------------- GRPO against GiGPO at equal env steps
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



# --------------------------------------------------------------------------- the capstone: your loss in the loop
#: the capstone's aggregations (exercise 06c) and the lab's loss kind that computes each
AGGREGATIONS = {"seq-mean-token-mean": "grpo", "token-mean": "ppo_clip"}


def budget_gaps(curves: pd.DataFrame, budgets: Sequence[float]) -> pd.DataFrame:
    """GiGPO's success minus GRPO's, per seed, at each env-step budget (``success_at_budget``):
    columns ``env_steps``, ``seed``, ``gap`` (NaN where a run stopped short of the budget)."""
    rows = []
    for budget in budgets:
        at = success_at_budget(curves, budget).pivot(index="seed", columns="label", values="success")
        rows += [{"env_steps": budget, "seed": int(seed), "gap": float(g)} for seed, g in (at["GiGPO"] - at["GRPO"]).items()]
    return pd.DataFrame(rows, columns=["env_steps", "seed", "gap"])


#: iterations that carry both runs of each aggregation past 40,000 env steps (on the seeds
#: 0 and 1: the seq-mean runs keep longer episodes, so they get there sooner)
LIVE_ITERATIONS = {"seq-mean-token-mean": 30, "token-mean": 42}


def your_loss_runs(env: ToolWorld, policy_loss, *, seeds: Sequence[int] = (0, 1), iterations: dict | int | None = None,
                   lr: float = 0.1, progress: bool = False) -> pd.DataFrame:
    """GRPO and GiGPO (``grpo_vs_gigpo_runs``) trained with the reader's
    ``policy_loss(logp, old_logp, advantages, mask, aggregation)`` under each of ``AGGREGATIONS``,
    for ``iterations`` (one number, or one per aggregation; default ``LIVE_ITERATIONS``); the
    stacked curves gain an ``aggregation`` column. With a loss equal to the lab's, seed s gives
    the first iterations of the lab's run of seed s."""
    if not callable(policy_loss):
        raise TypeError(f"policy_loss: expected the function you wrote, got {type(policy_loss).__name__}")
    iterations = LIVE_ITERATIONS if iterations is None else iterations
    if not isinstance(iterations, dict):
        iterations = dict.fromkeys(AGGREGATIONS, iterations)
    if set(iterations) != set(AGGREGATIONS):
        raise ValueError(f"iterations: expected one number or one per aggregation {list(AGGREGATIONS)}, "
                         f"got {sorted(iterations)}")
    curves = []
    for aggregation, kind in AGGREGATIONS.items():
        def loss_fn(logp, old_logp, advantages, mask, aggregation=aggregation):
            return policy_loss(logp, old_logp, advantages, mask, aggregation)
        runs = grpo_vs_gigpo_runs(env, seeds=seeds, iterations=iterations[aggregation], lr=lr, kind=kind,
                                  progress=progress, loss_fn=loss_fn)
        curves.append(runs.assign(aggregation=aggregation))
    return pd.concat(curves, ignore_index=True)


def gap_table(yours: pd.DataFrame, lab: dict, budgets: Sequence[float]) -> pd.DataFrame:
    """GiGPO - GRPO at each budget and aggregation: the reader's short runs (``yours``, from
    ``your_loss_runs``), one column per seed ("yours s0", ...), beside the lab's long version (``lab``: aggregation
    -> the notebook's curves of that loss) as mean, min and max over its ``lab n`` seeds."""
    rows = []
    for aggregation in AGGREGATIONS:
        mine = budget_gaps(yours[yours.aggregation == aggregation], budgets)
        theirs = budget_gaps(lab[aggregation], budgets)
        for budget in budgets:
            row = {"aggregation": aggregation, "env steps": budget}
            row.update({f"yours s{s}": g for s, g in mine[mine.env_steps == budget].set_index("seed").gap.items()})
            at = theirs[theirs.env_steps == budget].gap
            row.update({"lab mean": at.mean(), "lab min": at.min(), "lab max": at.max(), "lab n": len(at)})
            rows.append(row)
    return pd.DataFrame(rows)


def train_with_your_loss(policy_loss, env: ToolWorld, lab: dict, *, budgets: Sequence[float] = (20_000, 40_000),
                         seeds: Sequence[int] = (0, 1), iterations: dict | int | None = None, exercise: str = "06c"):
    """The capstone's run: once ``policy_loss`` passes ``check(policy_loss, exercise)``, train
    GRPO and GiGPO with it under each aggregation (``your_loss_runs``) and print the GiGPO - GRPO
    gap at ``budgets`` beside the lab's long version (``gap_table``). Until it passes, print one
    line saying so and train nothing. Returns the table, or None when it did not train."""
    from labkit.course.exercises import once_passed  # the course's grader: this lesson's own exercise

    return once_passed(policy_loss, exercise, lambda: _train_and_show(policy_loss, env, lab, budgets, seeds, iterations))


def _train_and_show(policy_loss, env: ToolWorld, lab: dict, budgets, seeds, iterations) -> pd.DataFrame:
    """``train_with_your_loss``'s run, once the loss passes: train, print the table, return it."""
    yours = your_loss_runs(env, policy_loss, seeds=seeds, iterations=iterations)
    table = gap_table(yours, lab, budgets)
    longest = max(int(curves.iteration.max()) for curves in lab.values())
    print(f"GiGPO - GRPO in J at equal env steps. yours: your loss, {len(seeds)} seed{'s' * (len(seeds) != 1)}, "
          f"up to {int(yours.iteration.max())} iterations;\nlab: the notebook's runs above, {longest} iterations, "
          f"mean / min / max over its n seeds.")
    shown = table.copy()
    numbers = shown.columns[2:-1]  # the gaps; the last column counts seeds
    shown[numbers] = shown[numbers].round(3) + 0.0  # + 0.0: no "-0.000" on the page
    print(shown.to_string(index=False))
    return table


# --------------------------------------------------------------------------- what the loss's rule does to credit
#: The policy losses shown beside the advantage: ``labkit.learn.loop.policy_loss`` kinds, and the
#: top-entropy rule on PPO-clip. Clip-Cov and KL-Cov at 2e-2 of the turns (verl's 2e-4 would
#: touch one turn of this batch).
LOSS_RULES = {"PPO-clip": ("ppo_clip", {}), "dual-clip": ("dual_clip", {}), "GSPO": ("gspo", {}),
              "CISPO": ("cispo", {}), "SAPO": ("sapo", {}),
              "Clip-Cov": ("clip_cov", {"clip_cov_ratio": 0.02}), "KL-Cov": ("kl_cov", {"kl_cov_ratio": 0.02}),
              "PPO-clip, top 20% entropy": ("ppo_clip", {"top_entropy_quantile": 0.2})}


def trained_copy(env: ToolWorld, policy, iterations: int, *, lr: float = 0.1, seed: int = 0):
    """A copy of ``policy`` after ``iterations`` training iterations with ``train`` (GRPO credit,
    PPO-clip, Adam at ``lr``, fresh batches of 8 tasks x 8 episodes, ``seed``); ``policy`` is left
    as it was. 0 iterations gives an untouched copy."""
    import copy

    iterations = check_int("iterations", iterations, low=0)
    moved = copy.deepcopy(policy)
    if iterations > 0:
        train(ToolLearner(env, moved), "grpo", iterations=iterations, kind="ppo_clip", lr=lr, seed=seed,
              eval_every=iterations, progress=False)
    return moved


def loss_rule_view(env: ToolWorld, *, warmup: int = 20, updates: int = 8, n_tasks: int = 8, group_size: int = 8,
                   seed: int = 0) -> dict:
    """Every loss of :data:`LOSS_RULES` on one batch once the learner has moved on: the uniform agent
    trained ``warmup`` iterations samples the batch (so turns differ in entropy and
    probability), GRPO credits it, and the learner trains ``updates`` iterations more before
    the loss is taken (``trained_copy``): how a learner ``updates`` steps ahead sees a batch its
    sampler drew (an asynchronous pipeline; a batch's later epochs do the same in smaller steps),
    the place where clips and gates act. Returns ``rollouts``, ``advantage`` and what
    ``loss_rule_credit`` returns."""
    warm = trained_copy(env, env.make_policy(), warmup, seed=seed)
    ro = env.sample(warm, n_tasks, group_size=group_size, seed=check_int("seed", seed) + 1)
    adv = get_estimator("grpo")(ro).token.double()
    later = trained_copy(env, warm, updates, seed=seed + 2)
    with torch.no_grad():
        logp = later.log_prob(ro.states, ro.tokens).double()
    return {"rollouts": ro, "advantage": adv, **loss_rule_credit(ro, adv, logp)}


def loss_rule_credit(rollouts, advantages: torch.Tensor, logp: torch.Tensor, *,
                     aggregation: str = "token-mean") -> dict:
    """Each loss of :data:`LOSS_RULES` applied to ``advantages`` at the moved policy's ``logp``
    (``loss_rule_view``) against the batch's own log-probabilities, all under ``aggregation``:
    ``credit`` ({rule: (B, T)}, ``labkit.learn.loop.loss_credit`` times the batch's turn count, so
    that at ratio 1 under token-mean it reads as the advantage), ``ratio`` (B, T) and ``table``:
    per rule, the share of turns the rule silenced (no push though the advantage is not 0) or
    pushed less or more than ratio x advantage (the unclipped importance-weighted push), and the
    correlation of the push with the advantage over the turns."""
    from labkit.learn.loop import loss_credit

    mask = rollouts.mask
    n = float(mask.sum())
    old = rollouts.logprobs.double()
    adv = advantages.double()
    ratio = torch.where(mask, (logp - old).exp(), torch.zeros((), dtype=torch.float64))
    plain = ratio * adv  # the push with the importance weight and no rule
    credit, rows = {}, []
    for rule, (kind, options) in LOSS_RULES.items():
        c = loss_credit(logp, old, adv, mask, kind, aggregation=aggregation, entropies=rollouts.entropies,
                        generator=torch.Generator().manual_seed(0) if kind == "clip_cov" else None, **options) * n
        credit[rule] = c
        live = mask & (adv != 0)
        tol = 1e-9 * plain.abs().clamp(min=1.0)
        silenced = live & (c == 0)
        moved = live & ~silenced
        rows.append({"loss": rule, "silenced": float(silenced.sum() / live.sum()),
                     "pushed less": float((moved & (c.abs() < plain.abs() - tol)).sum() / live.sum()),
                     "pushed more": float((moved & (c.abs() > plain.abs() + tol)).sum() / live.sum()),
                     "correlation with the advantage": pearson(c[mask], adv[mask])})
    return {"credit": credit, "ratio": ratio, "table": pd.DataFrame(rows)}


# --------------------------------------------------------------------------- loss aggregation is credit
#: The two aggregations of this notebook's runs: GRPO's own and the one that closed the gap.
AGGREGATION_RULES = ("seq-mean-token-mean", "token-mean")


def aggregation_credit(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0) -> dict:
    """What each aggregation does to GRPO's credit on one batch of ``policy`` in ``env``.

    Returns ``rollouts``, ``advantage`` (GRPO's per-turn credit, (B, T)), ``effective``
    ({rule: (B, T)}: the credit that reaches the gradient, ``labkit.learn.aggregation.
    effective_credit``, times the batch's turn count so that token-mean reads on the
    advantage's scale) and ``table``: for failed and successful episodes, in three length bins,
    the mean push per turn under each rule (the effective credit averaged over the turns)."""
    from labkit.learn.aggregation import effective_credit

    ro = env.sample(policy, n_tasks, group_size=group_size, seed=check_int("seed", seed))
    adv = get_estimator("grpo")(ro).token.double()
    n = float(ro.mask.sum())
    effective = {rule: effective_credit(adv, ro.mask, rule) * n for rule in AGGREGATION_RULES}
    lengths = ro.mask.sum(1)
    edges = torch.quantile(lengths.double(), torch.tensor([1 / 3, 2 / 3], dtype=torch.float64))
    rows = []
    for outcome, episodes in (("failed", ro.scores <= 0), ("succeeded", ro.scores > 0)):
        for name, lo, hi in (("short", -np.inf, edges[0]), ("middle", edges[0], edges[1]), ("long", edges[1], np.inf)):
            sel = episodes & (lengths.double() > lo) & (lengths.double() <= hi)
            if not bool(sel.any()):
                continue
            row = {"outcome": outcome, "length": name, "episodes": int(sel.sum()),
                   "turns": f"{int(lengths[sel].min())}-{int(lengths[sel].max())}"}
            for rule, e in effective.items():
                row[f"push per turn, {rule}"] = float((e[sel] * ro.mask[sel]).sum() / ro.mask[sel].sum())
            rows.append(row)
    return {"rollouts": ro, "advantage": adv, "effective": effective, "table": pd.DataFrame(rows)}


# --------------------------------------------------------------------------- the per-turn question
# The measurement itself lives in labkit.course.per_turn (scripts/build_per_turn_bias.py shares it);
# here: its cached grid, read for the notebook.
PER_TURN_SCRIPT = "build_per_turn_bias.py"


def load_per_turn_bias(path=None) -> tuple[pd.DataFrame, dict]:
    """The grid of ``per_turn_grid`` cached by ``scripts/build_per_turn_bias.py`` in ``path``
    (default ``data/per_turn``): (table, meta). Raises if it is missing, foreign or stale."""
    from pathlib import Path

    from labkit.core.cache import read_cache
    from labkit.core.paths import data_dir

    folder = Path(path) if path is not None else data_dir() / "per_turn"
    meta, files = read_cache(folder, script=PER_TURN_SCRIPT, files=["bias.csv"], what="per-turn bias grid")
    return pd.read_csv(files["bias.csv"]), meta


def per_turn_chart_data(grid: pd.DataFrame, estimators: Sequence[str] = ("MT-GRPO (turn index)",
                                                                          "return-to-go baseline")) -> pd.DataFrame:
    """The cost-per-turn rows of ``grid`` (find_reward = 0) for ``estimators``, with a ``line``
    column "estimator, agent" for a line chart of stop_bias against step_cost."""
    for col in ("step_cost", "find_reward", "estimator", "agent", "stop_bias", "stop_lo", "stop_hi"):
        if col not in grid:
            raise ValueError(f"grid: missing column {col!r} (a per_turn_grid table)")
    d = grid[(grid.find_reward == 0) & grid.estimator.isin(list(estimators))].copy()
    d["line"] = d.estimator + ", " + d.agent
    return d.reset_index(drop=True)


def per_turn_table(grid: pd.DataFrame, estimators: Sequence[str] = ("MT-GRPO (turn index)", "return-to-go baseline",
                                                                    "GiGPO (anchor groups)", "exact advantage"),
                   digits: int = 3) -> pd.DataFrame:
    """One row per (step_cost, find_reward, agent) of ``grid``: the mean episode length, then for
    each of ``estimators`` its stop_bias with its 95 % interval ("-0.123 [-0.150, -0.096]"; the
    exact advantage's shows the noise the batches share, since it has no bias), and ``one
    batch`` (the first estimator's stop_noise: how far one batch's read-out strays)."""
    for col in ("step_cost", "find_reward", "agent", "estimator", "stop_bias", "stop_lo", "stop_hi", "stop_noise",
                "episode_turns"):
        if col not in grid:
            raise ValueError(f"grid: missing column {col!r} (a per_turn_grid table)")
    digits = check_int("digits", digits, low=0)
    rows = []
    for (cost, find, agent), d in grid.groupby(["step_cost", "find_reward", "agent"], sort=False):
        d = d.set_index("estimator")
        row = {"cost/turn": cost, "find": find, "agent": agent, "turns": round(float(d.episode_turns.iloc[0]), 1)}
        for name in estimators:
            e = d.loc[name]
            m, lo, hi = (round(float(x), digits) + 0.0 for x in (e.stop_bias, e.stop_lo, e.stop_hi))  # no "-0.000"
            row[name] = f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"
        row["one batch"] = round(float(d.loc[estimators[0], "stop_noise"]), digits)
        rows.append(row)
    return pd.DataFrame(rows)
