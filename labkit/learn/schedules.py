"""Training schedules: credit (or the reward it is computed from) that changes with the iteration.

Two survey methods are not a new credit formula but an order in which credit signals are used
over a training run:

* PilotRL (Lu et al. 2025, arXiv:2508.00344, survey §5.4): coarse-to-fine stages, episode-level
  credit first, finer credit later (``pilotrl_schedule``);
* PRS, Progressive Reward Shaping (Su et al. 2025, arXiv:2512.07478, survey §5.7): dense,
  checkable rewards early, the plain outcome late (``ShapedReward`` + ``prs_schedule``).

Both are STAND-INS built from the lab's parts (see each docstring for what is and is not run).
``labkit.learn.loop.train`` recognises a ``Schedule`` by its ``for_iteration`` method: each
iteration it asks the schedule for that iteration's estimator and records the ``stage`` in the
curve. Measured on a ToolWorld in ``scripts/build_schedules.py`` (``data/schedules/``).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape, resolve_input
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator

Estimator = Callable[[Rollouts], Credit]


def _resolve(name: str, estimator) -> tuple[Estimator, str]:
    """A registered name or a callable -> (callable, label)."""
    if isinstance(estimator, str):
        return get_estimator(estimator), estimator
    if not callable(estimator):
        raise TypeError(f"{name}: expected a registered estimator name or a callable rollouts -> Credit, "
                        f"got {type(estimator).__name__}")
    return estimator, getattr(estimator, "__name__", type(estimator).__name__)


# --------------------------------------------------------------------------- Schedule
class Schedule:
    """Training schedule (as in PilotRL, Lu et al. 2025, arXiv:2508.00344, and PRS, Su et al. 2025, arXiv:2512.07478): stage k's estimator is used from iteration ``first_k`` on.

    Formula:
        estimator(it) = e_k with k = max {k : first_k <= it}, iterations counted from 1.

    Defaults:
        ``stages`` = a sequence of ``(first_iteration, estimator)``; the first stage must start
        at iteration 1 and the first iterations must strictly increase. An estimator is a
        registered name (``"grpo"``) or a callable rollouts -> Credit. ``names`` (optional)
        labels the stages (default: the estimators' names); ``name`` labels the schedule (the
        curve's ``label`` in ``train``).

    Degenerate input:
        one stage is a constant schedule (``train`` then behaves as with that estimator, plus a
        ``stage`` column of 1s). Iterations past the last start stay in the last stage. An empty
        ``stages``, a first stage not at 1, unsorted or repeated starts, a stage that is not a
        pair, or an estimator that is neither a name nor a callable raise an error naming
        ``stages``; an iteration below 1 raises one naming ``iteration``.

    Deviations from the reference:
        neither paper's schedule is a fixed list of iteration numbers in the same sense (PilotRL
        trains its stages one after another to convergence; PRS's stages are described as a
        curriculum); a fixed switch iteration is the lab's way of making the schedule a knob.

    Cost:
        whatever the active stage's estimator reports; the schedule adds nothing.
    """

    def __init__(self, stages: Sequence, *, name: str = "schedule", names: Sequence[str] | None = None):
        if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or len(stages) == 0:
            raise ValueError("stages: expected a non-empty sequence of (first_iteration, estimator) pairs")
        starts, fns, labels = [], [], []
        for i, stage in enumerate(stages):
            if not isinstance(stage, (tuple, list)) or len(stage) != 2:
                raise ValueError(f"stages: entry {i} must be a pair (first_iteration, estimator), got {stage!r}")
            first = check_int(f"stages[{i}] first_iteration", stage[0], low=1)
            fn, label = _resolve(f"stages[{i}] estimator", stage[1])
            starts.append(first)
            fns.append(fn)
            labels.append(label)
        if starts[0] != 1:
            raise ValueError(f"stages: the first stage must start at iteration 1, got {starts[0]}")
        if any(b <= a for a, b in zip(starts, starts[1:])):
            raise ValueError(f"stages: first iterations must strictly increase, got {starts}")
        if names is not None:
            names = [str(n) for n in names]
            if len(names) != len(starts):
                raise ValueError(f"names: expected {len(starts)} stage names, got {len(names)}")
            labels = names
        if not isinstance(name, str) or not name:
            raise TypeError("name: expected a non-empty string")
        self.starts, self.estimators, self.names = tuple(starts), tuple(fns), tuple(labels)
        self.name = self.__name__ = name

    def __repr__(self) -> str:
        body = ", ".join(f"{s}: {n}" for s, n in zip(self.starts, self.names))
        return f"Schedule({self.name!r}, {{{body}}})"

    def __len__(self) -> int:
        return len(self.starts)

    def stage_of(self, iteration: int) -> int:
        """The stage number (1 = the first stage) in force at ``iteration`` (counted from 1)."""
        it = check_int("iteration", iteration, low=1)
        return sum(1 for s in self.starts if s <= it)

    def for_iteration(self, iteration: int) -> Estimator:
        """The estimator used at ``iteration`` (counted from 1, as in ``train``)."""
        return self.estimators[self.stage_of(iteration) - 1]

    def stage_name(self, iteration: int) -> str:
        """The name of the stage in force at ``iteration``."""
        return self.names[self.stage_of(iteration) - 1]


# --------------------------------------------------------------------------- PilotRL stand-in
def pilotrl_schedule(switch_at: int = 20, *, coarse="grpo", fine="gigpo", name: str = "PilotRL (stand-in)") -> Schedule:
    """PilotRL (Lu et al. 2025, arXiv:2508.00344): STAND-IN, coarse-to-fine credit across training stages.

    Formula:
        iterations 1 .. switch_at - 1:  A = ``coarse`` credit (default GRPO: one group-relative
                                        advantage per episode, every turn the same)
        iterations switch_at ..:        A = ``fine`` credit (default GiGPO: the episode term plus
                                        the anchor-state step term, a different value per turn)

    Defaults:
        switch_at = 20 (batches of episode-level credit before the switch), coarse = "grpo",
        fine = "gigpo" with its own defaults (omega = 1, gamma = 0.95, mean_norm). Either may
        be any registered name or callable rollouts -> Credit.

    Degenerate input:
        switch_at = 1 is ``fine`` throughout (one stage); a run shorter than switch_at is
        ``coarse`` throughout. switch_at below 1 raises a ValueError naming ``switch_at``.

    Deviations from the reference:
        what was read: the paper's abstract and the survey's §5.4 summary. PilotRL trains an LLM
        agent that writes a global plan (AdaPlan) and then executes it, in three progressive RL
        stages: first the executor's adherence to the plan, then the plan's quality, then planner
        and executor jointly; the survey describes the stages as plan-level, step-level and
        token-level credit, "credit flows from coarse to fine". The paper's reward functions and
        stage lengths could not be read (only the abstract was available). The toy has no
        planner and no plan, so only the survey's coarse-to-fine order is run: episode credit,
        then turn credit. In ToolWorld a turn is one action (one position), so the survey's
        third, token-level stage coincides with the turn stage and is not a separate stage here.

    Cost:
        the active stage's estimator's (GRPO and GiGPO: none beyond the sampled batch).
    """
    switch_at = check_int("switch_at", switch_at, low=1)
    if switch_at == 1:
        return Schedule([(1, fine)], name=name, names=["fine"])
    return Schedule([(1, coarse), (switch_at, fine)], name=name, names=["coarse", "fine"])


# --------------------------------------------------------------------------- PRS stand-in
def turn_to_positions(rollouts: Rollouts, turn_values: torch.Tensor) -> torch.Tensor:
    """Place a (B, N) per-turn reward on each turn's last generated position: (B, T), 0 elsewhere
    (so the shaped rewards stay zero off the mask, as ``Rollouts`` requires)."""
    B, T = rollouts.mask.shape
    last, present = rollouts.view(torch.arange(T).expand(B, T), "turn", "last")
    n = min(turn_values.shape[1], present.shape[1])
    rows, turns = present[:, :n].nonzero(as_tuple=True)
    out = torch.zeros(B, T, dtype=turn_values.dtype)
    out[rows, last.long()[rows, turns]] = turn_values[rows, turns]
    return out


class ShapedReward:
    """Reward shaping for PRS (Su et al. 2025, arXiv:2512.07478): a base estimator run on
    outcome + weight x dense checkable turn rewards.

    Formula:
        r'_{b,t} = r_{b,t} + w * v_{b,n}   at the last generated position t of turn n, else r_{b,t}
        credit  = estimator(rollouts with rewards r')

        v = ``dense`` (B, N) per-turn rewards (a tensor, or a callable rollouts -> (B, N) such as
        ``functools.partial(labkit.envs.toolworld.features.verifiable_turn_rewards, env)``).
        ``info`` of the returned Credit gains ``shaping_weight`` w and ``dense_total`` (B,),
        the sum of v per trajectory (before weighting).

    Defaults:
        weight = 1; estimator = any registered name or callable (``prs_schedule`` uses "grpo").

    Degenerate input:
        weight = 0 returns the base estimator's credit on the unchanged rollouts, exactly (dense
        is not even computed). A trajectory with no generated turn gets no dense reward. A
        negative or non-finite weight raises a ValueError naming ``weight``; a dense reward of
        the wrong shape or non-finite raises one naming ``dense``.

    Deviations from the reference:
        the shaped score is a plain sum; the paper's dense rewards are format and answer-quality
        scores of one final answer (BLEU, a judge), not per-turn tool checks.

    Cost:
        the base estimator's, plus one ``aux_calls`` per trajectory when ``dense`` is a callable
        (the checks run once over each transcript, as ``turn_reward_design`` counts them).
    """

    def __init__(self, estimator, dense, weight: float = 1.0, *, name: str | None = None):
        self.estimator, base = _resolve("estimator", estimator)
        if dense is None or not (callable(dense) or isinstance(dense, torch.Tensor)):
            raise TypeError("dense: expected a (B, N) tensor or a callable rollouts -> (B, N) turn rewards")
        self.dense = dense
        self.weight = check_number("weight", weight, low=0.0)
        self.__name__ = name or f"{base} + {self.weight:g} x dense"

    def __repr__(self) -> str:
        return f"ShapedReward({self.__name__!r})"

    def shaped(self, rollouts: Rollouts) -> tuple[Rollouts, torch.Tensor, bool]:
        """(rollouts with shaped rewards, v (B, N), whether a callable ran)."""
        present = rollouts.view(rollouts.mask, "turn", "first")[1]
        v, called = resolve_input("dense", self.dense, rollouts, expected="a (B, N) tensor or a callable rollouts -> (B, N)")
        v = as_tensor("dense", v).to(torch.float64)
        check_shape("dense", v, tuple(present.shape))
        v = torch.where(present, v, 0.0)
        check_finite("dense", v)
        extra = turn_to_positions(rollouts, v).to(rollouts.rewards.dtype)
        return rollouts.with_(rewards=rollouts.rewards + self.weight * extra), v, called

    def __call__(self, rollouts: Rollouts) -> Credit:
        if self.weight == 0.0:
            return self.estimator(rollouts)
        shaped, v, called = self.shaped(rollouts)
        credit = self.estimator(shaped)
        if called:
            credit.cost = credit.cost + Cost(aux_calls=rollouts.batch_size)
        credit.info = {**credit.info, "shaping_weight": self.weight, "dense_total": v.sum(1)}
        return credit


PRS_STAGES = ((1, {"open_hinted": 0.5, "edit_flagged": 0.5, "tests_pass": 0.5}),
              (21, {"tests_pass": 0.5}),
              (41, {}))
"""PRS's default stages on ToolWorld: (first iteration, check weights of
``verifiable_turn_rewards``). Stage 1, "format": every checkable turn signal (following the
tools' hints: open the hinted file, edit the flagged file; tests passing after a run). Stage 2,
"correctness": only the tests passing. Stage 3: the outcome alone."""


def prs_schedule(env, *, stages: Sequence = PRS_STAGES, estimator="grpo", name: str = "PRS (stand-in)",
                 names: Sequence[str] | None = None) -> Schedule:
    """PRS, Progressive Reward Shaping (Su et al. 2025, arXiv:2512.07478): STAND-IN, dense checkable rewards phased out in stages.

    Formula:
        at iteration it in stage k:  credit = estimator(outcome + sum_c w_{k,c} * check_c per turn)
        with check_c the ToolWorld checks of ``labkit.envs.toolworld.features.verifiable_turn_rewards``
        (``ShapedReward`` per stage); a stage with no weights is the outcome alone.

    Defaults:
        ``stages`` = ``PRS_STAGES``: iterations 1-20 all checks at 0.5 (open the hinted file, edit
        the flagged file, tests pass after a run), 21-40 only "tests pass" at 0.5, 41 on the
        outcome alone; estimator = "grpo". ``stages`` is a sequence of (first_iteration,
        {check: weight}) with the rules of ``Schedule``.

    Degenerate input:
        one stage with constant weights is plain shaping throughout (the "shaping kept on"
        control); a stage with an empty mapping or all-zero weights runs the estimator on the
        outcome exactly. Bad stages raise an error naming ``stages``, negative weights one naming
        ``stages`` as well, unknown checks one naming ``weights`` (from verifiable_turn_rewards).

    Deviations from the reference:
        what was read: the paper's abstract and the survey's §5.7 summary. PRS trains tool-using
        QA agents with dense stage-wise rewards, first for parseable, well-formatted tool calls,
        then for answer correctness and quality (length-aware BLEU for short answers, an LLM
        judge for long ones). STAND-IN: ToolWorld has no text format, so the world's checkable
        turn signals stand in for the format and partial-correctness checks; the weights and
        switch iterations are the lab's choices, not the paper's (which could not be read). The
        paper's companion sampler VSPO (replacing zero-advantage prompts by high-value ones,
        value-smoothing clipping) is not built.

    Cost:
        one ``aux_calls`` per trajectory in every shaped stage (the checks), none in an
        outcome-only stage; the base estimator's otherwise.
    """
    from functools import partial

    from labkit.envs.toolworld.features import VERIFIABLE_CHECKS, verifiable_turn_rewards

    if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or len(stages) == 0:
        raise ValueError("stages: expected a non-empty sequence of (first_iteration, {check: weight}) pairs")
    built, labels = [], []
    for i, stage in enumerate(stages):
        if not isinstance(stage, (tuple, list)) or len(stage) != 2 or not isinstance(stage[1], Mapping):
            raise ValueError(f"stages: entry {i} must be a pair (first_iteration, {{check: weight}}), got {stage!r}")
        first, weights = stage
        unknown = [c for c in weights if c not in VERIFIABLE_CHECKS]
        if unknown:
            raise ValueError(f"weights: unknown checks {unknown} in stage {i}; known: {list(VERIFIABLE_CHECKS)}")
        w = {c: check_number(f"stages[{i}] weight of {c}", v, low=0.0) for c, v in weights.items()}
        w = {c: v for c, v in w.items() if v > 0}
        if w:
            dense = partial(verifiable_turn_rewards, env, weights=w)
            est = ShapedReward(estimator, dense, 1.0, name=f"shaped {w}")
            labels.append("+".join(sorted(w)))
        else:
            est = _resolve("estimator", estimator)[0]
            labels.append("outcome")
        built.append((first, est))
    return Schedule(built, name=name, names=names if names is not None else labels)


def shaped_constant(env, weights: Mapping[str, float] | None = None, *, estimator="grpo",
                    name: str = "shaping kept on") -> Schedule:
    """PRS's control (Su et al. 2025, arXiv:2512.07478): the dense checks kept on for the whole run.

    Formula:
        credit = estimator(outcome + sum_c weights[c] * check_c per turn) at every iteration
        (``prs_schedule`` with one stage).

    Defaults:
        weights = the first PRS stage's (``PRS_STAGES[0]``: every check at 0.5); estimator = "grpo".

    Degenerate input:
        empty or all-zero weights give the estimator on the outcome alone; negative weights raise
        a ValueError naming ``stages[0] weight of <check>``, unknown checks one naming ``weights``.

    Deviations from the reference:
        a control, not part of the paper's method: constant shaping is what PRS's stages are
        meant to improve on.

    Cost:
        one ``aux_calls`` per trajectory per iteration (the checks), plus the estimator's.
    """
    weights = dict(PRS_STAGES[0][1]) if weights is None else dict(weights)
    return prs_schedule(env, stages=[(1, weights)], estimator=estimator, name=name)
