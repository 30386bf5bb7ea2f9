"""The survey's taxonomy: vocabularies of the inventory's columns, tag -> label tables, queries.

Every closed set of values a column of ``methods.csv`` / ``baselines.csv`` may hold lives here
(granularities, methodology families, settings, types, collections, statuses, ...), together
with the tables that fold the survey's raw tags into them, :func:`filter_methods` and the
granularity x methodology counts behind the heatmap of notebook 00.

Multi-valued cells (``setting``, ``granularity``) hold values joined by ``;`` in the canonical
order of :data:`SETTINGS` / :data:`GRANULARITIES`; :func:`split_multi` turns a cell into a list.

Taxonomy: how raw labels become coarse families
-----------------------------------------------
The survey labels each method's methodology with a short free-text tag ("MC", "Tree-TD",
"Min-form PRM", ...); the catalog's later additions use longer tags. For the heatmap the lab folds
every tag into one of the coarse :data:`METHODOLOGY_FAMILIES`, which mirror ``labkit.credit``'s
module split. The complete tag -> family table is :data:`METHODOLOGY_TO_FAMILY`; the granularity
tag table is :data:`GRANULARITY_LABELS`. Judgement calls worth knowing about:

* Tree-structured Monte Carlo (TEMPO "Tree-TD", AT2PO, APPO's branching) counts as ``mc``: the
  values come from sampled continuations, the TD part only propagates them up the tree.
* Shapley splits *within* one trajectory (SCAR, over text spans) are ``redistribution``; splits
  *among* agents or contributors (SHARP, the least-core paper) are ``multiagent``.
* HICRA (planning tokens) sits with CARL in ``entropy_information``: both concentrate the update
  on a few decisive tokens/actions.
* Self-distillation methods whose teacher is the policy given extra training-time context
  (SC-GRPO, OPID, SDAR) are ``privileged``; CRAFT, whose novelty is the counterfactual estimate
  from sibling rollouts, is ``hindsight_counterfactual``.
* RAGEN's contribution to credit is a filter on which prompts' episodes enter the update, so it
  is ``episode``.
* Schedules, frameworks, segmentation rules and evaluation harnesses (PilotRL, PRS, Agent
  Lightning, AdaptSeg, QVal, temporal scheduling, orchestration traces) are ``infrastructure``.
* LLM-graded rewards (CAPO, LaRe, TARL, LLM-MCA, MAPPA, QLLM, SCRIBE, TRIAGE, rubric judges) are
  ``judge``; critics that are LLMs *with privileged inputs* (CriticSearch) are ``privileged``.
"""
from __future__ import annotations

from typing import Iterable

import pandas as pd

__all__ = [
    "GRANULARITIES", "GRANULARITY_GLOSSES", "GRANULARITY_LABELS", "METHODOLOGY_FAMILIES",
    "METHODOLOGY_TO_FAMILY", "SETTINGS", "TYPES", "COLLECTIONS", "STATUSES", "BASELINE_FAMILIES",
    "EVIDENCE_LEVELS", "MULTI_SEP", "split_multi", "filter_methods", "taxonomy_counts",
]

#: Where credit lands, finest first. ``multi-agent`` (splitting a team reward among agents) is a
#: different axis from time; it sits after ``turn`` as in the survey. ``episode`` means "no
#: decomposition at all": one number for the whole trajectory.
GRANULARITIES: tuple[str, ...] = ("token", "segment", "step", "turn", "multi-agent", "episode")

GRANULARITY_GLOSSES: dict[str, str] = {
    "token": "each generated token gets its own number",
    "segment": "a run of tokens between cut points (not necessarily a semantic step)",
    "step": "one reasoning step or one agent action",
    "turn": "one full model response plus the environment's reply",
    "multi-agent": "each agent's (or contributor's) share of a team outcome",
    "episode": "the whole trajectory shares one number",
}

