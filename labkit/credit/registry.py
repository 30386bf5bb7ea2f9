"""Estimators registered by name, verl-style: every estimator is ``fn(rollouts, **kw) -> Credit``."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from labkit.core.rollouts import Credit, Rollouts, check_rollouts

Estimator = Callable[..., Credit]
ESTIMATORS: dict[str, Estimator] = {}


def register(name: str) -> Callable[[Estimator], Estimator]:
    """Register ``fn(rollouts, **options) -> Credit`` as ``name``. The registered function checks
    that ``rollouts`` is a ``Rollouts`` (a TypeError naming ``rollouts`` otherwise): the batch
    itself was validated when it was built, its options are the estimator's own business."""
    def wrap(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"name: estimator {name!r} is registered twice")

        params = inspect.signature(fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        options = sorted(k for k, p in params.items() if k != "rollouts" and p.kind is not inspect.Parameter.VAR_KEYWORD)

        @functools.wraps(fn)
        def checked(rollouts, *args, **kwargs):
            check_rollouts(rollouts, "an env's sample(), or built with labkit.core.rollouts.Rollouts")
            unknown = [] if takes_any else [k for k in kwargs if k not in params]
            if unknown:
                raise TypeError(f"{unknown[0]}: {name} has no option {unknown[0]!r}; its options are {options}")
            return fn(rollouts, *args, **kwargs)

        ESTIMATORS[name] = checked
        checked.estimator_name = name
        return checked
    return wrap


def get_estimator(name: str) -> Estimator:
    if not isinstance(name, str):
        raise TypeError(f"name: expected an estimator's registered name (a str), got {type(name).__name__}")
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"name: no estimator {name!r}; known: {sorted(ESTIMATORS)}") from None


def estimate(name: str, rollouts: Rollouts, **kwargs) -> Credit:
    """Run the estimator registered as ``name``."""
    return get_estimator(name)(rollouts, **kwargs)
