"""Notebook 02, critics and GAE: can a learned value function cut the variance of outcome credit,
what does GAE's lambda dial trade between bias and variance, and why do LLM critics struggle?

The first half runs on notebook 01's ``BifurcationChain`` with a ``TabularCritic`` (the lambda
sweep, the critic-data sweep, heatmaps, what the critic believes each fork is worth); the second
on the tiny arithmetic LM: PPO's critic fitted the way PPO would see data
(``labkit.learn.lm_runs.fit_lm_critic``), judged against cached Monte Carlo truth
(``labkit.envs.arithmetic.truth``; the first-wrong-step hit rate is
``labkit.scoring.first_error_hit_rate``). Each runner is seeded and returns plain data.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd
import torch

from labkit.core.checks import check_int, check_number
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.course.presets import NB02_CHAIN, chain_setup
from labkit.envs import BifurcationChain
from labkit.envs.tabular import Truth
from labkit.scoring import gradient_study, pearson
from labkit.viz import credit_panels


# --------------------------------------------------------------------------- GAE on the chain
def gae_lambda_sweep(lams: Iterable[float], *, critic_episodes: int = 64, horizon: int = NB02_CHAIN.horizon,
                     n_bifurcations: int = NB02_CHAIN.n_bifurcations, noise_std: float = NB02_CHAIN.noise_std,
                     slip: float = NB02_CHAIN.slip, init_std: float = NB02_CHAIN.init_std, batch_size: int = 32,
                     n_batches: int = 100, seed: int = 0, progress: bool = True,
                     critic_seed: int | None = None) -> pd.DataFrame:
    """GAE's lambda dial on a BifurcationChain, with a learned and with the exact critic.

    The learned critic is a ``TabularCritic`` fitted on ``critic_episodes`` separate episodes
    (fewer episodes, worse critic), sampled with ``critic_seed`` (default ``seed + 2``; change it
    to draw another critic of the same size). For each lambda and critic: the gradient study
    against the exact gradient (cosine, relative variance) and per-token error to the exact
    advantage over all batches. One row per (critic, lam).
    """
    from labkit.credit.td import gae
    from labkit.learn.critics import TabularCritic
    from labkit.scoring import advantage_error, rank_correlation

    lams = [check_number("lams", lam, low=0.0, high=1.0) for lam in lams]
    if not lams:
        raise ValueError("lams: need at least one lambda")
    critic_episodes = check_int("critic_episodes", critic_episodes, low=1)
    env, policy, truth = chain_setup(horizon, n_bifurcations=min(n_bifurcations, horizon), noise_std=noise_std,
                                     slip=slip, init_std=init_std, env_seed=seed, policy_seed=seed)
    critic_seed = seed + 2 if critic_seed is None else check_int("critic_seed", critic_seed)
    learned = TabularCritic(env.n_states).fit(env.sample(policy, critic_episodes, seed=critic_seed))
    ro = env.sample(policy, n_batches * batch_size, seed=seed + 1)
    batches = ro.split(n_batches)
    critics = {"learned": learned.value, "exact": truth.value}
    rows = []
    for name, critic in progress_bar(critics.items(), desc="critics", enabled=progress):
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


def gae_chain_setup(critic_episodes: int = 64, *, horizon: int = NB02_CHAIN.horizon,
                    n_bifurcations: int = NB02_CHAIN.n_bifurcations, noise_std: float = NB02_CHAIN.noise_std,
                    slip: float = NB02_CHAIN.slip, init_std: float = NB02_CHAIN.init_std, seed: int = 0,
                    critic_seed: int | None = None):
    """The chain, policy, exact truth and learned critic that ``gae_lambda_sweep`` uses.

    Same arguments and defaults as the sweep, so a notebook can draw heatmaps of exactly the
    setting it sweeps. Returns (env, policy, truth, critic) with ``critic`` a fitted
    ``TabularCritic`` (call ``critic.value(rollouts)`` or pass it to ``gae`` as ``values``).
    """
    from labkit.learn.critics import TabularCritic

    critic_episodes = check_int("critic_episodes", critic_episodes, low=1)
    env, policy, truth = chain_setup(horizon, n_bifurcations=min(n_bifurcations, horizon), noise_std=noise_std,
                                     slip=slip, init_std=init_std, env_seed=seed, policy_seed=seed)
    critic_seed = seed + 2 if critic_seed is None else check_int("critic_seed", critic_seed)
    critic = TabularCritic(env.n_states).fit(env.sample(policy, critic_episodes, seed=critic_seed))
    return env, policy, truth, critic


def gae_panels(rollouts: Rollouts, truth: Truth, critics: dict, lams: Sequence[float]) -> dict[str, torch.Tensor]:
    """Exact advantage next to GAE credit for each critic and lambda, for ``viz.compare_heatmaps``.

    ``critics`` maps a name (e.g. "learned") to a critic callable ``rollouts -> (B, T)`` or a
    (B, T) tensor of values. Panel titles read "GAE λ=0, learned critic".
    """
    from labkit.credit.td import gae

    lams = [check_number("lams", lam, low=0.0, high=1.0) for lam in lams]
    credits = {f"GAE λ={lam:g}, {name} critic": gae(rollouts, values=critic, lam=lam)
               for name, critic in critics.items() for lam in lams}
    return credit_panels(credits, truth=truth.advantage(rollouts), truth_title="exact advantage")


def _study_precomputed(policy, batches: list[Rollouts], token: torch.Tensor, exact_grad: torch.Tensor) -> dict:
    """``gradient_study`` of credit computed once for all batches (right for any estimator that
    treats each trajectory on its own, like GAE: no batch statistics)."""
    chunks = dict(zip(map(id, batches), token.split(len(batches[0]))))
    return gradient_study(policy, batches, lambda b: Credit.from_tokens(b, chunks[id(b)], "gae"), exact_grad)


_EXACT_STUDIES: dict = {}  # (setting, lam) -> gradient_study of GAE with the exact critic (gae_critic_sweep)
_EXACT_STUDIES_KEPT = 512  # oldest out first; a study is a dict of a few floats


def gae_critic_sweep(critic_episodes: Iterable[int], lams: Sequence[float] = (0.0, 1.0), *, n_critics: int = 4,
                     first_fit: int = 0, horizon: int = NB02_CHAIN.horizon,
                     n_bifurcations: int = NB02_CHAIN.n_bifurcations, noise_std: float = NB02_CHAIN.noise_std,
                     slip: float = NB02_CHAIN.slip, init_std: float = NB02_CHAIN.init_std, batch_size: int = 32,
                     n_batches: int = 50, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """How much data the critic needs: GAE's gradient quality as the critic's training set grows.

    Same chain and policy as ``gae_lambda_sweep``. For every size in ``critic_episodes``,
    ``n_critics`` independent ``TabularCritic`` fits numbered ``first_fit, first_fit + 1, ...``
    (fit i samples its episodes with seed ``seed + 2 + i``: fit 0 is the sweep's critic, fit i
    is ``gae_chain_setup(critic_seed=seed + 2 + i)``'s), each scored on the same ``n_batches``
    batches at every lambda. One row per (critic_episodes, fit, lam) with cosine,
    cosine_of_mean, relative_variance and critic_value_error (mean |V_learned - V| over the
    states the critic saw). Rows with critic "exact" repeat the exact critic's scores at every
    size (fit 0), so a chart draws them as reference lines.
    """
    from labkit.credit.td import gae
    from labkit.learn.critics import TabularCritic

    sizes = [check_int("critic_episodes", n, low=1) for n in critic_episodes]
    if not sizes:
        raise ValueError("critic_episodes: need at least one size")
    lams = [check_number("lams", lam, low=0.0, high=1.0) for lam in lams]
    if not lams:
        raise ValueError("lams: need at least one lambda")
    n_critics = check_int("n_critics", n_critics, low=1)
    first_fit = check_int("first_fit", first_fit, low=0)
    env, policy, truth = chain_setup(horizon, n_bifurcations=min(n_bifurcations, horizon), noise_std=noise_std,
                                     slip=slip, init_std=init_std, env_seed=seed, policy_seed=seed)
    ro = env.sample(policy, check_int("n_batches", n_batches, low=2) * check_int("batch_size", batch_size, low=1),
                    seed=seed + 1)
    batches = ro.split(n_batches)
    keep = ("cosine", "cosine_of_mean", "relative_variance")
    # the exact critic's scores depend on the setting and lambda only (every sample is seeded):
    # kept by value, so notebook 02's dashboard does not recompute them when only the learned
    # critic (its size or draw) or one lambda changes
    setting = (horizon, n_bifurcations, noise_std, slip, init_std, batch_size, n_batches, seed)
    exact = {}
    for lam in lams:
        key = (setting, lam)
        if key not in _EXACT_STUDIES:
            _EXACT_STUDIES[key] = _study_precomputed(policy, batches, gae(ro, values=truth.value, lam=lam).token,
                                                     truth.grad)
            while len(_EXACT_STUDIES) > _EXACT_STUDIES_KEPT:
                _EXACT_STUDIES.pop(next(iter(_EXACT_STUDIES)))
        exact[lam] = _EXACT_STUDIES[key]
    rows = []
    for n in progress_bar(sizes, desc="critic episodes", enabled=progress):
        for fit in range(first_fit, first_fit + n_critics):
            critic = TabularCritic(env.n_states).fit(env.sample(policy, n, seed=seed + 2 + fit))
            err = float((critic.table - truth.V).abs()[critic.counts > 0].mean())
            values = critic.value(ro)
            for lam in lams:
                stats = _study_precomputed(policy, batches, gae(ro, values=values, lam=lam).token, truth.grad)
                rows.append({"critic": "learned", "critic_episodes": n, "fit": fit, "lam": lam,
                             **{k: stats[k] for k in keep}, "critic_value_error": err})
        for lam in lams:
            rows.append({"critic": "exact", "critic_episodes": n, "fit": 0, "lam": lam,
                         **{k: exact[lam][k] for k in keep}, "critic_value_error": 0.0})
    return pd.DataFrame(rows)


def gae_critic_curves(df: pd.DataFrame) -> pd.DataFrame:
    """``gae_critic_sweep`` output as chart-ready curves: per (lam, critic_episodes) the exact
    critic's cosine and the mean, worst and best cosine over the learned critics.

    Long format, columns lam, critic_episodes, curve ("exact critic", "learned: mean",
    "learned: worst", "learned: best"), cosine.
    """
    for col in ("critic", "lam", "critic_episodes", "cosine"):
        if col not in df.columns:
            raise ValueError(f"df: missing column {col!r}; pass the output of gae_critic_sweep")
    keys = ["lam", "critic_episodes"]
    learned = df[df.critic == "learned"].groupby(keys, sort=True).cosine
    parts = [df[df.critic == "exact"].groupby(keys, sort=True).cosine.first().rename("exact critic"),
             learned.mean().rename("learned: mean"), learned.min().rename("learned: worst"),
             learned.max().rename("learned: best")]
    wide = pd.concat(parts, axis=1)
    return wide.reset_index().melt(keys, var_name="curve", value_name="cosine").dropna(subset=["cosine"])


def fork_values(env: BifurcationChain, truth: Truth, critic) -> pd.DataFrame:
    """What a tabular critic believes each fork of a BifurcationChain is worth, next to the truth.

    One row per bifurcation t (forks at the last position are skipped: no state follows them):
    V of the state right after the fork when it was passed (still on track) and when it was
    failed, exact and learned, and how many of the critic's training visits each state had.
    Their difference is the signal GAE with lambda = 0 bootstraps from at that fork.
    """
    rows = []
    for t in env.bifurcations:
        if t + 1 >= env.horizon:
            continue
        on, off = env.state_index(t + 1, 1), env.state_index(t + 1, 0)
        rows.append({"fork": t,
                     "V passed (exact)": float(truth.V[on]), "V passed (learned)": float(critic.table[on]),
                     "V failed (exact)": float(truth.V[off]), "V failed (learned)": float(critic.table[off]),
                     "visits passed": int(critic.counts[on]), "visits failed": int(critic.counts[off])})
    return pd.DataFrame(rows).set_index("fork") if rows else pd.DataFrame()


def dial_summary(critic_episodes: int = 64, critic_draw: int = 0, noise_std: float = NB02_CHAIN.noise_std, *,
                 lams: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0), n_batches: int = 30,
                 seed: int = 0) -> dict:
    """What notebook 02's "Try it" dashboard shows at one setting: its slider move computes this.

    The critic fitted on ``critic_episodes`` episodes, draw ``critic_draw`` (its episodes seeded
    ``seed + 2 + critic_draw``), on the chain with reward noise ``noise_std``; every lambda in
    ``lams`` scored over ``n_batches`` batches (``gae_critic_sweep``). Returns a dict:
    ``cosine`` (DataFrame indexed by lam, columns exact and learned: one batch's cosine to the
    exact gradient), ``best_lam`` and ``best_cosine`` (the learned critic's best lambda and its
    cosine), and ``fork_worth`` (DataFrame indexed by fork, columns learned and exact: V after
    passing the fork minus V after failing it); and what the dashboard draws from: ``sweep`` (the
    ``gae_critic_sweep`` table), ``forks`` (``fork_values``), ``env``, ``policy``, ``truth`` and
    ``critic``.
    """
    critic_draw = check_int("critic_draw", critic_draw, low=0)
    df = gae_critic_sweep([critic_episodes], lams=sorted(set(lams)), n_critics=1, first_fit=critic_draw,
                          noise_std=noise_std, n_batches=n_batches, seed=seed, progress=False)
    cosine = df.pivot(index="lam", columns="critic", values="cosine")[["exact", "learned"]]
    cosine.columns.name = None
    env, policy, truth, critic = gae_chain_setup(critic_episodes, noise_std=noise_std, seed=seed,
                                                 critic_seed=seed + 2 + critic_draw)
    forks = fork_values(env, truth, critic)
    worth = pd.DataFrame({"learned": forks["V passed (learned)"] - forks["V failed (learned)"],
                          "exact": forks["V passed (exact)"] - forks["V failed (exact)"]})
    return {"cosine": cosine, "best_lam": float(cosine.learned.idxmax()),
            "best_cosine": float(cosine.learned.max()), "fork_worth": worth, "sweep": df, "forks": forks,
            "env": env, "policy": policy, "truth": truth, "critic": critic}


# --------------------------------------------------------------------------- the tiny LM (notebooks 02-03)
def lm_value_scores(env, critic, reference: Rollouts, alternatives: dict, ks: Iterable[int] = (1, 3, 9), *,
                    min_gap: float = 0.1, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Value estimates of the tiny LM judged two ways against Monte Carlo truth.

    * **Level**: error of V at every step start of the ``reference`` rollouts (``value_mae``,
      ``value_corr`` against the cached 256-vine values) — for the critic and for the best
      constant (the truth's own mean; any batch baseline is a constant per prompt at best).
    * **Ranking** (the test behind VinePPO's finding, arXiv:2410.01679, that PPO's critic barely
      beats random): within each state of ``alternatives`` (``load_step_alternatives``), does the estimate order the candidate next
      steps as their 128-vine values do? ``scoring.ranking_accuracy`` with ``min_gap`` (default
      0.1, about 2.3 standard errors of the truth) — for the critic, a constant, and Monte Carlo
      with k vines per candidate for each k in ``ks``.

    ``tokens`` is what each estimate cost on the ranking task: token positions the critic read,
    or the policy processed to roll out the vines (a constant costs nothing).
    """
    from labkit.scoring import ranking_accuracy

    ks = [check_int("ks", k, low=1) for k in ks]
    prefixes, _, present = env.step_prefixes(reference)
    truth = reference.truth["step_values"][present]
    critic_at_steps = critic.prefix_values(prefixes)
    candidates, mc, groups = alternatives["prefixes"], alternatives["mc_values"], alternatives["groups"]

    def ranks(pred):
        r = ranking_accuracy(pred, mc, groups, min_gap=min_gap)
        return {"pairwise": r["pairwise"], "pairwise_chance": r["pairwise_chance"], "top1": r["top1"],
                "top1_chance": r["top1_chance"], "pairs": r["pairs"], "groups": r["groups"]}

    rows = [{"estimate": "constant", "value_mae": float((truth - truth.mean()).abs().mean()), "value_corr": float("nan"),
             **ranks(torch.zeros(len(candidates), dtype=torch.float64)), "tokens": 0},
            {"estimate": "LM critic", "value_mae": float((critic_at_steps - truth).abs().mean()),
             "value_corr": pearson(critic_at_steps, truth), **ranks(critic.prefix_values(candidates)),
             "tokens": sum(len(c) for c in candidates)}]
    for k in progress_bar(ks, desc="vines", enabled=progress):
        values, tokens = env.prefix_values(candidates, alternatives["problems"], k, seed=seed + 100 + k)
        rows.append({"estimate": f"Monte Carlo, k={k}", "value_mae": float("nan"), "value_corr": float("nan"),
                     **ranks(values), "tokens": tokens})
    return pd.DataFrame(rows)


def ranking_intervals(scores: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """How far the ranking scores of ``lm_value_scores`` could move on another sample: for each
    estimate, ``pairwise`` with its Wilson interval over the ``pairs`` scored and ``top1`` with
    its Wilson interval over the ``groups`` (states) scored, next to what chance gets
    (``pairwise_chance``, ``top1_chance``). Pairs from one state share that state, so they are
    not independent draws: the interval over pairs is, if anything, too narrow. Returns one row
    per estimate, indexed by it."""
    from labkit.scoring import wilson_interval

    need = {"estimate", "pairwise", "pairwise_chance", "top1", "top1_chance", "pairs", "groups"}
    if not isinstance(scores, pd.DataFrame) or not need <= set(scores.columns):
        raise ValueError(f"scores: expected lm_value_scores' table with columns {sorted(need)}")
    rows = []
    for r in scores.itertuples():
        out = {"estimate": r.estimate}
        for name, n in (("pairwise", int(r.pairs)), ("top1", int(r.groups))):
            rate = float(getattr(r, name))
            # shared ties make fractional successes; the float product can overshoot n by rounding
            low, high = wilson_interval(min(max(rate * n, 0.0), n), n, level=level) if n else (float("nan"),) * 2
            out.update({name: rate, f"{name}_low": low, f"{name}_high": high,
                        f"{name}_chance": float(getattr(r, f"{name}_chance"))})
        out.update({"pairs": int(r.pairs), "groups": int(r.groups)})
        rows.append(out)
    return pd.DataFrame(rows).set_index("estimate")
