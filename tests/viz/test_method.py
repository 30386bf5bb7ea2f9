"""A method's card (labkit.viz.method): every registered estimator's card shows its docstring formula
and the code that computes it, without docstring or argument checks.
"""
from __future__ import annotations

import re

import pytest

from labkit.course.methods import show_methods
from labkit.credit import ESTIMATORS, get_estimator, spec
from labkit.viz.method import called_helpers, formula_section, method_card, method_code


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_card_shows_the_formula_and_the_code_without_docstring_or_checks(name):
    fn = get_estimator(name)
    card = method_card(fn, equation=spec(name).equation)
    inner = fn.__wrapped__
    assert card.name == name and card.formula and card.formula.splitlines()[0].strip() in inner.__doc__
    assert card.code.startswith(f"def {inner.__name__}(")
    assert '"""' not in card.code and "@register" not in card.code
    # top-level argument checks are left out (one inside a branch belongs to that branch's logic)
    assert not re.search(r"^    (\w+ = )?check_\w+\(", card.code, re.M), "argument checks are left out"
    text = card._repr_markdown_()
    assert f"$$\n{card.equation}\n$$" in text and "```python" in text


def test_the_card_follows_the_helpers_that_hold_the_formula():
    # gae delegates twice: the backward loop must still be on its card
    helpers = [h.__name__ for h in called_helpers(get_estimator("gae"))]
    assert "_gae_recursion" in helpers and "_token_gae" in helpers
    # grpo's group-of-one rule lives once, in core.stats.group_normalize: shown, not repeated
    card = method_card(get_estimator("grpo"))
    assert ("labkit.core.stats.group_normalize" in dict(card.helpers))
    assert "arxiv.org/abs/2402.03300" in card._repr_markdown_()
    assert card.arxiv == ("2402.03300",)


def test_plain_functions_work_too():
    def double(x):
        """Twice x (a toy, 2024).

        Formula:
            y = 2 x
        """
        return 2 * x
    card = method_card(double)
    assert card.formula == "y = 2 x" and card.code == "def double(x):\n    return 2 * x" and not card.helpers
    assert formula_section(double) == "y = 2 x"
    labelled = method_card(double, status="stand-in", replaces="a judge")
    assert "STAND-IN: replaces a judge" in repr(labelled) and "**STAND-IN: replaces a judge**" in labelled._repr_markdown_()
    assert "STAND-IN" not in repr(card)


@pytest.mark.parametrize("call,arg", [
    (lambda: method_card(3), "fn"),
    (lambda: method_card(get_estimator("grpo"), equation=1), "equation"),
    (lambda: method_card(get_estimator("grpo"), status=None), "status"),
    (lambda: method_card(get_estimator("grpo"), replaces=2), "replaces"),
    (lambda: method_code("grpo"), "fn"),
    (lambda: show_methods(), "names"),
    (lambda: show_methods("grpo", collapse="yes"), "collapse"),
    (lambda: show_methods("no_such_method"), "name"),
])
def test_bad_arguments_name_themselves(call, arg):
    with pytest.raises((TypeError, ValueError), match=f"^{arg}"):
        call()
