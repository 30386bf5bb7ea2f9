"""Estimators registered by name, verl-style: every estimator is ``fn(rollouts, **kw) -> Credit``."""
from __future__ import annotations

from typing import Callable

from labkit.core.rollouts import Credit, Rollouts

Estimator = Callable[..., Credit]
ESTIMATORS: dict[str, Estimator] = {}


def register(name: str) -> Callable[[Estimator], Estimator]:
    def wrap(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"name: estimator {name!r} is registered twice")
        ESTIMATORS[name] = fn
        fn.estimator_name = name
        return fn
    return wrap


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"name: no estimator {name!r}; known: {sorted(ESTIMATORS)}") from None


def estimate(name: str, rollouts: Rollouts, **kwargs) -> Credit:
    """Run the estimator registered as ``name``."""
    return get_estimator(name)(rollouts, **kwargs)