#: Coarse methodology families for the taxonomy heatmap, in course order, each with a gloss.
METHODOLOGY_FAMILIES: dict[str, str] = {
    "episode": "one score per trajectory, copied to every token and compared with a baseline "
               "(REINFORCE, RLOO, GRPO), plus filters deciding which episodes are trained on",
    "td": "a learned value function bootstrapped from the next state's estimate (GAE, "
          "turn-level critics, lambda-returns, turn-level MDPs)",
    "mc": "values measured by sampling fresh continuations from a prefix or state (vines, "
          "segment cut points, rollout trees)",
    "group": "critic-free comparisons inside groups finer than the episode, e.g. all steps "
             "that reached the same environment state",
    "process": "per-step rewards from a process reward model, a checker of intermediate "
               "results, or a step reward derived from the policy itself",
    "entropy_information": "concentrate credit on the decisive decisions (high entropy, "
                           "planning tokens) or pay each step for what it reveals about success",
    "redistribution": "split the final reward over positions with a learned or attribution "
                      "model whose pieces add back up to the outcome",
    "implicit": "read credit off the policy's log-likelihood ratio to a reference model "
                "(DPO-style implicit rewards)",
    "hindsight_counterfactual": "judge an action once the outcome is known, or by what would "
                                "have happened had it been different",
    "privileged": "a critic or teacher that sees information only available in training "
                  "(gold answers, hidden state, a verified solution)",
    "judge": "a language model reads the trajectory and grades steps, turns or agents",
    "multiagent": "divide a shared team or coalition reward among its members (Shapley, "
                  "agent-wise normalisation, hierarchical teams)",
    "infrastructure": "frameworks, schedules, segmentation rules and evaluation harnesses: they "
                      "change how credit is used but add no new credit formula",
}

#: Every methodology tag used in ``methods.csv`` (Appendix B tags for the survey's 47, catalog
#: tags for later additions) and the coarse family it is counted under.
METHODOLOGY_TO_FAMILY: dict[str, str] = {
    # --- Appendix B tags (survey methods #1-47) ---
    "MC": "mc",
    "Redistribution": "redistribution",
    "Self-generated": "implicit",
    "Implicit": "implicit",
    "Game-theoretic": "redistribution",
    "Tree-TD": "mc",
    "Min-form PRM": "process",
    "Masked Adv.": "process",
    "LLM-as-Critic": "judge",
    "Attribution": "redistribution",
    "Hierarchy": "entropy_information",
    "Entropy-RL": "process",
    "Intervention": "hindsight_counterfactual",
    "Fine PRM": "process",
    "TD (hierarchical)": "td",
    "Implicit+IRL": "implicit",
    "Action Decomp.": "td",
    "MC (group)": "group",
    "Privileged Critic": "privileged",
    "TD+GAE": "td",
    "Hybrid": "process",
    "Turn-level MDP": "td",
    "Bias-corrected": "td",
    "LLM-Judge": "judge",
    "Info-theoretic": "entropy_information",
    "Entropy-based": "entropy_information",
    "Implicit DPO": "implicit",
    "Progressive": "infrastructure",
    "LLM-Critic": "judge",
    "Hindsight": "hindsight_counterfactual",
    "Counterfactual": "hindsight_counterfactual",
    "Retrospective Critic": "privileged",
    "MLP estimator": "redistribution",
    "Decoupled Arch.": "infrastructure",
    "Uncertainty": "episode",
    "Skill-prototype": "judge",
    "Segmentation": "infrastructure",
    "Hierarchical": "multiagent",
    "LLM-generated": "judge",
    "Shapley": "multiagent",
    "Per-action PRM": "judge",
    "Agent-wise Adv.": "multiagent",
    # --- catalog tags (later additions) ---
    "Eligibility trace / lambda-return": "td",
    "Discriminative token reweighting": "redistribution",
    "Curriculum / verifiable subproblems": "process",
    "Role-typed process rewards": "judge",
    "Outcome-sensitivity attribution": "redistribution",
    "Counterfactual sibling rollouts": "hindsight_counterfactual",
    "Self-conditioned KL weighting": "privileged",
    "Gradient saliency reweighting": "redistribution",
    "Verifiable process rewards": "process",
    "Procedural policy optimization": "mc",
    "On-policy self-distillation": "privileged",
    "Entropy-polarity reweighting": "entropy_information",
    "Implicit progress signal": "implicit",
    "Dense-signal evaluation": "infrastructure",
    "Surprisal-guided advantage reweighting": "entropy_information",
    "Temporal scheduling": "infrastructure",
    "Self-distillation": "privileged",
    "Tree search / turn-wise advantage": "mc",
    "Verification-based advantage shaping": "process",
    "Adaptive entropy modulation": "entropy_information",
    "Uncertainty-guided exploration": "entropy_information",
    "Orchestration traces": "infrastructure",
    "Information-gain normalization": "entropy_information",
    "Structured action residuals": "group",
    "Rubric-grounded reward shaping": "judge",
    "Cooperative game theory": "multiagent",
}

