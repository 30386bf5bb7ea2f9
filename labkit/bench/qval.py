"""QVal (Hernandez-Gutierrez et al. 2026, arXiv:2606.32034): a cheap yardstick for dense credit.

QVal asks of any per-step score k(s, a) whether it orders state-action pairs the way the
Q-values of a reference policy do, Q^pi(s, a) labelled by Monte Carlo (restore the state, force
the action, follow the reference policy, record the return), and reports Spearman's rho between
the scores and those labels. No training run is needed, and the labels cost only simulator time.

In the lab the pairs are every generated position of a bench batch (the recorded state and the
action taken there), the reference policy is the policy that sampled the batch (the one the
bench's exact truth is computed for), and the labels are the mean of ``k`` continuations per
pair (``chain_q_estimate``, ``toolworld_q_estimate``), far fewer than exact truth needs.
``qval_score`` is the statistic; ``compare_rankings`` answers whether ranking the bench's
estimators by QVal gives the ranking that the exact advantage gives (``scripts/build_qval.py``
caches the answer in data/qval/, ``load_qval`` reads it).
"""
from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import torch

from labkit.core.cache import read_cache
from labkit.core.checks import as_tensor, check_int, check_shape
from labkit.core.credit import Cost, Credit
from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.scoring import rank_correlation

from labkit.bench.suite import Instance, Task, applies, score

__all__ = ["chain_q_estimate", "toolworld_q_estimate", "qval_score", "estimator_credit", "qval_cells",
           "ranking_agreement", "compare_rankings", "QVAL_DIR", "load_qval"]

QVAL_DIR = data_path("qval")


def _pairs(rollouts: Rollouts, pairs) -> torch.Tensor:
    if pairs is None:
        return rollouts.mask.clone()
    p = as_tensor("pairs", pairs)
    check_shape("pairs", p, tuple(rollouts.mask.shape))
    return p.bool() & rollouts.mask


@torch.no_grad()
def chain_q_estimate(env, policy, rollouts: Rollouts, k: int, *, seed: int = 0,
                     pairs=None) -> tuple[torch.Tensor, Cost]:
    """Monte Carlo Q^policy(s, a) of the BifurcationChain at the recorded (state, token) pairs:
    for every pair, ``k`` continuations that restart from the recorded state, execute the recorded
    token (the chain's slip applies) and follow ``policy`` to the end; their mean return.

    ``pairs`` (B, T) bool picks the pairs (default: every generated position). Returns the
    estimate (B, T) float64, 0 off the pairs, and the cost (k resets per pair, every token run).
    A ValueError names ``k``, ``pairs`` or ``rollouts`` (no recorded states)."""
    k = check_int("k", k, low=1)
    if rollouts.states is None:
        raise ValueError("rollouts: Q labels restart from recorded states (sample with BifurcationChain.sample)")
    where = _pairs(rollouts, pairs)
    q = torch.zeros(where.shape, dtype=torch.float64)
    states = rollouts.states.long()[where].repeat_interleave(k)
    actions = rollouts.tokens.long()[where].repeat_interleave(k)
    if states.numel() == 0:
        return q, Cost()
    g = torch.Generator().manual_seed(check_int("seed", seed))
    t, ok = states // 2, states % 2
    slipped = torch.rand(len(t), generator=g, dtype=torch.float64) < env.slip
    done = torch.where(slipped, torch.randint(env.n_actions, (len(t),), generator=g), actions)
    correct = env.correct[t]
    ok = torch.where(correct >= 0, ok * (done == correct).long(), ok)
    ret = torch.zeros(len(t), dtype=torch.float64)
    if env.noise_std > 0:
        ret += env.noise_std * torch.randn(len(t), generator=g, dtype=torch.float64)
    last = t == env.horizon - 1
    ret[last] += env.success_reward * ok[last].to(torch.float64)
    more = ~last
    steps = int(len(t))
    if bool(more.any()):
        cont, cont_steps = env.continuation_returns(policy, env.state_index(t[more] + 1, ok[more]), 1,
                                                    seed=seed + 1)
        ret[more] += cont
        steps += cont_steps
    q[where] = ret.view(-1, k).mean(1)
    n = int(where.sum()) * k
    return q, Cost(policy_forwards=n, policy_tokens=steps, env_steps=steps, env_resets=n)


