"""What ToolWorld's own programs can check about a turn: the task's progress state at every turn
boundary, and what the tools visibly reported about the agent's work.

* ``progress_states``: a checker that knows the task (the buggy file, whether it is fixed) reads
  the progress level of the state after every turn: none, located (the agent's current
  observation names the buggy file: a correct hint, or the buggy file opened), fixed, fix
  confirmed (fixed and the tests just passed) and submitted with the fix. A program or solver
  that knows the puzzle checks partial progress the same way; the level is a function of the
  state, so progress made (the difference between two boundaries) telescopes over an episode.
* ``execution_feedback``: what execution reported about each turn's work, read only from what
  the agent saw (its action, the observation before it and the tools' answers), never the
  hidden bug: an edit whose test run passed or failed, an edit of a file the last read called
  fine, a submit with or without passing tests. Flaky tests and misread files make it wrong
  sometimes, as real execution feedback is.

Estimators in ``labkit.credit`` never import this module: the caller passes its output.
"""
from __future__ import annotations

from typing import Mapping

import torch

from labkit.core.checks import as_tensor, check_shape
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.turns import turn_table
from labkit.envs.toolworld.env import RUN_TESTS, SUBMIT, TESTS_PASS

__all__ = ["PROGRESS_LEVELS", "FEEDBACK_EVENTS", "progress_states", "execution_feedback"]

PROGRESS_LEVELS = ("none", "located", "fixed", "confirmed", "submitted")
"""The progress levels of ``progress_states``, in order: level l is reported as l / 4."""

FEEDBACK_EVENTS = {"edit_tests_pass": 1, "edit_tests_fail": -1, "edit_looked_fine": -1,
                   "submit_verified": 1, "submit_unverified": -1}
"""The execution reports ``execution_feedback`` reads, with their sign: edit_tests_pass / _fail
(an edit whose next turn ran the tests, and what they said), edit_looked_fine (an edit of file j
right after "file j looks fine"), submit_verified / _unverified (a submit right after "tests
pass", or after anything else)."""


def _world_of(env) -> None:
    missing = [a for a in ("n_files", "open_action", "edit_action", "hint_obs", "buggy_obs", "fine_obs",
                           "edited_obs") if not hasattr(env, a)]
    if missing:
        raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")


def _truth_field(rollouts: Rollouts, key: str, shape: tuple[int, ...]) -> torch.Tensor:
    value = rollouts.truth.get(key) if isinstance(rollouts.truth, Mapping) else None
    if value is None:
        raise ValueError(f"rollouts.truth['{key}']: missing; sample with ToolWorld.sample")
    value = as_tensor(f"rollouts.truth['{key}']", value)
    check_shape(f"rollouts.truth['{key}']", value, shape)
    return value


def progress_states(env, rollouts: Rollouts) -> torch.Tensor:
    """The world's checker: the task's progress level at every turn boundary, (B, N + 1) float64.

    Column 0 is the state before the first turn, column k + 1 the state after turn k; N is the
    batch's largest number of turns and columns past a trajectory's end repeat its last level.
    The level of a state (bug b, fixed flag f, observation o), divided by 4 so it lies in [0, 1]:

        4  the turn submitted with the bug fixed (success)
        3  f and o = "tests pass"                       (fix confirmed)
        2  f                                            (fixed)
        1  not f and o names file b: "hint: file b", "file b looks buggy", "file b looks fine"
        0  otherwise, and after a submit without the fix

    It reads the hidden bug and fixed flag (``truth["bug"]``, ``truth["fixed"]``): it is a
    program that knows the task, as a puzzle's solver does, not what the agent saw. A search
    that moves the agent off the buggy file, a flaky failed test run after the fix, a wrong
    submit lower the level. Cost: tensor work on the recorded transcript, no sampling.
    """
    _world_of(env)
    check_rollouts(rollouts, "ToolWorld.sample")
    obs, act, present = turn_table(rollouts)
    B, N = present.shape
    bug = _truth_field(rollouts, "bug", (B,)).long()
    fixed_before = _truth_field(rollouts, "fixed", tuple(rollouts.mask.shape))
    fixed_before = rollouts.view(fixed_before.bool(), "turn", "first")[0].bool()
    after = _truth_field(rollouts, "observations_after", tuple(rollouts.mask.shape)).long()
    after = rollouts.view(after, "turn", "first")[0].long()
    success = _truth_field(rollouts, "success", (B,)).bool()
    b = bug[:, None]
    fixed = fixed_before | (act == env.edit_action(b))
    names_bug = (after == env.hint_obs(b)) | (after == env.buggy_obs(b)) | (after == env.fine_obs(b))
    level = torch.where(fixed, torch.where(after == TESTS_PASS, 3.0, 2.0), torch.where(names_bug, 1.0, 0.0))
    level = torch.where(act == SUBMIT, torch.where(success[:, None], 4.0, 0.0), level)
    level = torch.where(present, level, 0.0).to(torch.float64)
    n_turns = present.sum(1)
    p = torch.zeros(B, N + 1, dtype=torch.float64)
    p[:, 1:] = level
    last = p[torch.arange(B), n_turns]
    past = torch.arange(N + 1)[None, :] > n_turns[:, None]
    return torch.where(past, last[:, None], p) / 4.0


def execution_feedback(env, rollouts: Rollouts) -> torch.Tensor:
    """What execution visibly reported about every turn's work, (B, N) float64 in {-1, 0, +1}.

    For turn k with action a_k, observation before it o_k and the tools' answer o'_k the events
    of ``FEEDBACK_EVENTS`` are read (each a sign), and the turn gets the sign of their sum:

        edit j, next turn runs the tests     +1 if they answer "tests pass", -1 if "tests fail"
        edit j right after "file j looks fine"                       -1
        submit right after "tests pass"                              +1
        submit after anything else                                   -1

    Other turns (think, search, open, a test run itself) get 0: the report lands on the turn
    whose work it checks. Only the transcript is read (actions, observations, answers), never
    the hidden bug, so a flaky test run or a misread file gives the wrong sign. Absent turns
    get 0. Cost: tensor work on the recorded transcript.
    """
    _world_of(env)
    check_rollouts(rollouts, "ToolWorld.sample")
    obs, act, present = turn_table(rollouts)
    after = _truth_field(rollouts, "observations_after", tuple(rollouts.mask.shape)).long()
    after = rollouts.view(after, "turn", "first")[0].long()
    n = env.n_files
    is_edit = (act >= env.edit_action(0)) & (act < env.edit_action(0) + n)
    j = (act - env.edit_action(0)).clamp(0, n - 1)
    nxt_act = torch.full_like(act, -1)
    nxt_act[:, :-1] = torch.where(present[:, 1:], act[:, 1:], -1)
    nxt_after = torch.full_like(after, -1)
    nxt_after[:, :-1] = after[:, 1:]
    tested = is_edit & (nxt_act == RUN_TESTS)
    sign = (torch.where(tested, torch.where(nxt_after == TESTS_PASS, 1, -1), 0)
            - (is_edit & (obs == env.fine_obs(j))).long()
            + torch.where(act == SUBMIT, torch.where(obs == TESTS_PASS, 1, -1), 0))
    return torch.where(present, sign.sign(), 0).to(torch.float64)
