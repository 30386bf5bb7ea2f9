"""The echo trap (notebook 05): training an agent in a world where doing nothing is safe and
trying is risky, and what each loss does on the way into that safe loop.

The world is any ToolWorld with step cost 0, success reward 1 and a wrong-submit penalty > 0
(notebook 05 uses ``labkit.course.presets.echo_world()``: six files, noisy tools, -3 for a wrong
submit, 40 turns, so timing out with 0 is the safe choice). ``echo_trap_runs`` trains GRPO, GRPO
on StarPO-filtered batches and the exact-advantage oracle from the uniform agent and records
where each batch's push goes (``outcome_weights``); ``exact_ascent`` follows the exact gradient
with no sampling at all; ``loss_direction`` compares each loss's update from exact advantages
with the exact gradient. ``scripts/build_echo_trap.py`` caches the sweep over losses and
learning rates in ``data/echo_trap/``; the notebook reads it and runs small pieces live.
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

import pandas as pd
import torch

from labkit.core.checks import as_tensor, check_choice, check_has, check_int, check_number, check_policy, check_shape
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.credit.group import starpo_filter
from labkit.envs.toolworld import SUBMIT, ToolLearner, ToolWorld
from labkit.learn.loop import policy_loss, train


def _check_world(env) -> None:
    """An echo-trap world: a ToolWorld with step cost 0, success reward 1 and a wrong-submit
    penalty > 0 (the exact outcome split and the safe loop need all three)."""
    if not isinstance(env, ToolWorld):
        raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")
    if env.step_cost != 0 or env.wrong_submit <= 0 or env.success_reward != 1:
        raise ValueError("env: the echo trap needs step_cost 0, success_reward 1 and a wrong_submit penalty > 0")


def exact_credit(env: ToolWorld, policy) -> callable:
    """An oracle estimator: every turn gets its exact advantage A_t(s_t, a_t) under the current
    policy (recomputed by DP at every call, so it follows the policy during training). It sees
    the hidden bug location, which no real agent's critic can: an upper bound, not a method."""
    check_has("env", env, ("truth",), "a ToolWorld")
    check_policy("policy", policy)

    def exact(rollouts: Rollouts) -> Credit:
        adv = env.truth(policy).advantage(rollouts).to(rollouts.rewards.dtype)
        return Credit.from_tokens(rollouts, adv, "exact")
    exact.__name__ = "exact"
    return exact


def repeat_share(rollouts: Rollouts) -> float:
    """Share of played turns that repeat an (observation, action) pair already played earlier in
    the same episode: a memoryless agent that repeats one is going round in a loop."""
    n_act = int(rollouts.tokens.max()) + 1
    pair = rollouts.states * n_act + rollouts.tokens
    repeats, total = 0, 0
    for b, n in enumerate(rollouts.mask.sum(1).tolist()):
        seen = set()
        for p in pair[b, :n].tolist():
            repeats += p in seen
            seen.add(p)
        total += n
    return repeats / max(total, 1)


ECHO_METHODS = ("GRPO", "GRPO + StarPO filter", "exact advantage (oracle)")
ECHO_LOSSES = {"grpo": "per-episode mean", "ppo_clip": "token mean"}


def outcome_weights(rollouts: Rollouts, credit: torch.Tensor, kind: str = "grpo") -> dict[str, float]:
    """Where a batch's policy-gradient push goes, split by how the episodes ended.

    With one epoch the loss ``kind`` (``labkit.learn.loop.policy_loss``) gives turn t of episode
    b the weight w_bt = A_bt / len_b / B (``"grpo"``, the per-episode mean) or A_bt / N
    (``"ppo_clip"``, the mean over all N turns of the batch; ``"reinforce"`` has A_bt / B).
    For each outcome (``success``, ``wrong_submit``: the episode submitted an unfixed bug,
    ``timeout``) returns the share of the episodes (``<outcome>_share``), the share of the
    batch's total |w| that their turns carry (``<outcome>_weight``) and the sum of their w over
    the total |w| (``<outcome>_push``: signed, > 0 when the loss makes what those episodes did
    more likely on balance). A timeout is the longest episode there is, so the per-episode mean
    gives its turns the smallest weight each.
    """
    check_choice("kind", kind, ("grpo", "ppo_clip", "reinforce"))
    m = rollouts.mask
    credit = as_tensor("credit", credit)
    check_shape("credit", credit, tuple(m.shape))
    a = torch.where(m, credit.to(torch.float64), 0.0)
    lengths = m.sum(1).to(torch.float64)
    if kind == "grpo":
        per_row = 1.0 / lengths.clamp(min=1)
    elif kind == "ppo_clip":
        per_row = torch.full_like(lengths, 1.0 / max(float(lengths.sum()), 1.0))
    else:
        per_row = torch.ones_like(lengths)
    w = a * per_row[:, None]
    total = float(w.abs().sum())
    out = {}
    timeout, success = rollouts.truth["timeout"], rollouts.truth["success"]
    for name, rows in (("success", success), ("wrong_submit", ~success & ~timeout), ("timeout", timeout)):
        out[f"{name}_share"] = float(rows.double().mean())
        out[f"{name}_weight"] = float(w[rows].abs().sum()) / total if total > 0 else 0.0
        out[f"{name}_push"] = float(w[rows].sum()) / total if total > 0 else 0.0
    return out


