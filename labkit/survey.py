"""The map of the field: method inventory, taxonomy counts, a method-selection tree, a checklist.

Everything here is plain pandas and the standard library, so it loads fast and can be used from a
script, a test or notebook ``00_map.ipynb``; drawing (altair heatmaps, widgets) lives in
``labkit.viz``.

Data files (see ``data/README.md``)
-----------------------------------
``data/methods.csv``
    One row for every entry of the survey authors' catalog (47 methods reviewed in arXiv
    2604.09459 plus later additions). Labels for the 47 come from the survey's Appendix B; for
    later additions from the catalog's own columns. Descriptions are written for this lab.
``data/baselines.csv``
    The background estimators the survey builds on but does not count (REINFORCE, RLOO, GRPO,
    ...), with the same lab columns.

Multi-valued cells (``setting``, ``granularity``) hold values joined by ``;`` in the canonical order
of :data:`SETTINGS` / :data:`GRANULARITIES`; :func:`split_multi` turns a cell into a list.

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

import re
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Iterable, NamedTuple

import pandas as pd

__all__ = [
    "DATA_DIR", "METHODS_CSV", "BASELINES_CSV",
    "GRANULARITIES", "GRANULARITY_GLOSSES", "GRANULARITY_LABELS",
    "METHODOLOGY_FAMILIES", "METHODOLOGY_TO_FAMILY",
    "SETTINGS", "TYPES", "COLLECTIONS", "STATUSES", "BASELINE_FAMILIES", "EVIDENCE_LEVELS",
    "NOTEBOOKS", "CREDIT_MODULES", "METHOD_COLUMNS", "BASELINE_COLUMNS",
    "split_multi", "load_methods", "load_baselines", "lookup", "decision_tree_graph",
    "taxonomy_counts", "filter_methods",
    "REASONING_MAX_TOKENS", "AGENTIC_MIN_TOKENS", "LEAVES", "Leaf",
    "DecisionInputs", "Recommendation", "recommend",
    "ChecklistItem", "REPORTING_CHECKLIST",
]

# --------------------------------------------------------------------------------------------
# Locations
# --------------------------------------------------------------------------------------------

#: ``data/`` of a source checkout (the package sits next to it). A wheel install does not ship
#: it; pass ``path=`` explicitly in that case.
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
METHODS_CSV = DATA_DIR / "methods.csv"
BASELINES_CSV = DATA_DIR / "baselines.csv"

MULTI_SEP = ";"

# --------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------

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
COLLECTIONS: tuple[str, ...] = ("survey_snapshot", "recent_addition")
#: implemented = the labkit function exists; stand-in = implemented with a substitute for a
#: component the lab cannot ship (e.g. an LLM judge); planned = scheduled but not written yet;
#: concept-only = described in the map, not scheduled (``status_note`` says why).
STATUSES: tuple[str, ...] = ("implemented", "stand-in", "planned", "concept-only")
#: Appendix B's "BL" column: G, P, D, O, T.
BASELINE_FAMILIES: tuple[str, ...] = ("GRPO", "PPO", "DPO", "ORM", "TD")
#: Appendix B's "Ev." column: S, L, A.
EVIDENCE_LEVELS: tuple[str, ...] = ("strong", "limited", "analytical")

NOTEBOOKS: tuple[str, ...] = (
    "00_map.ipynb",
    "01_reinforce_variance.ipynb",
    "02_critics_gae.ipynb",
    "03_vineppo.ipynb",
    "04_process_rewards.ipynb",
    "05_why_agents_harder.ipynb",
    "06_gigpo.ipynb",
    "07_critical_actions.ipynb",
    "08_hindsight_counterfactual.ipynb",
    "09_multiagent.ipynb",
    "10_benchmark.ipynb",
)

#: The submodules of ``labkit.credit`` a ``labkit_function`` may point into.
CREDIT_MODULES: tuple[str, ...] = (
    "episode", "td", "mc", "group", "process", "entropy", "information", "redistribution",
    "implicit", "hindsight", "counterfactual", "privileged", "judge", "multiagent",
)

METHOD_COLUMNS: tuple[str, ...] = (
    "id", "name", "title", "year", "collection", "survey_number", "type", "setting",
    "granularity", "granularity_label", "methodology", "methodology_family", "baseline_family",
    "evidence", "benchmarks", "paper_url", "code_url", "description", "labkit_function",
    "notebook", "status", "status_note",
)

BASELINE_COLUMNS: tuple[str, ...] = (
    "name", "arxiv_id", "year", "reference", "setting", "granularity", "methodology_family",
    "description", "labkit_function", "notebook", "status", "status_note",
)

_FUNCTION_RE = re.compile(r"^labkit\.credit\.([a-z_]+)\.([a-z_][a-z0-9_]*)$")
_ARXIV_RE = re.compile(r"^(\d{4}\.\d{4,5}|openreview-[A-Za-z0-9_-]+)$")


def split_multi(cell: str) -> list[str]:
    """Split a multi-valued cell such as ``"token;segment"`` into ``["token", "segment"]``.

    Empty cells give ``[]``; surrounding whitespace is ignored.
    """
    if not isinstance(cell, str):
        raise TypeError(f"cell: expected a string, got {type(cell).__name__}")
    return [part.strip() for part in cell.split(MULTI_SEP) if part.strip()]


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------

def _read_csv(path: str | Path | None, default: Path, what: str) -> tuple[pd.DataFrame, Path]:
    path = default if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{what} not found at {path}. labkit reads it from the repository's data/ folder "
            f"(expected next to the labkit package: {DATA_DIR}); from an installed copy without "
            f"data/, pass path= pointing at the file.")
    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    return df, path


class _Checker:
    """Collects context so every validation error names the file, the column and the row."""

    def __init__(self, df: pd.DataFrame, source: Path, key: str):
        self.df, self.source, self.key = df, source, key

    def fail(self, column: str, i: int | None, msg: str) -> None:
        where = f"{self.source.name}: column '{column}'"
        if i is not None:
            where += f", row {i + 1} ({self.key} {self.df.iloc[i][self.key]!r})"
        raise ValueError(f"{where}: {msg}")

    def columns(self, expected: tuple[str, ...]) -> None:
        missing = [c for c in expected if c not in self.df.columns]
        if missing:
            raise ValueError(f"{self.source.name}: missing column(s) {missing}; "
                             f"expected {list(expected)}")
        extra = [c for c in self.df.columns if c not in expected]
        if extra:
            raise ValueError(f"{self.source.name}: unexpected column(s) {extra}")

    def choice(self, column: str, allowed: tuple[str, ...], *, empty_ok: bool = False,
               multi: bool = False) -> None:
        for i, cell in enumerate(self.df[column]):
            if cell == "":
                if not empty_ok:
                    self.fail(column, i, "is empty")
                continue
            parts = split_multi(cell) if multi else [cell]
            for part in parts:
                if part not in allowed:
                    self.fail(column, i, f"{part!r} is not one of {allowed}")
            if multi:
                canonical = sorted(set(parts), key=allowed.index)
                if parts != canonical:
                    self.fail(column, i, f"write {MULTI_SEP.join(canonical)!r} (no repeats, "
                                         f"canonical order) instead of {cell!r}")

    def nonempty(self, column: str) -> None:
        for i, cell in enumerate(self.df[column]):
            if not cell.strip():
                self.fail(column, i, "is empty")

    def unique(self, column: str) -> None:
        dup = self.df[column][self.df[column].duplicated()]
        if len(dup):
            i = int(dup.index[0])
            self.fail(column, i, f"{self.df.iloc[i][column]!r} appears more than once")

    def year(self) -> None:
        for i, cell in enumerate(self.df["year"]):
            if not (cell.isdigit() and 1950 <= int(cell) <= 2100):
                self.fail("year", i, f"{cell!r} is not a four-digit year")

    def lab_columns(self) -> None:
        """labkit_function / notebook / status / status_note must agree with each other."""
        self.choice("status", STATUSES)
        self.choice("notebook", NOTEBOOKS, empty_ok=True)
        for i, row in enumerate(self.df.itertuples(index=False)):
            fn, status = row.labkit_function, row.status
            if fn:
                m = _FUNCTION_RE.match(fn)
                if not m or m.group(1) not in CREDIT_MODULES:
                    self.fail("labkit_function", i,
                              f"{fn!r} is not labkit.credit.<module>.<function> with <module> "
                              f"one of {CREDIT_MODULES}")
            if status in ("implemented", "stand-in", "planned"):
                if not fn:
                    self.fail("labkit_function", i, f"status {status!r} needs a labkit function")
                if not row.notebook:
                    self.fail("notebook", i, f"status {status!r} needs a notebook")
            if status == "stand-in" and not row.status_note:
                self.fail("status_note", i, "a stand-in must say what stands in for what")
            if status == "concept-only":
                if fn:
                    self.fail("labkit_function", i, "concept-only rows have no labkit function")
                if not row.status_note.strip():
                    self.fail("status_note", i, "concept-only rows must give the reason")


def load_methods(path: str | Path | None = None) -> pd.DataFrame:
    """Load and validate the method inventory (``data/methods.csv`` by default).

    Returns one row per catalog entry with the columns of :data:`METHOD_COLUMNS`. ``year`` is an
    ``int`` column and ``survey_number`` a nullable ``Int64`` column (1-47 for the survey's
    methods, missing for later additions); every other column is text, with ``""`` for "none".

    Raises ``FileNotFoundError`` if the file is missing and ``ValueError`` naming the column and
    row of the first problem: an unknown label, a duplicate id, a methodology tag whose family
    disagrees with :data:`METHODOLOGY_TO_FAMILY`, or lab columns that contradict each other
    (e.g. a planned method with no labkit function).
    """
    df, src = _read_csv(path, METHODS_CSV, "Method inventory (methods.csv)")
    check = _Checker(df, src, "id")
    check.columns(METHOD_COLUMNS)
    for col in ("id", "name", "title", "description", "methodology", "granularity_label",
                "paper_url"):
        check.nonempty(col)
    check.unique("id")
    check.unique("name")
    for i, value in enumerate(df["id"]):
        if not _ARXIV_RE.match(value):
            check.fail("id", i, f"{value!r} is not an arXiv id (or openreview-<id>)")
    for i, value in enumerate(df["name"]):
        if "," in value:
            check.fail("name", i, "names may not contain commas (taxonomy_counts joins on ', ')")
    check.year()
    check.choice("collection", COLLECTIONS)
    check.choice("type", TYPES)
    check.choice("setting", SETTINGS, multi=True)
    check.choice("granularity", GRANULARITIES, multi=True)
    check.choice("methodology_family", tuple(METHODOLOGY_FAMILIES))
    check.choice("baseline_family", BASELINE_FAMILIES, empty_ok=True)
    check.choice("evidence", EVIDENCE_LEVELS, empty_ok=True)
    for i, row in enumerate(df.itertuples(index=False)):
        expected = METHODOLOGY_TO_FAMILY.get(row.methodology)
        if expected is None:
            check.fail("methodology", i, f"tag {row.methodology!r} has no family in "
                                         f"METHODOLOGY_TO_FAMILY")
        if row.methodology_family != expected:
            check.fail("methodology_family", i, f"tag {row.methodology!r} maps to {expected!r}, "
                                                f"not {row.methodology_family!r}")
        gran = GRANULARITY_LABELS.get(row.granularity_label)
        if gran is None:
            check.fail("granularity_label", i, f"tag {row.granularity_label!r} is not in "
                                               f"GRANULARITY_LABELS")
        if tuple(split_multi(row.granularity)) != gran:
            check.fail("granularity", i, f"tag {row.granularity_label!r} maps to "
                                         f"{MULTI_SEP.join(gran)!r}, not {row.granularity!r}")
        in_survey = row.collection == "survey_snapshot"
        if in_survey != bool(row.survey_number):
            check.fail("survey_number", i, "must be filled exactly for survey_snapshot rows")
        if in_survey and not (row.survey_number.isdigit() and 1 <= int(row.survey_number) <= 47):
            check.fail("survey_number", i, f"{row.survey_number!r} is not an integer in 1..47")
        if not in_survey and (row.evidence or row.baseline_family):
            check.fail("evidence", i, "evidence and baseline_family come from Appendix B, so "
                                      "only survey_snapshot rows carry them")
    numbered = df.loc[df["survey_number"] != "", "survey_number"]
    repeated = numbered[numbered.duplicated()]
    if len(repeated):
        check.fail("survey_number", int(repeated.index[0]),
                   f"{repeated.iloc[0]!r} appears more than once")
    check.lab_columns()
    out = df.copy()
    out["year"] = out["year"].astype(int)
    out["survey_number"] = pd.array(
        [int(v) if v else pd.NA for v in df["survey_number"]], dtype="Int64")
    return out


def load_baselines(path: str | Path | None = None) -> pd.DataFrame:
    """Load and validate the background estimators (``data/baselines.csv`` by default).

    These are the estimators the surveyed methods are measured against or built from
    (REINFORCE, RLOO, GRPO, Dr. GRPO, REINFORCE++, GAE, Math-Shepherd); the survey discusses them
    but does not count them among its 47. Columns are :data:`BASELINE_COLUMNS`; ``year`` is
    ``int``. Errors are raised as in :func:`load_methods`.
    """
    df, src = _read_csv(path, BASELINES_CSV, "Baseline estimators (baselines.csv)")
    check = _Checker(df, src, "name")
    check.columns(BASELINE_COLUMNS)
    for col in ("name", "reference", "description"):
        check.nonempty(col)
    check.unique("name")
    for i, value in enumerate(df["arxiv_id"]):
        if value and not _ARXIV_RE.match(value):
            check.fail("arxiv_id", i, f"{value!r} is not an arXiv id")
    check.year()
    check.choice("setting", SETTINGS, multi=True)
    check.choice("granularity", GRANULARITIES, multi=True)
    check.choice("methodology_family", tuple(METHODOLOGY_FAMILIES))
    check.lab_columns()
    out = df.copy()
    out["year"] = out["year"].astype(int)
    return out


def lookup(names: Iterable[str], *, methods: pd.DataFrame | None = None,
           baselines: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows for the given method names from both inventories, in the order asked.

    The result has the columns ``name, source ("methods" or "baselines"), methodology_family,
    granularity, description, labkit_function, notebook, status``. Handy for showing the
    candidates of a :class:`Recommendation`. Unknown names raise ``ValueError`` listing them.
    """
    if isinstance(names, str):
        names = [names]
    names = list(names)
    methods = load_methods() if methods is None else methods
    baselines = load_baselines() if baselines is None else baselines
    cols = ["name", "methodology_family", "granularity", "description", "labkit_function",
            "notebook", "status"]
    both = pd.concat([methods[cols].assign(source="methods"),
                      baselines[cols].assign(source="baselines")], ignore_index=True)
    unknown = [n for n in names if n not in set(both["name"])]
    if unknown:
        raise ValueError(f"names: not in methods.csv or baselines.csv: {unknown}")
    order = {n: k for k, n in enumerate(names)}
    picked = both[both["name"].isin(order)].copy()
    picked["_order"] = picked["name"].map(order)
    picked = picked.sort_values("_order").drop(columns="_order").reset_index(drop=True)
    return picked[["name", "source"] + cols[1:]]


