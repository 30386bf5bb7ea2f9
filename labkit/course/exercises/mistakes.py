"""Rule tests several exercises share: an answer that reproduces a known mistake, credit where the
mask says there is nothing to credit, a discounted return that breaks at gamma = 0.

A typical mistake is written once, as a ``variant`` function with the exercise's signature that
makes it on purpose; ``looks_like(variant)`` turns it into a rule test, so the hint that names the
mistake fires only on answers the mistake explains.
"""
from __future__ import annotations

from typing import Callable

import torch

from labkit.course.exercises.grader import F64, Case, Rule, close, copy_args

__all__ = ["looks_like", "any_of", "nonzero_where_false", "wrong", "OFF_MASK", "ZERO_DISCOUNT"]


def looks_like(variant: Callable[..., torch.Tensor], tol: float = 1e-5):
    """A rule test: the answer is wrong, and equals what ``variant`` (a known mistake) gives."""
    def broken(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
        if close(got, want, tol):
            return False
        alt = torch.as_tensor(variant(**copy_args(case)))
        alt = alt if alt.dtype == torch.bool else alt.to(F64)
        return alt.shape == got.shape and close(got, alt, tol)
    return broken


def any_of(*tests):
    """A rule test that is broken where any of ``tests`` is (one hint for a family of mistakes)."""
    return lambda case, got, want: any(t(case, got, want) for t in tests)


def nonzero_where_false(arg: str):
    """A rule test: the answer is not 0 (not False, for a selection) somewhere the case's bool
    argument ``arg`` is False, i.e. it credits padding, tool output or a turn never played."""
    def broken(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
        off = got[~case.args[arg].bool()]
        return bool(off.any()) if off.dtype == torch.bool else bool((off.abs() > 1e-9).any())
    return broken


def wrong(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
    """A rule test: the answer differs from the lab's (for a rule that names what a case is for)."""
    return not close(got, want, 1e-5)


#: for the exercises whose input marks the generated tokens with ``mask``
OFF_MASK = Rule("credit off the mask must be 0 (tool output and padding get no credit)", nonzero_where_false("mask"))

#: for the exercises that discount returns by ``gamma``, on their edge case tagged "gamma0"
ZERO_DISCOUNT = Rule("with gamma = 0 nothing is carried back: each step's return is its own reward (gamma ** 0 = 1, "
                     "gamma ** k = 0 after); a discount computed through log(gamma), or a division by gamma, "
                     "breaks there", wrong, frozenset({"gamma0"}))
