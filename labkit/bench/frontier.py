"""The credit-assignment efficiency frontier (the survey's open question §9.2).

At a fixed compute budget, is it better to buy many rollouts with crude episode credit (GRPO)
or fewer rollouts with precise credit (VinePPO's vines, C3's re-executed counterfactuals)?
``train_to_budget`` trains one learner with one estimator until a budget is spent;
``frontier_cell`` adds the evaluation; ``sweep`` runs a grid resumably into a CSV; ``gaps`` compares
an arm with GRPO per budget, with an interval over seeds; ``crossover``
finds, per horizon, the smallest budget at which a fine-grained method beats GRPO;
``time_to_success`` the first budget at which an arm's success reaches a threshold.

Worlds (``WORLDS``). ``chain``: notebook 01's BifurcationChain with a tabular policy, every
position its own logits, so no parameter is shared between positions and a routine token's
gradient never touches a decisive one. ``chain_shared``: the same chain with a policy whose
weights every position shares (``labkit.envs.chain.shared_policy``), as in a language model,
where the routine tokens' noise reaches the decisive logits; the tabular world stays as the
contrast. ``toolworld``: the bench's agentic task.

Steps and vines. On the chain VinePPO forks a vine at the first token of every step; the arms
``vineppo_m{m}_k{K}`` cut the chain into steps of m tokens (``BifurcationChain(step_len=m)``)
and run K vines per fork, so their cost grows like K T^2 / m (the plain ``vineppo`` arm is m = 1,
K = 2: one fork per token).

The compute unit. One *unit* is one environment step, one policy position (a token the policy
ran to sample or to score), one environment reset or one auxiliary-model call. Why this sum: in
the tabular worlds of the lab an env step and a policy forward of one position cost about the
same, and for an LLM agent both are what a rollout pays for (the policy generates, the tool
runs); resets are counted because re-execution methods pay for restoring a state, which a
real sandbox charges for. ``weights`` re-prices any of the four. Counted for every iteration:
the sampled batch (its env steps, its policy positions, one reset per episode) plus everything
the estimator's ``Credit.cost`` reports (vines, replays, auxiliary calls). Estimators report
policy work either as sequences (``policy_forwards``) with their tokens (``policy_tokens``) or,
for one-action turns, as forwards only; the larger of the two is the policy positions, so both
conventions count every position once. Gradient passes are not counted: every arm runs one
epoch over the batch it sampled, so they scale with the sampled batch, which is counted.

Budgets are given in *episode equivalents* E: E times the cost of one full-length episode of
the world, 2 T + 1 units (T env steps, T policy positions, one reset), so one E buys GRPO about
one episode at every horizon and budgets compare across horizons.

Batch sizes per arm (``ARMS``). Every arm trains with the same loss (PPO-clip, one epoch: the
plain policy gradient of the token-mean objective), the same optimiser and learning rate; the
arms differ by credit and by how they spend the budget. GRPO-like arms (no extra cost) sample
big batches (chain: 32 episodes in groups of 8; ToolWorld: 8 tasks x 8 episodes) and so run
many iterations; the vine and re-execution arms sample small batches (8 episodes) because each
of their episodes costs many more units, so they run fewer iterations. Holding the batch equal
instead would give the expensive arms a handful of iterations at every budget.

Stopping rule: an iteration is started only if the units spent plus the last iteration's cost
stay within the budget (the first iteration always runs), so a run ends within the budget
unless one iteration costs more than predicted, and never exceeds it by more than one
iteration's cost.

Evaluation (not counted in the budget): final success is the learner's exact success
probability J (dynamic programming), i.e. the success rate on infinitely many fresh episodes;
credit quality is Spearman's rho between the arm's credit and the exact advantage on a fresh
batch sampled from the final policy (and, for comparison at one policy, from the initial one).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import torch

from labkit.core.cache import read_cache
from labkit.core.checks import check_bool, check_choice, check_int, check_number
from labkit.core.paths import data_path
from labkit.core.credit import Cost, Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.envs import BifurcationChain
from labkit.envs.chain import ChainLearner, shared_policy
from labkit.envs.tabular import exact_truth
from labkit.envs.toolworld import ToolLearner, ToolWorld
from labkit.learn.loop import LOSSES, policy_loss
from labkit.policies import SharedFeaturePolicy, TabularSoftmaxPolicy
from labkit.scoring import difference_interval, rank_correlation, sign_agreement

__all__ = ["WORLDS", "ARMS", "Arm", "UNIT_WEIGHTS", "KEY", "LEARNING_RATES", "VINE_STEP_LENS", "VINE_KS",
           "vine_arm_name", "cost_units", "rollout_cost", "episode_units", "make_learner", "train_to_budget",
           "frontier_cell", "sweep", "gaps", "crossover", "time_to_success", "frontier_band", "load_frontier",
           "FRONTIER_DIR", "SHARED_FRONTIER_DIR"]

WORLDS = ("chain", "toolworld", "chain_shared")
CHAIN_WORLDS = ("chain", "chain_shared")
# One rate for every arm of a world, so arms differ only by credit and by how they spend the
# budget. The tabular chain and ToolWorld keep their learners' default 0.1 (the shipped frontier
# was built with it). The shared chain also takes 0.1, measured with GRPO (the frontier's arm,
# scripts/measure_shared_horizon.py, 3 seeds, rates 0.03 to 1): at T = 40 rates 0.3 and 1 learn
# fastest, but at T = 100 both collapse for some seeds (exact J 0 after 960 episodes for one seed
# in three), while 0.1 reaches J 0.94 to 0.98 there and 0.998 at T = 40; a rate that holds at every
# horizon keeps a collapse from deciding the comparison, and it is the tabular chain's rate too.
LEARNING_RATES = {"chain": ChainLearner.default_lr, "toolworld": ToolLearner.default_lr, "chain_shared": 0.1}
UNIT_WEIGHTS = {"env_steps": 1.0, "policy_positions": 1.0, "env_resets": 1.0, "aux_calls": 1.0}
KEY = ("world", "horizon", "estimator", "budget", "seed")


# --------------------------------------------------------------------------- the unit
def _weights(weights: dict | None) -> dict:
    """UNIT_WEIGHTS updated by ``weights``; unknown names and negative prices refused."""
    if weights is None:
        return UNIT_WEIGHTS
    if not isinstance(weights, dict):
        raise TypeError(f"weights: expected a dict over {sorted(UNIT_WEIGHTS)}, got {type(weights).__name__}")
    unknown = set(weights) - set(UNIT_WEIGHTS)
    if unknown:
        raise ValueError(f"weights: unknown cost {sorted(unknown)[0]!r}; known: {sorted(UNIT_WEIGHTS)}")
    return {**UNIT_WEIGHTS, **{k: check_number("weights", v, low=0.0) for k, v in weights.items()}}


def cost_units(cost: Cost, weights: dict | None = None) -> float:
    """A ``Cost`` in compute units (module docstring): env steps + policy positions (the larger
    of ``policy_tokens`` and ``policy_forwards``) + env resets + auxiliary calls, each times its
    weight (``UNIT_WEIGHTS`` by default)."""
    if not isinstance(cost, Cost):
        raise TypeError(f"cost: expected a Cost, got {type(cost).__name__}")
    w = _weights(weights)
    return (w["env_steps"] * cost.env_steps + w["policy_positions"] * max(cost.policy_tokens, cost.policy_forwards)
            + w["env_resets"] * cost.env_resets + w["aux_calls"] * cost.aux_calls)


def rollout_cost(rollouts: Rollouts) -> Cost:
    """What sampling ``rollouts`` cost: one env step and one policy position per sampled step
    (a batch filter's ``info["sampled_steps"]`` if it dropped some) and one reset per episode."""
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"rollouts: expected Rollouts, got {type(rollouts).__name__}")
    steps = int(rollouts.info.get("sampled_steps", int(rollouts.mask.sum())))
    return Cost(policy_forwards=rollouts.batch_size, policy_tokens=steps, env_steps=steps,
                env_resets=rollouts.batch_size)


