"""Hand-made, readable features of ToolWorld turns, and the world's checkable (verifiable) turn signals.

Two uses, both standing in for something a paper gets from elsewhere:

* ``turn_features``: what LaRe asks an LLM to write as code, a "latent reward", i.e. a few
  interpretable evaluation factors of each step. Here a person wrote them (STAND-IN for the
  LLM-generated encoder); ``labkit.learn.judges.LatentRewardRegressor`` then splits each
  episode's return over the steps through them.
* ``verifiable_turn_rewards``: what Turn-Level Reward Design calls verifiable turn rewards,
  programmatic checks of a turn's result (did the tests pass after the run, did the agent open
  the file search pointed at). They read only what the agent itself saw (its action, the
  observation before the turn, the tool's answer after it), never the hidden bug.

The tool's answer after turn t is ``rollouts.truth["observations_after"]`` (ToolWorld.sample
stores it there beside the hidden state; it is the observation the agent reads at turn t + 1,
so it is not privileged). Estimators in ``labkit.credit`` never import this module: the caller
passes its output explicitly.
"""
from __future__ import annotations

from typing import Mapping

import torch

from labkit.core.checks import as_tensor, check_finite, check_shape
from labkit.core.rollouts import Rollouts
from labkit.core.turns import turn_table
from labkit.envs.toolworld.env import RUN_TESTS, SEARCH, SUBMIT, TESTS_PASS, THINK

FEATURE_NAMES = ("think", "search", "run_tests", "submit", "open_hinted", "open_unhinted", "edit_flagged",
                 "edit_unflagged", "submit_after_pass", "tests_passed_after", "looked_buggy_after")
"""Columns of ``turn_features``, each 0 or 1 per turn:

think / search / run_tests / submit: the action type; open_hinted: opened the file the last
search named (open j after "hint: file j"); open_unhinted: any other open; edit_flagged: edited
the file the last read called buggy (edit j after "file j looks buggy"); edit_unflagged: any
other edit; submit_after_pass: submitted right after "tests pass"; tests_passed_after: the
tool answered "tests pass"; looked_buggy_after: the tool answered "file j looks buggy".
The last two describe the tool's (noisy) answer, not the choice: a reward written on them pays
for luck, which is what the luck regression can show."""

VERIFIABLE_CHECKS = ("open_hinted", "edit_flagged", "tests_pass")
"""The checks ``verifiable_turn_rewards`` knows: open_hinted (opened the file search named),
edit_flagged (edited the file a read flagged as buggy), tests_pass (ran the tests and they
passed). Each is decidable by a program from the transcript alone."""


def _world_of(env) -> None:
    missing = [a for a in ("n_files", "open_action", "edit_action", "hint_obs", "buggy_obs") if not hasattr(env, a)]
    if missing:
        raise ValueError(f"env: ToolWorld turn features need a ToolWorld, got {type(env).__name__}")


def _observation_after(rollouts: Rollouts) -> torch.Tensor:
    """The tool's answer after every turn, (B, N) long, -1 where none (submit, out of turns, absent)."""
    after = rollouts.truth.get("observations_after") if isinstance(rollouts.truth, Mapping) else None
    if after is None:
        raise ValueError("rollouts.truth['observations_after']: missing; sample with ToolWorld.sample")
    after = as_tensor("rollouts.truth['observations_after']", after).long()
    check_shape("rollouts.truth['observations_after']", after, tuple(rollouts.mask.shape))
    view, _ = rollouts.view(after, "turn", "first")
    return view.long()


def turn_features(env, rollouts: Rollouts) -> torch.Tensor:
    """STAND-IN for LaRe's LLM-written latent-reward encoder: (B, N, len(FEATURE_NAMES)) float64.

    Row b, turn n holds the 0/1 features of ``FEATURE_NAMES`` computed from the turn's
    observation o_n, action a_n and the tool's answer o'_n; absent turns are all 0. Nothing
    here reads the hidden bug location or the fixed flag.
    """
    _world_of(env)
    obs, act, present = turn_table(rollouts)
    after = _observation_after(rollouts)
    N = env.n_files
    is_open = (act >= env.open_action(0)) & (act < env.edit_action(0))
    is_edit = (act >= env.edit_action(0)) & (act < env.edit_action(0) + N)
    j = torch.where(is_open, act - env.open_action(0), act - env.edit_action(0))
    hinted = is_open & (obs == env.hint_obs(j))
    flagged = is_edit & (obs == env.buggy_obs(j))
    looked_buggy = (after >= env.buggy_obs(0)) & (after < env.buggy_obs(0) + N)
    cols = [act == THINK, act == SEARCH, act == RUN_TESTS, act == SUBMIT, hinted, is_open & ~hinted,
            flagged, is_edit & ~flagged, (act == SUBMIT) & (obs == TESTS_PASS), after == TESTS_PASS, looked_buggy]
    x = torch.stack(cols, -1).to(torch.float64)
    return torch.where(present[..., None], x, 0.0)


