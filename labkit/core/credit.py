"""What every estimator returns: ``Credit`` (credit per generated position, plus the coarser values
it was computed at) and ``Cost`` (the compute it spent beyond the sampled batch, so estimators
compare at equal budget).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch

from labkit.core.checks import as_tensor, check_choice, check_finite, check_shape
from labkit.core.rollouts import Rollouts, check_real, check_rollouts
from labkit.core.segments import LEVELS, segment_broadcast, segment_reduce


@dataclass
class Cost:
    """Compute an estimator spent beyond the sampled batch, so methods compare at equal budget.

    policy_forwards: extra sequences run through the policy (e.g. VinePPO's vines);
    policy_tokens: tokens those sequences generated or scored;
    env_steps / env_resets: extra environment interaction (re-execution, restoring a state);
    aux_calls: calls to an auxiliary model (critic, reward model, judge).
    """

    policy_forwards: int = 0
    policy_tokens: int = 0
    env_steps: int = 0
    env_resets: int = 0
    aux_calls: int = 0

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(eq=False)
class Credit:
    """What an estimator returns.

    ``token`` (B, T): the credit (advantage) each generated position receives in the policy
    gradient; 0 off the mask. ``level`` is the granularity the estimator worked at and
    ``values`` (B, N) / ``present`` (B, N) the credit at that level (for 'episode', N = 1).
    Built directly, the fields must agree: real numbers, ``token`` 2-D, ``values`` with B rows
    (at level 'token' at least T columns) and ``present`` of ``values``' shape.
    """

    token: torch.Tensor
    level: str
    values: torch.Tensor
    present: torch.Tensor
    method: str
    cost: Cost = field(default_factory=Cost)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.method, str):
            raise TypeError(f"method: expected the estimator's name (a str), got {type(self.method).__name__}")
        check_choice("level", self.level, LEVELS)
        self.token = as_tensor("token", self.token)
        self.values = as_tensor("values", self.values)
        check_real("token", self.token)
        check_real("values", self.values)
        if self.token.dim() != 2:
            raise ValueError(f"token: expected shape (B, T), got {tuple(self.token.shape)}")
        # values are the same credit at ``level``: one row per trajectory, and at least a column
        # per position when the level is "token" (so every position has its value)
        B, T = self.token.shape
        if self.values.dim() != 2 or self.values.shape[0] != B or (
                self.level == "token" and self.values.shape[1] < T):
            want = f"({B}, >= {T})" if self.level == "token" else f"({B}, N)"
            raise ValueError(f"values: expected shape {want} to match token {tuple(self.token.shape)} at level "
                             f"{self.level!r}, got {tuple(self.values.shape)}")
        self.present = as_tensor("present", self.present)
        if tuple(self.present.shape) != tuple(self.values.shape):
            raise ValueError(f"present: expected the shape of values {tuple(self.values.shape)}, "
                             f"got {tuple(self.present.shape)}")
        check_finite(f"token ({self.method} credit)", self.token)
        check_finite(f"values ({self.method} {self.level} credit)", self.values)

    @classmethod
    def from_level(cls, rollouts: Rollouts, values: torch.Tensor, level: str, method: str,
                   cost: Cost | None = None, **info: Any) -> "Credit":
        """Build a Credit from values at ``level`` (each position takes its segment's value)."""
        check_rollouts(rollouts)
        check_choice("level", level, LEVELS)
        values = rollouts._level_values("values", values, level)
        check_finite(f"values ({method} {level} credit)", values)
        mask, n = rollouts.mask, values.shape[1]
        # Which segments a row has, and each position's value, without a scatter where the labels
        # allow it: episode = the row has a generated position; step / turn labels count 0, 1, 2, ...
        # without gaps (checked when the Rollouts was built), so a row has segments 0..max. Same
        # results as segment_reduce / segment_broadcast, which agents (labels may skip) still use.
        if level == "episode":
            present = torch.zeros(mask.shape[0], n, dtype=torch.bool)
            # A row's max over the mask's bytes, not mask.any(1) / mask.sum(1): bool reductions
            # along rows were measured 20x / 5x slower on a 1024 x 512 batch.
            present[:, 0] = mask.view(torch.uint8).amax(1).bool()
            # The value times the 0/1 mask, not where(mask, value, 0), which broadcasting a column
            # makes 4x slower. Off the mask a negative value times 0 is -0.0: adding 0.0 makes it
            # 0.0, so the result equals where's bit for bit (but an on-mask -0.0 becomes 0.0).
            token = values[:, :1] * rollouts.mask_as(values.dtype)
            token += 0.0
        elif level == "token":
            present = torch.zeros(mask.shape[0], n, dtype=torch.bool)
            present[:, :mask.shape[1]] = mask[:, :n]
            token = torch.where(mask, values[:, :mask.shape[1]], torch.zeros((), dtype=values.dtype))
        else:
            ids = rollouts.ids_for(level)
            if level in ("step", "turn"):
                present = torch.arange(n)[None, :] <= ids.max(1, keepdim=True).values
            else:
                present = segment_reduce(ids, torch.ones_like(ids, dtype=torch.float64), "sum", n_segments=n)[1]
            token = segment_broadcast(ids, values)
        return cls(token=token, level=level, values=values,
                   present=present, method=method, cost=cost or Cost(), info=dict(info))

    @classmethod
    def from_tokens(cls, rollouts: Rollouts, token: torch.Tensor, method: str,
                    cost: Cost | None = None, **info: Any) -> "Credit":
        """Build a Credit from per-position credit (B, T); positions off the mask get 0."""
        check_rollouts(rollouts)
        token = as_tensor("token", token)
        check_real("token", token)
        check_shape("token", token, tuple(rollouts.mask.shape))
        token = torch.where(rollouts.mask, token, torch.zeros((), dtype=token.dtype))
        return cls(token=token, level="token", values=token, present=rollouts.mask.clone(),
                   method=method, cost=cost or Cost(), info=dict(info))

    def at(self, rollouts: Rollouts, level: str, reduce: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """This credit viewed at another level (e.g. token credit averaged per step)."""
        return rollouts.view(self.token, level, reduce)
