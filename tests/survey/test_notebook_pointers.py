"""Every pointer to a notebook in the method inventory holds: a row's ``notebook`` column names a
notebook that mentions the method, and every "notebook NN" in its notes names a notebook that
mentions what the clause points at (the methods it names, or else the row's own method)."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
TABLES = {"methods.csv": ROOT / "data" / "methods.csv", "baselines.csv": ROOT / "data" / "inventory" / "baselines.csv"}
_POINTER = re.compile(r"notebooks? ((?:\d{2}(?:\s*(?:,|and|or|-|–)\s*)?)+)|(\d{2})_[a-z0-9_]+\.ipynb")


def _text(path: Path) -> str:
    """A notebook's cells, prose and code, and the method cards it prints (``show_methods``'s
    output); other outputs are left out (a printed inventory table lists every method)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        src = "".join(c["source"])
        parts.append(src)
        if "show_methods(" in src:
            parts += ["".join(o.get("text", "")) for o in c.get("outputs", [])]
    return "\n".join(parts)


TEXTS = {n: _text(p) for n, p in NOTEBOOKS.items()}


def mentions(number: str, name: str) -> bool:
    """Whether notebook ``number`` names ``name`` (as a word, case kept: "InT" is not "int")."""
    text = TEXTS.get(number)
    return text is not None and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _names() -> list[str]:
    names = set()
    for path in TABLES.values():
        names |= set(pd.read_csv(path, dtype=str, keep_default_na=False)["name"])
    return sorted(names, key=len, reverse=True)


NAMES = _names()


def pointers(note: str):
    """(notebook numbers, the clause before them) for every pointer in ``note``; a clause runs from
    the previous ';', ':' or sentence end."""
    for m in _POINTER.finditer(note):
        numbers = re.findall(r"\d{2}", m.group(1) or m.group(2))
        start = max(note.rfind(c, 0, m.start()) for c in (";", ":", ". "))
        yield numbers, note[start + 1:m.start()]


def _rows():
    for table, path in TABLES.items():
        for r in pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records"):
            yield table, r


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_notebook_pointer_names_a_notebook_that_mentions_what_it_points_at(table):
    wrong = []
    for t, row in _rows():
        if t != table:
            continue
        name = row["name"]
        # a notebook that calls the row's function (e.g. show_methods("turn_gae")) mentions it too
        own = [name] + [f for f in [row.get("labkit_function", "").rpartition(".")[2]] if f]
        for number in re.findall(r"(\d{2})_[a-z0-9_]+\.ipynb", row.get("notebook", "")):
            if not any(mentions(number, n) for n in own):
                wrong.append(f"{name}: its notebook {number} never mentions it")
        for column in ("status_note", "description"):
            for numbers, clause in pointers(row.get(column, "")):
                named = [n for n in NAMES if n != name and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", clause)]
                named += [f.rpartition(".")[2] for f in re.findall(r"labkit\.[\w.]*\w", clause)]   # a lab function
                targets = named or own
                for number in numbers:
                    if number not in NOTEBOOKS:
                        wrong.append(f"{name}: {column} points at notebook {number}, which does not exist")
                    elif not any(mentions(number, n) for n in targets):
                        wrong.append(f"{name}: {column} points at notebook {number} for {', '.join(targets)}, "
                                     f"which it never mentions ({clause.strip()[:60]!r})")
    assert not wrong, "\n".join(wrong)


def test_the_pointer_reader_on_examples():
    assert list(pointers("Nearest in the lab: RED and T-REG (notebook 04); judges in notebooks 08, 09 and 10.")) == [
        (["04"], " RED and T-REG ("), (["08", "09", "10"], " judges in ")]
    assert mentions("10", "GRPO") and not mentions("01", "No-Such-Method")
