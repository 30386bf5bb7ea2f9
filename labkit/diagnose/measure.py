"""What a batch of rollouts says about the training setup, measured without an environment.

Every function here reads a ``Rollouts`` only (no policy, no environment, no truth) and returns
plain numbers in small frozen dataclasses (:mod:`labkit.diagnose.results`), so a report, a test
or a notebook can print them. Each is a :class:`~labkit.diagnose.tally.Tally` of one batch: the
same numbers a stream of batches gives (a file read in chunks).

Which position is what. ``mask`` True marks what the policy generated. A position with ``mask``
False is **padding** when it lies after the last generated position of its row (the row has
ended: nothing the policy did can follow it) and **environment output** (tool results,
observations) otherwise, i.e. between or before generated positions. A row with nothing
generated is all padding. Why this rule: ``Rollouts`` stores no separate length, and an episode
ends with the policy's last action; a tool answer after it would be read by nobody.
"""
from __future__ import annotations

import torch

from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.segments import last_generated
from labkit.diagnose.results import GroupStats, Lengths, PositionStats, RewardStats, Stochasticity
from labkit.diagnose.situations import CHUNK_ROWS
from labkit.diagnose.tally import Tally

__all__ = ["position_kinds", "measure_lengths", "measure_rewards", "measure_groups", "measure_positions",
           "measure_stochasticity"]


def position_kinds(rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """``(environment, padding)`` (B, T) bool masks; generated positions are ``rollouts.mask``.

    Padding: after the row's last generated position; environment output: every other position
    with ``mask`` False (see the module docstring)."""
    check_rollouts(rollouts)
    last = last_generated(rollouts.mask)
    t = torch.arange(rollouts.horizon)
    padding = t[None, :] > last[:, None]
    return ~rollouts.mask & ~padding, padding


def measure_lengths(rollouts: Rollouts, *, bins: int = 20) -> Lengths:
    """Trajectory lengths in generated tokens, in episode tokens (generated + environment
    output, no padding) and in turns where the data has turns (median: the midpoint of the two
    middle values for an even count)."""
    return Tally().add(rollouts, stochasticity=False).lengths(bins=bins)


def measure_rewards(rollouts: Rollouts, *, bins: int = 20) -> RewardStats:
    """Reward sparsity and distribution (see :class:`RewardStats`)."""
    return Tally().add(rollouts, stochasticity=False).rewards(bins=bins)


def measure_groups(rollouts: Rollouts) -> GroupStats:
    """Group sizes and zero-variance groups (see :class:`GroupStats`)."""
    return Tally().add(rollouts, stochasticity=False).groups()


def measure_positions(rollouts: Rollouts) -> PositionStats:
    """Count generated, environment-output and padding positions (module docstring's rule)."""
    return Tally().add(rollouts, stochasticity=False).positions()


def measure_stochasticity(rollouts: Rollouts, *, chunk_rows: int = CHUNK_ROWS,
                          progress=None) -> Stochasticity:
    """Estimate how stochastic the environment is from situations that repeat in the data.

    Method (prefix repeats). Cut every trajectory into actions: maximal runs of generated
    positions with one turn id. The *situation* of an action is everything up to and including
    it: the prompt (``prompts[b]`` when given, and ``group_ids[b]``: trajectories of one group
    share a task), every earlier position (tokens, whether generated or environment output, and
    the observation state where ``states`` exist) and the action's own tokens. Its *result* is
    what the environment did next: the environment output up to the next action, the state the
    next action starts from, whether the episode ended, and the reward received for the action.
    In a deterministic environment the result is a function of the situation, so two visits
    to one situation can differ only if the environment (tools, transitions or reward) is
    random. The estimate is the probability that two visits to the same situation had
    different results, pooled over every situation seen at least twice:

        rate = sum_k [n_k (n_k - 1) - sum_r n_kr (n_kr - 1)] / sum_k n_k (n_k - 1)

    (n_k visits to situation k, n_kr of them with result r). 0 means deterministic wherever the
    data can tell; the rate is None ("not measurable") when no situation repeats, which is
    usual for long free-text trajectories: only early turns of a group tend to coincide.
    Situations and results are compared by 64-bit hashes (a collision is astronomically
    unlikely at these sizes); rewards are compared to 1e-9.

    Why prefixes rather than (state, action) pairs: an observation is not the environment's
    state in a partially observed task (the same "tests pass" can hide a fixed or an unfixed
    bug), so equal (observation, action) pairs differ for reasons that are not randomness; the
    whole history with the prompt determines a deterministic environment's next result.
    """
    return Tally().add(rollouts, chunk_rows=chunk_rows, progress=progress).stochasticity()
