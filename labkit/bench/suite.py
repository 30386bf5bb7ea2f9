"""The benchmark's tasks and the loop that scores every applicable estimator on them.

A ``Task`` is one setting of one world with exact truth, in one of the survey's three families
(section 9.3): *reasoning* (BifurcationChain: exact per-token advantage by dynamic programming),
*agentic* (ToolWorld: exact per-turn advantage by DP over the hidden bug location) and
*multi-agent* (TeamTask's designed cases: exact per-trajectory Shapley value of every agent).
``task.build(seed)`` samples a batch and returns an ``Instance``: the rollouts, the exact truth
at the level it is scored, the deciding positions (where the task has them) and the auxiliary
inputs the task can give an estimator (a vine value function, coalition values, ...).

An estimator *applies* to a task when every option it requires (an option with no default in
its registered signature) is among the task's inputs. One that does not apply, or raises on the
task's rollouts, yields a ``skipped`` (or ``error``) record with the reason; the run goes on.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import torch

from labkit.core.rollouts import Credit, Rollouts
from labkit.credit import ESTIMATORS, get_estimator
from labkit.credit.multiagent import exact_shapley
from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.envs.teamtask import TeamTask
from labkit.envs.toolworld import ToolWorld
from labkit.policies import TabularSoftmaxPolicy
from labkit.scoring import rank_correlation, recall_at_k, sign_agreement

from labkit.bench.records import make_record

__all__ = ["FAMILIES", "Task", "Instance", "SUITES", "suite_tasks", "estimator_names", "applies",
           "score", "run_cell", "iter_cells"]

FAMILIES = ("reasoning", "agentic", "multi-agent")


@dataclass
class Instance:
    """One sampled batch of a task with its exact truth.

    ``truth`` is (B, T) per-position exact advantage when ``level`` is 'token' (the rollouts'
    mask selects the scored positions), or (B, n) exact Shapley values per agent when ``level``
    is 'agent'. ``targets`` (B, T) bool marks the deciding positions (None where undefined).
    ``inputs`` are what the task can hand an estimator, by option name.
    """

    rollouts: Rollouts
    truth: torch.Tensor
    level: str
    targets: torch.Tensor | None = None
    inputs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A named task: its family, its parameters (recorded in every record) and ``build(seed)``."""

    name: str
    family: str
    params: dict
    build: Callable[[int], Instance]

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family: expected one of {FAMILIES}, got {self.family!r}")


# --------------------------------------------------------------------------- the three families
def chain_task(horizon: int, *, n_bifurcations: int = 2, n: int = 64, group_size: int = 8) -> Task:
    """Reasoning: a BifurcationChain played by the uniform tabular policy, exact truth by DP; the
    task offers a vine ``value_fn`` (re-running the chain from recorded states) and the env/policy."""
    params = {"env": "BifurcationChain", "horizon": horizon, "n_bifurcations": n_bifurcations,
              "n": n, "group_size": group_size, "policy": "uniform tabular"}

    def build(seed: int) -> Instance:
        env = BifurcationChain(horizon=horizon, n_bifurcations=n_bifurcations, seed=0)
        policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0)
        ro = env.sample(policy, n, group_size=group_size, seed=seed)
        adv = exact_truth(env.mdp(), policy).advantage(ro)
        return Instance(ro, adv, "token", ro.truth.get("decisive"),
                        {"value_fn": env.vine_value_fn(policy, seed=seed), "env": env, "policy": policy})
    return Task(f"chain_T{horizon}", "reasoning", params, build)


