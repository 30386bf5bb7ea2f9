"""One rollout of the arithmetic task read step by step: the table notebooks 02-04 print next to
their heatmaps (a step's text, the verifier's verdict, values and credits per step)."""
from __future__ import annotations

import pandas as pd
import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts


def step_table(rollouts: Rollouts, row: int, values: dict[str, torch.Tensor],
               advantages: dict[str, torch.Tensor]) -> pd.DataFrame:
    """One rollout's steps as a table: step text, the verifier's verdict, step-level ``values``
    ((B, S) tensors, e.g. V before each step) and token-level ``advantages`` ((B, T), shown as
    the mean over each step's tokens)."""
    row = check_int("row", row, low=0, high=rollouts.batch_size - 1)
    present = rollouts.view(rollouts.rewards, "step", "sum")[1][row]
    steps = present.nonzero().flatten().tolist()
    text = rollouts.text[row] if rollouts.text is not None else [str(t) for t in rollouts.tokens[row].tolist()]
    out = {"step": steps,
           "text": ["".join(tok for tok, s, m in zip(text, rollouts.step_ids[row].tolist(), rollouts.mask[row].tolist())
                            if m and s == i) for i in steps]}
    if "step_correct" in rollouts.truth:
        out["correct"] = [bool(rollouts.truth["step_correct"][row, i]) for i in steps]
    for name, v in values.items():
        out[name] = [float(v[row, i]) for i in steps]
    for name, a in advantages.items():
        per_step = rollouts.view(a, "step", "mean")[0][row]
        out[name] = [float(per_step[i]) for i in steps]
    return pd.DataFrame(out)
