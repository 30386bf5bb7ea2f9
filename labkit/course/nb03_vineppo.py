"""Notebook 03, VinePPO: how good are Monte Carlo values from forked continuations ("vines") of a
real model's prefixes, what do they cost, and does step credit from them train better than
GRPO's outcome credit or PPO's learned critic?

Runners on the tiny arithmetic LM: the vine values' error against the cached 256-vine truth
(``labkit.envs.arithmetic.truth``, also the token-level truth), first-wrong-step hits per rollout
(a 119-rollout sample cached by ``scripts/build_vine_hits.py`` in ``data/vine_hits``; the hits and
their intervals are ``labkit.scoring``'s), the RL runs the notebook compares
(``labkit.learn.lm_runs.lm_rl_runs``, trained by ``scripts/build_rl_runs.py``) and their
learning-rate sweep (``scripts/build_rl_lr_sweep.py``), both loaded from ``data/rl_runs``. Each
runner is seeded and returns plain data.

The capstone (exercise 03c): ``live_capstone`` trains a fresh model with the reader's GRPO loop
for a few iterations (a notebook cell guards it with ``exercises.once_passed``), ``load_capstone_run`` reads the long run of the
lab's loop cached by ``scripts/build_capstone_grpo.py`` in ``data/capstone_grpo``, and
``logprob_change_table`` / ``logprob_change_heatmaps`` show what either moved on fixed rollouts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd
import torch

from labkit.core.cache import read_cache
from labkit.course import presets
from labkit.core.checks import check_int
from labkit.core.paths import data_path
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.scoring import first_error_hit_rate, pearson


def vine_credits(env, rollouts: Rollouts, ks: Iterable[int], *, seed: int = 0,
                 progress: bool = True) -> dict[int, Credit]:
    """VinePPO credit on ``rollouts`` for every k in ``ks``, k vines per step seeded ``seed + k``
    (``vine_value_error``'s seeds, so it can score these instead of sampling them again).

    Notebook 03's K slider reads these: sampling 16 vines per step takes seconds, so every K on
    the slider is computed once, up front. A call depends on its arguments only (tested), so a
    stored credit is the credit the slider would compute. Each credit's ``info["seconds"]`` is
    its wall time.
    """
    import time

    from labkit.credit.mc import vineppo

    ks = [check_int("ks", k, low=1) for k in ks]
    if not ks:
        raise ValueError("ks: need at least one k")
    out = {}
    for k in progress_bar(ks, desc="k", enabled=progress):
        start = time.perf_counter()
        credit = vineppo(rollouts, value_fn=env.value_fn(seed=seed + k), k=k)
        credit.info["seconds"] = time.perf_counter() - start
        out[k] = credit
    return out


def vine_value_error(env, rollouts: Rollouts, ks: Iterable[int] = (1, 3, 9, 16), *, seed: int = 0,
                     progress: bool = True, credits: Mapping[int, Credit] | None = None) -> pd.DataFrame:
    """VinePPO's Monte Carlo values with k vines against the cached 256-vine truth.

    For each k: mean absolute error and RMSE of V at every step start of ``rollouts`` (from
    ``load_reference``), correlation with the truth, the first-wrong-step hit rate of the
    resulting VinePPO credit, and the cost: vines (policy forward sequences) and the token
    positions the model processed. The truth has its own noise, standard error <= 0.5/sqrt(256).
    ``credits``: VinePPO credits from ``vine_credits`` with the same ``seed``; a k found there is
    scored, not sampled again (the same numbers).
    """
    import time

    ks = [check_int("ks", k, low=1) for k in ks]
    if not ks:
        raise ValueError("ks: need at least one k")
    truth = rollouts.truth["step_values"]
    present = rollouts.view(rollouts.rewards, "step", "sum")[1]
    rows = []
    for k in progress_bar(ks, desc="k", enabled=progress):
        if credits is None or k not in credits:  # sampled here, the one way vine_credits samples
            credits = {**(credits or {}), **vine_credits(env, rollouts, [k], seed=seed, progress=False)}
        credit = credits[k]
        start = time.perf_counter() - credit.info.get("seconds", 0.0)  # sampling counts, reused or not
        est = credit.info["step_values"]
        err = (est - truth)[present]
        a, b = est[present], truth[present]
        corr = pearson(a, b)
        rows.append({"k": k, "value_mae": float(err.abs().mean()), "value_rmse": float(err.pow(2).mean().sqrt()),
                     "value_corr": corr, **{f"first_error_{key}": v for key, v in
                                            first_error_hit_rate(credit.token, rollouts).items()},
                     "vines": credit.cost.policy_forwards, "policy_tokens": credit.cost.policy_tokens,
                     "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- hit rates on a larger sample





# notebook 07 reads the same cache, so its loader lives in presets; the lesson hands it on
load_vine_hits = presets.load_vine_hits


# --------------------------------------------------------------------------- RL on the tiny LM: GRPO, PPO and VinePPO
RL_RUNS_DIR = data_path("rl_runs")


def load_rl_runs(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """Learning curves of ``labkit.learn.lm_runs.lm_rl_runs`` cached by ``scripts/build_rl_runs.py``
    in ``path`` (default ``data/rl_runs``): (curves, meta). Raises if the cache is missing,
    foreign or stale (built from another model than the shipped one)."""
    meta, files = read_cache(path if path is not None else RL_RUNS_DIR, script="build_rl_runs.py",
                             files=["curves.csv"], what="cached runs")
    return pd.read_csv(files["curves.csv"]), meta


def load_lr_sweep(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The learning-rate sweep cached by ``scripts/build_rl_lr_sweep.py`` in ``path`` (default
    ``data/rl_runs``): (curves with ``lr`` and ``iterations`` columns, meta). Raises if the cache
    is missing, foreign or stale."""
    meta, files = read_cache(path if path is not None else RL_RUNS_DIR, script="build_rl_lr_sweep.py",
                             meta="lr_sweep_meta.json", files=["lr_sweep.csv"], args=["--lrs", "3e-5", "1e-4"],
                             what="cached sweep")
    return pd.read_csv(files["lr_sweep.csv"]), meta


def summarise_lr_sweep(curves: pd.DataFrame) -> pd.DataFrame:
    """``labkit.learn.loop.summarise`` per learning rate: one row per (``lr``, ``iterations``,
    ``label``) of ``curves`` (``load_lr_sweep``'s, or any curves given those two columns) with the
    seeds run, held-out success before training and the change it made (mean, std, min, max over
    the seeds), plus ``vs_grpo``: the mean over shared seeds of the run's change minus GRPO's
    change at the same lr and seed (evaluations share problems and random numbers, so this
    pairing removes what the seeds have in common; NaN without a GRPO run)."""
    from labkit.learn.loop import summarise

    if not {"lr", "iterations"} <= set(curves.columns):
        raise ValueError("curves: need lr and iterations columns (load_lr_sweep's curves)")
    rows = []
    for (lr, iterations), group in curves.groupby(["lr", "iterations"], sort=True):
        table = summarise(group)
        first = group[group.iteration == 0].set_index(["label", "seed"]).success
        last_it = group.groupby(["label", "seed"]).iteration.transform("max")
        change = group[group.iteration == last_it].set_index(["label", "seed"]).success - first
        for _, row in table.iterrows():
            mine = change.loc[row.label]
            grpo = change.loc["GRPO"] if "GRPO" in change.index.get_level_values(0) else pd.Series(dtype=float)
            shared = mine.index.intersection(grpo.index)
            rows.append({"lr": lr, "iterations": int(iterations), "label": row.label, "seeds": int(row.seeds),
                         "success_before": row.success_before, "change_mean": row.change_mean,
                         "change_std": row.change_std, "change_min": row.change_min, "change_max": row.change_max,
                         "vs_grpo": float((mine[shared] - grpo[shared]).mean()) if len(shared) else float("nan")})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the capstone (exercise 03c): a GRPO loop
CAPSTONE_DIR = data_path("capstone_grpo")
#: the live run's recipe: the cached long run's (scripts/build_capstone_grpo.py) with a smaller
#: batch and a few iterations, so it takes seconds
LIVE = {"iterations": 4, "lr": 3e-5, "prompts_per_batch": 4, "n_per_prompt": 8, "seed": 0}


def load_capstone_run(path: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The long GRPO run of ``scripts/build_capstone_grpo.py`` cached in ``path`` (default
    ``data/capstone_grpo``): (curve, tokens, meta). ``curve``: ``labkit.learn.loop.train``'s, one
    row per iteration; ``tokens``: ``row``, ``position``, ``before``, ``after``, the log-probability
    of each generated token of the 32 reference rollouts before and after training. Raises if the
    cache is missing, foreign or stale."""
    meta, files = read_cache(path if path is not None else CAPSTONE_DIR, script="build_capstone_grpo.py",
                             files=["curve.csv", "logprobs.csv"], what="cached capstone run")
    return pd.read_csv(files["curve.csv"]), pd.read_csv(files["logprobs.csv"]), meta


def token_grid(tokens: pd.DataFrame, column: str, rollouts: Rollouts) -> torch.Tensor:
    """``column`` of ``load_capstone_run``'s long-form ``tokens`` as a (B, T) tensor shaped like
    ``rollouts`` (0 off the listed positions). Raises if a listed position is not generated in
    ``rollouts`` (the cache was built on other rollouts)."""
    if column not in tokens.columns or not {"row", "position"} <= set(tokens.columns):
        raise ValueError(f"column: expected one of the token table's value columns, got {column!r}")
    b = torch.tensor(tokens.row.tolist(), dtype=torch.long)
    t = torch.tensor(tokens.position.tolist(), dtype=torch.long)
    B, T = rollouts.mask.shape
    if len(b) and (int(b.max()) >= B or int(t.max()) >= T or not bool(rollouts.mask[b, t].all())):
        raise ValueError("tokens: positions outside the rollouts' generated tokens (built on other rollouts?)")
    grid = torch.zeros(B, T, dtype=torch.float64)
    grid[b, t] = torch.tensor(tokens[column].tolist(), dtype=torch.float64)
    return grid


def policy_logprobs(learner, rollouts: Rollouts) -> torch.Tensor:
    """(B, T) log-probability under ``learner``'s current policy of every generated token of
    ``rollouts`` (0 elsewhere), without a gradient."""
    with torch.no_grad():
        return learner.logprobs(rollouts, torch.arange(len(rollouts))).double()


def live_capstone(loop, rollouts: Rollouts, *, iterations: int = LIVE["iterations"], lr: float = LIVE["lr"],
                  prompts_per_batch: int = LIVE["prompts_per_batch"], n_per_prompt: int = LIVE["n_per_prompt"],
                  seed: int = LIVE["seed"]) -> dict:
    """Train a fresh copy of the shipped model (``presets.lm_rl_setup``'s learner) with the
    reader's ``loop(learner, optimizer, iterations, seed)`` and Adam at ``lr``. Returns
    ``rewards`` (what the loop returned), ``before`` and ``after`` (``policy_logprobs`` of
    ``rollouts``) and ``seconds`` (the loop's wall time)."""
    import time

    iterations = check_int("iterations", iterations, low=1)
    if not callable(loop):
        raise TypeError(f"loop: expected your training loop (a function), got {type(loop).__name__}")
    learner = presets.lm_rl_setup(prompts_per_batch=prompts_per_batch, n_per_prompt=n_per_prompt)(seed)
    before = policy_logprobs(learner, rollouts)
    optimizer = torch.optim.Adam(learner.parameters(), lr=lr)
    start = time.perf_counter()
    rewards = [float(r) for r in loop(learner, optimizer, iterations, seed)]
    seconds = time.perf_counter() - start
    return {"rewards": rewards, "before": before, "after": policy_logprobs(learner, rollouts), "seconds": seconds}


def logprob_change_table(rollouts: Rollouts, before: torch.Tensor, after: torch.Tensor) -> pd.DataFrame:
    """Where training moved the log-probabilities of ``rollouts``' generated tokens: one row per
    kind of token (on a first wrong step, elsewhere in a failed rollout, in a correct rollout)
    with ``tokens``, ``mean_change`` and ``mean_abs_change`` of log pi (after - before)."""
    from labkit.scoring import first_error_positions

    change = (after - before).double()
    wrong = first_error_positions(rollouts)
    failed = (rollouts.scores < 0.5)[:, None] & rollouts.mask
    kinds = {"first wrong step": wrong, "rest of a failed rollout": failed & ~wrong,
             "correct rollout": rollouts.mask & ~failed & ~wrong}
    rows = []
    for name, where in kinds.items():
        d = change[where]
        rows.append({"tokens": name, "count": int(where.sum()),
                     "mean_change": float(d.mean()) if len(d) else float("nan"),
                     "mean_abs_change": float(d.abs().mean()) if len(d) else float("nan")})
    return pd.DataFrame(rows)


def logprob_change_heatmaps(rollouts: Rollouts, before: torch.Tensor, after: torch.Tensor, rows,
                            after_label: str = "after training"):
    """Two heatmaps of ``rows`` of ``rollouts``: log pi of each generated token before training,
    and its change ``after - before`` (each on its own colour scale), first wrong steps outlined."""
    from labkit.course.step_heatmaps import wrong_step_heatmaps

    rows = list(rows)
    panels = {"log pi before training": before[rows], f"change in log pi, {after_label}": (after - before)[rows]}
    return wrong_step_heatmaps(rollouts, panels, rows, shared_scale=False, cell_size=16)


def capstone_curves(curve: pd.DataFrame) -> pd.DataFrame:
    """``train``'s curve in long form for one chart: ``iteration``, ``value``, ``series`` (the
    mean reward of each training batch, and held-out success where it was evaluated)."""
    if not {"iteration", "train_reward", "success"} <= set(curve.columns):
        raise ValueError("curve: expected the DataFrame labkit.learn.loop.train returns")
    batch = curve.dropna(subset=["train_reward"])
    held = curve.dropna(subset=["success"])
    return pd.concat([pd.DataFrame({"iteration": batch.iteration, "value": batch.train_reward,
                                    "series": "training batch, mean reward"}),
                      pd.DataFrame({"iteration": held.iteration, "value": held.success,
                                    "series": "held-out success (256 problems)"})], ignore_index=True)