@torch.no_grad()
def toolworld_q_estimate(env, policy, rollouts: Rollouts, k: int, *, seed: int = 0,
                         pairs=None) -> tuple[torch.Tensor, Cost]:
    """Monte Carlo Q^policy(s, a) of ToolWorld at the recorded (hidden state, action) pairs: for
    every played turn, ``k`` episodes replayed from its recorded hidden state with the recorded
    action forced (``ToolWorld.rollout_from``), then ``policy`` to the end; their mean return-to-go.
    ``pairs`` as in ``chain_q_estimate``; returns the estimate (B, T) and the cost."""
    k = check_int("k", k, low=1)
    hidden = rollouts.truth.get("hidden_states")
    if not isinstance(hidden, torch.Tensor):
        raise ValueError("rollouts: Q labels restart from truth['hidden_states'] (sample with ToolWorld.sample)")
    where = _pairs(rollouts, pairs)
    q = torch.zeros(where.shape, dtype=torch.float64)
    if not bool(where.any()):
        return q, Cost()
    # one position is one turn (ToolWorld's rollouts), so a position's index is its turn
    turn = torch.arange(where.shape[1]).expand_as(where)[where]
    bug, fixed, obs = env.decode_hidden(hidden.long()[where])
    rep = lambda x: x.repeat_interleave(k)  # noqa: E731
    returns, steps = env.rollout_from(policy, rep(bug), rep(fixed), rep(obs), rep(turn),
                                      first_action=rep(rollouts.tokens.long()[where]), seed=seed)
    q[where] = returns.view(-1, k).mean(1)
    n = int(where.sum()) * k
    return q, Cost(policy_forwards=n, policy_tokens=steps, env_steps=steps, env_resets=n)


def qval_score(credit: Credit | torch.Tensor, q: torch.Tensor, pairs: torch.Tensor) -> float:
    """QVal (Hernandez-Gutierrez et al. 2026, arXiv:2606.32034): Q-alignment of a dense score, Spearman's rho against reference Q labels.

    Inputs:
        credit: any estimator's per-position score (a ``Credit`` or a (B, T) tensor);
        q: the reference Q label of every pair, (B, T) (``chain_q_estimate``,
        ``toolworld_q_estimate`` or an exact Q); pairs: (B, T) bool, the state-action pairs.

    Formula:
        QVal = Spearman rho( {k(s, a)}, {Q^ref(s, a)} ) over the pairs, pooled (ties take their
        mean rank: ``labkit.scoring.rank_correlation``).

    Defaults:
        none: every pair given is scored.

    Degenerate input:
        fewer than two pairs, or a constant score or constant labels, give 0 (no ordering to
        compare). Mis-shaped tensors raise a ValueError naming the argument.

    Deviations:
        the paper scores language agents' signals against a strong reference policy (a scripted
        optimum or a frontier model); here the reference is the policy that sampled the batch,
        the one the bench's exact truth belongs to, and the signals are the registered credit
        estimators. Its pairs are states drawn along trajectories; here every generated position.

    Returns:
        the rank correlation, a float in [-1, 1].

    Cost:
        none beyond the labels (whose cost the label functions report).
    """
    return rank_correlation(credit, q, pairs)


def estimator_credit(instance: Instance, name: str) -> Credit | None:
    """The credit the bench would score for registered estimator ``name`` on ``instance`` (its
    task inputs and per-estimator overrides, as ``labkit.bench.suite.run_cell`` passes them), or
    None when it does not apply or raises."""
    fn = get_estimator(name)
    inputs = instance.inputs | instance.overrides.get(name, {})
    view = Instance(instance.rollouts, instance.truth, instance.level, instance.targets, inputs)
    if applies(fn, view) is not None:
        return None
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {key: v for key, v in inputs.items() if takes_any or key in params}
    try:
        return fn(instance.rollouts, **kwargs)
    except Exception:  # the bench records such a cell as an error; here it is left out
        return None


