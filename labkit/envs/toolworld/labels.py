"""Display labels for ToolWorld turns (heatmap cells)."""
from __future__ import annotations

from labkit.core.rollouts import Rollouts

SHORT_ACTIONS = {"think": "think", "search": "search", "run tests": "tests", "submit": "submit"}


def turn_labels(env, rollouts: Rollouts) -> list[list[str]]:
    """Short action names per turn ("search", "open3", "edit1", "tests", "submit", "think")
    for heatmap cells; padding gets "". The full turn text stays in ``rollouts.text``."""
    names = [SHORT_ACTIONS.get(a, a.replace(" ", "")) for a in env.action_names]
    return [[names[a] if m else "" for a, m in zip(tok, mk)]
            for tok, mk in zip(rollouts.tokens.tolist(), rollouts.mask.tolist())]