def episode_units(horizon: int) -> int:
    """Units of one full-length episode of ``horizon`` steps: 2 T + 1 (the budget's scale)."""
    return 2 * check_int("horizon", horizon, low=1) + 1


# --------------------------------------------------------------------------- the arms
@dataclass(frozen=True)
class Arm:
    """One estimator as the frontier trains it: its registered ``estimator``, the batch it
    samples per iteration in each world (``batch``: world -> (groups, group size)), and options
    for the estimator (``options``), ``seeded`` True when it samples (vines, replays) and so takes
    a fresh seed every iteration, and ``step_len``, the chain's step length (tokens per step,
    where step-level credit such as a vine forks; a chain shorter than it is one step)."""

    estimator: str
    batch: dict
    options: dict = field(default_factory=dict)
    seeded: bool = False
    step_len: int = 1


# chain batches are (groups, group size) of episodes; ToolWorld's are (tasks, episodes per task)
ARMS = {
    "grpo": Arm("grpo", {"chain": (4, 8), "toolworld": (8, 8), "chain_shared": (4, 8)}),
    "gigpo": Arm("gigpo", {"toolworld": (8, 8)}),
    # k = 2 vines per step: the cheapest setting with a two-sample mean; VinePPO's own k = 9 costs
    # 4.5 times more per batch in a world where a vine is a whole continuation
    "vineppo": Arm("vineppo", {"chain": (1, 8), "toolworld": (2, 4)}, {"k": 2}, seeded=True),
    "c3": Arm("c3", {"toolworld": (2, 4)}, {"n_continuations": 2}, seeded=True),
}
# VinePPO on the chain with steps of m tokens and K vines per fork: m from one token (a fork at
# every position, the paper's fine extreme on a toy) to steps a tenth of the longest chain; K from
# the plain arm's two-sample mean to eight (the paper uses nine). Same batch as the plain arm.
VINE_STEP_LENS = (1, 5, 20)
VINE_KS = (2, 8)


