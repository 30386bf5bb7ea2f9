"""The method on the page: every registered estimator has a key equation (data/estimator_equations.csv)
and a card that shows it with the docstring formula and the code that computes it."""
from __future__ import annotations

import csv
import re

import pytest

from labkit.core.paths import data_path
from labkit.course.methods import load_equations, show_methods
from labkit.credit import ESTIMATORS, get_estimator
from labkit.viz.method import called_helpers, formula_section, method_card, method_code


def test_every_registered_estimator_has_exactly_one_key_equation():
    with open(data_path("estimator_equations.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    names = [row["estimator"] for row in rows]
    assert sorted(names) == sorted(ESTIMATORS) and len(names) == len(set(names))
    for row in rows:
        assert row["equation"].strip() and row["symbols"].strip(), row["estimator"]
        assert "$" not in row["equation"], row["estimator"]  # the card adds the display-math fences
        depth = 0
        for ch in re.sub(r"\\[{}]", "", row["equation"]):   # literal \{ \} do not count
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0, row["estimator"]
        assert depth == 0, f"{row['estimator']}: unbalanced braces"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_card_shows_the_formula_and_the_code_without_docstring_or_checks(name):
    fn = get_estimator(name)
    card = method_card(fn, equation=load_equations()[name][0])
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
    shown = set()
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            shown |= set(re.findall(r"\*\*`(\w+)`\*\*", "".join(out.get("data", {}).get("text/markdown", ""))))
    assert used <= shown, f"{path.name}: used but not on a card: {sorted(used - shown)}"


def test_every_registered_estimator_is_on_a_card_somewhere():
    import json
    shown = set()
    for path in _notebooks():
        for cell in json.loads(path.read_text())["cells"]:
            for out in cell.get("outputs", []):
                shown |= set(re.findall(r"\*\*`(\w+)`\*\*", "".join(out.get("data", {}).get("text/markdown", ""))))
    assert set(ESTIMATORS) <= shown, sorted(set(ESTIMATORS) - shown)
