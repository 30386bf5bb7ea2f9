"""Every estimator a notebook uses, or the inventory assigns to it, is on a method card in that notebook."""
from __future__ import annotations

import re

import pytest

from labkit.credit import ESTIMATORS


# Registered names that a notebook's code or runner module quotes for something else: notebooks
# 05 and 09 name the loss kind "reinforce" (labkit.learn.losses), not the estimator.
NOT_ESTIMATOR_USES = {"05": {"reinforce"}, "09": {"reinforce"}}


def _notebooks():
    from pathlib import Path
    return sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_every_estimator_a_notebook_uses_is_on_a_card_there(path):
    """Every estimator used in a notebook is defined there with its equation and code.
    'Used': its registered name quoted in the notebook's code or its runner module; 'on a card':
    a stored show_methods output of that notebook names it."""
    import json
    from pathlib import Path
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    key = path.name[:2]
    runner = list((Path(__file__).resolve().parents[2] / "labkit" / "course").glob(f"nb{key}_*.py"))
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
NOT_ON_ITS_CARD_YET: dict[tuple[str, str], str] = {}


def test_every_estimator_the_inventory_assigns_to_a_notebook_is_on_a_card_there():
    from pathlib import Path

    from labkit.survey import load_baselines, load_methods
    folder = Path(__file__).resolve().parents[2] / "notebooks"
    assigned = set()
    for table in (load_methods(), load_baselines()):
        for function, notebook in zip(table.labkit_function, table.notebook):
            for path in filter(None, (f.strip() for f in str(function).split(";"))):
                name = path.rsplit(".", 1)[-1]
                if name in ESTIMATORS and notebook:
                    assigned.add((name, notebook))
    missing = {(n, nb) for n, nb in assigned if n not in _shown(folder / nb)}
    assert missing == set(NOT_ON_ITS_CARD_YET), sorted(missing ^ set(NOT_ON_ITS_CARD_YET))