def vine_arm_name(step_len: int, k: int) -> str:
    """The ``ARMS`` name of VinePPO with steps of ``step_len`` tokens and ``k`` vines per fork."""
    return f"vineppo_m{check_int('step_len', step_len, low=1)}_k{check_int('k', k, low=1)}"


ARMS.update({vine_arm_name(m, k): Arm("vineppo", {"chain": (1, 8), "chain_shared": (1, 8)}, {"k": k},
                                      seeded=True, step_len=m)
             for m in VINE_STEP_LENS for k in VINE_KS})


def _world(world: str, horizon: int, step_len: int = 1):
    """(env, fresh policy) of ``world`` at ``horizon``: a BifurcationChain with two bifurcations
    (notebook 01's chain) cut into steps of ``step_len`` tokens (at most the whole chain) with the
    tabular (``chain``) or shared-weight (``chain_shared``) policy, or a five-file ToolWorld with
    error rate 0.2 on every tool (the bench's agentic task), each with the uniform policy."""
    check_choice("world", world, WORLDS)
    horizon = check_int("horizon", horizon, low=2)
    step_len = check_int("step_len", step_len, low=1)
    if world in CHAIN_WORLDS:
        env = BifurcationChain(horizon=horizon, n_bifurcations=2, step_len=min(step_len, horizon), seed=0)
        if world == "chain_shared":
            return env, shared_policy(env)
        return env, TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0)
    env = ToolWorld(5, max_turns=horizon, mislead=0.2, noise=0.2, flaky=0.2)
    return env, env.make_policy()


def make_learner(world: str, horizon: int, estimator: str):
    """A fresh learner (uniform policy) of ``world`` at ``horizon`` with ``estimator``'s batch
    shape from ``ARMS``."""
    arm = _arm(estimator, world)
    env, policy = _world(world, horizon, arm.step_len)
    groups, size = arm.batch[world]
    if world in CHAIN_WORLDS:
        return ChainLearner(env, policy, batch_size=groups * size, group_size=size)
    return ToolLearner(env, policy, n_tasks=groups, group_size=size)