def qval_cells(task: Task, seed: int, estimators: Iterable[str], labels: dict) -> list[dict]:
    """One row per applicable estimator on ``task``'s batch for ``seed``: the bench's exact
    metric (``truth``: rank correlation with the exact advantage) and QVal against every label in
    ``labels``, {column: fn(instance, seed) -> (B, T) Q labels}, as column ``qval_<column>``."""
    inst = task.build(seed)
    pairs = inst.rollouts.mask
    q = {col: fn(inst, seed) for col, fn in labels.items()}
    rows = []
    for name in estimators:
        credit = estimator_credit(inst, name)
        if credit is None:
            continue
        truth = score(inst, credit)["rank_correlation"]
        rows.append({"task": task.name, "seed": seed, "estimator": name, "truth": truth,
                     **{f"qval_{col}": qval_score(credit, lab, pairs) for col, lab in q.items()}})
    return rows


def ranking_agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho between two scorings of the same estimators (rank agreement of the two
    rankings; 0 when either is constant). A ValueError names ``b`` when lengths differ."""
    x, y = torch.as_tensor(list(a), dtype=torch.float64), torch.as_tensor(list(b), dtype=torch.float64)
    if x.shape != y.shape:
        raise ValueError(f"b: expected {x.numel()} scores, got {y.numel()}")
    return rank_correlation(x[None], y[None], torch.ones(1, x.numel(), dtype=torch.bool))


def compare_rankings(cells: pd.DataFrame, *, columns: Sequence[str], n_boot: int = 1000,
                     seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per task, and over all tasks pooled (task "all"): rank the estimators by their mean
    exact-truth metric and by the mean of each QVal column over seeds, and report the Spearman
    agreement of the two rankings with a percentile bootstrap interval over seeds (seeds drawn
    with replacement, ``n_boot`` times, the same draw for every task). Also the mean agreement
    of one batch's ranking (``single_batch``: one seed's QVal ranking against the seed-mean exact
    ranking), the chance that the two pick the same best estimator (``same_top``)."""
    n_boot = check_int("n_boot", n_boot, low=1)
    seeds = sorted(cells.seed.unique())
    g = torch.Generator().manual_seed(seed)
    draws = torch.randint(len(seeds), (n_boot, len(seeds)), generator=g)
    rows = []
    groups = [(t, d) for t, d in cells.groupby("task", sort=False)] + [("all", cells)]
    for task, d in groups:
        # one unit per (task, estimator): across tasks the same estimator is a separate entry;
        # only units scored on every seed are ranked
        d = d.assign(unit=d.task + "/" + d.estimator)
        counts = d.groupby("unit").seed.nunique()
        d = d[d.unit.isin(counts.index[counts == len(seeds)])]
        truth = torch.tensor(d.pivot(index="seed", columns="unit", values="truth").fillna(0.0).loc[seeds].values)
        units = truth.shape[1]
        everyone = torch.ones(1, units, dtype=torch.bool)
        for col in columns:
            qv = torch.tensor(d.pivot(index="seed", columns="unit", values=col).loc[seeds].values)
            t_mean, q_mean = truth.mean(0), qv.mean(0)
            point = rank_correlation(q_mean[None], t_mean[None], everyone)
            boots = sorted(rank_correlation(qv[i].mean(0)[None], truth[i].mean(0)[None], everyone) for i in draws)
            lo = boots[int(math.floor((1 - level) / 2 * n_boot))]
            hi = boots[min(n_boot - 1, int(math.ceil((1 + level) / 2 * n_boot)) - 1)]
            single = [rank_correlation(qv[j][None], t_mean[None], everyone) for j in range(len(seeds))]
            rows.append({"task": task, "qval": col, "n_estimators": units, "n_seeds": len(seeds),
                         "agreement": point, "lo": lo, "hi": hi,
                         "same_top": bool(int(t_mean.argmax()) == int(q_mean.argmax())),
                         "single_batch": sum(single) / len(single),
                         "single_batch_min": min(single), "single_batch_max": max(single)})
    return pd.DataFrame(rows)


def load_qval(path: Path | str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The comparison ``scripts/build_qval.py`` caches: (per-cell scores, ranking agreement
    table, meta) from ``path`` (default data/qval). Raises if the cache is missing, foreign or
    stale (``labkit.core.cache``), naming ``path``."""
    meta, files = read_cache(Path(path) if path is not None else QVAL_DIR, script="build_qval.py",
                             files=["cells.csv", "agreement.csv"], what="cached QVal comparison")
    return pd.read_csv(files["cells.csv"]), pd.read_csv(files["agreement.csv"]), meta
