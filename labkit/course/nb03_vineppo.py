"""Notebook 03, VinePPO: how good are Monte Carlo values from forked continuations ("vines") of a
real model's prefixes, what do they cost, and does step credit from them train better than
GRPO's outcome credit or PPO's learned critic?

Runners on the tiny arithmetic LM: the vine values' error against the cached 256-vine truth,
the token-level truth, first-wrong-step hits per rollout with their intervals (Wilson over
rollouts, paired bootstrap for a difference; a 119-rollout sample cached by
``scripts/build_vine_hits.py`` in ``data/vine_hits``), the RL runs the notebook compares (trained
by ``scripts/build_rl_runs.py``) and their learning-rate sweep (``scripts/build_rl_lr_sweep.py``),
both loaded from ``data/rl_runs``. Each runner is seeded and returns plain data.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.paths import data_path
from labkit.core.checks import check_int, check_number
from labkit.core.rollouts import Credit, Rollouts
# Defined in nb02 (the notebook calls them as lesson.<name> too)
from labkit.course.nb02_critics_gae import first_error_hit_rate, step_table, truth_step_advantage  # noqa: F401
from labkit.course.presets import LM_OPERANDS
from labkit.scoring import pearson


def truth_token_advantage(rollouts: Rollouts) -> torch.Tensor:
    """Token-level Monte Carlo advantage A_t = r_t + V_{t+1} - V_t for the rows that carry
    ``truth["token_values"]`` (V before every token; V after the last token = 0), (R, T)."""
    if "token_values" not in rollouts.truth:
        raise ValueError("rollouts: need truth['token_values'] (use labkit.envs.arithmetic.truth.load_reference)")
    v = rollouts.truth["token_values"]
    R = v.shape[0]
    mask, r = rollouts.mask[:R], rollouts.rewards[:R].to(v.dtype)
    v_next = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)
    v_next = torch.where(torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1), v_next, 0)
    return torch.where(mask, r + v_next - v, 0)


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
    for k in tqdm(ks, desc="k", disable=not progress):
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
    for k in tqdm(ks, desc="k", disable=not progress):
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


# --------------------------------------------------------------------------- hit rates with their noise
def first_error_hits(credit: torch.Tensor, rollouts: Rollouts) -> pd.DataFrame:
    """``first_error_hit_rate`` rollout by rollout: one row per rollout with a wrong step (and
    that step present), with ``row`` (its index in ``rollouts``), ``hit`` (1 if the most
    negative step credit is on the first wrong step; a tie of m steps counts 1/m) and
    ``chance`` (1 / its number of steps). The mean of ``hit`` is ``first_error_hit_rate``."""
    if credit.shape != rollouts.mask.shape:
        raise ValueError(f"credit: expected shape {tuple(rollouts.mask.shape)} (per token), got {tuple(credit.shape)}")
    rows = []
    for b in (rollouts.truth["first_error_step"] >= 0).nonzero().flatten().tolist():
        one = first_error_hit_rate(credit[b:b + 1], rollouts.select([b]))  # nb02's rule, on one row
        if one["rollouts"]:
            rows.append({"row": b, "hit": one["hit_rate"], "chance": one["chance"]})
    return pd.DataFrame(rows, columns=["row", "hit", "chance"])


def wilson_interval(successes: float, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a rate of ``successes`` out of ``n`` (fractional successes,
    such as shared ties, are allowed): unlike rate ± z·SE it stays inside [0, 1] and is not
    empty at a rate of 0 or 1, which matters for small samples."""
    from statistics import NormalDist

    n = check_int("n", n, low=1)
    successes = check_number("successes", successes, low=0.0, high=float(n))
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    # at a rate of exactly 0 or 1 the bound is exactly 0 or 1 (the formula leaves rounding dust)
    return (0.0 if p == 0 else max(0.0, centre - half)), (1.0 if p == 1 else min(1.0, centre + half))


def hit_rate_intervals(hits: Mapping[str, pd.DataFrame], *, level: float = 0.95) -> pd.DataFrame:
    """One row per method of ``hits`` (method -> ``first_error_hits`` table): the hit rate, its
    Wilson interval at ``level`` over the rollouts scored, the chance rate and the number of
    rollouts. The interval says how far the rate could move on another sample of rollouts."""
    if not hits:
        raise ValueError("hits: need at least one method")
    rows = []
    for name, table in hits.items():
        n = len(table)
        if n == 0:
            raise ValueError(f"hits: {name!r} scored no rollout")
        lo, hi = wilson_interval(float(table.hit.sum()), n, level=level)
        rows.append({"method": name, "hit_rate": float(table.hit.mean()), "low": lo, "high": hi,
                     "chance": float(table.chance.mean()), "rollouts": n})
    return pd.DataFrame(rows)