def toolworld_task(max_turns: int, *, noise: float = 0.2, n_files: int = 5, strength: float = 3.0,
                   n_tasks: int = 8, group_size: int = 8) -> Task:
    """Agentic: a ToolWorld whose three tools share one error rate ``noise``, played by the
    scripted agent of notebook 05 (``strength`` 3: the sensible action about 0.6 likely); exact
    per-turn advantage by DP over the hidden bug; the decisive turns are the world's own. The task
    offers the env, the policy and the recorded hidden states (re-execution estimators)."""
    params = {"env": "ToolWorld", "max_turns": max_turns, "noise": noise, "n_files": n_files,
              "strength": strength, "n_tasks": n_tasks, "group_size": group_size}

    def build(seed: int) -> Instance:
        env = ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise)
        policy = env.scripted_policy(strength)
        ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
        adv = env.truth(policy).advantage(ro).to(ro.rewards.dtype)
        return Instance(ro, adv, "token", ro.truth.get("decisive"),
                        {"env": env, "policy": policy, "hidden_states": ro.truth["hidden_states"]})
    return Task(f"toolworld_T{max_turns}_noise{noise:g}", "agentic", params, build)


def team_task(case: str, *, strength: float = 4.0, n_tasks: int = 8, group_size: int = 8) -> Task:
    """Multi-agent: one of TeamTask's designed cases played by its scripted team; truth is the
    exact Shapley value of every agent in every trajectory (from the exact coalition values,
    which the task also offers to estimators as ``coalition_values``)."""
    params = {"env": "TeamTask", "case": case, "strength": strength, "n_tasks": n_tasks, "group_size": group_size}

    def build(seed: int) -> Instance:
        env = TeamTask.preset(case)
        ro = env.sample(env.scripted_policies(strength), n_tasks, group_size=group_size, seed=seed)
        phi = exact_shapley(env.coalition_values(ro))
        return Instance(ro, phi, "agent", None, {"coalition_values": env.coalition_values})
    return Task(f"team_{case}", "multi-agent", params, build)


# Quick: a few small tasks per family, two seeds; the whole suite runs in well under 3 minutes on
# two cores. Tiny: one task per family with small batches, for tests and smoke runs.
SUITES: dict[str, tuple[Callable[[], list[Task]], tuple[int, ...]]] = {
    "quick": (lambda: [chain_task(10), chain_task(40), toolworld_task(20),
                       team_task("redundancy"), team_task("free_riding"), team_task("sabotage")], (0, 1)),
    "tiny": (lambda: [chain_task(6, n=16), toolworld_task(8, n_tasks=2, group_size=4),
                      team_task("redundancy", n_tasks=2, group_size=4)], (0,)),
}


def suite_tasks(suite: str) -> tuple[list[Task], tuple[int, ...]]:
    """The tasks and seeds of a named suite; a ValueError naming ``suite`` for an unknown one."""
    if suite not in SUITES:
        raise ValueError(f"suite: no suite {suite!r}; known: {sorted(SUITES)}")
    make, seeds = SUITES[suite]
    return make(), seeds


def estimator_names(spec: str | Sequence[str] = "all") -> list[str]:
    """'all' (every registered estimator), a comma-separated string or a list of names; a
    ValueError naming ``estimators`` for a name that is not registered."""
    if isinstance(spec, str):
        if spec.strip() == "all":
            return sorted(ESTIMATORS)
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(spec)
    if not names:
        raise ValueError("estimators: name at least one estimator, or 'all'")
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise ValueError(f"estimators: no estimator {unknown[0]!r}; known: {sorted(ESTIMATORS)}")
    return names


