"""Labels on positions and the two operations over them: steps, turns and agents are integer
labels on generated positions (0, 1, 2, ... in order of appearance, -1 elsewhere), so a coarse
view of per-position values is a reduction over a label and a broadcast back.

``LEVELS`` names the granularities credit can live at; ``segment_reduce`` / ``segment_broadcast``
move values between positions and segments; ``default_labels`` and ``last_generated`` are the two
label rules a batch without labels (or a record writer) needs.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_choice, check_shape

LEVELS = ("token", "step", "turn", "agent", "episode")
REDUCTIONS = ("sum", "mean", "first", "last", "max", "min")


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