#: Raw granularity tags (Appendix B or catalog) -> the lab's granularities. Lossy cases: the
#: survey files FinePO's "Sub-step" under step-level methods, so it counts as ``step``;
#: "Sequence" means the whole response (``episode``); "Training phase" (temporal scheduling)
#: schedules token-level criteria, so it counts as ``token``.
GRANULARITY_LABELS: dict[str, tuple[str, ...]] = {
    "Token": ("token",),
    "Segment": ("segment",),
    "Token/Seg": ("token", "segment"),
    "Step": ("step",),
    "Sub-step": ("step",),
    "Token/Turn": ("token", "turn"),
    "Turn": ("turn",),
    "Multi-Agent": ("multi-agent",),
    "Token/Sequence": ("token", "episode"),
    "Subproblem/Span": ("segment",),
    "Segment/Turn": ("segment", "turn"),
    "Token/Step": ("token", "step"),
    "Turn (verifiable feedback)": ("turn",),
    "Decision/Procedure": ("token", "segment"),
    "Token/Skill": ("token", "step"),
    "Token/Entropy": ("token",),
    "Step/Turn": ("step", "turn"),
    "State/Action": ("step",),
    "Training phase": ("token",),
    "Step/Action": ("step",),
    "Response/Turn": ("turn",),
    "Trace/Agent/Team": ("multi-agent",),
    "Turn/Action": ("turn",),
    "Criterion/Step": ("step",),
    "Contributor/Coalition": ("multi-agent",),
}

#: ``other`` is used once: a credit paper outside LLM-policy RL (in-context credit via the core).
SETTINGS: tuple[str, ...] = ("reasoning", "agentic", "multi-agent", "other")
#: core / enabler follow Appendix B's C / E; ``related`` is for catalog additions outside both.
TYPES: tuple[str, ...] = ("core", "enabler", "related")
COLLECTIONS: tuple[str, ...] = ("survey_snapshot", "recent_addition", "beyond_catalog")
#: implemented = the labkit function exists; adaptation = implemented with one of the paper's
#: components changed to fit the lab (e.g. a tabular model for an LLM in the same role);
#: stand-in = implemented with a substitute of another nature for a component the lab cannot
#: ship (e.g. an LLM judge); planned = scheduled but not written yet; concept-only = described in
#: the map, not scheduled (``status_note`` says why). The first three are a registered
#: estimator's own status (``labkit.credit.registry.STATUSES``), which its rows must carry.
STATUSES: tuple[str, ...] = ("implemented", "adaptation", "stand-in", "planned", "concept-only")
#: Appendix B's "BL" column: G, P, D, O, T.
BASELINE_FAMILIES: tuple[str, ...] = ("GRPO", "PPO", "DPO", "ORM", "TD")
#: Appendix B's "Ev." column: S, L, A.
EVIDENCE_LEVELS: tuple[str, ...] = ("strong", "limited", "analytical")

MULTI_SEP = ";"


def split_multi(cell: str) -> list[str]:
    """Split a multi-valued cell such as ``"token;segment"`` into ``["token", "segment"]``.

    Empty cells give ``[]``; surrounding whitespace is ignored.
    """
    if not isinstance(cell, str):
        raise TypeError(f"cell: expected a string, got {type(cell).__name__}")
    return [part.strip() for part in cell.split(MULTI_SEP) if part.strip()]


# Filters and counts: every argument is checked against its vocabulary, so a typo such as
# setting="agentc" fails loudly instead of silently matching nothing.

def _as_choices(name: str, value: str | Iterable[str], allowed: tuple[str, ...]) -> set[str]:
    values = [value] if isinstance(value, str) else list(value)
    if not values or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name}: expected a string or a non-empty list of strings, "
                         f"got {value!r}; allowed values: {allowed}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{name}: {bad} not allowed; allowed values: {allowed}")
    return set(values)