def verifiable_turn_rewards(env, rollouts: Rollouts, *, weights: Mapping[str, float] | None = None) -> torch.Tensor:
    """Turn-Level Reward Design's verifiable turn rewards on ToolWorld: (B, N) float64.

        v_{b,n} = sum_c weights[c] * check_c(turn n of row b)      over c in VERIFIABLE_CHECKS

    ``weights`` (default 1 for every check) picks and scales the checks; a check left out counts
    0. Absent turns get 0. The submit's own success is not a turn check here: it is the outcome
    reward, which the estimator mixes in separately.
    """
    if weights is None:
        weights = {c: 1.0 for c in VERIFIABLE_CHECKS}
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights: expected a mapping check -> weight, got {type(weights).__name__}")
    unknown = [c for c in weights if c not in VERIFIABLE_CHECKS]
    if unknown:
        raise ValueError(f"weights: unknown checks {unknown}; known: {list(VERIFIABLE_CHECKS)}")
    w = {c: float(v) for c, v in weights.items()}
    check_finite("weights", torch.tensor(list(w.values()) or [0.0], dtype=torch.float64))
    x = turn_features(env, rollouts)
    col = {name: x[..., i] for i, name in enumerate(FEATURE_NAMES)}
    checks = {"open_hinted": col["open_hinted"], "edit_flagged": col["edit_flagged"],
              "tests_pass": col["run_tests"] * col["tests_passed_after"]}
    out = torch.zeros_like(x[..., 0])
    for c, v in w.items():
        out = out + v * checks[c]
    return out


SKILL_TEMPLATES = ("locate", "inspect", "fix", "verify", "finish")
"""SCRIBE-style skill prototypes of a ToolWorld turn, keyed by what the agent has just seen:
locate (start, thought, "tests fail", "file j looks fine": expect search), inspect ("hint: file
j": expect open j), fix ("file j looks buggy": expect edit j), verify ("edited file j": expect
run tests), finish ("tests pass": expect submit)."""


def template_grades(env, rollouts: Rollouts) -> torch.Tensor:
    """STAND-IN for SCRIBE-style template grading: +1 / -1 per turn, (B, N) float64.

    Each turn is matched to its skill prototype (``SKILL_TEMPLATES``) by the observation it
    answers, and graded +1 if the action is what the template expects, -1 otherwise; absent
    turns get 0. The grader reads only the observation and the action, so it cannot be fooled
    by a lucky tool answer, but it is only as right as its templates: where the best action
    differs from the template (a misleading hint, a flaky pass) it grades the wrong way.
    Usable as TARL's ``grades``: ``tarl(rollouts, grades=template_grades(env, rollouts))``.
    """
    _world_of(env)
    obs, act, present = turn_table(rollouts)
    N = env.n_files
    expect = torch.full_like(act, SEARCH)                       # locate: everything not listed below
    for lo, to_action in ((env.hint_obs(0), env.open_action), (env.buggy_obs(0), env.edit_action)):
        j = obs - lo
        inside = (j >= 0) & (j < N)
        expect = torch.where(inside, to_action(j.clamp(0, N - 1)), expect)
    j = obs - env.edited_obs(0)
    expect = torch.where((j >= 0) & (j < N), torch.full_like(act, RUN_TESTS), expect)
    expect = torch.where(obs == TESTS_PASS, torch.full_like(act, SUBMIT), expect)
    grade = torch.where(act == expect, 1.0, -1.0).to(torch.float64)
    return torch.where(present, grade, 0.0)


def reward_split(env, rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """A ToolWorld episode's rewards split into per-turn rewards and the outcome: ``(turn, outcome)``.

    ``turn`` (B, N) float64 is what every turn earned besides the submit's verdict (-step_cost,
    plus find_reward on a turn that opened the buggy file before the fix; 0 on absent turns),
    ``outcome`` (B,) the verdict (success_reward on a submit with the bug fixed, -wrong_submit
    on one without, 0 on a timeout). turn.sum(1) + outcome is the episode's return; the per-turn
    part is what a per-turn estimator such as ``turn_reward_design`` takes as ``turn_rewards``,
    the outcome what it takes as R. Reads ``truth["success"]`` (the verdict the agent is told).
    """
    _world_of(env)
    _, act, present = turn_table(rollouts)
    r, _ = rollouts.view(rollouts.rewards.to(torch.float64), "turn", "sum")
    success = rollouts.truth.get("success") if isinstance(rollouts.truth, Mapping) else None
    if success is None:
        raise ValueError("rollouts.truth['success']: missing; sample with ToolWorld.sample")
    submitted = ((act == SUBMIT) & present).any(1)
    success = as_tensor("rollouts.truth['success']", success).bool()
    outcome = torch.where(success, float(env.success_reward),
                          torch.where(submitted, -float(env.wrong_submit), 0.0)).to(torch.float64) + 0.0
    last = (present.sum(1) - 1).clamp(min=0)
    turn = torch.where(present, r, 0.0)
    rows = torch.arange(turn.shape[0])
    turn[rows, last] -= torch.where(present.any(1), outcome, 0.0)
    return turn, outcome