# --------------------------------------------------------------------------------------------
# Taxonomy and filtering
# --------------------------------------------------------------------------------------------

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

    ``collection`` ("survey_snapshot" / "recent_addition") and ``setting`` ("reasoning",
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
                   collection: str | Iterable[str] | None = None) -> pd.DataFrame:
    """Rows of ``df`` (from :func:`load_methods` or :func:`load_baselines`) matching every filter.

    ``text`` is a case-insensitive substring looked for in the name, title (or reference) and
    description. The other filters take one allowed value or a list of them (a row matches if
    it has any of them; for multi-valued cells any part counts). ``None`` means "no filter".
    A value outside the vocabulary raises ``ValueError`` listing the allowed values. The index is
    reset.
    """
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


# --------------------------------------------------------------------------------------------
# Method-selection decision tree
# --------------------------------------------------------------------------------------------

#: Trajectories shorter than this many tokens are the reasoning regime.
REASONING_MAX_TOKENS = 30_000
#: Trajectories longer than this many tokens are the agentic regime; in between is hybrid.
AGENTIC_MIN_TOKENS = 100_000
#: The survey's Table 8 puts 10K-30K-token chains of thought in a separate "hard math" row.
_LONG_COT_TOKENS = 10_000


class Leaf(NamedTuple):
    """One outcome of the tree: the method class and the inventory methods that realise it."""
    regime: str
    method_class: str
    candidates: tuple[str, ...]
    rationale: str