class _Recorder:
    """An estimator wrapper that keeps ``outcome_weights`` of every batch it is asked to credit."""

    def __init__(self, estimator, kind: str):
        self.estimator, self.kind, self.rows = estimator, kind, []
        self.__name__ = getattr(estimator, "__name__", "estimator")

    def __call__(self, rollouts: Rollouts) -> Credit:
        credit = self.estimator(rollouts)
        self.rows.append(outcome_weights(rollouts, credit.token, self.kind))
        return credit


def echo_trap_runs(env: ToolWorld, *, seeds: Sequence[int] = (0, 1, 2), iterations: int = 100, lr: float = 0.3,
                   kind: str = "grpo", keep: float = 0.25, n_tasks: int = 8, group_size: int = 8,
                   eval_every: int = 10, methods: Sequence[str] = ECHO_METHODS,
                   progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train a uniform agent in ``env`` (a ToolWorld; the echo trap shows in an echo-trap world,
    see the module docstring) with GRPO, GRPO on StarPO-filtered batches (``keep``) and the
    exact-advantage oracle (``methods``: any of ``ECHO_METHODS``), same
    seeds, same iterations (equal env steps sampled: the filter discards what it drops), Adam
    at ``lr``, with the loss ``kind`` of ``labkit.learn.loop.train`` (``"grpo"``: per-episode
    mean; ``"ppo_clip"``: token mean; one epoch, so no clipping acts).

    Returns ``(curves, final)``: the stacked ``train`` curves (with ``reward_spread`` and
    ``zero_spread_share`` of each sampled batch, and ``outcome_weights`` of each batch trained
    on: ``timeout_share``, ``timeout_weight``, ``timeout_push``, ...) and one row per run with
    the final exact J, the final policy's entropy, timeout share, repeat share
    (``repeat_share``) and success rate on a fresh batch of 256 episodes, the mean
    ``timeout_push`` of the first 20 batches and ``lr`` and ``kind``.
    """
    iterations = check_int("iterations", iterations, low=1)
    check_choice("kind", kind, tuple(ECHO_LOSSES))
    lr = check_number("lr", lr, low=0.0, low_open=True)
    for m in methods:
        check_choice("methods", m, ECHO_METHODS)
    if not isinstance(env, ToolWorld):
        raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")
    specs = {"GRPO": dict(estimator="grpo"),
             "GRPO + StarPO filter": dict(estimator="grpo", batch_filter=partial(starpo_filter, keep=keep)),
             "exact advantage (oracle)": dict(estimator="exact")}
    names = {"GRPO + StarPO filter": f"GRPO + StarPO filter (keep {keep:g})"}
    curves, final = [], []
    bar = progress_bar(total=len(methods) * len(seeds), desc="runs", enabled=progress)
    for method in methods:
        spec, label = specs[method], names.get(method, method)
        for s in seeds:
            policy = env.make_policy()
            learner = ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size,
                                  batch_filter=spec.get("batch_filter"))
            est = exact_credit(env, policy) if spec["estimator"] == "exact" else get_estimator(spec["estimator"])
            recorder = _Recorder(est, kind)
            curve = train(learner, recorder, iterations=iterations, kind=kind, lr=lr, eval_every=eval_every,
                          seed=s, label=label, progress=False)
            diag = pd.DataFrame(recorder.rows, index=curve.index[1:])  # row 0 is the untrained policy
            curve = curve.join(diag)
            curve["lr"] = lr
            curves.append(curve)
            ro = env.sample(policy, 32, group_size=8, seed=10_000 + s)
            final.append({"label": label, "kind": kind, "lr": lr, "seed": s, "J": curve.success.iloc[-1],
                          "entropy": float(ro.entropies[ro.mask].mean()),
                          "timeout_share": float(ro.truth["timeout"].double().mean()),
                          "success_rate": float(ro.truth["success"].double().mean()),
                          "repeat_share": repeat_share(ro),
                          "zero_spread_share_last10": float(curve.zero_spread_share.iloc[-10:].mean()),
                          "timeout_push_first20": float(curve.timeout_push.iloc[1:21].mean())})
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True), pd.DataFrame(final)


def echo_trap_sweep(env: ToolWorld, *, kinds: Sequence[str] = tuple(ECHO_LOSSES), lrs: Sequence[float] = (0.03, 0.1, 0.3),
                    seeds: Sequence[int] = (0, 1, 2, 3, 4), progress: bool = True,
                    **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``echo_trap_runs`` over loss ``kinds`` x learning rates ``lrs`` (``kw`` goes to every
    run): the stacked curves and final rows, each with ``kind`` and ``lr`` columns."""
    kinds, lrs = list(kinds), list(lrs)
    if not kinds or not lrs:
        raise ValueError("kinds, lrs: need at least one value each")
    curves, final = [], []
    for kind in kinds:
        for lr in lrs:
            c, f = echo_trap_runs(env, kind=kind, lr=lr, seeds=seeds, progress=progress, **kw)
            curves.append(c)
            final.append(f)
    return pd.concat(curves, ignore_index=True), pd.concat(final, ignore_index=True)


def trap_table(final: pd.DataFrame, *, trapped_at: float = 0.5) -> pd.DataFrame:
    """``echo_trap_runs`` final rows summarised per (kind, lr, label): mean timeout share,
    success rate and exact J over seeds, the number of seeds (``seeds``) and how many ended in
    the safe loop (``trapped``: timeout share > ``trapped_at``)."""
    trapped_at = check_number("trapped_at", trapped_at, low=0.0, high=1.0)
    need = {"kind", "lr", "label", "seed", "timeout_share", "success_rate", "J"}
    if not need <= set(final.columns):
        raise ValueError(f"final: missing columns {sorted(need - set(final.columns))}")
    g = final.assign(trapped=final.timeout_share > trapped_at).groupby(["kind", "lr", "label"], sort=False)
    out = g.agg(timeout_share=("timeout_share", "mean"), success_rate=("success_rate", "mean"), J=("J", "mean"),
                J_min=("J", "min"), J_max=("J", "max"), trapped=("trapped", "sum"), seeds=("seed", "size"))
    if "timeout_push_first20" in final.columns:
        out["timeout_push_first20"] = g.timeout_push_first20.mean()
    out["trapped"] = out.trapped.astype(int)
    return out.reset_index()


def exact_outcomes(env: ToolWorld, policy) -> dict[str, float]:
    """Exact J of ``policy`` in ``env`` (a ToolWorld with step cost 0, success reward 1 and a
    wrong-submit penalty > 0, such as notebook 05's ``echo_world()``) and the exact chances that a fresh
    episode ``succeeds``, ``submits`` at all and times out (``timeout`` = 1 - submits).

    P(success) is J of the same world without the penalty; J = P(success) - penalty x P(wrong
    submit) then gives P(wrong submit): two dynamic programmes, no sampling.
    """
    _check_world(env)
    check_policy("policy", policy)
    J = env.truth(policy).J
    safe = ToolWorld(env.n_files, max_turns=env.max_turns, mislead=env.mislead, noise=env.noise, flaky=env.flaky)
    success = safe.truth(policy).J
    submits = success + (success - J) / env.wrong_submit
    return {"J": J, "succeeds": success, "submits": submits, "timeout": 1.0 - submits}


def exact_ascent(env: ToolWorld, *, lr: float = 0.3, iterations: int = 100, optimizer: str = "adam",
                 eval_every: int = 10, max_grad_norm: float | None = 1.0) -> pd.DataFrame:
    """Gradient ascent on the exact J of ``env`` (an echo-trap world) from the uniform agent: no sampling at
    all (the limit of an infinite batch of the exact-advantage oracle under the token-mean loss,
    whose expected gradient is proportional to dJ/dlogits, ``ToolTruth.grad``). ``optimizer``
    ``"adam"`` or ``"sgd"`` at ``lr``, the gradient norm clipped to ``max_grad_norm`` as
    ``train`` does. It separates the objective from the sampling and the loss: if this ends in
    the safe loop, the loop is where the true gradient leads.

    Returns one row every ``eval_every`` iterations (and the last) with ``iteration`` and
    ``exact_outcomes`` (``J``, ``succeeds``, ``submits``, ``timeout``), plus ``optimizer``, ``lr``.
    """
    lr = check_number("lr", lr, low=0.0, low_open=True)
    iterations = check_int("iterations", iterations, low=1)
    eval_every = check_int("eval_every", eval_every, low=1)
    check_choice("optimizer", optimizer, ("adam", "sgd"))
    if max_grad_norm is not None:
        max_grad_norm = check_number("max_grad_norm", max_grad_norm, low=0.0, low_open=True)
    _check_world(env)
    policy = env.make_policy()
    opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(policy.parameters(), lr=lr)
    rows = []
    for it in range(iterations + 1):
        if it % eval_every == 0 or it == iterations:
            rows.append({"iteration": it, **exact_outcomes(env, policy)})
        if it == iterations:
            break
        opt.zero_grad()
        policy.logits.grad = -env.truth(policy).grad.to(policy.logits.dtype)
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
        opt.step()
    return pd.DataFrame(rows).assign(optimizer=optimizer, lr=lr)


def loss_direction(env: ToolWorld, *, probe_at: Sequence[int] = (1, 5, 10, 15, 20, 30), lr: float = 0.3, seed: int = 0,
                   n_batches: int = 8, n_tasks: int = 8, group_size: int = 8) -> pd.DataFrame:
    """What each loss does with *exact* credit on the way into the safe loop.

    Trains the exact-advantage oracle with the per-episode loss (``kind="grpo"``, Adam at
    ``lr``, ``seed``) as ``echo_trap_runs`` does, keeping the policy at every iteration in
    ``probe_at``. At each kept policy, ``n_batches`` fresh batches (``n_tasks`` x
    ``group_size``) get their exact advantages and the gradient of both losses (``"grpo"``:
    per-episode mean; ``"ppo_clip"``, one epoch: token mean) is summed over the batches. One
    row per (iteration, loss): ``exact_outcomes`` of the policy, ``cos_true`` (cosine between
    the loss's update and the exact dJ/dlogits) and ``submit_push`` (the update's summed
    component on the submit logits over its summed |component|: < 0 pushes away from
    submitting) next to ``true_submit_push``, the same share of the exact gradient.
    """
    probe_at = sorted({check_int("probe_at", i, low=1) for i in probe_at})
    if not probe_at:
        raise ValueError("probe_at: need at least one iteration")
    n_batches = check_int("n_batches", n_batches, low=1)
    _check_world(env)
    policy = env.make_policy()
    oracle = exact_credit(env, policy)
    kept: dict[int, torch.Tensor] = {}

    def keep(rollouts: Rollouts) -> Credit:
        # called once per iteration before the update: this is the policy that iteration trains
        kept[len(kept) + 1] = policy.logits.detach().clone()
        return oracle(rollouts)

    train(ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size), keep, iterations=max(probe_at),
          kind="grpo", lr=check_number("lr", lr, low=0.0, low_open=True), eval_every=max(probe_at),
          seed=check_int("seed", seed), progress=False)
    probe = env.make_policy()
    rows = []
    for it in probe_at:
        with torch.no_grad():
            probe.logits.copy_(kept[it])
        truth = env.truth(probe)
        true = truth.grad
        outcomes = exact_outcomes(env, probe)
        batches = [env.sample(probe, n_tasks, group_size=group_size, seed=seed * 1000 + it * 10 + b)
                   for b in range(n_batches)]
        for kind in ECHO_LOSSES:
            update = torch.zeros_like(true)
            for ro in batches:
                probe.zero_grad()
                loss, _ = policy_loss(probe.log_prob(ro.states, ro.tokens), ro.logprobs,
                                      truth.advantage(ro).to(ro.rewards.dtype), ro.mask, kind)
                loss.backward()
                update -= probe.logits.grad.detach().to(true.dtype)
            rows.append({"iteration": it, "kind": kind, **outcomes,
                         "cos_true": float((update * true).sum() / (update.norm() * true.norm())),
                         "submit_push": float(update[:, SUBMIT].sum() / update.abs().sum()),
                         "true_submit_push": float(true[:, SUBMIT].sum() / true.abs().sum())})
    return pd.DataFrame(rows)
