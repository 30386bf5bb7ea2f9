"""GRPO against GiGPO trained on a ToolWorld: the runs notebook 06 trains live and the cached sweep
(``scripts/build_loss_runs.py``) that repeats them under every aggregation and policy loss, and how
the two are read at equal environment steps.

Shared by the lesson and the script that builds the cache, so it lives outside the lesson.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from labkit.core.cache import read_cache
from labkit.core.checks import check_number
from labkit.core.paths import data_path
from labkit.core.progress import progress_bar
from labkit.credit import get_estimator
from labkit.envs.toolworld import ToolLearner, ToolWorld
from labkit.learn.aggregation import AGGREGATIONS
from labkit.learn.loop import train
from labkit.scoring import difference_interval

#: the cached sweep's families of settings, in the order notebook 06 shows them
LOSS_FAMILIES = ("one update per batch", "one update per batch, lr 0.3", "four updates per batch")
#: four updates per batch: two epochs of two minibatches, so the ratio leaves 1 and the rules act
FOUR_UPDATES = dict(epochs=2, minibatches=2)


def loss_settings() -> list[tuple[str, str, dict]]:
    """(family, setting, ``grpo_vs_gigpo_runs`` keyword arguments) of every cached comparison:
    PPO-clip under each of verl's five aggregations at one update per batch (lr 0.1, as in the
    notebook); token-mean and seq-mean-token-mean at lr 0.3; and with four updates per batch,
    PPO-clip under both and each other policy loss under token-mean. Clip-Cov and KL-Cov at
    verl's 2e-4 (one turn of a batch) and at 2e-2."""
    one, big, four = LOSS_FAMILIES
    out = [(one, mode, dict(kind="ppo_clip", aggregation=mode)) for mode in AGGREGATIONS]
    out += [(big, mode, dict(kind="ppo_clip", aggregation=mode, lr=0.3)) for mode in ("token-mean", "seq-mean-token-mean")]
    out += [(four, f"PPO-clip, {mode}", dict(kind="ppo_clip", aggregation=mode, **FOUR_UPDATES))
            for mode in ("token-mean", "seq-mean-token-mean")]
    for label, kind, options in (("dual-clip", "dual_clip", {}), ("GSPO", "gspo", {}), ("CISPO", "cispo", {}),
                                 ("SAPO", "sapo", {}), ("Clip-Cov", "clip_cov", {}), ("KL-Cov", "kl_cov", {}),
                                 ("Clip-Cov, ratio 0.02", "clip_cov", {"clip_cov_ratio": 0.02}),
                                 ("KL-Cov, ratio 0.02", "kl_cov", {"kl_cov_ratio": 0.02}),
                                 ("PPO-clip, top 20% entropy", "ppo_clip", {"top_entropy_quantile": 0.2})):
        out.append((four, label, dict(kind=kind, aggregation="token-mean", loss_options=options or None,
                                      **FOUR_UPDATES)))
    return out


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
                       kind: str = "grpo", gigpo_kwargs: dict | None = None, progress: bool = True,
                       loss_fn=None, aggregation: str | None = None, loss_options: dict | None = None,
                       epochs: int = 1, minibatches: int = 1) -> pd.DataFrame:
    """GRPO and GiGPO from the same uniform agent, same seeds, same batch shape and loss ``kind``
    (``train``'s: "grpo" averages within each episode then over episodes, "ppo_clip" over all
    turns of the batch); stacked curves. Compare them against ``env_steps``: GiGPO's shorter
    episodes sample fewer steps per batch. ``loss_fn``: a loss of one's own,
    ``(logp, old_logp, advantages, mask) -> scalar``, minimised in place of ``kind``'s (``train``).
    ``aggregation``, ``loss_options``, ``epochs`` and ``minibatches`` go to ``train`` as given."""
    runs = {"GRPO": get_estimator("grpo"),
            "GiGPO": partial(get_estimator("gigpo"), **(gigpo_kwargs or {}))}
    curves = []
    bar = progress_bar(total=len(runs) * len(seeds), desc="runs", enabled=progress)
    for label, est in runs.items():
        for s in seeds:
            learner = ToolLearner(env, env.make_policy(), n_tasks=n_tasks, group_size=group_size)
            curves.append(train(learner, est, iterations=iterations, kind=kind, lr=lr, eval_every=eval_every,
                                seed=s, label=label, progress=False, loss_fn=loss_fn, aggregation=aggregation,
                                loss_options=loss_options, epochs=epochs, minibatches=minibatches))
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True)


def load_loss_runs(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The cached GRPO-against-GiGPO runs under every aggregation and policy loss
    (``scripts/build_loss_runs.py`` writes them to ``path``, default ``data/loss_runs/``): the
    stacked curves (with ``family`` and ``setting``) and the meta (settings, seeds, wall times).
    Raises if the cache is missing, foreign or stale."""
    meta, files = read_cache(path if path is not None else data_path("loss_runs"), script="build_loss_runs.py",
                             files=["curves.csv"], what="cached loss runs")
    return pd.read_csv(files["curves.csv"]), meta


def gap_by_setting(curves: pd.DataFrame, budget: float, *, level: float = 0.95) -> pd.DataFrame:
    """GiGPO's exact J minus GRPO's at ``budget`` environment steps, per training setting, from
    curves with a ``setting`` column (and optionally ``family``: ``scripts/build_loss_runs.py``'s,
    or any stack of ``grpo_vs_gigpo_runs``): mean J of each, the gap's mean with a ``level``
    bootstrap interval over seeds (``labkit.scoring.difference_interval``: seeds are independent
    runs), the seeds on which GiGPO is ahead, and the share of turns the loss's rule acted on
    (``clip_frac``: clipped, dropped or penalised). A run that stopped short of the budget is
    left out. Settings keep their order of first appearance."""
    budget = check_number("budget", budget, low=0.0)
    if "setting" not in curves.columns:
        raise ValueError("curves: expected a 'setting' column (one label per training setting)")
    keys = ["family", "setting"] if "family" in curves.columns else ["setting"]
    rows = []
    for key, runs in curves.groupby(keys, sort=False):
        at = success_at_budget(runs, budget).dropna(subset=["success"])
        by = {label: at[at.label == label].success.to_numpy() for label in ("GRPO", "GiGPO")}
        if min(len(v) for v in by.values()) < 2:
            raise ValueError(f"budget: fewer than two runs of setting {key[-1]!r} reach {budget:g} env steps")
        diff = difference_interval(by["GiGPO"], by["GRPO"], level=level)
        paired = at.pivot(index="seed", columns="label", values="success").dropna()
        rows.append({**dict(zip(keys, key)), "GRPO J": by["GRPO"].mean(), "GiGPO J": by["GiGPO"].mean(),
                     "gap": diff["diff"], "gap low": diff["low"], "gap high": diff["high"],
                     "seeds GiGPO ahead": f"{int((paired.GiGPO > paired.GRPO).sum())}/{len(paired)}",
                     "rule acted on": float(runs.clip_frac.mean())})
    return pd.DataFrame(rows)
