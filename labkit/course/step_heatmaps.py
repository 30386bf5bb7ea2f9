"""The heatmap the reasoning notebooks (02, 03, 04 and 09) share: per-token credit of several
methods on the tiny LM's reference rollouts, side by side, with each rollout's first wrong step
outlined (``wrong_step_heatmaps``).

It lives here rather than in a lesson because four lessons draw it and a lesson is a leaf: one
helper keeps the rule for what is outlined (``labkit.scoring.first_error_positions``) and what is
drawn (the rollouts' mask, no padding) the same in every notebook.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import torch

from labkit import viz
from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts
from labkit.scoring import first_error_positions

__all__ = ["wrong_step_heatmaps"]


def wrong_step_heatmaps(rollouts: Rollouts, panels: Mapping[str, torch.Tensor], rows: Iterable[int],
                        **kw: Any):
    """``viz.compare_heatmaps`` of ``panels`` on ``rows`` of ``rollouts``, the first wrong steps outlined.

    Each panel is (len(rows), T), row i being rollout ``rows[i]``. The cells show the rollouts'
    text; their padding is not drawn (the rollouts' mask); each row is labelled ``#b R=outcome``;
    the outlined cells are the rollout's first wrong step (``scoring.first_error_positions``), so a
    rollout whose every step is right has none. Other keyword arguments go to compare_heatmaps.
    """
    if rollouts.text is None:
        raise ValueError("rollouts: has no text to show in the cells")
    rows = [check_int("rows", b, low=0, high=len(rollouts) - 1) for b in rows]
    if not rows:
        raise ValueError("rows: need at least one rollout to show")
    return viz.compare_heatmaps(panels, [rollouts.text[b] for b in rows], rollouts.mask[rows],
                                highlight=first_error_positions(rollouts)[rows],
                                row_labels=[f"#{b} R={rollouts.scores[b]:.0f}" for b in rows], **kw)
