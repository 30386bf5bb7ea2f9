"""The two data structures every part of the lab passes around.

``Rollouts`` is a batch of trajectories at every granularity at once: positions (tokens) are the
unit of storage, and steps, turns and agents are integer labels on positions, so a coarse view is
a reduction over a label and a broadcast back. ``Credit`` is what every estimator returns: credit
per position plus the coarse values it was computed at and what it cost to compute.

Conventions (all tensors are padded to a common length T):

* ``mask[b, t]`` is True where the policy produced position t of trajectory b. Credit lives only
  there; padding and environment-produced positions (tool output) are False.
* ``rewards[b, t]`` is the reward received right after position t. An outcome reward sits on the
  last generated position. Rewards must be zero where ``mask`` is False.
* ``step_ids`` / ``turn_ids`` / ``agent_ids`` label generated positions 0, 1, 2, ... in order of
  appearance within a trajectory, and are -1 elsewhere.
* ``group_ids`` says which trajectories share a prompt / task instance (GRPO's group).

The one validated boundary. A ``Rollouts`` checks everything it holds when it is built, so an
estimator can trust it: every label (tokens, states, step / turn / agent / group ids) is an
integer tensor (floats are refused, never truncated), token ids and states are >= 0 and group
ids >= 0, rewards are finite and zero off the mask, log-probabilities are <= 0 and entropies
>= 0 where generated, shapes agree. The empty-batch rule: a batch needs at least one trajectory,
one position and **one generated position**; an empty batch is refused here with a message, so
no estimator has to handle it. (A batch may still hold rows with nothing generated: they get 0.)
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Hashable, Sequence

import torch

from labkit.core.checks import (ROUND_OFF, as_tensor, check_choice, check_finite, check_in_range, check_int,
                                check_integer_tensor, check_number, check_shape)
from labkit.core.stats import discounted_returns

LEVELS = ("token", "step", "turn", "agent", "episode")
REDUCTIONS = ("sum", "mean", "first", "last", "max", "min")


# --------------------------------------------------------------------------- segment helpers
def segment_reduce(ids: torch.Tensor, values: torch.Tensor, reduce: str = "sum",
                   n_segments: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduce per-position ``values`` (B, T) over integer labels ``ids`` (B, T; -1 = skip).

    Returns ``(out, present)`` with shape (B, N): ``out[b, k]`` is the reduction of the values of
    segment k of row b, ``present[b, k]`` whether row b has a segment k. Absent segments are 0.
    """
    check_choice("reduce", reduce, REDUCTIONS)
    check_shape("values", values, tuple(ids.shape))
    B, T = ids.shape
    n = int(ids.max().item()) + 1 if n_segments is None else n_segments
    n = max(n, 0)
    valid = ids >= 0
    idx = ids.clamp(min=0)
    vals = values.to(torch.float64) if not values.is_floating_point() else values
    count = torch.zeros(B, n, dtype=vals.dtype).scatter_add_(1, idx, valid.to(vals.dtype))
    present = count > 0
    if reduce in ("sum", "mean"):
        out = torch.zeros(B, n, dtype=vals.dtype).scatter_add_(1, idx, torch.where(valid, vals, 0))
        if reduce == "mean":
            out = torch.where(present, out / count.clamp(min=1), 0)
        return out, present
    if reduce in ("first", "last"):
        pos = torch.arange(T).expand(B, T)
        if reduce == "first":
            fill = torch.full((B, n), T, dtype=torch.long)
            where = fill.scatter_reduce(1, idx, torch.where(valid, pos, T), "amin", include_self=True)
        else:
            fill = torch.full((B, n), -1, dtype=torch.long)
            where = fill.scatter_reduce(1, idx, torch.where(valid, pos, -1), "amax", include_self=True)
        out = vals.gather(1, where.clamp(0, T - 1))
        return torch.where(present, out, 0), present
    big = torch.finfo(vals.dtype).max
    sentinel = -big if reduce == "max" else big
    fill = torch.full((B, n), sentinel, dtype=vals.dtype)
    out = fill.scatter_reduce(1, idx, torch.where(valid, vals, sentinel),
                              "amax" if reduce == "max" else "amin", include_self=True)
    return torch.where(present, out, 0), present


