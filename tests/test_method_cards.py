"""The method on the page: every registered estimator's card renders its key equation (from its
spec), its docstring formula and the code that computes it, and every estimator a notebook uses
or the inventory assigns to it is on a card in that notebook."""
from __future__ import annotations

import re

import pytest

from labkit.course.methods import show_methods
from labkit.credit import ESTIMATORS, get_estimator, spec
from labkit.viz.method import called_helpers, formula_section, method_card, method_code


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_registered_estimators_card_renders(name):
    card = show_methods(name).cards[0]
    assert card.name == name and card.equation.strip() and card.equation == spec(name).equation
    assert card.formula.strip(), f"{name}: no Formula: section in its docstring"
    text = card._repr_markdown_()
    assert f"$$\n{card.equation}\n$$" in text and spec(name).symbols in text


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


def test_show_methods_folds_long_lists_and_keeps_the_order():
    few = show_methods("grpo", "rloo")
    many = show_methods("reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo")
    assert [c.name for c in few.cards] == ["grpo", "rloo"] and "<details>" not in few._repr_markdown_()
    assert len(many) == 5 and many._repr_markdown_().count("<details>") == 5
    assert "<details>" not in show_methods(*[c.name for c in many.cards], collapse=False)._repr_markdown_()
    assert repr(few).startswith("grpo: GRPO")


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


@pytest.mark.parametrize("call,arg", [
    (lambda: method_card(3), "fn"),
    (lambda: method_card(get_estimator("grpo"), equation=1), "equation"),
    (lambda: method_code("grpo"), "fn"),
    (lambda: show_methods(), "names"),
    (lambda: show_methods("grpo", collapse="yes"), "collapse"),
    (lambda: show_methods("no_such_method"), "name"),
])
def test_bad_arguments_name_themselves(call, arg):
    with pytest.raises((TypeError, ValueError), match=f"^{arg}"):
        call()


# Registered names that a notebook's code or runner module quotes for something else: notebooks
# 05 and 09 name the loss kind "reinforce" (labkit.learn.losses), not the estimator.
NOT_ESTIMATOR_USES = {"05": {"reinforce"}, "09": {"reinforce"}}


def _notebooks():
    from pathlib import Path
    return sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_every_estimator_a_notebook_uses_is_on_a_card_there(path):
    """Issue 18: every estimator used in a notebook is defined there with its equation and code.
    'Used': its registered name quoted in the notebook's code or its runner module; 'on a card':
    a stored show_methods output of that notebook names it."""
    import json
    from pathlib import Path
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    key = path.name[:2]
    runner = list((Path(__file__).resolve().parents[1] / "labkit" / "course").glob(f"nb{key}_*.py"))
    source = code + "".join(p.read_text() for p in runner)
    used = {n for n in ESTIMATORS if re.search(rf"[\"']{n}[\"']", source)} - NOT_ESTIMATOR_USES.get(key, set())
    shown = _shown(path)
    assert used <= shown, f"{path.name}: used but not on a card: {sorted(used - shown)}"


def _shown(path) -> set[str]:
    """Names on a card in a notebook's stored show_methods outputs."""
    import json
    shown = set()
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            shown |= set(re.findall(r"\*\*`(\w+)`\*\*", "".join(out.get("data", {}).get("text/markdown", ""))))
    return shown


# Inventory rows whose notebook does not show the estimator yet: (estimator, notebook) -> why.
# Strict: once the notebook shows it, the test fails until the entry is removed.
NOT_ON_ITS_CARD_YET = {
    ("archer", "05_why_agents_harder.ipynb"): "the inventory plans ArCHer for notebook 05, which does not show it "
                                              "yet (its card and its bench row are in notebook 10)",
}


def test_every_estimator_the_inventory_assigns_to_a_notebook_is_on_a_card_there():
    from pathlib import Path

    from labkit.survey import load_baselines, load_methods
    folder = Path(__file__).resolve().parents[1] / "notebooks"
    assigned = set()
    for table in (load_methods(), load_baselines()):
        for function, notebook in zip(table.labkit_function, table.notebook):
            for path in filter(None, (f.strip() for f in str(function).split(";"))):
                name = path.rsplit(".", 1)[-1]
                if name in ESTIMATORS and notebook:
                    assigned.add((name, notebook))
    missing = {(n, nb) for n, nb in assigned if n not in _shown(folder / nb)}
    assert missing == set(NOT_ON_ITS_CARD_YET), sorted(missing ^ set(NOT_ON_ITS_CARD_YET))