#: The seven leaves of the practitioner's tree. Candidates are names from ``methods.csv`` or
#: ``baselines.csv``, cross-checked against the survey's Table 8 scenario rows.
LEAVES: dict[str, Leaf] = {
    "reasoning/outcome": Leaf(
        "reasoning", "GRPO / group-relative baseline",
        ("GRPO", "RLOO", "Dr. GRPO", "SPO"),
        "A single deterministic generation with only a final verdict: sampling several answers "
        "per prompt and comparing each with its siblings gives a cheap, critic-free baseline, "
        "and policy sampling is the only source of variance so the comparison is fair. SPO "
        "refines it to segments by forking from cut points when finer credit is worth the "
        "extra samples (Table 8, math reasoning)."),
    "reasoning/per_step": Leaf(
        "reasoning", "Process reward model (step-level rewards)",
        ("PURE", "SPRO", "Math-Shepherd", "CAPO"),
        "Intermediate steps can be checked, so score them: a PRM (trained from Monte Carlo "
        "labels as in Math-Shepherd, derived from the policy as in SPRO, or an LLM verifier as "
        "in CAPO) turns one verdict into step rewards. Combine them with a minimum rather than "
        "a sum (PURE) so padding with harmless steps cannot be rewarded."),
    "hybrid/deterministic": Leaf(
        "hybrid", "VinePPO / segment-level Monte Carlo",
        ("VinePPO", "SPO", "TEMPO", "GiGPO"),
        "Long trajectories but a deterministic environment: restarting from an intermediate "
        "state reproduces it exactly, so values can be measured by sampling continuations "
        "instead of trusting a learned critic. GiGPO is the cheap alternative when identical "
        "states recur across rollouts."),
    "hybrid/stochastic": Leaf(
        "hybrid", "PPO + trained value model",
        ("GAE", "AgentPRM", "ArCHer", "Turn-PPO"),
        "With stochastic tools a re-run from the same state can end differently for reasons the "
        "policy did not cause, so sampled comparisons mix luck into credit. A value model "
        "trained on many transitions averages that noise out and separates what the policy "
        "controls from what the environment does."),
    "agentic/replay": Leaf(
        "agentic", "Hindsight / counterfactual analysis",
        ("HCAPO", "C3", "CCPO"),
        "Long, tool-heavy episodes where you can return to a saved state: compare what happened "
        "with what would have happened had one turn been different, or re-weigh each action by "
        "how likely it looks once the outcome is known, and give credit to the decisions that "
        "changed the result."),
    "agentic/privileged": Leaf(
        "agentic", "Privileged asymmetric critic",
        ("SWEET-RL", "CriticSearch", "IGPO"),
        "No replay, but training runs know things the agent will not (the gold answer, hidden "
        "environment state): a critic given that information can localise blame turn by turn "
        "while the actor still sees only its own observations. IGPO uses the gold answer in "
        "the same spirit, paying each turn for raising its probability."),
    "agentic/online": Leaf(
        "agentic", "Turn-level MDP reformulation",
        ("Turn-PPO", "ArCHer", "AgentPRM", "GiGPO", "CARL"),
        "Only fresh online episodes: treat each whole turn as one action so values, ratios and "
        "advantages are computed per turn, shrinking the horizon from 100K tokens to tens of "
        "decisions. Critic-free options (GiGPO's state groups, CARL's focus on high-entropy "
        "actions) keep the overhead low (Table 8, tool use and software engineering)."),
}

