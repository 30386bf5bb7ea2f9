"""Input checks shared by labkit's public functions.

Every check raises ValueError (or TypeError for a wrong type) whose message starts with the
offending argument's name, so a student who passes a bad slider value or a mis-shaped tensor
reads what to fix instead of a NaN three cells later or a traceback from inside torch.
"""
from __future__ import annotations

import math
import os
from typing import Any

import torch

#: The variable that makes the notebooks' checks strict: banded numbers out of their band, and
#: charts a student cannot read, fail the cell instead of printing a note (the tests set it to 1).
STRICT_ENV = "LABKIT_STRICT_CHECKS"


def strict_checks_enabled() -> bool:
    """Whether notebook checks are strict (``$LABKIT_STRICT_CHECKS`` is "1", as the tests set it)."""
    return os.environ.get(STRICT_ENV) == "1"


#: How far a float32 log-probability may sit above 0 (or an entropy below 0) by round-off.
ROUND_OFF = 1e-5


def as_tensor(name: str, value: Any, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Turn ``value`` into a tensor (no copy when it already is one), naming ``name`` on failure."""
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.to(dtype)
    try:
        return torch.as_tensor(value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"{name}: cannot be read as a tensor ({err})") from None


def check_shape(name: str, tensor: torch.Tensor, shape: tuple[int | None, ...]) -> None:
    """Require ``tensor.shape`` to match ``shape`` (``None`` matches any size)."""
    ok = tensor.dim() == len(shape) and all(s is None or s == t for s, t in zip(shape, tensor.shape))
    if not ok:
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name}: expected shape {want}, got {tuple(tensor.shape)}")


def resolve_input(name: str, value: Any, rollouts: Any, *, expected: str) -> tuple[Any, bool]:
    """An estimator's explicit input from a model, judge or verifier: a tensor, or a callable
    ``rollouts -> tensor`` that is called here. Returns ``(value, called)``; ``called`` says a
    model ran, which the estimator's cost counts. ``None`` raises a ValueError naming ``name``
    and saying what is ``expected``. (The one rule for "tensor or callable" inputs.)"""
    if value is None:
        raise ValueError(f"{name}: required, {expected}")
    called = callable(value) and not isinstance(value, torch.Tensor)
    return (value(rollouts) if called else value), called


def selection_mask(name: str, value: Any) -> torch.Tensor:
    """``value`` as a boolean tensor of positions: bool as it is, or numbers that are all 0 or 1
    (verl's float response mask); any other number is refused by name, because a mask selects
    positions and does not weight them. (The one rule for a mask an argument hands in.)"""
    m = as_tensor(name, value)
    if m.dtype != torch.bool:
        if bool(((m != 0) & (m != 1)).any()):
            raise ValueError(f"{name}: must be boolean (or 0/1): it selects positions, it does not weight them")
        m = m.bool()
    return m


def per_position(name: str, value: Any, mask: torch.Tensor) -> torch.Tensor:
    """An estimator's per-position input (scores, contributions, log-probabilities): a tensor of
    ``mask``'s shape as float64, set to 0 off the mask and required finite on it, with errors
    naming ``name``."""
    x = as_tensor(name, value)
    check_shape(name, x, tuple(mask.shape))
    x = torch.where(mask, x.to(torch.float64), torch.zeros((), dtype=torch.float64))
    check_finite(name, x)
    return x


def log_probabilities(name: str, value: Any, mask: torch.Tensor) -> torch.Tensor:
    """A per-position log-probability input (``per_position``) that is also <= 0 on the mask (up
    to ``ROUND_OFF``): probabilities or logits passed by mistake are refused by name."""
    x = per_position(name, value, mask)
    check_in_range(name, x, high=ROUND_OFF, where=mask, what="log-probabilities (log_softmax, not probabilities or logits)")
    return x


def check_finite(name: str, tensor: torch.Tensor) -> None:
    """Reject NaN and +-inf, reporting the first bad index."""
    if tensor.is_floating_point():
        # A finite sum proves every entry finite (a NaN or inf poisons it) at the cost of one
        # reduction; only a non-finite sum (a bad entry, or an overflow) looks entry by entry.
        if tensor.numel() and bool(torch.isfinite(tensor.sum())):
            return
        bad = ~torch.isfinite(tensor)
        if bool(bad.any()):
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(f"{name}: contains a non-finite value ({tensor[where].item()}) at index {where}")


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """Require a finite real number inside [low, high] (or an open end); return it as float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not (
            isinstance(value, torch.Tensor) and value.numel() == 1):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name}: must be {'>' if low_open else '>='} {low}, got {x}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ValueError(f"{name}: must be {'<' if high_open else '<='} {high}, got {x}")
    return x


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Require an integer (bools refused) inside [low, high]; return it as int."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name}: expected an integer, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name}: must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name}: must be <= {high}, got {value}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    """Require True or False (a switch): "no", 2 or None would otherwise be read by truthiness."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        value = bool(value)
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return value


def check_in_range(name: str, tensor: torch.Tensor, *, low: float | None = None, high: float | None = None,
                   where: torch.Tensor | None = None, what: str = "values") -> None:
    """Require every entry of ``tensor`` (those with ``where`` True, if given) to lie in [low, high],
    reporting the first offending index, e.g. a probability of 5 or a log-probability above 0."""
    bad = torch.zeros_like(tensor, dtype=torch.bool)
    if low is not None:
        bad |= tensor < low
    if high is not None:
        bad |= tensor > high
    if where is not None:
        bad &= where
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        span = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise ValueError(f"{name}: {what} must lie in {span}, got {float(tensor[idx]):g} at index {idx}")


def check_integer_tensor(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """Require an integer tensor (float, bool or complex refused: a float label would be
    truncated silently, e.g. group id 0.7 -> 0); return it as int64."""
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise TypeError(f"{name}: expected integers (an int tensor or a list of ints), got dtype {tensor.dtype}")
    return tensor.long()


def check_choice(name: str, value: Any, allowed: tuple) -> Any:
    """Require ``value`` to be one of ``allowed``; return it. A non-string where only names are
    allowed (a number, None or a tensor where a setting name is expected) is a TypeError, an
    unknown choice a ValueError; both messages start with ``name`` and list the choices."""
    allowed = tuple(allowed)
    if isinstance(value, torch.Tensor) or (
            allowed and all(isinstance(a, str) for a in allowed) and not isinstance(value, str)):
        raise TypeError(f"{name}: expected one of {allowed} (a name), got {value!r} ({type(value).__name__})")
    if value not in allowed:
        raise ValueError(f"{name}: must be one of {allowed}, got {value!r}")
    return value


def check_has(name: str, obj: Any, methods: tuple[str, ...], expected: str) -> Any:
    """Require an object with every attribute in ``methods`` (None refused); return it. The
    TypeError names ``name``, says what is ``expected`` and what came instead, so a missing
    policy or learner is refused where it enters, not as an AttributeError deep inside a loop."""
    missing = [m for m in methods if not hasattr(obj, m)]
    if obj is None or missing:
        got = "None" if obj is None else f"{type(obj).__name__} (it has no {', '.join(missing)})"
        raise TypeError(f"{name}: expected {expected}, got {got}")
    return obj


#: What every policy that labkit's worlds and loops take provides: action probabilities per state.
POLICY_METHODS = ("probs",)
#: What the policy-gradient loop needs from a learner (``labkit.core.protocols.Learner``).
LEARNER_METHODS = ("parameters", "collect", "logprobs", "evaluate")


def check_policy(name: str, policy: Any) -> Any:
    """Require a policy (an object with ``probs()``, e.g. a TabularSoftmaxPolicy); return it."""
    return check_has(name, policy, POLICY_METHODS, "a policy with probs() (e.g. TabularSoftmaxPolicy)")


def check_learner(name: str, learner: Any) -> Any:
    """Require a learner (``parameters``, ``collect``, ``logprobs``, ``evaluate``, e.g. a
    ChainLearner); return it."""
    return check_has(name, learner, LEARNER_METHODS,
                     "a learner with parameters(), collect(), logprobs() and evaluate() (e.g. ChainLearner)")


def trajectory_totals(name: str, value: Any, default: torch.Tensor) -> torch.Tensor:
    """One total per trajectory as float64 (B,): ``default`` (e.g. the outcome scores) when
    ``value`` is None, else ``value`` checked to be a finite (B,) tensor, B = ``default``'s length;
    errors name ``name``. (The one rule for an estimator's optional per-trajectory total.)"""
    if value is None:
        return default.to(torch.float64)
    x = as_tensor(name, value).to(torch.float64)
    check_shape(name, x, (default.shape[0],))
    check_finite(name, x)
    return x


#: How far a row of a probability table may sum from 1: a float32 softmax row sums to 1 within
#: about 1e-7, so a row off by more than this is not a distribution (unnormalised weights,
#: logits or a table of another shape read row-wise).
PROBABILITY_ROW_TOL = 1e-6


def check_probability_table(name: str, value: Any, *, shape: tuple[int | None, ...] | None = None,
                            tol: float = PROBABILITY_ROW_TOL) -> torch.Tensor:
    """A table of probability distributions, one per row (e.g. a policy table pi of shape
    (n_obs, n_actions)), returned as float64. Refused with an error naming ``name`` unless it
    is a real 2-D tensor (or of ``shape``), finite, non-negative and every row sums to 1 within
    ``tol`` (``PROBABILITY_ROW_TOL`` = 1e-6). (The one rule for a probability table an argument
    hands in.)"""
    x = as_tensor(name, value)
    if x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name}: expected a real table of probabilities, got dtype {x.dtype}")
    x = x.to(torch.float64)
    if shape is not None:
        check_shape(name, x, shape)
    elif x.dim() != 2:
        raise ValueError(f"{name}: expected a 2-D table of probabilities (one distribution per row), "
                         f"got shape {tuple(x.shape)}")
    d = x.detach()  # checked without the graph; the table itself is returned as given (float64)
    check_finite(name, d)
    check_in_range(name, d, low=0.0, what="probabilities")
    sums = d.sum(-1)
    off = (sums - 1).abs() > tol
    if bool(off.any()):
        row = tuple(int(i) for i in off.nonzero()[0])
        raise ValueError(f"{name}: each row must be a distribution summing to 1 (within {tol:g}); "
                         f"row {row[0] if len(row) == 1 else row} sums to {float(sums[row]):.6g}")
    return x


def check_ids_in_range(name: str, ids: torch.Tensor, size: int, *, where: torch.Tensor | None = None,
                       what: str = "ids", owner: str = "this table") -> None:
    """Require integer ids (those with ``where`` True, if given) to lie in [0, ``size``): an id
    out of range would index another object's table, and clamping it reads a wrong entry
    silently. The error names ``name`` and says ``what`` is out of range for ``owner``."""
    bad = (ids < 0) | (ids >= size)
    if where is not None:
        bad &= where
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}: {what} out of range for {owner} (size {size}): got {int(ids[idx])} "
                         f"at index {idx}")


