"""The reporting checklist: what a credit-assignment experiment should report.

A paraphrase of the survey's Appendix C, shown in notebook 00.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["ChecklistItem", "REPORTING_CHECKLIST"]


class ChecklistItem(NamedTuple):
    """One thing a credit-assignment experiment should report."""
    key: str
    category: str
    priority: str   # "required" or "recommended"
    item: str


REPORTING_CHECKLIST: tuple[ChecklistItem, ...] = (
    ChecklistItem("base_model", "Model & data", "required",
                  "Which base model was trained: its name, parameter count and exact checkpoint."),
    ChecklistItem("training_data", "Model & data", "required",
                  "Where the training prompts came from, how many there were, and what was "
                  "filtered out."),
    ChecklistItem("granularity", "Credit method", "required",
                  "The unit that receives credit: token, segment, step, turn or agent."),
    ChecklistItem("family", "Credit method", "required",
                  "Which methodology family of the survey's taxonomy the method belongs to."),
    ChecklistItem("episode_baseline", "Baselines", "required",
                  "At least one episode-level baseline (GRPO or PPO) started from the same base "
                  "model."),
    ChecklistItem("equal_compute", "Baselines", "required",
                  "Baselines given the same compute budget, or an explicit account of how the "
                  "budgets differ."),
    ChecklistItem("ablation", "Baselines", "recommended",
                  "An ablation that removes only the credit-assignment component, isolating "
                  "its effect."),
    ChecklistItem("benchmarks", "Evaluation", "required",
                  "The benchmarks used and precisely which splits."),
    ChecklistItem("metric", "Evaluation", "required",
                  "An exact definition of every reported metric."),
    ChecklistItem("variance", "Evaluation", "recommended",
                  "Run-to-run spread: standard deviation over three or more seeds, or "
                  "confidence intervals."),
    ChecklistItem("gpu_hours", "Compute", "required",
                  "Total GPU-hours spent on training."),
    ChecklistItem("ca_overhead", "Compute", "recommended",
                  "What credit assignment itself costs: extra forward passes, environment "
                  "resets or LLM calls."),
    ChecklistItem("mean_length", "Trajectories", "required",
                  "Typical trajectory length: tokens for reasoning tasks, turns for agents."),
    ChecklistItem("length_distribution", "Trajectories", "recommended",
                  "The spread of trajectory lengths (minimum, median, maximum), not only the "
                  "average."),
)