_NEEDS_FORKING = frozenset({"VinePPO", "SPO", "TEMPO", "Math-Shepherd"})


@dataclass(frozen=True)
class DecisionInputs:
    """Answers to the tree's questions, validated.

    ``trajectory_tokens``: typical tokens per episode (prompt excluded), an integer >= 1.
    ``reward_density``: ``"outcome"`` (only a final verdict) or ``"per_step"`` (intermediate
    steps can be checked). ``stochastic_env``: does the same action from the same state lead to
    different results? ``can_replay``: can training restart an episode from a saved
    intermediate state? ``privileged_info``: does training have information the agent will
    not see at inference (gold answers, hidden state)?
    """

    trajectory_tokens: int
    reward_density: str
    stochastic_env: bool
    can_replay: bool
    privileged_info: bool = False

    def __post_init__(self) -> None:
        tokens = self.trajectory_tokens
        if isinstance(tokens, bool) or not isinstance(tokens, (Integral, float)):
            raise TypeError(f"trajectory_tokens: expected an integer, got {tokens!r}")
        if isinstance(tokens, float) and not tokens.is_integer():
            raise ValueError(f"trajectory_tokens: must be a whole number, got {tokens!r}")
        if tokens < 1:
            raise ValueError(f"trajectory_tokens: must be >= 1, got {tokens!r}")
        object.__setattr__(self, "trajectory_tokens", int(tokens))
        if self.reward_density not in ("outcome", "per_step"):
            raise ValueError(f"reward_density: must be 'outcome' or 'per_step', "
                             f"got {self.reward_density!r}")
        for name in ("stochastic_env", "can_replay", "privileged_info"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name}: expected True or False, got {value!r}")


