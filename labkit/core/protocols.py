"""What the layers above expect of each other, as ``typing.Protocol`` classes (duck typing).

An estimator never asks "is this a ToolWorld?"; it asks for the few methods it calls. Any
object with them works, so a new world plugs into the same estimators by providing them.
The classes are ``runtime_checkable`` so a function can check the methods are there and
raise a clear error naming the argument (``require``).
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable

import torch

from labkit.core.rollouts import Rollouts

#: An estimator's docstring, in this order, each header once on a line of its own: what it reads
#: (Inputs), what it computes (Formula), its defaults, what it does with a degenerate batch, where
#: it departs from the reference implementation, what it returns, what it costs. The method cards
#: (``labkit.viz.method``) read sections by these headers; the tests hold every estimator and every
#: exercise solution to the order.
DOCSTRING_SECTIONS = ("Inputs:", "Formula:", "Defaults:", "Degenerate input:", "Deviations from the reference:",
                      "Returns:", "Cost:")


@runtime_checkable
class Env(Protocol):
    """An environment that can restore a hidden state and play on: what re-executing estimators
    (C3, CCPO) need.

    ``decode_hidden(hidden)`` splits hidden-state indices (``rollouts.truth["hidden_states"]``)
    into the tensors that describe the state; the LAST one is the observation the policy sees.
    ``rollout_from(policy, *state, turn, first_action=None, seed=0)`` restores those states
    before turn ``turn``, forces ``first_action`` (or samples it from ``policy``) and lets
    ``policy`` play on; it returns (return-to-go per row, float64 (K,), env steps taken).
    """

    n_hidden: int
    max_turns: int

    def decode_hidden(self, hidden: Any) -> tuple[torch.Tensor, ...]: ...

    def rollout_from(self, policy: Any, *state: torch.Tensor, first_action: Any = None,
                     seed: int = 0) -> tuple[torch.Tensor, int]: ...


@runtime_checkable
class Truth(Protocol):
    """Exact per-position quantities under one fixed policy (what scoring compares credit with)."""

    def value(self, rollouts: Rollouts) -> torch.Tensor: ...

    def q_value(self, rollouts: Rollouts) -> torch.Tensor: ...

    def advantage(self, rollouts: Rollouts) -> torch.Tensor: ...


@runtime_checkable
class HiddenStateTruth(Protocol):
    """Exact truth indexed by hidden state, for the exact modes of re-executing estimators:
    ``pi`` the policy table (n_obs, n_actions), ``hidden_q(turn, hidden)`` the exact
    Q(s, .) of every action at those hidden states and turns, shape (..., n_actions)."""

    pi: torch.Tensor

    def hidden_q(self, turn: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class Learner(Protocol):
    """What the policy-gradient loop needs from a (policy, environment) pair."""

    default_lr: float

    def parameters(self) -> Iterable[torch.nn.Parameter]: ...

    def collect(self, iteration: int, seed: int) -> Rollouts: ...

    def logprobs(self, rollouts: Rollouts, rows: torch.Tensor) -> torch.Tensor: ...

    def evaluate(self, seed: int) -> float: ...


def require(name: str, obj: Any, protocol: type, why: str) -> Any:
    """Return ``obj`` if it has every method / attribute of ``protocol``, else raise a
    ValueError naming the argument ``name``, what is missing and ``why`` it is needed."""
    missing = [m for m in _members(protocol) if not hasattr(obj, m)]
    if obj is None or missing:
        got = "None" if obj is None else f"{type(obj).__name__} (missing {', '.join(missing)})"
        raise ValueError(f"{name}: {why}; expected an object with {', '.join(_members(protocol))}, got {got}")
    return obj


def _members(protocol: type) -> list[str]:
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {k for k, v in vars(protocol).items() if callable(v) and not k.startswith("_")}
    return sorted(names)
