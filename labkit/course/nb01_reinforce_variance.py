"""Notebook 01, REINFORCE and its variance: why does one outcome reward at the end of a long
trajectory make a noisy policy gradient, and how much do baselines (RLOO, GRPO, ...) help?

Runners on a ``BifurcationChain`` whose exact truth (values, advantages, gradient) comes from
dynamic programming (the chain and policy: ``labkit.course.presets.chain_setup``): each
estimator's credit next to the exact advantage, the gradient-quality sweep, and where the noise of
a gradient step lands (a tabular against a shared-weight policy). Each runner is
seeded, returns plain data (a pandas DataFrame or dict of tensors), and shows a progress bar
when it loops over settings.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import pandas as pd
import torch

from labkit.core.checks import check_choice, check_int
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.course.presets import EPISODE_ESTIMATORS, NB01_CHAIN, chain_setup
from labkit.credit import ESTIMATORS, get_estimator
from labkit.envs.chain import BifurcationChain, shared_policy
from labkit.envs.chain.features import DEFAULT_FREQUENCIES
from labkit.envs.tabular import Truth, exact_truth
from labkit.policies import TabularSoftmaxPolicy
from labkit.scoring import gradient_study, logit_view, score_credit
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


POLICIES = ("tabular", "shared")
# the shared policy's feature map needs more states (2 T) than features (2 + 2 K)
_SHARED_MIN_HORIZON = 2 + DEFAULT_FREQUENCIES


def decisive_noise(horizons: Iterable[int], estimators: Sequence[str] = ("reinforce", "grpo"),
                   policies: Sequence[str] = POLICIES, *, n_batches: int = 100, batch_size: int = 32,
                   group_size: int = 8, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Where the noise of a batch gradient lands: on the decisive tokens' logits, or elsewhere.

    For every horizon: a BifurcationChain with two bifurcations (chain ``seed``), and for each of
    ``policies`` ("tabular": one logit row per state; "shared": ``shared_policy``, logits from
    weights every state shares) the uniform policy (where every training run of notebook 10's
    frontier starts), its exact gradient, ``n_batches`` batches of
    ``batch_size`` trajectories in groups of ``group_size`` (sampling seed ``seed`` + 1, the same
    trajectories for both policies, which are both uniform), and ``gradient_study`` per estimator
    twice: of the decisive view (how one batch's step moves the logits of the on-track states at
    the bifurcations, ``logit_view``) and of the whole parameter gradient. Returns one row per
    (policy, horizon, estimator) with J, ``cosine`` and ``relative_variance`` of the decisive view
    and ``whole_cosine``, ``whole_relative_variance`` of the whole gradient.
    """
    horizons = list(horizons)
    if not horizons:
        raise ValueError("horizons: need at least one horizon")
    policies = list(policies)
    if not policies:
        raise ValueError("policies: need at least one of " + str(POLICIES))
    for name in policies:
        check_choice("policies", name, POLICIES)
    estimators = list(estimators)
    if not estimators:
        raise ValueError("estimators: need at least one estimator")
    for name in estimators:
        if name not in ESTIMATORS:
            raise ValueError(f"estimators: no estimator {name!r}; known: {sorted(ESTIMATORS)}")
    chosen = {name: get_estimator(name) for name in estimators}
    low = _SHARED_MIN_HORIZON if "shared" in policies else 2
    horizons = [check_int("horizons", T, low=low) for T in horizons]
    n_batches = check_int("n_batches", n_batches, low=2)
    B = check_int("batch_size", batch_size, low=1)
    group_size = check_int("group_size", group_size, low=1)
    if B % group_size:
        raise ValueError(f"group_size: {group_size} does not divide batch_size {B}")
    seed = check_int("seed", seed)
    rows = []
    for T in progress_bar(horizons, desc="horizon", enabled=progress):
        env = BifurcationChain(horizon=T, n_bifurcations=2, seed=seed)
        decisive = [env.state_index(t, 1) for t in env.bifurcations]
        for kind in policies:
            if kind == "tabular":
                policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0)
                truth = exact_truth(env.mdp(), policy)
                exact = truth.grad
            else:
                policy = shared_policy(env)
                truth = exact_truth(env.mdp(), policy)
                exact = policy.parameter_gradient(truth.grad)
            whole = env.sample(policy, n_batches * B, group_size=group_size, seed=seed + 1)
            batches = whole.split(n_batches)
            view = logit_view(policy, decisive)
            for name, estimator in chosen.items():
                seen = gradient_study(policy, batches, estimator, exact, whole=whole, view=view)
                full = gradient_study(policy, batches, estimator, exact, whole=whole)
                rows.append({"policy": kind, "horizon": T, "estimator": name, "J": truth.J,
                             "cosine": seen["cosine"], "relative_variance": seen["relative_variance"],
                             "whole_cosine": full["cosine"],
                             "whole_relative_variance": full["relative_variance"]})
    return pd.DataFrame(rows)


# the "Try it" dashboard's sliders start here (noise, slip and batch size as the chain's preset)
DIAL_START = {"horizon": 30, "noise_std": 0.0, "slip": 0.0, "batch_size": 32}