@dataclass
class Recommendation:
    """What :func:`recommend` returns.

    ``leaf`` is a key of :data:`LEAVES`; ``candidates`` are method names present in
    ``methods.csv`` or ``baselines.csv``; ``path`` lists the (question, answer) pairs walked from
    the root; ``caveats`` are warnings specific to the inputs (may be empty).
    """

    regime: str
    method_class: str
    rationale: str
    candidates: list[str]
    path: list[tuple[str, str]]
    leaf: str
    caveats: list[str] = field(default_factory=list)
    inputs: DecisionInputs | None = None


def recommend(trajectory_tokens: int, reward_density: str, stochastic_env: bool,
              can_replay: bool, privileged_info: bool = False) -> Recommendation:
    """Walk the practitioner's decision tree and return a method class with candidates.

    Regime by trajectory length: fewer than 30,000 tokens is *reasoning*, 30,000 to 100,000
    (both ends included) is *hybrid*, more than 100,000 is *agentic*. Then:

    * reasoning: ``reward_density`` "outcome" -> GRPO / group-relative; "per_step" -> process
      reward models;
    * hybrid: deterministic -> VinePPO / segment-level Monte Carlo; stochastic -> PPO with a
      trained value model;
    * agentic: ``can_replay`` -> hindsight / counterfactual analysis; otherwise
      ``privileged_info`` -> privileged asymmetric critic; otherwise -> turn-level MDP.

    The tree asks only the questions on its path; answers it does not use can still add
    ``caveats`` (e.g. a replay-based candidate when ``can_replay`` is False). For reasoning
    chains of 10K tokens or more with outcome rewards, HICRA and VinePPO are added (the
    survey's Table 8 "hard math" row). Bad inputs raise ``TypeError``/``ValueError`` naming the
    argument.
    """
    inputs = DecisionInputs(trajectory_tokens, reward_density, stochastic_env, can_replay,
                            privileged_info)
    tokens = inputs.trajectory_tokens
    path: list[tuple[str, str]] = []
    caveats: list[str] = []
    q_len = "How many tokens does one trajectory have?"
    if tokens < REASONING_MAX_TOKENS:
        path.append((q_len, f"{tokens:,}: under 30K, reasoning regime"))
        q = "Is the reward only the final outcome, or can each step be checked?"
        if inputs.reward_density == "outcome":
            path.append((q, "outcome only"))
            key = "reasoning/outcome"
        else:
            path.append((q, "each step can be checked"))
            key = "reasoning/per_step"
        if inputs.stochastic_env:
            caveats.append("The reasoning branch assumes the model's own sampling is the only "
                           "randomness. With a stochastic environment, group comparisons also "
                           "reward lucky environment draws; consider the value-model advice of "
                           "the hybrid branch.")
    elif tokens <= AGENTIC_MIN_TOKENS:
        path.append((q_len, f"{tokens:,}: 30K-100K, hybrid regime"))
        q = "Is the environment stochastic?"
        if inputs.stochastic_env:
            path.append((q, "yes"))
            key = "hybrid/stochastic"
            if inputs.privileged_info:
                caveats.append("You have privileged information at training time: the survey's "
                               "web-navigation row (Table 8: SWEET-RL, HCAPO, IGPO) suggests "
                               "comparing a privileged critic such as SWEET-RL.")
        else:
            path.append((q, "no"))
            key = "hybrid/deterministic"
    else:
        path.append((q_len, f"{tokens:,}: over 100K, agentic regime"))
        q = "Can you replay from intermediate states?"
        if inputs.can_replay:
            path.append((q, "yes"))
            key = "agentic/replay"
            if inputs.privileged_info:
                caveats.append("Privileged information is also available: a privileged critic "
                               "(SWEET-RL, CriticSearch) is complementary to counterfactual "
                               "replay and cheaper per episode.")
            if inputs.stochastic_env:
                caveats.append("In a stochastic environment a single replay per counterfactual "
                               "is noisy; average several re-runs before crediting a turn.")
        else:
            path.append((q, "no"))
            q = "Is privileged information (gold answers, hidden state) available in training?"
            if inputs.privileged_info:
                path.append((q, "yes"))
                key = "agentic/privileged"
            else:
                path.append((q, "no, pure online"))
                key = "agentic/online"
                caveats.append("GiGPO's step term needs identical states to recur across "
                               "rollouts; where they never do, it reduces to GRPO.")
    leaf = LEAVES[key]
    candidates = list(leaf.candidates)
    if key == "reasoning/outcome" and tokens >= _LONG_COT_TOKENS:
        candidates += ["HICRA", "VinePPO"]
        caveats.append("Chains of 10K-30K tokens are the survey's 'hard math' row (Table 8: "
                       "VinePPO, HICRA, CAPO); episode-level credit is spread very thin there.")
    if not inputs.can_replay:
        forking = [c for c in candidates if c in _NEEDS_FORKING]
        if forking:
            caveats.append(f"{', '.join(forking)} sample continuations from intermediate "
                           f"prefixes or states; you said you cannot replay, so these need that "
                           f"capability first.")
    return Recommendation(regime=leaf.regime, method_class=leaf.method_class,
                          rationale=leaf.rationale, candidates=candidates, path=path, leaf=key,
                          caveats=caveats, inputs=inputs)


