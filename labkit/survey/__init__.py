"""The map of the field: method inventory, taxonomy, a method-selection tree, a checklist.

Everything here is plain pandas and the standard library, so it loads fast and can be used from
a script, a test or notebook ``00_map.ipynb``; drawing (altair heatmaps, widgets) lives in
``labkit.viz``. ``from labkit import survey`` gives the whole public API:

* :mod:`.inventory` - ``data/methods.csv`` and ``data/inventory/baselines.csv``: columns, loading,
  validation, :func:`lookup`;
* :mod:`.taxonomy` - the vocabularies (granularities, methodology families, settings, ...), the
  tables that fold the survey's raw tags into them, :func:`filter_methods`,
  :func:`taxonomy_counts`;
* :mod:`.decision_tree` - the practitioner's tree as one specification, :func:`recommend` and
  :func:`decision_tree_graph`;
* :mod:`.checklist` - the reporting checklist.
"""
from .checklist import REPORTING_CHECKLIST, ChecklistItem
from .decision_tree import (
    AGENTIC_MIN_TOKENS, LEAVES, QUESTIONS, REASONING_MAX_TOKENS, ROOT, Branch, Caveat,
    DecisionInputs, Leaf, Question, Recommendation, decision_tree_graph, recommend,
)
from .inventory import (
    BASELINE_COLUMNS, BASELINES_CSV, CREDIT_MODULES, DATA_DIR, METHOD_COLUMNS, METHODS_CSV,
    NOTEBOOKS, after_survey_estimators, load_baselines, load_methods, lookup,
)
from .taxonomy import (
    BASELINE_FAMILIES, COLLECTIONS, EVIDENCE_LEVELS, GRANULARITIES, GRANULARITY_GLOSSES,
    GRANULARITY_LABELS, METHODOLOGY_FAMILIES, METHODOLOGY_TO_FAMILY, MULTI_SEP, SETTINGS,
    STATUSES, TYPES, filter_methods, split_multi, taxonomy_counts,
)

__all__ = [
    "DATA_DIR", "METHODS_CSV", "BASELINES_CSV",
    "GRANULARITIES", "GRANULARITY_GLOSSES", "GRANULARITY_LABELS",
    "METHODOLOGY_FAMILIES", "METHODOLOGY_TO_FAMILY",
    "SETTINGS", "TYPES", "COLLECTIONS", "STATUSES", "BASELINE_FAMILIES", "EVIDENCE_LEVELS",
    "NOTEBOOKS", "CREDIT_MODULES", "METHOD_COLUMNS", "BASELINE_COLUMNS", "MULTI_SEP",
    "split_multi", "load_methods", "load_baselines", "lookup", "after_survey_estimators", "decision_tree_graph",
    "taxonomy_counts", "filter_methods",
    "REASONING_MAX_TOKENS", "AGENTIC_MIN_TOKENS", "LEAVES", "Leaf",
    "DecisionInputs", "Recommendation", "recommend",
    "ROOT", "QUESTIONS", "Question", "Branch", "Caveat",
    "ChecklistItem", "REPORTING_CHECKLIST",
]