def _mask_any(df: pd.DataFrame, column: str, wanted: set[str]) -> pd.Series:
    return df[column].map(lambda cell: bool(wanted.intersection(split_multi(cell))))


def taxonomy_counts(df: pd.DataFrame, *, collection: str | None = None,
                    setting: str | None = None, include_empty: bool = True) -> pd.DataFrame:
    """Count methods per (granularity, methodology family) cell, in long form.

    Columns: ``granularity, methodology_family, count, methods`` where ``methods`` joins the
    method names of the cell with ``", "``. A method with several granularities is counted once
    in each, so the counts add up to the number of (method, granularity) pairs, which is at
    least the number of methods. Rows follow :data:`GRANULARITIES` then
    :data:`METHODOLOGY_FAMILIES` order; with ``include_empty`` (default) every cell of the grid
    is present, empty ones with count 0, which is what a heatmap wants.

    ``collection`` ("survey_snapshot" / "recent_addition" / "beyond_catalog") and ``setting`` ("reasoning",
    "agentic", "multi-agent", "other"; a method tagged "agentic;multi-agent" matches both)
    restrict the methods counted; other values raise ``ValueError``.
    """
    sub = filter_methods(df, setting=setting, collection=collection)
    cells: dict[tuple[str, str], list[str]] = {}
    for row in sub.itertuples(index=False):
        for gran in split_multi(row.granularity):
            cells.setdefault((gran, row.methodology_family), []).append(row.name)
    records = []
    for gran in GRANULARITIES:
        for fam in METHODOLOGY_FAMILIES:
            names = cells.get((gran, fam), [])
            if names or include_empty:
                records.append({"granularity": gran, "methodology_family": fam,
                                "count": len(names), "methods": ", ".join(names)})
    out = pd.DataFrame.from_records(
        records, columns=["granularity", "methodology_family", "count", "methods"])
    out["count"] = out["count"].astype(int)
    return out


def filter_methods(df: pd.DataFrame, *, text: str | None = None,
                   setting: str | Iterable[str] | None = None,
                   granularity: str | Iterable[str] | None = None,
                   family: str | Iterable[str] | None = None,
                   status: str | Iterable[str] | None = None,
                   collection: str | Iterable[str] | None = None, **unknown) -> pd.DataFrame:
    """Rows of ``df`` (from :func:`load_methods` or :func:`load_baselines`) matching every filter.

    ``text`` is a case-insensitive substring looked for in the name, title (or reference) and
    description. The other filters take one allowed value or a list of them (a row matches if
    it has any of them; for multi-valued cells any part counts). ``None`` means "no filter".
    A value outside the vocabulary raises ``ValueError`` listing the allowed values. The index is
    reset. An unknown keyword raises ``TypeError`` naming it and listing the filters.
    """
    # **unknown exists only to name a mistyped filter in a message that lists the real ones
    if unknown:
        name = sorted(unknown)[0]
        raise TypeError(f"{name}: not a filter of filter_methods; the filters are text, setting, "
                        f"granularity, family, status and collection")
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df: expected a DataFrame from load_methods() or load_baselines(), "
                        f"got {type(df).__name__}")
    mask = pd.Series(True, index=df.index)
    if text is not None:
        if not isinstance(text, str):
            raise ValueError(f"text: expected a string, got {type(text).__name__}")
        needle = text.strip().lower()
        if needle:
            hit = pd.Series(False, index=df.index)
            for col in ("name", "title", "reference", "description"):
                if col in df.columns:
                    hit |= df[col].str.lower().str.contains(needle, regex=False)
            mask &= hit
    filters = (("setting", setting, SETTINGS, True),
               ("granularity", granularity, GRANULARITIES, True),
               ("methodology_family", family, tuple(METHODOLOGY_FAMILIES), False),
               ("status", status, STATUSES, False),
               ("collection", collection, COLLECTIONS, False))
    for column, value, allowed, multi in filters:
        if value is None:
            continue
        arg = "family" if column == "methodology_family" else column
        wanted = _as_choices(arg, value, allowed)
        if column not in df.columns:
            raise ValueError(f"{arg}: this table has no {column!r} column")
        mask &= _mask_any(df, column, wanted) if multi else df[column].isin(wanted)
    return df[mask].reset_index(drop=True)

