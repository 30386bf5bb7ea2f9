"""The method on the page: ``show_methods("grpo", "rloo")`` in a notebook shows each estimator's
key equation, docstring formula and code (``labkit.viz.method.method_card``).

The key equations are data, in ``data/estimator_equations.csv`` (registered name, LaTeX as labkit
computes it, symbols), one row per registered estimator (tests/test_method_cards.py checks that
none is missing); the formula and the code are read from the function itself.
"""
from __future__ import annotations

import csv
import functools

from labkit.core.paths import data_path, require_data
from labkit.credit import get_estimator
from labkit.viz.method import MethodCards, method_card, method_cards

__all__ = ["EQUATIONS_FILE", "load_equations", "show_methods"]

EQUATIONS_FILE = "estimator_equations.csv"
# More methods than this in one call fold their listings, so a breadth notebook stays readable.
COLLAPSE_ABOVE = 3


@functools.lru_cache(maxsize=1)
def load_equations() -> dict[str, tuple[str, str]]:
    """``{registered name: (LaTeX equation, symbols)}`` from ``data/estimator_equations.csv``."""
    path = require_data(data_path(EQUATIONS_FILE), "the estimators' key equations")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {row["estimator"]: (row["equation"], row["symbols"]) for row in rows}


def show_methods(*names: str, collapse: bool | None = None) -> MethodCards:
    """Cards for the registered estimators ``names``, in the order given.

    ``collapse`` folds each card's code listing (default: only when more than three methods are
    shown). An unknown name raises the registry's error, which lists the known ones.
    """
    if not names:
        raise TypeError("names: give at least one registered estimator name, e.g. show_methods('grpo')")
    if collapse is not None and not isinstance(collapse, bool):
        raise TypeError(f"collapse: expected True, False or None, got {collapse!r}")
    fold = len(names) > COLLAPSE_ABOVE if collapse is None else collapse
    equations = load_equations()
    cards = []
    for name in names:
        fn = get_estimator(name)
        equation, symbols = equations.get(name, ("", ""))
        cards.append(method_card(fn, equation=equation, symbols=symbols, collapse_code=fold))
    return method_cards(cards)