def paired_difference(a: pd.DataFrame, b: pd.DataFrame, *, level: float = 0.95, n_boot: int = 4000,
                      seed: int = 0) -> dict[str, float]:
    """Hit rate of ``a`` minus that of ``b`` (two ``first_error_hits`` tables on the same
    rollouts) with a paired bootstrap interval: rollouts are resampled with replacement
    ``n_boot`` times (numpy, seeded ``seed``) and the ``level`` percentile interval of the
    difference is returned. Pairing removes the rollout-to-rollout spread both methods share,
    so it is narrower than comparing two separate intervals. Keys: diff, low, high, rollouts."""
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    if list(a.row) != list(b.row):
        raise ValueError("b: must score the same rollouts as a, in the same order")
    d = a.hit.to_numpy(float) - b.hit.to_numpy(float)
    if len(d) == 0:
        raise ValueError("a: scored no rollout")
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    boot = d[idx].mean(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {"diff": float(d.mean()), "low": float(lo), "high": float(hi), "rollouts": len(d)}


VINE_HITS_DIR = data_path("vine_hits")


def vine_hit_sample(env, *, n_problems: int = 256, n_operands: int = LM_OPERANDS, ks: Iterable[int] = (1, 3, 9, 16),
                    truth_k: int = 64, seed: int = 3, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """First-wrong-step hits on a larger sample than the 32 reference rollouts (what
    ``scripts/build_vine_hits.py`` caches): one rollout of each of ``n_problems`` distinct
    held-out ``n_operands``-operand problems (sampling seed ``seed``); the rollouts with a wrong
    step are scored with GRPO (one group of all rollouts), VinePPO with each k of ``ks`` (vines
    seeded ``seed + k``, as ``vine_credits``) and a ``truth_k``-vine Monte Carlo "truth" (seed
    ``seed + truth_k + 1``). Returns (hits, meta): hits in long form (``method``, ``k`` (0 for
    GRPO), then ``first_error_hits``' columns plus ``first_error_step`` and ``reward``), meta
    the sample size and each method's vines and token positions."""
    from labkit.credit import get_estimator

    n_problems = check_int("n_problems", n_problems, low=1)
    truth_k = check_int("truth_k", truth_k, low=1)
    ks = [check_int("ks", k, low=1) for k in ks]
    if truth_k in ks:
        raise ValueError(f"truth_k: {truth_k} is also in ks; the truth needs its own vines")
    problems = env.task.sample_prompts(n_problems, n_operands, split="held_out", seed=seed, unique=True)
    ro = env.rollouts(problems, seed=seed)
    wrong = (ro.truth["first_error_step"] >= 0).nonzero().flatten().tolist()
    if not wrong:
        raise ValueError("n_problems: no rollout of the sample has a wrong step")
    grpo = get_estimator("grpo")(ro.with_(group_ids=torch.zeros(len(ro), dtype=torch.long)))
    sub = ro.select(wrong)  # vines only where a hit can be scored
    credits = {("GRPO", 0): grpo.token[wrong]}
    costs = {"GRPO": {"vines": 0, "policy_tokens": 0}}
    vines = vine_credits(env, sub, ks, seed=seed, progress=progress)
    vines[truth_k] = vine_credits(env, sub, [truth_k], seed=seed + 1, progress=False)[truth_k]
    for k, credit in vines.items():
        name = f"truth K={k}" if k == truth_k else f"VinePPO K={k}"
        credits[(name, k)] = credit.token
        costs[name] = {"vines": credit.cost.policy_forwards, "policy_tokens": credit.cost.policy_tokens}
    tables = []
    for (name, k), token in credits.items():
        table = first_error_hits(token, sub)
        table.insert(0, "k", k)
        table.insert(0, "method", name)
        table["first_error_step"] = sub.truth["first_error_step"][table.row].tolist()
        table["reward"] = sub.rewards.sum(1)[table.row].tolist()
        table["row"] = [wrong[r] for r in table.row]  # index in the whole sample
        tables.append(table)
    meta = {"n_problems": n_problems, "n_operands": n_operands, "seed": seed, "success": float(ro.scores.mean()),
            "with_wrong_step": len(wrong), "truth_k": truth_k, "ks": ks, "cost": costs}
    return pd.concat(tables, ignore_index=True), meta


def load_vine_hits(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The hits cached by ``scripts/build_vine_hits.py`` (``vine_hit_sample``'s output):
    (hits, meta). Raises if the cache is missing or was built with a different model."""
    return _load_cache(path, VINE_HITS_DIR, "hits.csv", "meta.json", "hits", "build_vine_hits.py")


# --------------------------------------------------------------------------- RL on the tiny LM: GRPO, PPO and VinePPO
def lm_rl_setup(*, n_operands: int = LM_OPERANDS, train_pool: int = 512, eval_problems: int = 256,
                prompts_per_batch: int = 8, n_per_prompt: int = 8, task_seed: int = 0):
    """A ``make_learner(seed)`` for RL on the tiny LM: a fresh copy of the shipped model per seed,
    ``train_pool`` training problems and ``eval_problems`` distinct held-out problems with
    ``n_operands`` operands (the same problems for every seed, so runs differ by their seed only)."""
    from labkit.envs.arithmetic.learner import LMLearner
    from labkit.envs.arithmetic.lm import ArithmeticLM

    def make_learner(seed: int) -> LMLearner:
        env = ArithmeticLM.load(task_seed=task_seed)
        train = env.task.sample_prompts(train_pool, n_operands, split="train", seed=1)
        held_out = env.task.sample_prompts(eval_problems, n_operands, split="held_out", seed=2, unique=True)
        return LMLearner(env, train, held_out, prompts_per_batch=prompts_per_batch, n_per_prompt=n_per_prompt)
    return make_learner


def lm_rl_runs(*, k: int = 9, critic_lr: float = 1e-4, critic_epochs: int = 2, critic_minibatch: int = 16,
               methods: Sequence[str] = ("GRPO", "PPO", "VinePPO")) -> dict:
    """The three runs notebook 03 compares, as ``labkit.learn.loop.compare`` run specs.

    GRPO: group-normalised outcome credit, GRPO loss. PPO: token-level GAE (gamma = lambda = 1,
    verl's defaults) from a learned value model (``LMCritic``: the policy's trunk plus a scalar
    head, fresh per seed) regressed on the GAE returns after every batch (``critic_epochs``
    passes over minibatches of ``critic_minibatch`` rows, AdamW at ``critic_lr``), PPO-clip loss. VinePPO:
    step credit from ``k`` vines per step boundary, PPO-clip loss. Everything else is shared.
    """
    from functools import partial
    from types import SimpleNamespace

    from labkit.credit.mc import vineppo
    from labkit.credit.td import gae
    from labkit.learn.critics import LMCritic

    def ppo(learner):
        critic = LMCritic.from_policy(learner.env.model)
        update = partial(critic.update, lr=critic_lr, epochs=critic_epochs, minibatch_size=critic_minibatch)
        return {"estimator": partial(gae, values=critic, lam=1.0), "critic": SimpleNamespace(update=update),
                "kind": "ppo_clip"}

    def vine(learner):
        return {"estimator": partial(vineppo, value_fn=learner.env.value_fn(seed=17), k=k), "kind": "ppo_clip"}

    specs = {"GRPO": lambda learner: {"estimator": "grpo", "kind": "grpo"}, "PPO": ppo, "VinePPO": vine}
    unknown = set(methods) - set(specs)
    if unknown:
        raise ValueError(f"methods: unknown {sorted(unknown)}; choose from {sorted(specs)}")
    return {m: specs[m] for m in methods}


RL_RUNS_DIR = data_path("rl_runs")


def load_rl_runs(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """Learning curves cached by ``scripts/build_rl_runs.py``: (curves, meta). Raises if the
    cache is missing or was built with a different model than the shipped one."""
    return _load_cache(path, RL_RUNS_DIR, "curves.csv", "meta.json", "runs", "build_rl_runs.py")


def _load_cache(path: Path | None, default: Path, csv_name: str, meta_name: str, what: str,
                script: str) -> tuple[pd.DataFrame, dict]:
    """(table, meta) of a cache a script in scripts/ wrote; raises, naming ``path``, if it is
    missing or was built from another model than the shipped one (its meta's model_sha256)."""
    import hashlib
    import json

    folder = Path(path) if path is not None else default
    csv, meta_file = folder / csv_name, folder / meta_name
    if not csv.is_file() or not meta_file.is_file():
        raise FileNotFoundError(f"path: no cached {what} in {folder}; run python scripts/{script}")
    meta = json.loads(meta_file.read_text())
    weights = data_path("tiny_lm", "model.safetensors")
    if weights.is_file() and meta.get("model_sha256") != hashlib.sha256(weights.read_bytes()).hexdigest():
        raise ValueError(f"path: the cache in {folder} was built from a different model; "
                         f"rerun python scripts/{script}")
    return pd.read_csv(csv), meta


def load_lr_sweep(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The learning-rate sweep cached by ``scripts/build_rl_lr_sweep.py``: (curves with ``lr``
    and ``iterations`` columns, meta). Raises if missing or built from a different model."""
    return _load_cache(path, RL_RUNS_DIR, "lr_sweep.csv", "lr_sweep_meta.json", "sweep", "build_rl_lr_sweep.py")


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
