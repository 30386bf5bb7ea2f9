"""Experiment runners the notebooks call, so a notebook cell is one line and the logic is tested.

Each runner is seeded, returns plain data (a pandas DataFrame or dict of tensors), and shows a
progress bar when it loops over settings.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit._checks import check_choice, check_int, check_number
from labkit.credit import get_estimator
from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy
from labkit.rollouts import Credit, Rollouts
from labkit.scoring import gradient_study, score_credit
from labkit.truth import Truth, exact_truth

EPISODE_ESTIMATORS = ("reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo", "reinforce_pp")


def chain_setup(horizon: int, *, n_bifurcations: int = 2, noise_std: float = 0.0, slip: float = 0.0,
                p_correct: float | None = None, init_std: float = 0.0, env_seed: int = 0,
                policy_seed: int = 0) -> tuple[BifurcationChain, TabularSoftmaxPolicy, Truth]:
    """A BifurcationChain, a tabular policy for it, and the exact truth under that policy.

    ``p_correct`` (optional) sets the policy's probability of the right token at every
    bifurcation (the other tokens share the rest), which fixes the success rate at
    p_correct ** n_bifurcations when there is no slip. Otherwise logits are N(0, init_std^2).
    """
    env = BifurcationChain(horizon=horizon, n_bifurcations=n_bifurcations, noise_std=noise_std,
                           slip=slip, seed=env_seed)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=init_std, seed=policy_seed)
    if p_correct is not None:
        p_correct = check_number("p_correct", p_correct, low=0.0, high=1.0, low_open=True, high_open=True)
        for t in env.bifurcations:
            probs = torch.full((env.n_actions,), (1 - p_correct) / (env.n_actions - 1), dtype=torch.float64)
            probs[env.correct[t]] = p_correct
            policy.set_probs(env.state_index(t, 1), probs)
    return env, policy, exact_truth(env.mdp(), policy)


def credit_panels(rollouts: Rollouts, truth: Truth, estimators: Sequence[str]) -> dict[str, torch.Tensor]:
    """Per-position credit of each estimator next to the exact advantage, for a heatmap."""
    panels = {"exact advantage": truth.advantage(rollouts)}
    for name in estimators:
        panels[name] = get_estimator(name)(rollouts).token
    return panels


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
                   horizon: int = 20, n_bifurcations: int = 2, noise_std: float = 0.0,
                   slip: float = 0.0, p_correct: float | None = None, init_std: float = 0.0,
                   batch_size: int = 32, group_size: int = 8, n_batches: int = 100, seed: int = 0,
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
    for value in tqdm(values, desc=vary, disable=not progress):
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
        batches = env.sample(policy, n_batches * B, group_size=group_size, seed=seed + 1).split(n_batches)
        for name in estimators:
            stats = gradient_study(policy, batches, get_estimator(name), truth.grad)
            rows.append({vary: value, "estimator": name, "J": truth.J, **stats})
    return pd.DataFrame(rows)


def gae_lambda_sweep(lams: Iterable[float], *, critic_episodes: int = 64, horizon: int = 20,
                     n_bifurcations: int = 2, noise_std: float = 0.5, slip: float = 0.1,
                     init_std: float = 0.5, batch_size: int = 32, n_batches: int = 100,
                     seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """GAE's lambda dial on a BifurcationChain, with a learned and with the exact critic.

    The learned critic is a ``TabularCritic`` fitted on ``critic_episodes`` separate episodes
    (fewer episodes, worse critic). For each lambda and critic: the gradient study against the
    exact gradient (cosine, relative variance) and per-token error to the exact advantage over
    all batches. One row per (critic, lam).
    """
    from labkit.credit.td import gae
    from labkit.critics import TabularCritic
    from labkit.scoring import advantage_error, rank_correlation

    lams = [check_number("lams", lam, low=0.0, high=1.0) for lam in lams]
    if not lams:
        raise ValueError("lams: need at least one lambda")
    critic_episodes = check_int("critic_episodes", critic_episodes, low=1)
    env, policy, truth = chain_setup(horizon, n_bifurcations=min(n_bifurcations, horizon), noise_std=noise_std,
                                     slip=slip, init_std=init_std, env_seed=seed, policy_seed=seed)
    learned = TabularCritic(env.n_states).fit(env.sample(policy, critic_episodes, seed=seed + 2))
    ro = env.sample(policy, n_batches * batch_size, seed=seed + 1)
    batches = ro.split(n_batches)
    critics = {"learned": learned.value, "exact": truth.value}
    rows = []
    for name, critic in tqdm(critics.items(), desc="critics", disable=not progress):
        for lam in lams:
            def estimator(batch, lam=lam, critic=critic):
                return gae(batch, values=critic(batch), lam=lam)
            stats = gradient_study(policy, batches, estimator, truth.grad)
            credit = estimator(ro)
            adv = truth.advantage(ro)
            rows.append({"critic": name, "lam": lam, **stats,
                         "adv_mse": advantage_error(credit, adv, ro.mask)["mse"],
                         "rank_corr": rank_correlation(credit, adv, ro.mask)})
    out = pd.DataFrame(rows)
    out.attrs["critic_value_error"] = float((learned.table - truth.V).abs()[learned.counts > 0].mean())
    return out
