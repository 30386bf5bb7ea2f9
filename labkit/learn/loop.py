"""One small policy-gradient loop that every training demo in the course uses.

    for each iteration:
        rollouts = learner.collect(...)                 # sample a batch with the current policy
        credit   = estimator(rollouts)                  # ANY labkit estimator: the thing we compare
        for each epoch, for each minibatch:
            logp = learner.logprobs(rollouts, rows)     # differentiable log pi(token)
            loss = policy_loss(logp, old_logp, credit.token, mask, kind)
            step the optimiser (gradient norm clipped)
        critic.update(rollouts, returns)                # only if a learned critic is in play
        every eval_every iterations: learner.evaluate() -> success

The estimator is the only thing that changes between GRPO, PPO-with-critic and VinePPO runs, so
learning curves differ by credit assignment alone. Three losses (``kind``):

* ``"reinforce"``: -(1/B) sum_b sum_t A_bt log pi(a_bt | s_bt), the plain policy-gradient
  estimate (sequence sum, batch mean; ``labkit.policies.tabular`` computes the same gradient).
* ``"ppo_clip"``: -min(rho A, clip(rho, 1 - eps, 1 + eps) A) with rho = pi / pi_old, averaged
  over every generated token in the minibatch (verl's default "token-mean").
* ``"grpo"``: the same clipped surrogate, averaged within each sequence and then over sequences
  (the GRPO paper's "seq-mean-token-mean"). No KL penalty: like Dr. GRPO and DAPO, labkit drops it.

With one epoch and one minibatch rho = 1 and both clipped losses have the plain policy gradient
of the token-averaged objective; extra epochs reuse the batch, which is where clipping matters.

A *learner* couples an environment and a policy. It provides ``parameters()``,
``collect(n_iteration, seed) -> Rollouts`` (with ``logprobs`` of the sampled tokens),
``logprobs(rollouts, rows) -> (len(rows), T)`` (differentiable), ``evaluate(seed) -> float``
(success rate) and ``default_lr`` (``labkit.core.protocols.Learner``). Each world brings its
own: ``labkit.envs.chain.ChainLearner``, ``labkit.envs.toolworld.ToolLearner``,
``labkit.envs.teamtask.TeamLearner`` and ``labkit.envs.arithmetic.learner.LMLearner``.

Cost accounting, per iteration and cumulated in the returned curve: ``env_steps`` (actions /
tokens sampled for training), ``policy_tokens`` (token positions the policy ran to *sample* the
batch and to compute the credit, e.g. VinePPO's vines), ``aux_calls`` (critic / reward model
calls). Gradient passes are the same for every estimator at equal batch size and are not counted.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.checks import check_choice, check_int, check_number
from labkit.core.protocols import Learner
from labkit.core.rollouts import Credit, Rollouts
from labkit.core.stats import group_spread
from labkit.credit import get_estimator

LOSSES = ("reinforce", "ppo_clip", "grpo")


# --------------------------------------------------------------------------- the loss
def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                kind: str = "ppo_clip", *, clip_eps: float = 0.2) -> tuple[torch.Tensor, dict]:
    """The policy-gradient surrogate of ``kind`` (see the module docstring) and diagnostics.

    All inputs (B, T); ``mask`` selects generated positions. Returns ``(loss, stats)`` with
    ``clip_frac`` (share of tokens whose ratio was clipped) and ``approx_kl`` (mean of
    old_logp - logp). Rows without a masked token contribute nothing.
    """
    check_choice("kind", kind, LOSSES)
    m = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).detach()
    log_ratio = logp - old_logp.to(logp.dtype).detach()
    if kind == "reinforce":
        per_token = -adv * logp
        loss = (per_token * m).sum() / max(logp.shape[0], 1)
        clipped = torch.zeros_like(m)
    else:
        ratio = log_ratio.clamp(max=20.0).exp()  # clamp: a wild ratio must not overflow to inf
        unclipped, clipped_obj = ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
        per_token = -torch.minimum(unclipped, clipped_obj)
        clipped = (clipped_obj < unclipped).to(m.dtype)
        if kind == "ppo_clip":
            loss = (per_token * m).sum() / m.sum().clamp(min=1)
        else:  # grpo: mean over a sequence's tokens, then over sequences that have tokens
            lengths = m.sum(1)
            has = lengths > 0
            loss = ((per_token * m).sum(1)[has] / lengths[has]).sum() / has.sum().clamp(min=1)
    n = m.sum().clamp(min=1)
    stats = {"clip_frac": float((clipped * m).sum() / n), "approx_kl": float((-log_ratio.detach() * m).sum() / n)}
    return loss, stats


# --------------------------------------------------------------------------- the loop
def train(learner: Learner, estimator: Callable[[Rollouts], Credit] | str, *, iterations: int = 20,
          kind: str = "ppo_clip", lr: float | None = None, epochs: int = 1, minibatches: int = 1,
          clip_eps: float = 0.2, max_grad_norm: float | None = 1.0, optimizer: str = "adam",
          critic=None, eval_every: int = 5,
          seed: int = 0, progress: bool = True, label: str | None = None) -> pd.DataFrame:
    """Train ``learner``'s policy for ``iterations`` batches with credit from ``estimator``.

    ``estimator``: a registered name (``"grpo"``) or a callable ``rollouts -> Credit`` (use a
    lambda or ``functools.partial`` to pass a critic or a value_fn). ``critic``: anything with
    ``update(rollouts, targets)``; after each policy update it is regressed on
    ``credit.info["returns"]`` (GAE's A + V), or on the Monte Carlo returns if the estimator gave
    none. ``optimizer``: ``"adam"`` or ``"sgd"`` (plain gradient steps) with ``lr`` (default
    ``learner.default_lr``), gradient norm clipped to ``max_grad_norm`` (None = off). ``seed``
    fixes sampling and minibatch order.

    Returns one row per iteration: ``iteration`` (1-based), ``train_reward`` (mean score of the
    batch), ``success`` (``learner.evaluate``; at iteration 0, the untrained policy, every
    ``eval_every`` iterations and at the end; NaN elsewhere), ``loss``, ``grad_norm``,
    ``entropy``, ``clip_frac``, ``approx_kl``, cumulative ``env_steps`` / ``policy_tokens`` /
    ``aux_calls``, ``seconds``; ``label``, ``kind``, ``seed`` as columns.
    """
    iterations = check_int("iterations", iterations, low=1)
    check_choice("kind", kind, LOSSES)
    epochs = check_int("epochs", epochs, low=1)
    minibatches = check_int("minibatches", minibatches, low=1)
    clip_eps = check_number("clip_eps", clip_eps, low=0.0, low_open=True)
    eval_every = check_int("eval_every", eval_every, low=1)
    seed = check_int("seed", seed)
    if max_grad_norm is not None:
        max_grad_norm = check_number("max_grad_norm", max_grad_norm, low=0.0, low_open=True)
    if isinstance(estimator, str):
        label = label or estimator
        estimator = get_estimator(estimator)
    if not callable(estimator):
        raise TypeError("estimator: expected a registered name or a callable rollouts -> Credit")
    if critic is not None and not callable(getattr(critic, "update", None)):
        raise TypeError("critic: expected an object with update(rollouts, targets)")
    label = label or getattr(estimator, "__name__", "estimator")
    lr = check_number("lr", learner.default_lr if lr is None else lr, low=0.0, low_open=True)

    check_choice("optimizer", optimizer, ("adam", "sgd"))
    params = [p for p in learner.parameters() if p.requires_grad]
    optimizer = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(params, lr=lr)
    shuffle = torch.Generator().manual_seed(seed)
    totals = {"env_steps": 0, "policy_tokens": 0, "aux_calls": 0}
    rows = [{"iteration": 0, "success": learner.evaluate(seed=seed), **totals, "seconds": 0.0}]
    start = time.perf_counter()
    for it in tqdm(range(1, iterations + 1), desc=label, disable=not progress, leave=False):
        rollouts = learner.collect(it, seed=seed * 1_000_003 + it)
        credit = estimator(rollouts)
        if not isinstance(credit, Credit):
            raise TypeError(f"estimator: returned {type(credit).__name__}, expected a Credit")
        advantages = credit.token.detach()
        if not torch.isfinite(advantages[rollouts.mask]).all():
            raise ValueError(f"estimator: {label} produced non-finite credit")
        mask, old = rollouts.mask, rollouts.logprobs
        B = rollouts.batch_size
        losses, norms, stats = [], [], []
        for _ in range(epochs):
            order = torch.randperm(B, generator=shuffle)
            for rows_idx in order.chunk(min(minibatches, B)):
                logp = learner.logprobs(rollouts, rows_idx)
                loss, st = policy_loss(logp, old[rows_idx], advantages[rows_idx], mask[rows_idx], kind,
                                       clip_eps=clip_eps)
                optimizer.zero_grad()
                loss.backward()
                norm = (torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if max_grad_norm is not None
                        else torch.sqrt(sum((p.grad ** 2).sum() for p in params if p.grad is not None)))
                optimizer.step()
                losses.append(float(loss.detach()))
                norms.append(float(norm))
                stats.append(st)
        if critic is not None:
            targets = credit.info.get("returns")
            critic.update(rollouts, targets if targets is not None else rollouts.returns())
        sampled = int(rollouts.mask.sum())
        # a batch filter (StarPO) trains on fewer steps than were sampled: charge what was sampled
        totals["env_steps"] += int(rollouts.info.get("sampled_steps", sampled)) + credit.cost.env_steps
        totals["policy_tokens"] += int(rollouts.info.get("generation_cost", sampled)) + credit.cost.policy_tokens
        totals["aux_calls"] += credit.cost.aux_calls
        entropy = float(rollouts.entropies[mask].mean()) if rollouts.entropies is not None else float("nan")
        spread, flat = rollouts.info.get("sampled_spread") or group_spread(rollouts)
        evaluate = it % eval_every == 0 or it == iterations
        rows.append({"iteration": it, "train_reward": float(rollouts.scores.mean()),
                     "success": learner.evaluate(seed=seed) if evaluate else float("nan"),
                     "loss": sum(losses) / len(losses), "grad_norm": sum(norms) / len(norms),
                     "entropy": entropy, "reward_spread": spread, "zero_spread_share": flat,
                     "clip_frac": sum(s["clip_frac"] for s in stats) / len(stats),
                     "approx_kl": sum(s["approx_kl"] for s in stats) / len(stats),
                     **totals, "seconds": time.perf_counter() - start})
    out = pd.DataFrame(rows)
    out.insert(0, "label", label)
    out["kind"], out["seed"] = kind, seed
    return out


def compare(make_learner: Callable[[int], Learner], runs: dict[str, Callable[[Learner], dict]], *,
            seeds: Sequence[int] = (0, 1, 2), progress: bool = True, **common) -> pd.DataFrame:
    """Train a fresh learner per (run, seed) and stack the curves.

    ``make_learner(seed)`` builds a fresh learner. ``runs`` maps a label to a function that,
    given that learner, returns the keyword arguments of ``train`` for the run (at least
    ``estimator``), so a run can build a fresh critic or a value_fn tied to the learner's model.
    ``common`` goes to every run (a run's own arguments win).
    """
    if not runs:
        raise ValueError("runs: need at least one run")
    seeds = [check_int("seeds", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    curves = []
    bar = tqdm(total=len(runs) * len(seeds), desc="runs", disable=not progress)
    for label, make_kwargs in runs.items():
        if not callable(make_kwargs):
            raise TypeError(f"runs: entry {label!r} must be a function learner -> train keyword arguments")
        for s in seeds:
            learner = make_learner(s)
            kwargs = {**common, **make_kwargs(learner)}
            if "estimator" not in kwargs:
                raise ValueError(f"runs: entry {label!r} gave no estimator")
            curves.append(train(learner, kwargs.pop("estimator"), seed=s, label=label, progress=False, **kwargs))
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True)


def curve_band(curves: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Evaluated points of learning curves as mean / min / max of exact J over seeds, per
    ``by`` and iteration (chart-ready for ``viz.line_chart(..., band=("min", "max"))``)."""
    for col in (by, "iteration", "success"):
        if col not in curves.columns:
            raise ValueError(f"curves: missing column {col!r}")
    evals = curves.dropna(subset=["success"])
    return (evals.groupby([by, "iteration"], sort=False).success.agg(["mean", "min", "max"]).reset_index())


def summarise(curves: pd.DataFrame) -> pd.DataFrame:
    """Success change from iteration 0 to the last iteration per run: mean, std, min, max over
    seeds, plus the mean cost of a run."""
    if not {"label", "seed", "iteration", "success"} <= set(curves.columns):
        raise ValueError("curves: expected the DataFrame returned by train / compare")
    first = curves[curves.iteration == 0].set_index(["label", "seed"]).success
    last_it = curves.groupby(["label", "seed"]).iteration.transform("max")
    last = curves[curves.iteration == last_it].set_index(["label", "seed"])
    change = (last.success - first).rename("change")
    table = change.groupby("label").agg(["mean", "std", "min", "max"]).add_prefix("change_")
    table["success_before"] = first.groupby("label").mean()
    table["success_after"] = last.success.groupby("label").mean()
    for col in ("env_steps", "policy_tokens", "aux_calls", "seconds"):
        table[col] = last[col].groupby("label").mean()
    table["seeds"] = change.groupby("label").size()
    return table.reset_index()
