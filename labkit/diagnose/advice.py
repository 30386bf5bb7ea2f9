"""Advice that follows the numbers: each red flag names what was measured, the threshold that
raised it, why it matters for credit assignment, what to change, and the estimator classes of
notebook 00's tree that address it.

The flags read only measured quantities (:mod:`labkit.diagnose.tally`, :mod:`.training_steps`)
and what the user stated; the thresholds are module constants, quoted in every flag's text so a reader
can weigh them. The actions are the standard remedies of the RL-for-LLM practice (more samples
per prompt, difficulty filtering, dynamic sampling as in DAPO, overlong filtering and length
shaping, reward weights), named as options, not as verdicts: the lab cannot run your trainer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from labkit.diagnose.framework_credit import AdvantageCheck
from labkit.diagnose.results import STOCHASTIC_THRESHOLD, GroupStats, RewardStats, Stochasticity
from labkit.diagnose.training_steps import RunSteps
from labkit.survey.decision_tree import LEAVES

__all__ = ["Flag", "red_flags", "zero_variance_split", "reward_function_shares", "ZERO_VARIANCE_FLAG",
           "SPARSE_FLAG", "TRUNCATION_FLAG", "DOMINANCE_FLAG"]

#: Share of trajectories in zero-variance groups from which the flag is raised: half the batch
#: gives GRPO, RLOO and Dr. GRPO no gradient at all.
ZERO_VARIANCE_FLAG = 0.5
#: Share of trajectories with a non-zero reward below which the reward counts as sparse.
SPARSE_FLAG = 0.1
#: Share of trajectories at the generation cap from which truncation is flagged.
TRUNCATION_FLAG = 0.05
#: Share of the within-group reward variance from one reward function from which it dominates.
DOMINANCE_FLAG = 0.9


@dataclass(frozen=True)
class Flag:
    """One red flag: ``measured`` (the number, as text), ``threshold`` (what raised it),
    ``reason`` (why it matters), ``actions`` (what to change), ``estimators`` (method classes of
    notebook 00's tree, or estimator names, that address it)."""
    key: str
    title: str
    measured: str
    threshold: str
    reason: str
    actions: tuple[str, ...]
    estimators: tuple[str, ...] = ()


def zero_variance_split(rows: pd.DataFrame) -> tuple[int, int, int]:
    """(groups all at the run's highest total reward, all at its lowest, all equal elsewhere)
    among the zero-variance groups of :meth:`Tally.row_table`'s ``rows``: too easy, too hard,
    and stuck in between."""
    zero = rows[rows["zero_variance"]]
    if zero.empty:
        return 0, 0, 0
    value = zero.groupby("group")["score"].first()
    hi, lo = rows["score"].max(), rows["score"].min()
    top, bottom = int((value == hi).sum()), int((value == lo).sum()) if lo != hi else 0
    return top, bottom, int(len(value) - top - bottom)


def reward_function_shares(rows: pd.DataFrame) -> dict[str, float]:
    """Each logged reward function's share of the within-group reward variance (what GRPO's
    advantages see: a function that never differs within a group moves no advantage), {} with
    fewer than two functions. Missing values count as 0, as in the summed reward."""
    cols = [c for c in rows.columns if c.startswith("reward:")]
    if len(cols) < 2:
        return {}
    values = rows[cols].fillna(0.0)
    centred = values - values.groupby(rows["group"]).transform("mean")
    within = (centred ** 2).mean()
    total = float(within.sum())
    if total <= 0:
        return {c.split(":", 1)[1]: float("nan") for c in cols}
    return {c.split(":", 1)[1]: float(within[c] / total) for c in cols}


def _leaf(key: str) -> str:
    return LEAVES[key].method_class


def red_flags(groups: GroupStats, rewards: RewardStats, stochasticity: Stochasticity, rows: pd.DataFrame,
              steps: RunSteps | None = None, *, unit: str = "token", stochastic_stated: bool | None = None,
              credit_check: AdvantageCheck | None = None) -> list[Flag]:
    """The red flags the measurements raise, most costly first (see the module docstring).
    ``rows``: :meth:`Tally.row_table`; ``steps``: :func:`run_steps` (drifts, truncation);
    ``stochastic_stated``: the user's statement on the environment, which wins over the
    measurement; ``credit_check``: the framework's own advantages checked
    (:mod:`labkit.diagnose.framework_credit`): a mismatch is flagged first, since every other
    number assumes the trainer did what its configuration says."""
    flags: list[Flag] = []
    if credit_check is not None and not credit_check.matches:
        c = credit_check
        flags.append(Flag(
            "framework_credit", f"{c.framework}'s advantages are not its default GRPO",
            f"{c.rows_compared:,} logged advantages differ from the default recomputation by up to "
            f"{c.default_max_diff:.3g}; " + c.explanation,
            f"a difference beyond float32 round-off (tolerance {c.tolerance:.2g} on the worst row)",
            "the advantages are the credit the trainer actually gave: a setting that differs from the one you "
            "meant changes which completions are pushed up, before any estimator choice matters",
            ("check the setting named above against your trainer's configuration",
             "if it is intended, compare with the matching labkit estimator on this data "
             "(labkit.diagnose.compare_estimators)")))
    drift = {d.quantity: d for d in (steps.drifts if steps is not None else ())}
    share = groups.share_rows_zero_variance
    if share >= ZERO_VARIANCE_FLAG:
        top, bottom, middle = zero_variance_split(rows)
        split = (f"{top:,} of the {groups.n_zero_variance:,} zero-variance groups have every completion at the "
                 f"run's highest reward (too easy), {bottom:,} at its lowest (too hard)"
                 + (f", {middle:,} all equal in between" if middle else ""))
        climb = drift.get("zero_variance_share")
        flags.append(Flag(
            "zero_variance", "Most groups give no gradient",
            f"{share:.1%} of trajectories are in groups whose rewards are all equal; {split}"
            + (f"; {climb.text}" if climb else ""),
            f">= {ZERO_VARIANCE_FLAG:.0%} of trajectories",
            "GRPO, RLOO and Dr. GRPO compare a completion with its group: when all are equal every advantage is "
            "0, so those samples cost generation time and teach nothing" + (
                "; the share climbing over the run is the sign of a run that has stopped learning" if climb else ""),
            ("more generations per prompt (num_generations / rollout.n), so a rare success or failure shows up in "
             "the group",
             "filter prompts that are always solved or never solved (keep those with a pass rate strictly between "
             "0 and 1) and refresh the pool as the policy improves",
             "dynamic sampling (DAPO): draw more groups until the batch is filled with groups whose rewards differ",
             "a denser reward (partial credit, or step-level rewards) so equal outcomes can still differ"),
            (_leaf("reasoning/per_step"), _leaf("hybrid/deterministic") + " (needs replay from prefixes)")))
    if steps is not None and steps.max_length is not None and "truncated_share" in steps.table.columns:
        trunc = float(np.average(steps.table["truncated_share"], weights=steps.table["trajectories"]))
        if trunc >= TRUNCATION_FLAG:
            flags.append(Flag(
                "truncation", "Completions hit the length cap",
                f"{trunc:.1%} of trajectories reach {steps.max_length:,} {unit}s",
                f">= {TRUNCATION_FLAG:.0%} of trajectories at the cap",
                "a cut-off completion is judged as an unfinished answer: its reward says nothing about the "
                "reasoning that was cut, and the whole sequence gets that credit",
                ("raise the generation cap (max_completion_length / response_length) if memory allows",
                 "overlong filtering (DAPO): leave truncated samples out of the loss",
                 "a soft length penalty near the cap instead of a cliff")))
    length = drift.get("length_median")
    if length is not None:
        flags.append(Flag(
            "length_drift", "Completion length drifts",
            length.text, length.rule,
            "a sequence-level advantage spread over more tokens changes how much each token is pushed; "
            "growing lengths approach the cap and shrinking ones can mean the policy learned to stop early",
            ("check the loss's length normalisation (Dr. GRPO removes GRPO's per-sequence length bias)",
             "watch the share at the cap (pass the cap: max_length=) and consider overlong filtering",
             "a length penalty only if the task does not need longer reasoning"),
            ("Dr. GRPO",)))
    if rewards.share_nonzero < SPARSE_FLAG:
        flags.append(Flag(
            "sparse_reward", "The reward is sparse",
            f"{rewards.share_nonzero:.1%} of trajectories have a non-zero reward",
            f"< {SPARSE_FLAG:.0%} of trajectories",
            "with almost every reward 0, almost every group is all-zero and carries no comparison",
            ("easier prompts first (a curriculum) until the pass rate rises",
             "partial credit for steps the verifier can check",
             "more samples per prompt for the hard ones"),
            (_leaf("reasoning/per_step"),)))
    stochastic = stochastic_stated if stochastic_stated is not None else stochasticity.stochastic
    if stochastic:
        how = ("stated (stochastic_env=True)" if stochastic_stated is not None else
               f"measured: {stochasticity.summary()}")
        flags.append(Flag(
            "noisy_environment", "The environment is noisy",
            how, f"repeat rate > {STOCHASTIC_THRESHOLD}" if stochastic_stated is None else "stated",
            "group comparisons then also reward lucky environment draws, not only better actions",
            ("average several re-runs before crediting a turn",
             "a value model trained on many transitions to average the noise out"),
            (_leaf("hybrid/stochastic"),)))
    shares = reward_function_shares(rows)
    finite = {k: v for k, v in shares.items() if np.isfinite(v)}
    if finite and max(finite.values()) >= DOMINANCE_FLAG:
        top = max(finite, key=finite.get)
        quiet = [k for k, v in finite.items() if k != top]
        flags.append(Flag(
            "reward_dominance", "One reward function decides the advantages",
            f"{top} makes {finite[top]:.0%} of the within-group reward variance; "
            + ", ".join(f"{k} {finite[k]:.0%}" for k in quiet),
            f">= {DOMINANCE_FLAG:.0%} from one function",
            "GRPO sees only differences within a group: a function that barely differs there moves almost no "
            "advantage, however large its values",
            (f"check that {', '.join(quiet)} can differ between completions of one prompt (a constant bonus "
             f"shifts every reward alike and cancels)",
             "set reward weights (TRL reward_weights) if the quiet functions should count more"),
        ))
    return flags
