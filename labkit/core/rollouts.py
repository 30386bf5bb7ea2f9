"""``Rollouts``: a batch of trajectories at every granularity at once, the one data structure every
part of the lab passes around (``labkit.core.credit`` holds what estimators return).

Positions (tokens) are the unit of storage, and steps, turns and agents are integer labels on
positions (``labkit.core.segments``), so a coarse view is a reduction over a label and a broadcast
back.

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
>= 0 where generated, shapes agree, no field holds complex numbers, and the rewards are small
enough for their dtype that the batch's sums cannot overflow (T times the total |reward| at most
the dtype's largest value). The empty-batch rule: a batch needs at least one trajectory,
one position and **one generated position**; an empty batch is refused here with a message, so
no estimator has to handle it. (A batch may still hold rows with nothing generated: they get 0.)
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Hashable, Sequence

import torch

from labkit.core.checks import (ROUND_OFF, as_tensor, check_choice, check_finite, check_in_range, check_int,
                                check_integer_tensor, check_number, check_shape, selection_mask)
from labkit.core.segments import LEVELS, default_labels, segment_broadcast, segment_reduce
from labkit.core.stats import discounted_returns


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


def check_real(name: str, tensor: torch.Tensor) -> None:
    """Refuse a complex tensor by name: a reward, log-probability or credit is a real number, and
    casting would drop the imaginary part with only a warning."""
    if tensor.is_complex():
        raise TypeError(f"{name}: expected real numbers, got complex dtype {tensor.dtype}")


def _check_reward_magnitude(rewards: torch.Tensor) -> None:
    """Rewards small enough that the sums estimators take stay finite in their dtype.

    A return sums the rewards after a position, and the batch statistics built on returns and
    scores (REINFORCE++'s whitening, OPO's length-weighted means) add up to T times the batch's
    total |reward|, in the rewards' dtype. Past the dtype's largest value that overflows to inf
    and then NaN deep inside an estimator (float32 rewards near 3.4e38, say), so it is refused
    here, where the dtype and the batch are known, naming the limit."""
    B, T = rewards.shape
    largest = torch.finfo(rewards.dtype).max
    # one reduction settles every ordinary batch: B * T entries below largest / (B * T * T)
    if float(rewards.abs().amax()) <= largest / (B * T * T):
        return
    total = float(rewards.abs().sum(dtype=torch.float64)) * T
    if total > largest:
        raise ValueError(f"rewards: too large for {rewards.dtype}: the batch's total |reward| times T = {T} is "
                         f"{total:.3g}, above {largest:.3g} (the largest {rewards.dtype}), so returns and "
                         f"batch sums would overflow to inf; keep it at most {largest:.3g}: rescale the "
                         f"rewards or pass them as float64")


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
        check_real("mask", self.mask)
        check_shape("mask", self.mask, (B, T))
        given_float = self.mask if self.mask.is_floating_point() else None
        self.mask = selection_mask("mask", self.mask)
        # mask_as's cache; a float 0/1 mask as given (verl's response_mask) is kept, copied.
        self._mask_as = {}
        if given_float is not None:
            self._mask_as[given_float.dtype] = (self.mask, self.mask._version, given_float.clone())
        if not bool(self.mask.any()):
            raise ValueError("mask: no generated position in the batch (mask is all False), so there is "
                             "nothing to give credit to; keep at least one generated position")
        check_in_range("tokens", self.tokens, low=0, where=self.mask, what="token ids on generated positions")
        self.rewards = as_tensor("rewards", self.rewards)
        check_real("rewards", self.rewards)
        if not self.rewards.is_floating_point():
            self.rewards = self.rewards.to(torch.float32)
        check_shape("rewards", self.rewards, (B, T))
        check_finite("rewards", self.rewards)
        _check_reward_magnitude(self.rewards)
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
                check_real(name, x)
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
        """Reward-to-go G_t = r_t + gamma * G_{t'} where t' is the next generated position, (B, T),
        0 off the mask.

        Tool output inside a response (positions off the mask) is skipped: the running return
        crosses it unchanged and gamma applies once between the generated positions on either
        side (the "carry" convention, the lab's, stated in ``labkit.credit.tool_spans``). verl
        0.9.1's REINFORCE++ (``compute_reinforce_plus_plus_outcome_advantage``) computes the same
        returns on generated positions; its GAE, ReMax and multi-turn optimal token baseline carry
        across tool output too (that module says what each does there).
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
        check_real("values", values)
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
        check_real(name, values)
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