def _arm(estimator: str, world: str) -> Arm:
    if estimator not in ARMS:
        raise ValueError(f"estimator: no frontier arm {estimator!r}; known: {sorted(ARMS)}")
    check_choice("world", world, WORLDS)
    arm = ARMS[estimator]
    if world not in arm.batch:
        raise ValueError(f"estimator: {estimator!r} has no arm in world {world!r} "
                         f"(it runs in {sorted(arm.batch)})")
    return arm


def _learner_world(learner) -> str:
    """The world a learner of ``make_learner`` trains in."""
    if isinstance(learner, ChainLearner):
        return "chain_shared" if isinstance(learner.policy, SharedFeaturePolicy) else "chain"
    return "toolworld"


def _estimator_for(learner, estimator: str) -> Callable[[int], Callable[[Rollouts], Credit]]:
    """``seed -> (rollouts -> Credit)`` for the arm on this learner: vines and replays run the
    learner's *current* policy (the objects are shared) with a fresh seed each call."""
    world = _learner_world(learner)
    arm = _arm(estimator, world)
    fn = get_estimator(arm.estimator)
    env, policy = learner.env, learner.policy
    if world in CHAIN_WORLDS and env.step_len != min(arm.step_len, env.horizon):
        raise ValueError(f"estimator: {estimator!r} forks at steps of {arm.step_len} tokens, the learner's "
                         f"chain has steps of {env.step_len}; build the learner with make_learner")

    def make(seed: int):
        opts = dict(arm.options)
        if arm.estimator == "vineppo":
            opts["value_fn"] = env.vine_value_fn(policy, seed=seed)
        elif arm.estimator == "c3":
            opts.update(env=env, policy=policy, seed=seed)

        def run(rollouts: Rollouts) -> Credit:
            if arm.estimator == "c3":
                return fn(rollouts, hidden_states=rollouts.truth["hidden_states"], **opts)
            return fn(rollouts, **opts)
        return run
    return make


def _exact_advantage(learner, rollouts: Rollouts) -> torch.Tensor:
    """Exact per-position advantage of ``rollouts`` under the learner's current policy."""
    if isinstance(learner, ChainLearner):
        return exact_truth(learner.env.mdp(), learner.policy).advantage(rollouts)
    return learner.env.truth(learner.policy).advantage(rollouts).to(rollouts.rewards.dtype)