# --------------------------------------------------------------------------------------------
# Reporting checklist (the survey's Appendix C, paraphrased)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# The decision tree as a graph (for drawing; ``labkit.viz.tree_chart`` renders it)
# --------------------------------------------------------------------------------------------

#: Question nodes: id -> (label, x, y). Leaves take their position from _LEAF_XY.
_QUESTIONS = {
    "length": ("Tokens per trajectory?", 3.7, 0),
    "density": ("Reward: outcome only,\nor per-step checkable?", 1.0, 1),
    "stochastic": ("Environment\nstochastic?", 3.5, 1),
    "replay": ("Can you replay from\nintermediate states?", 6.0, 1),
    "privileged": ("Privileged info\nat train time?", 6.8, 2),
}
_LEAF_XY = {
    "reasoning/outcome": (0.3, 2), "reasoning/per_step": (1.7, 2),
    "hybrid/deterministic": (2.9, 2), "hybrid/stochastic": (4.1, 2),
    "agentic/replay": (5.2, 2), "agentic/privileged": (6.2, 3), "agentic/online": (7.4, 3),
}
#: (source, target, answer label) for every edge of the tree.
_EDGES = (
    ("length", "density", "< 30K"), ("length", "stochastic", "30K-100K"), ("length", "replay", "> 100K"),
    ("density", "reasoning/outcome", "outcome"), ("density", "reasoning/per_step", "per step"),
    ("stochastic", "hybrid/deterministic", "no"), ("stochastic", "hybrid/stochastic", "yes"),
    ("replay", "agentic/replay", "yes"), ("replay", "privileged", "no"),
    ("privileged", "agentic/privileged", "yes"), ("privileged", "agentic/online", "no"),
)