def segment_broadcast(ids: torch.Tensor, seg_values: torch.Tensor) -> torch.Tensor:
    """Give every position the value of its segment: (B, N) -> (B, T); 0 where ids == -1."""
    out = seg_values.gather(1, ids.clamp(min=0))
    return torch.where(ids >= 0, out, torch.zeros((), dtype=out.dtype))


def default_labels(mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """The step / turn / agent labels a batch without them gets (``Rollouts`` builds them here):
    every generated position its own step, one turn, one agent; -1 off the mask. The turn and
    agent labels are one shared tensor (labels are never written in place), which saves
    B * T * 8 bytes on a large imported batch."""
    one = torch.where(mask, 0, -1)
    return {"step_ids": torch.where(mask, mask.long().cumsum(1) - 1, -1), "turn_ids": one, "agent_ids": one}


def last_generated(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last generated position of a (B, T) ``mask``, (B,) int64; -1 for a
    row with nothing generated. What follows it is padding; a record ends there."""
    # int32 positions: half the memory traffic of int64 on a (B, T) pass
    t = torch.arange(mask.shape[1], dtype=torch.int32)
    return torch.where(mask, t, torch.tensor(-1, dtype=torch.int32)).amax(1).long()


def _check_off_mask(name: str, ids: torch.Tensor, mask: torch.Tensor) -> None:
    """A label is >= 0 on a generated position and exactly -1 elsewhere."""
    wrong = torch.where(mask, ids < 0, ids != -1)
    if bool(wrong.any()):
        b, t = (int(i) for i in wrong.nonzero()[0])
        raise ValueError(f"{name}: must be >= 0 where mask is True and -1 elsewhere, got {int(ids[b, t])} "
                         f"at {(b, t)} (mask {bool(mask[b, t])})")


def _check_labels(name: str, ids: torch.Tensor, mask: torch.Tensor) -> None:
    """Step / turn labels: -1 off the mask, and 0, 1, 2, ... in order along a trajectory (each
    generated position keeps the previous label or takes the next one; masked gaps are skipped)."""
    _check_off_mask(name, ids, mask)
    # Carry the last seen label forward over masked gaps, then compare each label with it.
    running = torch.where(mask, ids, torch.full_like(ids, -1)).cummax(dim=1).values
    before = torch.cat([torch.full_like(ids[:, :1], -1), running[:, :-1]], 1)
    step = torch.where(mask, ids - before, 0)
    if bool((step < 0).any()):
        b, t = (int(i) for i in (step < 0).nonzero()[0])
        raise ValueError(f"{name}: labels must not decrease along a trajectory (at {(b, t)})")
    if bool((step > 1).any()):
        b, t = (int(i) for i in (step > 1).nonzero()[0])
        raise ValueError(f"{name}: labels must count 0, 1, 2, ... without gaps along a trajectory, got "
                         f"{int(ids[b, t])} after {int(before[b, t])} at {(b, t)}")


# --------------------------------------------------------------------------- Rollouts
@dataclass(eq=False)
class Rollouts:
    """A batch of B trajectories padded to length T. See the module docstring for conventions.

    Required: ``tokens`` (B, T) long, ``mask`` (B, T) bool, ``rewards`` (B, T) float.
    Optional labels default to: one group for the whole batch, every generated position its own
    step, one turn, one agent. Optional per-position data: ``logprobs``, ``entropies`` (of the
    sampling policy), ``states`` (tabular state index, used to look up exact truth).
    ``anchor_keys[b][k]`` is the observation key of step k of trajectory b (GiGPO anchors).
    ``text[b]`` lists the display string of every position of trajectory b (length T).
    ``truth`` may carry exact per-position quantities an environment knows (e.g. the positions
    that decide the outcome); it is never read by estimators, only by scoring and plots.
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor | None = None
    step_ids: torch.Tensor | None = None
    turn_ids: torch.Tensor | None = None
    agent_ids: torch.Tensor | None = None
    logprobs: torch.Tensor | None = None
    entropies: torch.Tensor | None = None
    states: torch.Tensor | None = None
    anchor_keys: list[list[Hashable]] | None = None
    text: list[list[str]] | None = None
    prompts: list[str] | None = None
    truth: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokens = as_tensor("tokens", self.tokens)
        if self.tokens.dim() != 2:
            raise ValueError(f"tokens: expected shape (B, T), got {tuple(self.tokens.shape)}")
        self.tokens = check_integer_tensor("tokens", self.tokens)
        B, T = self.tokens.shape
        if B == 0:
            raise ValueError("tokens: a Rollouts batch needs at least one trajectory")
        if T == 0:
            raise ValueError("tokens: a Rollouts batch needs at least one position (T = 0)")
        self.mask = as_tensor("mask", self.mask)
        check_shape("mask", self.mask, (B, T))
        given_float = None
        if self.mask.dtype != torch.bool:
            if bool(((self.mask != 0) & (self.mask != 1)).any()):
                raise ValueError("mask: must be boolean (or 0/1)")
            given_float = self.mask if self.mask.is_floating_point() else None
            self.mask = self.mask.bool()
        # mask_as's cache; a float 0/1 mask as given (verl's response_mask) is kept, copied.
        self._mask_as = {}
        if given_float is not None:
            self._mask_as[given_float.dtype] = (self.mask, self.mask._version, given_float.clone())
        if not bool(self.mask.any()):
            raise ValueError("mask: no generated position in the batch (mask is all False), so there is "
                             "nothing to give credit to; keep at least one generated position")
        check_in_range("tokens", self.tokens, low=0, where=self.mask, what="token ids on generated positions")
        self.rewards = as_tensor("rewards", self.rewards)
        if not self.rewards.is_floating_point():
            self.rewards = self.rewards.to(torch.float32)
        check_shape("rewards", self.rewards, (B, T))
        check_finite("rewards", self.rewards)
        off = (self.rewards != 0) & ~self.mask
        if bool(off.any()):
            raise ValueError(f"rewards: non-zero reward at a position where mask is False "
                             f"{tuple(int(i) for i in off.nonzero()[0])}; put it on a generated position")

        if self.group_ids is None:
            self.group_ids = torch.zeros(B, dtype=torch.long)
        self.group_ids = check_integer_tensor("group_ids", as_tensor("group_ids", self.group_ids))
        check_shape("group_ids", self.group_ids, (B,))
        check_in_range("group_ids", self.group_ids, low=0, what="group ids (one per prompt / task)")

        # Labels built here from the mask are valid by construction: only given ones are checked
        # (the checks are several passes over (B, T), the bulk of building a large batch).
        built = {name for name in ("step_ids", "turn_ids", "agent_ids") if getattr(self, name) is None}
        if built:
            defaults = default_labels(self.mask)
            for name in built:
                setattr(self, name, defaults[name])
        for name in ("step_ids", "turn_ids"):
            if name in built:
                continue
            ids = check_integer_tensor(name, as_tensor(name, getattr(self, name)))
            check_shape(name, ids, (B, T))
            _check_labels(name, ids, self.mask)
            setattr(self, name, ids.long())
        if "agent_ids" not in built:
            ids = check_integer_tensor("agent_ids", as_tensor("agent_ids", self.agent_ids))
            check_shape("agent_ids", ids, (B, T))
            _check_off_mask("agent_ids", ids, self.mask)
            self.agent_ids = ids  # agents may alternate, so no monotonicity

        for name in ("logprobs", "entropies"):
            x = getattr(self, name)
            if x is not None:
                x = as_tensor(name, x)
                if not x.is_floating_point():
                    raise TypeError(f"{name}: expected a float tensor, got dtype {x.dtype}")
                check_shape(name, x, (B, T))
                check_finite(name, torch.where(self.mask, x, 0))
                # a log-probability is <= 0 and an entropy >= 0 (tolerance: float32 round-off)
                if name == "logprobs":
                    check_in_range(name, x, high=ROUND_OFF, where=self.mask,
                                   what="log-probabilities (log_softmax, not probabilities or logits)")
                else:
                    check_in_range(name, x, low=-ROUND_OFF, where=self.mask, what="entropies")
                setattr(self, name, x)
        if self.states is not None:
            self.states = check_integer_tensor("states", as_tensor("states", self.states))
            check_shape("states", self.states, (B, T))
            check_in_range("states", self.states, low=0, where=self.mask, what="state indices on generated positions")
        if self.anchor_keys is not None:
            if len(self.anchor_keys) != B:
                raise ValueError(f"anchor_keys: expected one list per trajectory ({B}), got {len(self.anchor_keys)}")
            n_steps = self.n_steps
            for b, keys in enumerate(self.anchor_keys):
                if len(keys) != int(n_steps[b]):
                    raise ValueError(f"anchor_keys: trajectory {b} has {int(n_steps[b])} steps "
                                     f"but {len(keys)} keys")
        if self.text is not None:
            if len(self.text) != B or any(len(row) != T for row in self.text):
                raise ValueError(f"text: expected {B} lists of {T} strings")
        if self.prompts is not None and (isinstance(self.prompts, str) or len(self.prompts) != B):
            got = "one string" if isinstance(self.prompts, str) else f"{len(self.prompts)} items"
            raise ValueError(f"prompts: expected a list of {B} strings (one per trajectory), got {got}")
        for name in ("truth", "info"):
            if not isinstance(getattr(self, name), dict):
                raise TypeError(f"{name}: expected a dict, got {type(getattr(self, name)).__name__}")

    # ---- sizes
    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]

    @property
    def horizon(self) -> int:
        return self.tokens.shape[1]

    def __len__(self) -> int:
        return self.batch_size

    @property
    def lengths(self) -> torch.Tensor:
        """Number of generated positions per trajectory, (B,)."""
        return self.mask.sum(1)

    def mask_as(self, dtype: torch.dtype) -> torch.Tensor:
        """The mask as 0/1 values of ``dtype``, (B, T), made once per dtype and kept.

        Why kept: converting a bool (B, T) tensor costs more than the arithmetic it feeds (1024 x
        512 on one thread: 0.29 ms to convert, 0.05 ms to multiply by the result). The copy is
        remade if ``mask`` is replaced or changed in place.
        """
        cache = self.__dict__.setdefault("_mask_as", {})
        hit = cache.get(dtype)
        if hit is not None and hit[0] is self.mask and hit[1] == self.mask._version:
            return hit[2]
        as_dtype = self.mask.to(dtype)
        cache[dtype] = (self.mask, self.mask._version, as_dtype)
        return as_dtype

    @property
    def n_steps(self) -> torch.Tensor:
        return self.step_ids.max(1).values + 1

    @property
    def n_turns(self) -> torch.Tensor:
        return self.turn_ids.max(1).values + 1

    # ---- rewards
    @property
    def scores(self) -> torch.Tensor:
        """Undiscounted total reward per trajectory, (B,) — the 'outcome' that episode-level methods use."""
        return self.rewards.sum(1)

    def returns(self, gamma: float = 1.0) -> torch.Tensor:
        """Reward-to-go G_t = r_t + gamma * G_{t'} where t' is the next generated position.

        Positions off the mask carry the running return through unchanged (tool-output tokens
        do not discount), matching verl's handling of masked positions. Shape (B, T), 0 off-mask.
        """
        gamma = check_number("gamma", gamma, low=0.0, high=1.0)
        return discounted_returns(self.rewards, self.mask, gamma)

    # ---- coarse views
    def ids_for(self, level: str) -> torch.Tensor:
        """Position labels for ``level`` ('token', 'step', 'turn', 'agent', 'episode')."""
        check_choice("level", level, LEVELS)
        if level == "token":
            return torch.where(self.mask, torch.arange(self.horizon).expand_as(self.mask), -1)
        if level == "episode":
            return torch.where(self.mask, 0, -1)
        return {"step": self.step_ids, "turn": self.turn_ids, "agent": self.agent_ids}[level]

    def view(self, values: torch.Tensor, level: str, reduce: str = "sum") -> tuple[torch.Tensor, torch.Tensor]:
        """Reduce per-position ``values`` (B, T) to ``level``: returns (B, N) values and presence mask."""
        values = as_tensor("values", values)
        check_shape("values", values, (self.batch_size, self.horizon))
        check_finite("values", torch.where(self.mask, values, torch.zeros((), dtype=values.dtype)))
        return segment_reduce(self.ids_for(level), values, reduce)

    def broadcast(self, values: torch.Tensor, level: str) -> torch.Tensor:
        """Spread (B, N) values at ``level`` back onto positions, (B, T), 0 off-mask."""
        return segment_broadcast(self.ids_for(level), self._level_values("values", values, level))

    def _level_values(self, name: str, values: Any, level: str) -> torch.Tensor:
        """``values`` as (B, N) for ``level``, N at least the batch's number of segments there
        (an episode-level (B,) becomes (B, 1)); errors name ``name``."""
        values = as_tensor(name, values)
        if level == "episode" and values.dim() == 1:
            values = values[:, None]
        if level == "episode":
            n = 1  # a batch has a generated position (checked at construction): one episode segment
        elif level == "token":
            n = int(self.mask.any(0).nonzero().max()) + 1  # the last column anything was generated at
        else:
            n = int(self.ids_for(level).max()) + 1
        check_shape(name, values, (self.batch_size, None))
        if values.shape[1] < n:
            raise ValueError(f"{name}: {level}-level values need at least {n} columns (this batch's largest "
                             f"{level} count), got shape {tuple(values.shape)}")
        return values

    # ---- batch manipulation
    def select(self, index: Sequence[int] | torch.Tensor) -> "Rollouts":
        """A new Rollouts holding the trajectories at ``index`` (in that order).

        Entries of ``truth`` and ``info`` follow the rows too: a tensor whose first dimension is
        the batch size, or a list with one item per row, is indexed like the fields. Batch-level
        entries (scalars, strings, tuples, 0-d tensors) are kept. A tensor with some other first
        dimension (e.g. truth for only the first R rows) cannot be matched to the selected rows
        and is dropped rather than left silently misaligned.
        """
        idx = check_integer_tensor("index", as_tensor("index", list(index) if isinstance(index, range) else index))
        if idx.dim() != 1 or idx.numel() == 0:
            raise ValueError(f"index: expected a non-empty 1-D sequence of row numbers, got shape {tuple(idx.shape)}")
        if int(idx.min()) < -self.batch_size or int(idx.max()) >= self.batch_size:
            raise ValueError(f"index: row numbers must be in [0, {self.batch_size}), got {idx.tolist()}")
        B = self.batch_size

        def rows(v):
            if isinstance(v, torch.Tensor):
                return v[idx]
            return [v[int(i)] for i in idx]

        def per_row(mapping: dict) -> dict:
            out = {}
            for key, v in mapping.items():
                if isinstance(v, torch.Tensor) and v.dim() >= 1:
                    if v.shape[0] == B:
                        out[key] = v[idx]
                elif isinstance(v, list) and len(v) == B:
                    out[key] = rows(v)
                else:
                    out[key] = v
            return out

        kw = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (torch.Tensor, list)):
                kw[f.name] = rows(v)
            elif isinstance(v, dict):
                kw[f.name] = per_row(v)
            else:
                kw[f.name] = v
        return Rollouts(**kw)

    def split(self, n_batches: int) -> list["Rollouts"]:
        """Cut into ``n_batches`` equal consecutive batches (B must divide evenly)."""
        n_batches = check_int("n_batches", n_batches, low=1)
        if self.batch_size % n_batches:
            raise ValueError(f"n_batches: {n_batches} does not divide the batch size {self.batch_size}")
        size = self.batch_size // n_batches
        return [self.select(range(i * size, (i + 1) * size)) for i in range(n_batches)]

    def with_(self, **changes: Any) -> "Rollouts":
        """A copy with some fields replaced (validated again)."""
        known = {f.name for f in fields(self)}
        for name in changes:
            if name not in known:
                raise TypeError(f"{name}: not a Rollouts field; the fields are {sorted(known)}")
        return replace(self, **changes)


def check_rollouts(rollouts: Any, source: str | None = None) -> Rollouts:
    """Require a ``Rollouts`` (the one rule every entry point that takes a batch applies);
    ``source`` says where such a batch comes from, for the message."""
    if not isinstance(rollouts, Rollouts):
        where = f" from {source}" if source else ""
        raise TypeError(f"rollouts: expected a Rollouts{where}, got {type(rollouts).__name__}")
    return rollouts


# --------------------------------------------------------------------------- Credit
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
        check_shape("token", token, tuple(rollouts.mask.shape))
        token = torch.where(rollouts.mask, token, torch.zeros((), dtype=token.dtype))
        return cls(token=token, level="token", values=token, present=rollouts.mask.clone(),
                   method=method, cost=cost or Cost(), info=dict(info))

    def at(self, rollouts: Rollouts, level: str, reduce: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """This credit viewed at another level (e.g. token credit averaged per step)."""
        return rollouts.view(self.token, level, reduce)
