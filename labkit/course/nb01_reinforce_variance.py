"""Notebook 01, REINFORCE and its variance: why does one outcome reward at the end of a long
trajectory make a noisy policy gradient, and how much do baselines (RLOO, GRPO, ...) help?

Runners on a ``BifurcationChain`` whose exact truth (values, advantages, gradient) comes from
dynamic programming (the chain and policy: ``labkit.course.presets.chain_setup``): each
estimator's credit next to the exact advantage, and the gradient-quality sweep. Each runner is
seeded, returns plain data (a pandas DataFrame or dict of tensors), and shows a progress bar
when it loops over settings.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd
import torch

from labkit.core.checks import check_choice, check_int
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.course.presets import EPISODE_ESTIMATORS, NB01_CHAIN, chain_setup
from labkit.credit import get_estimator
from labkit.envs.tabular import Truth
from labkit.scoring import gradient_study, score_credit
from labkit.viz import credit_panels


def episode_credit_panels(rollouts: Rollouts, truth: Truth, estimators: Sequence[str]) -> dict[str, torch.Tensor]:
    """Per-position credit of each estimator next to the exact advantage, for a heatmap."""
    credits = {name: get_estimator(name)(rollouts) for name in estimators}
    return credit_panels(credits, truth=truth.advantage(rollouts), truth_title="exact advantage")


def credit_scores(rollouts: Rollouts, truth: Truth, estimators: Sequence[str]) -> pd.DataFrame:
    """Per-position metrics (rank correlation, sign agreement, recall@k, error) per estimator."""
    adv = truth.advantage(rollouts)
    targets = rollouts.truth.get("decisive")
    rows = []
    for name in estimators:
        credit: Credit = get_estimator(name)(rollouts)
        rows.append({"estimator": name, **score_credit(credit, rollouts, adv, targets=targets)})
    return pd.DataFrame(rows)


SWEEPABLE = ("horizon", "n_bifurcations", "noise_std", "slip", "p_correct", "batch_size")


def gradient_sweep(vary: str, values: Iterable, estimators: Sequence[str] = EPISODE_ESTIMATORS, *,
                   horizon: int = NB01_CHAIN.horizon, n_bifurcations: int = NB01_CHAIN.n_bifurcations,
                   noise_std: float = NB01_CHAIN.noise_std, slip: float = NB01_CHAIN.slip,
                   p_correct: float | None = None, init_std: float = NB01_CHAIN.init_std, batch_size: int = 32,
                   group_size: int = 8, n_batches: int = 100, seed: int = 0,
                   progress: bool = True) -> pd.DataFrame:
    """Policy-gradient quality of each estimator as one setting ``vary`` takes ``values``.

    For every value: a chain and policy (``chain_setup``), the exact gradient by DP,
    ``n_batches`` independent batches of ``batch_size`` trajectories in groups of ``group_size``,
    and ``labkit.scoring.gradient_study`` per estimator. Returns one row per (value, estimator)
    with cosine, cosine_of_mean, variance, relative_variance, and the exact success rate J.
    When ``vary="horizon"``, ``n_bifurcations`` is capped at the horizon.
    """
    check_choice("vary", vary, SWEEPABLE)
    values = list(values)
    if not values:
        raise ValueError("values: need at least one setting to sweep")
    rows = []
    for value in progress_bar(values, desc=vary, enabled=progress):
        setting = dict(horizon=horizon, n_bifurcations=n_bifurcations, noise_std=noise_std, slip=slip,
                       p_correct=p_correct, batch_size=batch_size)
        setting[vary] = value
        T = check_int("horizon", setting["horizon"], low=1)
        B = check_int("batch_size", setting["batch_size"], low=1)
        group_size = check_int("group_size", group_size, low=1)
        if B % group_size:
            raise ValueError(f"group_size: {group_size} does not divide batch_size {B}")
        env, policy, truth = chain_setup(T, n_bifurcations=min(setting["n_bifurcations"], T),
                                         noise_std=setting["noise_std"], slip=setting["slip"],
                                         p_correct=setting["p_correct"], init_std=init_std,
                                         env_seed=seed, policy_seed=seed)
        whole = env.sample(policy, n_batches * B, group_size=group_size, seed=seed + 1)
        batches = whole.split(n_batches)
        for name in estimators:
            stats = gradient_study(policy, batches, get_estimator(name), truth.grad, whole=whole)
            rows.append({vary: value, "estimator": name, "J": truth.J, **stats})
    return pd.DataFrame(rows)