# --------------------------------------------------------------------------- training to a budget
def train_to_budget(learner, make_estimator: Callable[[int], Callable[[Rollouts], Credit]], budget: float, *,
                    kind: str = "ppo_clip", lr: float | None = None, seed: int = 0, weights: dict | None = None,
                    max_iterations: int = 100_000) -> dict:
    """Train ``learner`` until ``budget`` compute units (module docstring) are spent.

    ``make_estimator(seed)`` returns the iteration's estimator (a fresh seed for sampling
    estimators). Each iteration: sample a batch, compute credit, one PPO-clip (``kind``) step
    with Adam at ``lr`` (default ``learner.default_lr``), gradient norm clipped to 1; charge
    ``rollout_cost`` + the credit's ``Cost``. An iteration starts only while spent + the last
    iteration's cost <= budget (the first always runs). Returns ``iterations``, ``spent``,
    ``episodes`` (sampled for training), ``estimator_units`` (the credit's share of ``spent``),
    ``max_iteration_units``, ``seconds``.
    """
    if not callable(make_estimator):
        raise TypeError("make_estimator: expected a function seed -> (rollouts -> Credit)")
    budget = check_number("budget", budget, low=0.0, low_open=True)
    check_choice("kind", kind, LOSSES)
    seed = check_int("seed", seed)
    max_iterations = check_int("max_iterations", max_iterations, low=1)
    lr = check_number("lr", learner.default_lr if lr is None else lr, low=0.0, low_open=True)
    params = [p for p in learner.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    spent = est_units = last = biggest = 0.0
    episodes = it = 0
    start = time.perf_counter()
    while it < max_iterations and (it == 0 or spent + last <= budget):
        it += 1
        rollouts = learner.collect(it, seed=seed * 1_000_003 + it)
        credit = make_estimator(seed * 1_000_003 + it)(rollouts)
        if not isinstance(credit, Credit):
            raise TypeError(f"make_estimator: its estimator returned {type(credit).__name__}, expected a Credit")
        rows = torch.arange(rollouts.batch_size)
        loss, _ = policy_loss(learner.logprobs(rollouts, rows), rollouts.logprobs, credit.token.detach(),
                              rollouts.mask, kind)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        credit_units = cost_units(credit.cost, weights)
        last = cost_units(rollout_cost(rollouts), weights) + credit_units
        spent += last
        est_units += credit_units
        biggest = max(biggest, last)
        episodes += rollouts.batch_size
    return {"iterations": it, "spent": spent, "episodes": episodes, "estimator_units": est_units,
            "max_iteration_units": biggest, "seconds": time.perf_counter() - start}


def _credit_quality(learner, make_estimator, seed: int) -> tuple[float, float]:
    """(rank correlation, sign agreement) of the arm's credit with the exact advantage on a fresh
    batch of the learner's current policy (seeded apart from every training batch)."""
    ro = learner.collect(0, seed=-(seed + 1))
    credit = make_estimator(-(seed + 1))(ro)
    adv = _exact_advantage(learner, ro)
    return rank_correlation(credit, adv, ro.mask), sign_agreement(credit, adv, ro.mask)


def frontier_cell(world: str, horizon: int, estimator: str, budget: float, seed: int, *,
                  weights: dict | None = None, kind: str = "ppo_clip", lr: float | None = None) -> dict:
    """One row of the frontier: a fresh uniform learner of ``world`` at ``horizon`` trained with
    ``estimator`` (an ``ARMS`` name) until ``budget`` episode equivalents (x ``episode_units``)
    are spent, at the world's rate ``LEARNING_RATES`` unless ``lr`` is given. Returns the key, ``budget_units``, the training record of ``train_to_budget``,
    ``success_start`` / ``success`` (exact J before and after), ``credit_rank_start`` /
    ``credit_rank`` and ``credit_sign`` (credit quality on fresh batches, initial and final
    policy), and ``over_budget`` (units spent beyond the budget, 0 when within it)."""
    check_choice("world", world, WORLDS)
    horizon = check_int("horizon", horizon, low=2)
    budget = check_number("budget", budget, low=0.0, low_open=True)
    seed = check_int("seed", seed)
    learner = make_learner(world, horizon, estimator)
    make = _estimator_for(learner, estimator)
    torch.manual_seed(seed)
    rank0, _ = _credit_quality(learner, make, seed)
    success0 = float(learner.evaluate())
    units = budget * episode_units(horizon)
    lr = LEARNING_RATES[world] if lr is None else lr
    record = train_to_budget(learner, make, units, kind=kind, lr=lr, seed=seed, weights=weights)
    rank, sign = _credit_quality(learner, make, seed + 7919)
    return {"world": world, "horizon": horizon, "estimator": estimator, "budget": budget, "seed": seed,
            "budget_units": units, **record, "over_budget": max(0.0, record["spent"] - units),
            "success_start": success0, "success": float(learner.evaluate()),
            "credit_rank_start": rank0, "credit_rank": rank, "credit_sign": sign}


# --------------------------------------------------------------------------- the sweep
def _cells(grid: dict, estimators: dict, budgets: Sequence[float], seeds: Sequence[int]) -> list[tuple]:
    """Every (world, horizon, estimator, budget, seed) of the grid, checked."""
    if not isinstance(grid, dict) or not grid:
        raise ValueError("grid: expected a dict world -> horizons, e.g. {'chain': [10, 40]}")
    if not isinstance(estimators, dict):
        raise TypeError("estimators: expected a dict world -> estimator names")
    budgets = [check_number("budgets", b, low=0.0, low_open=True) for b in budgets]
    seeds = [check_int("seeds", s) for s in seeds]
    if not budgets:
        raise ValueError("budgets: need at least one budget")
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    cells = []
    for world, horizons in grid.items():
        check_choice("grid", world, WORLDS)
        names = list(estimators.get(world, ()))
        if not names:
            raise ValueError(f"estimators: no estimators for world {world!r}")
        for name in names:
            _arm(name, world)
        for h in horizons:
            check_int("grid", h, low=2)
            cells += [(world, int(h), n, b, s) for n in names for b in budgets for s in seeds]
    return cells


def _key(row) -> tuple:
    return (str(row[0]), int(row[1]), str(row[2]), float(row[3]), int(row[4]))


def sweep(grid: dict, estimators: dict, budgets: Sequence[float], seeds: Sequence[int] = (0, 1, 2), *,
          out=None, progress: bool = True, weights: dict | None = None) -> pd.DataFrame:
    """Run ``frontier_cell`` over the grid and return one tidy row per cell.

    ``grid``: world -> horizons; ``estimators``: world -> ARMS names; ``budgets`` in episode
    equivalents; ``seeds``. With ``out`` (a CSV path) every finished cell is appended at once and
    cells already in the file (by ``KEY``) are skipped, so an interrupted sweep resumes where it
    stopped; the returned frame is then everything in the file for this grid."""
    cells = _cells(grid, estimators, budgets, seeds)
    path = None if out is None else Path(out)
    if path is not None and path.exists() and path.is_dir():
        raise ValueError(f"out: {path} is a folder; expected a CSV file path")
    done = pd.read_csv(path) if path is not None and path.exists() and path.stat().st_size else pd.DataFrame()
    if len(done) and not set(KEY) <= set(done.columns):
        raise ValueError(f"out: {path} is not a frontier CSV (missing {sorted(set(KEY) - set(done.columns))})")
    have = {_key(r) for r in done[list(KEY)].itertuples(index=False)} if len(done) else set()
    todo = [c for c in cells if _key(c) not in have]
    rows = []
    for world, horizon, name, budget, seed in progress_bar(todo, desc="frontier", enabled=progress):
        row = frontier_cell(world, horizon, name, budget, seed, weights=weights)
        rows.append(row)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame([row]).to_csv(path, mode="a", header=not path.exists() or not path.stat().st_size,
                                       index=False)
    table = pd.concat([done, pd.DataFrame(rows)], ignore_index=True) if len(done) else pd.DataFrame(rows)
    wanted = {_key(c) for c in cells}
    keep = [(_key(r) in wanted) for r in table[list(KEY)].itertuples(index=False)] if len(table) else []
    return table[keep].reset_index(drop=True) if len(table) else table


# --------------------------------------------------------------------------- gaps and the crossover
def _check_table(table, metric: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table: expected a DataFrame, got {type(table).__name__}")
    missing = sorted((set(KEY) | {metric}) - set(table.columns))
    if missing:
        raise ValueError(f"table: missing columns {missing}")


def _fine_names(table: pd.DataFrame, fine, base: str) -> list[str]:
    """The fine-grained arms to compare with ``base`` (default: every other estimator), checked."""
    if base not in set(table.estimator):
        raise ValueError(f"base: no rows for estimator {base!r} in table")
    names = [n for n in sorted(set(table.estimator)) if n != base] if fine is None else \
        ([fine] if isinstance(fine, str) else list(fine))
    for n in names:
        if n not in set(table.estimator):
            raise ValueError(f"fine: no rows for estimator {n!r} in table")
    return names


def gaps(table: pd.DataFrame, fine: str | Sequence[str] | None = None, *, base: str = "grpo",
         metric: str = "success", level: float = 0.95) -> pd.DataFrame:
    """Per (world, horizon, fine-grained estimator, budget): how far the fine method's ``metric``
    is from ``base``'s, with an interval.

    Every (budget, seed) cell is its own training run, so the two arms' seeds are independent
    samples: ``gap`` is the difference of the means over seeds and ``gap_low`` / ``gap_high`` its
    ``level`` bootstrap interval (``labkit.scoring.difference_interval``, seeded, each arm's seeds
    resampled on their own). Also ``fine_mean`` / ``fine_std``, ``base_mean`` / ``base_std`` (std
    over seeds), ``gap_min`` / ``gap_max`` (the range of fine minus base over the seeds both
    have) and ``seeds`` (the fine arm's). ``fine``: estimator names (default: every estimator in
    ``table`` other than ``base``); budgets both arms ran."""
    _check_table(table, metric)
    names = _fine_names(table, fine, base)
    out = []
    for (world, horizon), part in table.groupby(["world", "horizon"], sort=True):
        b = part[part.estimator == base].set_index(["budget", "seed"])[metric]
        for name in names:
            f = part[part.estimator == name].set_index(["budget", "seed"])[metric]
            if not len(f) or not len(b):
                continue
            for bud in sorted(set(f.index.get_level_values(0)) & set(b.index.get_level_values(0))):
                fv, bv = f.xs(bud, level="budget"), b.xs(bud, level="budget")
                both = fv.index.intersection(bv.index)
                per_seed = fv[both] - bv[both]
                gap = difference_interval(fv.to_numpy(), bv.to_numpy(), level=level)
                out.append({"world": world, "horizon": int(horizon), "estimator": name, "budget": bud,
                            "fine_mean": float(fv.mean()), "fine_std": float(fv.std(ddof=1)) if len(fv) > 1 else 0.0,
                            "base_mean": float(bv.mean()), "base_std": float(bv.std(ddof=1)) if len(bv) > 1 else 0.0,
                            "gap": gap["diff"], "gap_low": gap["low"], "gap_high": gap["high"],
                            "gap_min": float(per_seed.min()) if len(both) else math.nan,
                            "gap_max": float(per_seed.max()) if len(both) else math.nan, "seeds": len(fv)})
    return pd.DataFrame(out)


def crossover(table: pd.DataFrame, fine: str | Sequence[str] | None = None, *, base: str = "grpo",
              metric: str = "success") -> pd.DataFrame:
    """Per (world, horizon, fine-grained estimator): the smallest budget at which the fine
    method's mean ``metric`` over seeds exceeds ``base``'s, or "none".

    ``fine``: estimator names (default: every estimator in ``table`` other than ``base``).
    Columns: ``world``, ``horizon``, ``estimator``, ``crossover`` (a budget or "none"), and at
    that budget (or at the largest budget when there is none) the ``gaps`` row (means, stds, the
    gap with its interval ``gap_low`` / ``gap_high`` and its per-seed range ``gap_min`` /
    ``gap_max``), plus ``stays_ahead_from`` (the smallest budget from which fine is ahead at
    every larger budget, or "none"), ``budgets`` (how many budgets were compared) and ``wins``
    (at how many of them fine was ahead).
    """
    per_budget = gaps(table, fine, base=base, metric=metric)
    out = []
    if not len(per_budget):
        return pd.DataFrame(out)
    for (world, horizon, name), stats in per_budget.groupby(["world", "horizon", "estimator"], sort=True):
        stats = stats.sort_values("budget")
        ahead = stats[stats.fine_mean > stats.base_mean]
        at = (ahead if len(ahead) else stats.tail(1)).iloc[0]
        # a win at one budget followed by losses is not a frontier crossing: also report the
        # smallest budget from which the fine method stays ahead at every larger budget
        stays = "none"
        for s in reversed(list(stats.itertuples())):
            if s.fine_mean <= s.base_mean:
                break
            stays = s.budget
        out.append({"world": world, "horizon": int(horizon), "estimator": name,
                    "crossover": at["budget"] if len(ahead) else "none", "stays_ahead_from": stays,
                    **{k: at[k] for k in ("fine_mean", "fine_std", "base_mean", "base_std", "gap_min", "gap_max",
                                          "gap_low", "gap_high")},
                    "budgets": len(stats), "wins": len(ahead)})
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- time to success
def _first_budget(success: pd.Series, threshold: float):
    """The smallest budget (the Series' index) whose value reaches ``threshold``, or "none"."""
    reached = success[success >= threshold]
    return float(reached.index.min()) if len(reached) else "none"


def time_to_success(table: pd.DataFrame, threshold: float = 0.9, *, metric: str = "success",
                    per_seed: bool = False) -> pd.DataFrame:
    """Per (world, horizon, estimator): the first budget at which the mean ``metric`` over seeds
    reaches ``threshold`` (>=), or "none" when no budget of the table does.

    Every (budget, seed) cell is its own run from the uniform policy, so a seed's time is the
    first budget at which that seed's run reached the threshold. Columns: ``world``, ``horizon``,
    ``estimator``, ``time_to_success`` (a budget or "none"), ``mean_at`` (mean ``metric`` at that
    budget, or at the largest budget when none), ``seeds``, ``seeds_reached`` (seeds that reach
    the threshold at some budget), and the spread over seeds: ``seed_first`` (the earliest seed's
    time) and ``seed_last`` (the latest, "none" when some seed never reaches it). With
    ``per_seed`` one row per seed instead: the key, ``seed`` and its ``time_to_success``.
    """
    _check_table(table, metric)
    threshold = check_number("threshold", threshold)
    arms, seeds = [], []
    for (world, horizon, name), part in table.groupby(["world", "horizon", "estimator"], sort=True):
        key = {"world": world, "horizon": int(horizon), "estimator": name}
        times = {int(seed): _first_budget(runs.groupby("budget")[metric].mean(), threshold)
                 for seed, runs in part.groupby("seed", sort=True)}
        seeds += [{**key, "seed": seed, "time_to_success": t} for seed, t in times.items()]
        means = part.groupby("budget")[metric].mean().sort_index()
        first = _first_budget(means, threshold)
        reached = sorted(t for t in times.values() if t != "none")
        arms.append({**key, "time_to_success": first,
                     "mean_at": float(means.iloc[-1] if first == "none" else means.loc[first]),
                     "seeds": len(times), "seeds_reached": len(reached),
                     "seed_first": reached[0] if reached else "none",
                     "seed_last": reached[-1] if len(reached) == len(times) else "none"})
    return pd.DataFrame(seeds if check_bool("per_seed", per_seed) else arms)


# --------------------------------------------------------------------------- reading a built frontier
FRONTIER_DIR = data_path("bench", "frontier")
# the shared-weight chain's frontier (``scripts/build_frontier.py --suite shared``), read with
# ``load_frontier(SHARED_FRONTIER_DIR)``
SHARED_FRONTIER_DIR = data_path("bench", "frontier_shared")


def frontier_band(table: pd.DataFrame, metric: str = "success") -> pd.DataFrame:
    """``metric`` per (world, horizon, estimator, budget) as mean / std / min / max over seeds,
    with ``seeds`` and the mean ``spent`` units (chart-ready: one line per estimator against
    ``budget``, a band from min to max)."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table: expected a DataFrame, got {type(table).__name__}")
    missing = sorted((set(KEY) | {metric, "spent"}) - set(table.columns))
    if missing:
        raise ValueError(f"table: missing columns {missing}")
    groups = table.groupby(["world", "horizon", "estimator", "budget"], sort=True)
    band = groups[metric].agg(["mean", "std", "min", "max"])
    band["std"] = band["std"].fillna(0.0)  # one seed: no spread
    band["seeds"] = groups.size()
    band["spent"] = groups.spent.mean()
    return band.reset_index()


def load_frontier(path=None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The frontier built by ``scripts/build_frontier.py``: (frontier rows, crossover table,
    meta) from ``path`` (default ``FRONTIER_DIR``, data/bench/frontier). Raises if the cache is
    missing or foreign (``labkit.core.cache``)."""
    meta, files = read_cache(Path(path) if path is not None else FRONTIER_DIR, script="build_frontier.py",
                             files=["frontier.csv", "crossover.csv"], what="cached frontier")
    return pd.read_csv(files["frontier.csv"]), pd.read_csv(files["crossover.csv"]), meta