def check_pairing(name: str, recorded: Any, actual: Any, *, sides: tuple[str, str] = ("this truth", "the rollouts"),
                  hint: str = "", atol: float = 1e-6) -> None:
    """Require what an object recorded when it was built (a truth's world size, horizon, number
    of actions, policy table: the mapping ``recorded``) to equal the same quantities of what it
    is paired with (``actual``: a mapping, or an object whose attributes of those names are
    read; names it lacks are skipped). Numbers compare by equality, tensors by shape and
    within ``atol``. A ValueError naming ``name`` lists every mismatch (``sides`` names the two
    objects in the message), then ``hint`` (what to pass instead). (The one rule for "this
    truth belongs to these rollouts / this world".)"""
    if isinstance(actual, dict):
        other = actual
    else:
        other = {k: getattr(actual, k) for k in recorded if hasattr(actual, k)}
    gaps = []
    for key, want in recorded.items():
        if key not in other:
            continue
        got = other[key]
        if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
            a = as_tensor(f"{name}.{key}", want).to(torch.float64)
            b = as_tensor(f"{name}.{key}", got).to(torch.float64)
            if tuple(a.shape) != tuple(b.shape):
                gaps.append(f"{key} of shape {tuple(a.shape)} against {tuple(b.shape)}")
            elif a.numel() and not bool(((a - b).abs() <= atol).all()):
                gap = float((a - b).abs().nan_to_num(float("inf")).max())
                gaps.append(f"{key} differing by up to {gap:.3g} (more than {atol:g})")
        elif want != got:
            gaps.append(f"{key} {want!r} against {got!r}")
    if gaps:
        raise ValueError(f"{name}: {sides[0]} and {sides[1]} come from different worlds or policies "
                         f"({sides[0]} against {sides[1]}: {'; '.join(gaps)})" + (f"; {hint}" if hint else ""))


def check_turn_columns(name: str, rollouts: Any, max_turns: int, *, owner: str = "this world",
                       hint: str = "") -> None:
    """Turn-level rollouts (one generated position per turn, as a ToolWorld samples them) hold
    one column per possible turn: require their horizon to equal ``max_turns`` of the world or
    truth they are paired with (``owner``), else a ValueError naming ``name`` (``check_pairing``):
    a truth or replay of a world with another horizon reads values for a different number of
    turns left. Rollouts with several positions per turn (token views) are not checked here."""
    mask = rollouts.mask
    if not bool((mask.sum(1) == rollouts.n_turns).all()):
        return
    check_pairing(name, {"max_turns": int(max_turns)}, {"max_turns": int(mask.shape[1])},
                  sides=(owner, "the rollouts (one column per turn)"), hint=hint)