def _signature(fn: Callable) -> tuple[list[str], set[str], bool]:
    """(required options, all options, takes **kwargs) of an estimator, from its signature."""
    params = inspect.signature(fn).parameters
    skip = {"rollouts"}
    required = [k for k, p in params.items() if k not in skip and p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    options = {k for k, p in params.items() if k not in skip and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return required, options, any(p.kind is p.VAR_KEYWORD for p in params.values())


def applies(fn: Callable, instance: Instance) -> str | None:
    """None if the estimator can run on the instance (the task gives every required option),
    otherwise the reason it cannot."""
    required, _, _ = _signature(fn)
    missing = [k for k in required if k not in instance.inputs]
    if missing:
        return f"needs {', '.join(missing)}, which this task does not provide"
    return None


def score(instance: Instance, credit: Credit) -> dict:
    """Rank correlation and sign agreement with the exact truth, and recall@k of the deciding
    positions where the task has them (None otherwise)."""
    if instance.level == "agent":
        ro, n = instance.rollouts, instance.truth.shape[1]
        vals = credit.values if credit.level == "agent" else credit.at(ro, "agent", "mean")[0]
        est = torch.zeros(ro.batch_size, n, dtype=torch.float64)
        k = min(n, vals.shape[1])
        est[:, :k] = vals.double()[:, :k]
        mask = torch.ones(ro.batch_size, n, dtype=torch.bool)
        return {"rank_correlation": rank_correlation(est, instance.truth, mask),
                "sign_agreement": sign_agreement(est, instance.truth, mask), "recall_at_k": None}
    m = instance.rollouts.mask
    out = {"rank_correlation": rank_correlation(credit, instance.truth, m),
           "sign_agreement": sign_agreement(credit, instance.truth, m), "recall_at_k": None}
    # recall@k is defined only where some trajectory reached a deciding position
    if instance.targets is not None and bool((instance.targets & m).any()):
        out["recall_at_k"] = recall_at_k(credit, m, instance.targets)
    return out


def _clamped(metrics: dict) -> dict:
    # float round-off can put a perfect correlation at 1.0000000000000002, outside the schema's range
    return {k: (None if v is None else min(1.0, max(-1.0, float(v)))) for k, v in metrics.items()}


def _name(estimator: str | Callable) -> str:
    if isinstance(estimator, str):
        return estimator
    return getattr(estimator, "estimator_name", None) or getattr(estimator, "__name__", "estimator")


def run_cell(suite: str, task: Task, estimator: str | Callable, seed: int, instance: Instance | None = None) -> dict:
    """One record: ``estimator`` (a registered name, or any ``fn(rollouts, **options) -> Credit``)
    on ``task``'s batch for ``seed``, scored against exact truth; a skipped record (with the
    reason) when it does not apply or raises. ``instance`` reuses an already sampled batch."""
    name = _name(estimator)
    fn = get_estimator(estimator) if isinstance(estimator, str) else estimator
    base = dict(suite=suite, task=task.name, family=task.family, task_params=task.params, estimator=name, seed=seed)
    inst = instance if instance is not None else task.build(seed)
    ro = inst.rollouts
    sampled = {"sampled_trajectories": int(ro.batch_size), "sampled_env_steps": int(ro.mask.sum())}
    reason = applies(fn, inst)
    if reason is not None:
        return make_record(**base, reason=reason, cost=sampled)
    _, options, takes_any = _signature(fn)
    kwargs = {k: v for k, v in inst.inputs.items() if takes_any or k in options}
    t0 = time.perf_counter()
    try:
        credit = fn(ro, **kwargs)
        metrics = _clamped(score(inst, credit))
    except Exception as e:  # recorded, not fatal: one estimator never stops a run
        msg = str(e).splitlines()[0] if str(e) else ""
        # labkit's errors start with the argument's name: an option this task does not give
        # (declared optional, e.g. ``verdicts=None``, but needed) is a skip, anything else an error
        argument = msg.split(":", 1)[0]
        if isinstance(e, ValueError) and argument in options and argument not in inst.inputs:
            return make_record(**base, reason=f"needs {argument}, which this task does not provide ({msg})"[:300],
                               cost=sampled | {"wall_seconds": time.perf_counter() - t0})
        return make_record(**base, reason=f"{type(e).__name__}: {msg}"[:300], error=True,
                           cost=sampled | {"wall_seconds": time.perf_counter() - t0})
    wall = time.perf_counter() - t0
    return make_record(**base, granularity=credit.level, metrics=metrics,
                       cost=sampled | credit.cost.as_dict() | {"wall_seconds": wall})


def iter_cells(suite: str, estimators: Iterable[str]) -> Iterator[tuple[Task, str, int]]:
    """Every (task, estimator, seed) cell of a suite, task-major so a batch is sampled once."""
    tasks, seeds = suite_tasks(suite)
    names = list(estimators)
    for task in tasks:
        for seed in seeds:
            for name in names:
                yield task, name, seed
