"""The method cards a notebook shows (labkit.course.methods)."""
from __future__ import annotations

import pytest

from labkit.course.methods import show_methods
from labkit.credit import ESTIMATORS, spec


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_registered_estimators_card_renders(name):
    card = show_methods(name).cards[0]
    assert card.name == name and card.equation.strip() and card.equation == spec(name).equation
    assert card.formula.strip(), f"{name}: no Formula: section in its docstring"
    text = card._repr_markdown_()
    assert f"$$\n{card.equation}\n$$" in text and spec(name).symbols in text


def test_show_methods_folds_long_lists_and_keeps_the_order():
    few = show_methods("grpo", "rloo")
    many = show_methods("reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo")
    assert [c.name for c in few.cards] == ["grpo", "rloo"] and "<details>" not in few._repr_markdown_()
    assert len(many) == 5 and many._repr_markdown_().count("<details>") == 5
    assert "<details>" not in show_methods(*[c.name for c in many.cards], collapse=False)._repr_markdown_()
    assert repr(few).startswith("grpo: GRPO")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_card_carries_the_registered_label(name):
    # the same label in code, registry and card: a stand-in or an adaptation says so, with what it
    # substitutes, in both renderings; a method run as published carries no label
    s = spec(name)
    card = show_methods(name).cards[0]
    label = f"{s.status.upper()}: replaces {s.replaces}"
    if s.status == "implemented":
        assert "STAND-IN" not in repr(card) and "ADAPTATION" not in repr(card)
    else:
        assert label in repr(card) and f"**{label}**" in card._repr_markdown_()
