"""Random inputs several exercises draw their cases from, each drawn the one way from the generator.

Every draw goes through the exercise's seeded ``torch.Generator``, so a seed gives the same cases
on every machine, and the first random case a notebook's template fails on stays the one printed.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.grader import F64

__all__ = ["rand", "randint", "random_gamma", "random_prefix_mask", "random_group_ids", "group_members"]


def rand(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Uniform float64 numbers in [0, 1)."""
    return torch.rand(*shape, generator=gen, dtype=F64)


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def random_gamma(gen: torch.Generator) -> float:
    """A discount in [0.5, 1], rounded to two digits so the failing case reads well."""
    return round(0.5 + 0.5 * float(rand(gen, 1)), 2)


def random_prefix_mask(gen: torch.Generator, rows: tuple[int, int], cols: tuple[int, int], shortest: int = 2,
                       *, first_full: bool = False, tool_output: bool = False) -> torch.Tensor:
    """A padded batch's (B, T) bool mask, B drawn from ``rows`` and T from ``cols`` (each an
    inclusive (low, high)): every row a prefix of ``shortest`` to T True entries, then padding.

    ``first_full``: row 0 is never short, so the batch spans its whole table. ``tool_output``: a
    prefix of 4 or more holds one False inside (a tool's answer between generated tokens), where a
    per-token method must neither give credit nor take a discount step."""
    B, T = randint(gen, *rows), randint(gen, *cols)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        n = randint(gen, T if first_full and b == 0 else shortest, T)
        mask[b, :n] = True
        if tool_output and n >= 4:
            mask[b, randint(gen, 1, n - 2)] = False
    return mask


def random_group_ids(gen: torch.Generator, min_groups: int, max_groups: int) -> torch.Tensor:
    """Group ids 0, 1, ... for ``min_groups`` to ``max_groups`` groups of 2 to 5 members each,
    sorted by group (a caller that wants them interleaved shuffles them)."""
    sizes = [randint(gen, 2, 5) for _ in range(randint(gen, min_groups, max_groups))]
    return torch.cat([torch.full((n,), g, dtype=torch.long) for g, n in enumerate(sizes)])


def group_members(group_ids: torch.Tensor) -> list[torch.Tensor]:
    """The positions of each group's members, one index tensor per group id (in id order)."""
    return [torch.nonzero(group_ids == g).flatten() for g in torch.unique(group_ids)]
