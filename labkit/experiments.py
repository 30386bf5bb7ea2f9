"""Experiment runners the notebooks call, so a notebook cell is one line and the logic is tested.

Each runner is seeded, returns plain data (a pandas DataFrame or dict of tensors), and shows a
progress bar when it loops over settings.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.checks import check_choice, check_int, check_number
from labkit.credit import get_estimator
from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy
from labkit.core.rollouts import Cost, Credit, Rollouts
from labkit.scoring import gradient_study, pearson, score_credit
from labkit.envs.tabular import Truth, exact_truth

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
                     seed: int = 0, progress: bool = True, critic_seed: int | None = None) -> pd.DataFrame:
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


def gae_chain_setup(critic_episodes: int = 64, *, horizon: int = 20, n_bifurcations: int = 2,
                    noise_std: float = 0.5, slip: float = 0.1, init_std: float = 0.5, seed: int = 0,
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
    panels = {"exact advantage": truth.advantage(rollouts)}
    for name, critic in critics.items():
        for lam in lams:
            panels[f"GAE λ={lam:g}, {name} critic"] = gae(rollouts, values=critic, lam=lam).token
    return panels


def _study_precomputed(policy, batches: list[Rollouts], token: torch.Tensor, exact_grad: torch.Tensor) -> dict:
    """``gradient_study`` of credit computed once for all batches (right for any estimator that
    treats each trajectory on its own, like GAE: no batch statistics)."""
    chunks = dict(zip(map(id, batches), token.split(len(batches[0]))))
    return gradient_study(policy, batches, lambda b: Credit.from_tokens(b, chunks[id(b)], "gae"), exact_grad)


def gae_critic_sweep(critic_episodes: Iterable[int], lams: Sequence[float] = (0.0, 1.0), *,
                     n_critics: int = 4, first_fit: int = 0, horizon: int = 20, n_bifurcations: int = 2,
                     noise_std: float = 0.5, slip: float = 0.1, init_std: float = 0.5,
                     batch_size: int = 32, n_batches: int = 50, seed: int = 0,
                     progress: bool = True) -> pd.DataFrame:
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
    exact = {lam: _study_precomputed(policy, batches, gae(ro, values=truth.value, lam=lam).token, truth.grad)
             for lam in lams}
    rows = []
    for n in tqdm(sizes, desc="critic episodes", disable=not progress):
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


# --------------------------------------------------------------------------- the tiny LM (notebooks 02-03)
def truth_step_advantage(rollouts: Rollouts) -> torch.Tensor:
    """The Monte Carlo "true" step advantage of reference rollouts, (B, T) per token:
    A_i = r_i + V_{i+1} - V_i from ``truth["step_values"]`` (V after the last step = 0), each
    token taking its step's value — VinePPO's formula with the cached 256-vine values."""
    if "step_values" not in rollouts.truth:
        raise ValueError("rollouts: need truth['step_values'] (use labkit.envs.arithmetic.truth.load_reference)")
    from labkit.credit.mc import vineppo
    cached = rollouts.truth["step_values"]
    return vineppo(rollouts, value_fn=lambda ro, k: (cached, Cost()), k=1).token


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


def first_error_hit_rate(credit: torch.Tensor, rollouts: Rollouts) -> dict[str, float]:
    """How often the most negative step credit falls on the first wrong step, over rollouts that
    have one. Ties share the hit (counted in expectation). Returns the rate, the chance rate of
    a uniformly random step pick, and the number of rollouts scored."""
    first = rollouts.truth["first_error_step"]
    step_credit, present = rollouts.view(credit, "step", "mean")
    hits, chance, n = 0.0, 0.0, 0
    for b in (first >= 0).nonzero().flatten().tolist():
        steps = present[b].nonzero().flatten()
        if int(first[b]) not in steps.tolist():
            continue
        vals = step_credit[b, steps]
        lowest = vals <= vals.min() + 1e-6 * max(1.0, float(vals.abs().max()))  # equal up to float32 rounding: a tie
        hits += float(lowest[steps.tolist().index(int(first[b]))]) / int(lowest.sum())
        chance += 1.0 / len(steps)
        n += 1
    return {"hit_rate": hits / max(n, 1), "chance": chance / max(n, 1), "rollouts": n}


def vine_value_error(env, rollouts: Rollouts, ks: Iterable[int] = (1, 3, 9, 16), *, seed: int = 0,
                     progress: bool = True) -> pd.DataFrame:
    """VinePPO's Monte Carlo values with k vines against the cached 256-vine truth.

    For each k: mean absolute error and RMSE of V at every step start of ``rollouts`` (from
    ``load_reference``), correlation with the truth, the first-wrong-step hit rate of the
    resulting VinePPO credit, and the cost: vines (policy forward sequences) and the token
    positions the model processed. The truth has its own noise, standard error <= 0.5/sqrt(256).
    """
    import time

    from labkit.credit.mc import vineppo

    ks = [check_int("ks", k, low=1) for k in ks]
    if not ks:
        raise ValueError("ks: need at least one k")
    truth = rollouts.truth["step_values"]
    present = rollouts.view(rollouts.rewards, "step", "sum")[1]
    rows = []
    for k in tqdm(ks, desc="k", disable=not progress):
        start = time.perf_counter()
        credit = vineppo(rollouts, value_fn=env.value_fn(seed=seed + k), k=k)
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


def fit_lm_critic(env, *, n_rollouts: int = 512, n_operands: int = 4, steps: int = 80, seed: int = 0,
                  progress: bool = True):
    """PPO's critic for the tiny LM, fitted the way PPO would see data: a value head on a copy of
    the policy's trunk (``LMCritic.from_policy``), regressed on the 0/1 outcomes of
    ``n_rollouts`` fresh rollouts of ``n_operands``-operand training problems (512 rollouts = 8
    PPO iterations of 64). Returns ``(critic, history)``; ``history`` is ``LMCritic.fit``'s
    per-step loss, with ``attrs["rollout_success"]`` the success rate of the data it saw."""
    from labkit.learn.critics import LMCritic

    n_rollouts = check_int("n_rollouts", n_rollouts, low=1)
    problems = env.task.sample_prompts(n_rollouts, n_operands=n_operands, split="train", seed=seed + 1)
    data = env.rollouts(problems, seed=seed + 1)
    critic = LMCritic.from_policy(env.model, seed=seed)
    history = critic.fit(data, steps=steps, seed=seed, progress=progress)
    history.attrs["rollout_success"] = float(data.scores.mean())
    history.attrs["rollouts"] = n_rollouts
    return critic, history


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
    for k in tqdm(ks, desc="vines", disable=not progress):
        values, tokens = env.prefix_values(candidates, alternatives["problems"], k, seed=seed + 100 + k)
        rows.append({"estimate": f"Monte Carlo, k={k}", "value_mae": float("nan"), "value_corr": float("nan"),
                     **ranks(values), "tokens": tokens})
    return pd.DataFrame(rows)


def lm_rl_setup(*, n_operands: int = 4, train_pool: int = 512, eval_problems: int = 256,
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


def step_table(rollouts: Rollouts, row: int, values: dict[str, torch.Tensor],
               advantages: dict[str, torch.Tensor]) -> pd.DataFrame:
    """One rollout's steps as a table: step text, the verifier's verdict, step-level ``values``
    ((B, S) tensors, e.g. V before each step) and token-level ``advantages`` ((B, T), shown as
    the mean over each step's tokens)."""
    row = check_int("row", row, low=0, high=rollouts.batch_size - 1)
    present = rollouts.view(rollouts.rewards, "step", "sum")[1][row]
    steps = present.nonzero().flatten().tolist()
    text = rollouts.text[row] if rollouts.text is not None else [str(t) for t in rollouts.tokens[row].tolist()]
    out = {"step": steps,
           "text": ["".join(tok for tok, s, m in zip(text, rollouts.step_ids[row].tolist(), rollouts.mask[row].tolist())
                            if m and s == i) for i in steps]}
    if "step_correct" in rollouts.truth:
        out["correct"] = [bool(rollouts.truth["step_correct"][row, i]) for i in steps]
    for name, v in values.items():
        out[name] = [float(v[row, i]) for i in steps]
    for name, a in advantages.items():
        per_step = rollouts.view(a, "step", "mean")[0][row]
        out[name] = [float(per_step[i]) for i in steps]
    return pd.DataFrame(out)


RL_RUNS_DIR = Path(__file__).resolve().parents[1] / "data" / "rl_runs"


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
    weights = Path(__file__).resolve().parents[1] / "data" / "tiny_lm" / "model.safetensors"
    if weights.is_file() and meta.get("model_sha256") != hashlib.sha256(weights.read_bytes()).hexdigest():
        raise ValueError(f"path: the runs in {folder} were trained from a different model; "
                         "rerun python scripts/build_rl_runs.py")
    return pd.read_csv(csv), meta


# --------------------------------------------------------------------------- segments as players (SCAR)
def _segment_roles(rollouts: Rollouts) -> torch.Tensor:
    """Each step's role in its completion, (B, S) long: 0 first step, 1 middle, 2 last
    computation step, 3 the answer (the final segment); -1 where there is no step."""
    n = rollouts.n_steps
    S = int(n.max())
    idx = torch.arange(S).expand(len(n), S)
    roles = torch.full((len(n), S), 1, dtype=torch.long)
    roles[idx == 0] = 0
    roles[idx == (n - 2)[:, None]] = 2
    roles[idx == (n - 1)[:, None]] = 3
    return torch.where(idx < n[:, None], roles, -1)


SEGMENT_ROLE_NAMES = ("first step", "middle step", "last step", "answer")


def segment_shapley_study(env, rollouts: Rollouts, *, k: int = 8, games: Sequence[str] = ("resample", "delete"),
                          seed: int = 0) -> dict:
    """SCAR on the tiny LM: exact Shapley over the reasoning segments of ``rollouts`` (from
    ``load_reference``, which carries the 256-vine step values) for each segment ``game``
    (see ``ArithmeticLM.segment_coalition_values``), next to segment leave-one-out and the
    Monte Carlo step advantage (``truth_step_advantage``, VinePPO's formula with cached values).

    Returns a dict: ``summary`` (one row per game and method: correlation with the truth over all
    steps (0 for a constant credit), first-wrong-step hit rate, ``efficiency_gap`` = the largest
    |sum of a row's credit - (reward - v(empty))| (0 for Shapley, not for leave-one-out), cost
    in sampled sequences and token positions, seconds), ``by_role`` (mean credit per segment role:
    first / middle / last computation step / answer, per game and method, and the truth),
    ``credits`` ({"shapley <game>": (B, T), "leave-one-out <game>": (B, T), "MC advantage": (B, T)})
    and ``values`` ({game: (B, 2**M)}).
    """
    import time

    from labkit.credit import estimate
    from labkit.credit.multiagent import leave_one_out

    k = check_int("k", k, low=1)
    truth = truth_step_advantage(rollouts)
    truth_steps, present = rollouts.view(truth, "step", "mean")
    roles = _segment_roles(rollouts)
    credits, values, rows = {"MC advantage": truth}, {}, []
    by_role = [{"method": "MC advantage", "game": "-",
                **{name: float(truth_steps[roles == r].mean()) for r, name in enumerate(SEGMENT_ROLE_NAMES)}}]

    for game in games:
        start = time.perf_counter()
        table, cost = env.segment_coalition_values(rollouts, k, game=game, seed=seed)
        seconds = time.perf_counter() - start
        values[game] = table
        phi = estimate("scar", rollouts, coalition_values=table)
        n_steps = int(rollouts.n_steps.max())
        loo = leave_one_out(table)[:, :n_steps]
        loo = torch.where(present, loo, 0)
        for method, step_credit in (("shapley", phi.values[:, :n_steps]), ("leave-one-out", loo)):
            token = rollouts.broadcast(step_credit, "step")
            credits[f"{method} {game}"] = token
            rows.append({"game": game, "method": method, "corr_with_truth": pearson(step_credit[present], truth_steps[present], constant=0.0),
                         "first_error_hit": first_error_hit_rate(token, rollouts)["hit_rate"],
                         "efficiency_gap": float((torch.where(present, step_credit, 0).sum(1)
                                                   - (table[:, -1] - table[:, 0])).abs().max()),
                         "sequences": cost.policy_forwards, "token_positions": cost.policy_tokens,
                         "seconds": seconds})
            by_role.append({"method": method, "game": game,
                            **{name: float(step_credit[roles == r].mean()) for r, name in enumerate(SEGMENT_ROLE_NAMES)}})
    summary = pd.DataFrame(rows)
    truth_hits = first_error_hit_rate(truth, rollouts)
    summary.attrs.update(truth_first_error_hit=truth_hits["hit_rate"], chance_first_error_hit=truth_hits["chance"],
                         rollouts_with_error=truth_hits["rollouts"])
    return {"summary": summary, "by_role": pd.DataFrame(by_role), "credits": credits, "values": values}
