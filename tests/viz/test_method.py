"""A method's card (labkit.viz.method): every registered estimator's card shows its formula once (the
rendered equation; the docstring's formula where there is none, and in plain text) and the code
that computes it, without docstring or argument checks.
"""
from __future__ import annotations

import re
import textwrap

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
    # one formula per card: the rendered equation, not the docstring's again below it
    assert text.count(card.equation) == 1 and "```text" not in text and "Formula:" not in text
    # the plain-text form shows one formula too: the docstring's, which reads in a terminal
    plain = repr(card)
    assert plain.count("formula:") == 1 and textwrap.indent(card.formula, "  ") in plain and card.equation not in plain


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


def test_the_docstring_formula_stands_in_where_there_is_no_equation():
    def double(x):
        """Twice x (a toy, 2024).

        Formula:
            y = 2 x
        """
        return 2 * x

    def triple(x):
        """Three times x (a toy, 2024)."""
        return 3 * x

    plain = method_card(double)._repr_markdown_()
    assert "Formula:\n\n```text\ny = 2 x\n```" in plain and "$$" not in plain
    rendered = method_card(double, equation="y = 2x", symbols="x: the input")
    markdown = rendered._repr_markdown_()
    assert markdown.count("$$") == 2 and "y = 2 x" not in markdown and "<small>x: the input</small>" in markdown
    assert "formula:\n  y = 2 x" in repr(rendered) and "LaTeX" not in repr(rendered)
    # a docstring without a Formula section: the equation is the card's one formula in both forms
    latex_only = method_card(triple, equation="y = 3x")
    assert "$$\ny = 3x\n$$" in latex_only._repr_markdown_()
    assert "key equation (LaTeX): y = 3x" in repr(latex_only) and "formula:" not in repr(latex_only)
    bare = method_card(triple)
    assert "$$" not in bare._repr_markdown_() and "Formula" not in bare._repr_markdown_()


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
