"""The method on the page: ``show_methods("grpo", "rloo")`` in a notebook shows each estimator's
key equation and code (``labkit.viz.method.method_card``; the docstring's formula only where no
equation is registered), and, for a stand-in or an adaptation, that label and what it substitutes.

The key equation and its symbols are part of the estimator's registered spec
(``labkit.credit.spec(name).equation`` / ``.symbols``, with ``.status`` / ``.replaces``); the
formula and the code are read from the function itself.
"""
from __future__ import annotations

from labkit.credit import spec
from labkit.viz.method import MethodCards, method_card, method_cards

__all__ = ["show_methods"]

# More methods than this in one call fold their listings, so a breadth notebook stays readable.
COLLAPSE_ABOVE = 3


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
    cards = []
    for name in names:
        s = spec(name)
        cards.append(method_card(s.fn, equation=s.equation, symbols=s.symbols, collapse_code=fold,
                                 status=s.status, replaces=s.replaces))
    return method_cards(cards)
