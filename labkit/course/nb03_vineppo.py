"""Notebook 03, VinePPO: how good are Monte Carlo values from forked continuations ("vines") of a
real model's prefixes, what do they cost, and does step credit from them train better than
GRPO's outcome credit or PPO's learned critic?

Runners on the tiny arithmetic LM: the vine values' error against the cached 256-vine truth,
the token-level truth, the RL runs the notebook compares (trained by ``scripts/build_rl_runs.py``
and loaded from ``data/rl_runs``). Each runner is seeded and returns plain data.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.paths import data_path
from labkit.core.checks import check_int
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
    import hashlib
    import json

    folder = Path(path) if path is not None else RL_RUNS_DIR
    csv, meta_file = folder / "curves.csv", folder / "meta.json"
    if not csv.is_file() or not meta_file.is_file():
        raise FileNotFoundError(f"path: no cached runs in {folder}; run python scripts/build_rl_runs.py")
    meta = json.loads(meta_file.read_text())
    weights = data_path("tiny_lm", "model.safetensors")
    if weights.is_file() and meta.get("model_sha256") != hashlib.sha256(weights.read_bytes()).hexdigest():
        raise ValueError(f"path: the runs in {folder} were trained from a different model; "
                         "rerun python scripts/build_rl_runs.py")
    return pd.read_csv(csv), meta