def decision_tree_graph(leaf: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes and edges of the decision tree with a fixed layout, marking the path to ``leaf``.

    Returns ``(nodes, edges)``. nodes: id, label, kind ("question"/"leaf"), x, y, active.
    edges: source, target, label, x, y, x2, y2, active. ``leaf`` is a key of :data:`LEAVES`
    (e.g. ``recommend(...).leaf``); ``None`` marks nothing.
    """
    if leaf is not None and leaf not in LEAVES:
        raise ValueError(f"leaf: must be one of {sorted(LEAVES)}, got {leaf!r}")
    parent = {target: source for source, target, _ in _EDGES}
    on_path: set[str] = set()
    node = leaf
    while node is not None:
        on_path.add(node)
        node = parent.get(node)
    rows = [{"id": q, "label": label, "kind": "question", "x": x, "y": y} for q, (label, x, y) in _QUESTIONS.items()]
    for key, (x, y) in _LEAF_XY.items():
        rows.append({"id": key, "label": LEAVES[key].method_class,
                     "kind": "leaf", "x": x, "y": y})
    nodes = pd.DataFrame(rows)
    nodes["active"] = nodes["id"].isin(on_path)
    pos = nodes.set_index("id")[["x", "y"]]
    edges = pd.DataFrame([{"source": s, "target": t, "label": lab,
                           "x": pos.at[s, "x"], "y": pos.at[s, "y"], "x2": pos.at[t, "x"], "y2": pos.at[t, "y"],
                           "active": s in on_path and t in on_path} for s, t, lab in _EDGES])
    return nodes, edges