def dial(horizon: int = 30, noise_std: float = 0.0, slip: float = 0.0, batch_size: int = 32, *,
         n_batches: int = 50, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """One move of the "Try it" dashboard: ``gradient_sweep`` over the episode-level estimators at
    these settings (``n_batches`` batches seeded ``seed``, the dashboard's 50 and 0). Returns the
    sweep's table (one row per estimator: what the chart draws) and the summary the dashboard
    prints, as a dict: the settings, J, best_cosine and best_estimator (the highest cosine of one
    batch gradient to the exact one, and whose it is), reinforce_relative_variance."""
    df = gradient_sweep("horizon", [horizon], noise_std=noise_std, slip=slip, batch_size=batch_size,
                        n_batches=n_batches, seed=seed, progress=False)
    best = df.loc[df.cosine.idxmax()]
    return df, {"horizon": horizon, "noise_std": noise_std, "slip": slip, "batch_size": batch_size,
                "J": float(df.J.iloc[0]), "best_cosine": float(best.cosine), "best_estimator": best.estimator,
                "reinforce_relative_variance": float(df.set_index("estimator").relative_variance["reinforce"])}


def dial_summary(settings: Sequence[Mapping], *, n_batches: int = 50, seed: int = 0) -> pd.DataFrame:
    """What the "Try it" dashboard reports at each of ``settings`` (``dial``'s summary, one row
    per setting, in order). Each setting is a mapping of some of ``horizon``, ``noise_std``,
    ``slip`` and ``batch_size``; the others take the dashboard's start values (``DIAL_START``)."""
    settings = list(settings)
    if not settings:
        raise ValueError("settings: need at least one setting")
    rows = []
    for setting in settings:
        if not isinstance(setting, Mapping):
            raise TypeError(f"settings: each setting must be a mapping, got {type(setting).__name__}")
        unknown = sorted(set(setting) - set(DIAL_START))
        if unknown:
            raise ValueError(f"settings: unknown control {unknown[0]!r}; the controls are {list(DIAL_START)}")
        rows.append(dial(**{**DIAL_START, **setting}, n_batches=n_batches, seed=seed)[1])
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the engines' other group baselines
#: Group-relative estimators verl and TRL offer beside GRPO, compared with it on the tiny LM's answers;
#: the last three need more than the file holds, which the tiny LM that wrote it supplied.
ENGINE_VARIANTS = ("grpo", "dr_grpo", "opo", "grpo_passk", "gpg", "reinforce_pp_baseline", "gdpo", "remax",
                   "optimal_token_baseline")


def sample_credit_inputs() -> dict[str, torch.Tensor]:
    """What the tiny LM that wrote ``data/sample_rollouts/arithmetic_lm.jsonl`` gives the
    estimators that need more than the file, by option name (``ArithmeticLM.credit_inputs``,
    cached beside the file by ``scripts/build_sample_rollouts.py``): the verifier's answer,
    format and step signals as three reward functions (``reward_parts``), the greedy answer's
    reward per prompt (``greedy_scores``) and the next-token distributions' sum of squared
    probabilities (``sum_pi_squared``)."""
    from safetensors.torch import load_file

    from labkit.core.cache import read_cache
    from labkit.core.paths import data_path

    _, files = read_cache(data_path("sample_rollouts"), script="scripts/build_sample_rollouts.py",
                          files=["arithmetic_lm_inputs.safetensors"], what="sample rollouts")
    return load_file(str(files["arithmetic_lm_inputs.safetensors"]))


def engine_variants(names: Sequence[str] = ENGINE_VARIANTS) -> pd.DataFrame:
    """Each estimator's credit beside GRPO's on the tiny LM's arithmetic sample
    (``data/sample_rollouts/arithmetic_lm.jsonl``: groups of 8 answers, one 0/1 verdict each): the
    share of answers it gives non-zero credit, the Spearman correlation of its per-answer credit
    with GRPO's, and its RMS credit (its scale). An estimator that needs an input the file lacks
    gets it from ``sample_credit_inputs``."""
    from labkit.core.paths import data_path
    from labkit.credit import spec
    from labkit.io import read_rollouts
    from labkit.scoring.agreement import rank_correlation

    ro = read_rollouts(data_path("sample_rollouts", "arithmetic_lm.jsonl"))
    inputs = sample_credit_inputs() if any(spec(name).inputs for name in names) else {}
    per_answer = {}
    for name in names:
        credit = get_estimator(name)(ro, **{k: inputs[k] for k in spec(name).inputs}).token.double()
        # one number per answer: its mean credit over the tokens it generated
        per_answer[name] = (credit * ro.mask).sum(1) / ro.mask.sum(1).clamp(min=1)
    base = per_answer["grpo"] if "grpo" in per_answer else get_estimator("grpo")(ro).values[:, 0].double()
    every = torch.ones(ro.batch_size, 1, dtype=torch.bool)
    return pd.DataFrame([{"estimator": name, "answers credited": f"{float((v != 0).double().mean()):.1%}",
                          "rank correlation with grpo": round(rank_correlation(v[:, None], base[:, None], every), 3),
                          "RMS credit": round(float(v.pow(2).mean().sqrt()), 3)}
                         for name, v in per_answer.items()])
