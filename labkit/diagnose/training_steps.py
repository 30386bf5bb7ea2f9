"""A run, not a batch: the checklist's quantities per training step, and where they drift.

A dump that spans training steps (the readers keep each trajectory's step in
``info['training_steps']``; :meth:`labkit.diagnose.tally.Tally.row_table` collects it) is
summarised step by step: the zero-variance share (trajectories in groups whose rewards are all
equal), generated length (median and the 10-90% range) and, when the generation cap is known,
the share that reached it, reward mean and the share with a non-zero reward (and each reward
function's mean), the tool-output share, and the framework's advantages (mean, std, share
exactly zero). Pooled, a run that drifts looks like one batch; per step, the drift shows.

Drift is judged between the run's first and last quarter of steps (at least one step each, so
one noisy step does not decide it): a quantity drifts when the two windows' means differ by at
least its :data:`DRIFT_RULES` threshold, and the step where it happens is the first whose value
is past halfway from the first window's mean to the last's. The thresholds are stated beside
each drift, so a reader can disagree with them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from labkit import viz
from labkit.core.checks import check_int

__all__ = ["Drift", "RunSteps", "run_steps", "step_charts", "DRIFT_RULES", "QUANTITIES"]

#: Per quantity: (kind, threshold). "share": an absolute change of the share (0.2 = 20 points);
#: "relative": a change of at least this fraction of the first window's value (lengths);
#: "spread": a change of at least this fraction of the run's range of total rewards.
DRIFT_RULES = {
    "zero_variance_share": ("share", 0.2),
    "length_median": ("relative", 0.25),
    "truncated_share": ("share", 0.1),
    "reward_mean": ("spread", 0.2),
    "nonzero_share": ("share", 0.2),
    "tool_share": ("share", 0.1),
    "advantage_std": ("relative", 0.5),
}
#: What each column of :attr:`RunSteps.table` is, for labels.
QUANTITIES = {
    "zero_variance_share": "zero-variance share",
    "length_median": "median generated length",
    "length_p10": "generated length, 10th percentile",
    "length_p90": "generated length, 90th percentile",
    "truncated_share": "share at the generation cap",
    "reward_mean": "mean total reward",
    "nonzero_share": "share with a non-zero reward",
    "tool_share": "tool-output share of positions",
    "advantage_mean": "mean advantage",
    "advantage_std": "advantage std",
    "advantage_zero_share": "share of advantages exactly 0",
}


@dataclass(frozen=True)
class Drift:
    """One quantity that moved over the run: ``start`` / ``end`` are the first and last window's
    means, ``step`` the first step past halfway, ``rule`` the threshold it crossed."""
    quantity: str
    start: float
    end: float
    step: int
    rule: str
    text: str


@dataclass(frozen=True)
class RunSteps:
    """The run per training step. ``table``: one row per step (columns: ``step``,
    ``trajectories``, ``groups`` and the :data:`QUANTITIES`, plus each reward function's mean
    ``reward:<function>`` and share of non-zero values ``nonzero:<function>``);
    ``drifts``: what moved; ``unit``: what a length counts; ``max_length``: the generation cap
    (None: unknown, then ``truncated_share`` is absent)."""
    table: pd.DataFrame
    drifts: tuple[Drift, ...]
    unit: str
    max_length: int | None
    windows: tuple[tuple[int, int], tuple[int, int]]


def _fmt(quantity: str, x: float, unit: str) -> str:
    if quantity.endswith("share"):
        return f"{x:.0%}"
    if quantity.startswith("length"):
        return f"{x:,.1f} {unit}s"
    return f"{x:.3g}"


def _steps_text(window) -> str:
    return f"step {int(window[0])}" if len(window) == 1 else f"steps {int(window[0])}-{int(window[-1])}"


def run_steps(rows: pd.DataFrame, *, unit: str = "token", max_length: int | None = None,
              reward_range: float | None = None) -> RunSteps | None:
    """Per-step table and drifts of a run from :meth:`Tally.row_table`'s ``rows`` (it needs a
    ``step`` column); None when the rows carry no step or only one. ``max_length``: the
    generation cap in the data's positions (``unit``), for the share that reached it.
    ``reward_range``: the scale of total rewards the "spread" rule uses (default: the rows'
    max - min)."""
    if "step" not in rows.columns or rows["step"].nunique() < 2:
        return None
    if max_length is not None:
        max_length = check_int("max_length", max_length, low=1)
    g = rows.groupby("step", sort=True)
    table = pd.DataFrame({"trajectories": g.size(), "groups": g["group"].nunique(),
                          "zero_variance_share": g["zero_variance"].mean(),
                          "length_median": g["generated"].median(),
                          "length_p10": g["generated"].quantile(0.1), "length_p90": g["generated"].quantile(0.9)})
    if max_length is not None:
        table["truncated_share"] = g["generated"].apply(lambda x: float((x >= max_length).mean()))
    table["reward_mean"] = g["score"].mean()
    table["nonzero_share"] = g["nonzero"].mean()
    for col in [c for c in rows.columns if c.startswith("reward:")]:
        table[col] = g[col].mean()
        # each function's own sparsity: the share of its values that are non-zero (missing: zero)
        table["nonzero:" + col.split(":", 1)[1]] = g[col].apply(lambda x: float((x.fillna(0) != 0).mean()))
    tool = g["episode"].sum() - g["generated"].sum()
    if (tool > 0).any():
        table["tool_share"] = tool / g["episode"].sum()
    if "advantage" in rows.columns:
        table["advantage_mean"] = g["advantage"].mean()
        table["advantage_std"] = g["advantage"].std(ddof=0)
        table["advantage_zero_share"] = g["advantage"].apply(lambda x: float((x == 0).mean()))
    table = table.reset_index()
    scale = reward_range if reward_range is not None else float(rows["score"].max() - rows["score"].min())
    steps = table["step"].to_numpy()
    w = max(1, len(steps) // 4)
    drifts = []
    for quantity, (kind, threshold) in DRIFT_RULES.items():
        if quantity not in table.columns:
            continue
        values = table[quantity].to_numpy(dtype=np.float64)
        start, end = float(np.nanmean(values[:w])), float(np.nanmean(values[-w:]))
        change = end - start
        need = {"share": threshold, "relative": threshold * abs(start), "spread": threshold * scale}[kind]
        if not np.isfinite(change) or need <= 0 or abs(change) < need:
            continue
        halfway = start + change / 2
        past = (values >= halfway) if change > 0 else (values <= halfway)
        step = int(steps[int(np.argmax(past))])
        rule = {"share": f"a change of {threshold * 100:.0f} percentage points or more",
                "relative": f"a change of {threshold:.0%} of the start or more",
                "spread": f"a change of {threshold:.0%} of the run's reward range ({scale:.3g}) or more"}[kind]
        first, last = _steps_text(steps[:w]), _steps_text(steps[-w:])
        text = (f"{QUANTITIES[quantity]} {'rises' if change > 0 else 'falls'} from {_fmt(quantity, start, unit)} "
                f"({first}) to {_fmt(quantity, end, unit)} ({last}), past halfway at step {step} (drift: {rule})")
        drifts.append(Drift(quantity, start, end, step, rule, text))
    windows = ((int(steps[0]), int(steps[w - 1])), (int(steps[-w]), int(steps[-1])))
    return RunSteps(table, tuple(drifts), unit, max_length, windows)


def step_charts(st: RunSteps) -> dict[str, object]:
    """The run's charts by name: shares of trajectories per step (zero-variance, non-zero reward,
    at the cap, tool output), generated length (median and 10-90% band), mean reward per reward
    function and in total, and the framework's advantages (mean and std) when logged."""
    t, u = st.table, st.unit
    out: dict[str, object] = {}
    shares = [c for c in ("zero_variance_share", "nonzero_share", "truncated_share", "tool_share") if c in t.columns]
    long = t.melt(id_vars="step", value_vars=shares, var_name="quantity", value_name="share")
    long["quantity"] = long["quantity"].map(QUANTITIES)
    out["steps_shares"] = viz.line_chart(long, "step", "share", color="quantity", value_domain=(0, 1),
                                         title="Shares of trajectories per training step", x_title="training step",
                                         y_title="share of trajectories")
    out["steps_lengths"] = viz.line_chart(t, "step", "length_median", band=("length_p10", "length_p90"),
                                          title=f"Generated {u}s per step (median, 10-90% band)",
                                          x_title="training step", y_title=f"generated {u}s")
    parts = [c for c in t.columns if c.startswith("reward:")]
    rw = t.melt(id_vars="step", value_vars=["reward_mean", *parts], var_name="reward", value_name="mean")
    rw["reward"] = rw["reward"].map(lambda c: "total" if c == "reward_mean" else c.split(":", 1)[1])
    out["steps_rewards"] = viz.line_chart(rw, "step", "mean", color="reward", title="Mean reward per step",
                                          x_title="training step", y_title="mean reward")
    if "advantage_std" in t.columns:
        adv = t.melt(id_vars="step", value_vars=["advantage_mean", "advantage_std"], var_name="statistic",
                     value_name="value")
        adv["statistic"] = adv["statistic"].map({"advantage_mean": "mean", "advantage_std": "std"})
        out["steps_advantages"] = viz.line_chart(adv, "step", "value", color="statistic",
                                                 title="The framework's advantages per step",
                                                 x_title="training step", y_title="advantage")
    return out
