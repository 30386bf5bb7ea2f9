"""The method on the page: an estimator's formula and its code.

Spinning Up shows each algorithm as key equations plus a short listing; the course does the same
for every estimator a notebook introduces. :func:`method_card` takes the function itself (the
registered estimator, or any plain function) and shows

* its first docstring line (name, paper, arXiv id, linked),
* its formula, once: the key equation rendered from LaTeX when one is given (the course keeps
  them in each estimator's registered spec, ``labkit.credit.spec(name).equation``), otherwise the
  docstring's ``Formula:`` section, verbatim,
* the function's code without its decorator, docstring and argument checks: the lines that *are*
  the method.

Everything is read from the function at display time, so the card cannot drift from the code it
describes. The card renders as Markdown in JupyterLab and in a stored notebook, and as plain text
in a terminal. This module takes functions, not registered names, so ``viz`` keeps importing
nothing of the stack; ``labkit.course.show_methods`` looks names up.
"""
from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Callable, Sequence

from labkit.core.protocols import DOCSTRING_SECTIONS

__all__ = ["MethodCard", "MethodCards", "method_card", "method_cards", "formula_section", "method_code", "arxiv_ids",
           "called_helpers"]

_ARXIV = re.compile(r"arXiv[: ]?(\d{4}\.\d{4,5})")


def _check_function(name: str, fn) -> Callable:
    if not callable(fn) or not (inspect.isfunction(inspect.unwrap(fn)) or inspect.ismethod(fn)):
        raise TypeError(f"{name}: expected a Python function (e.g. labkit.credit.get_estimator('grpo')), "
                        f"got {type(fn).__name__}")
    return inspect.unwrap(fn)


def formula_section(fn: Callable) -> str:
    """The ``Formula:`` section of ``fn``'s docstring, dedented ('' when it has none)."""
    doc = inspect.getdoc(_check_function("fn", fn)) or ""
    lines = doc.splitlines()
    stripped = [line.strip() for line in lines]
    if "Formula:" not in stripped:
        return ""
    start = stripped.index("Formula:") + 1
    end = next((i for i in range(start, len(lines)) if stripped[i] in DOCSTRING_SECTIONS), len(lines))
    return textwrap.dedent("\n".join(lines[start:end])).strip()


def arxiv_ids(fn: Callable) -> list[str]:
    """arXiv ids cited in the first paragraph of ``fn``'s docstring, in order, without repeats."""
    doc = inspect.getdoc(_check_function("fn", fn)) or ""
    return list(dict.fromkeys(_ARXIV.findall(doc.split("\n\n")[0])))


def _is_check(node: ast.stmt) -> bool:
    """An argument check: ``check_x(...)`` or ``name = check_x(...)`` (the house's checks.py helpers)."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return called.startswith("check_") or called.startswith("_check")


def method_code(fn: Callable, *, keep_checks: bool = False) -> str:
    """``fn``'s source without decorators and docstring, and (unless ``keep_checks``) without the
    statements that only validate arguments: what is left is the computation."""
    fn = _check_function("fn", fn)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as err:   # built in a REPL or from a string: nothing to show
        raise ValueError(f"fn: the source of {fn.__name__} is not available ({err})") from None
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError(f"fn: {fn.__name__} is not defined by a def statement")
    lines = source.splitlines()
    drop: set[int] = set(range(0, node.lineno - 1))     # decorators (lines before the def)
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        drop |= set(range(body[0].lineno - 1, body[0].end_lineno))
        body = body[1:]
    if not keep_checks:
        for stmt in body:
            if _is_check(stmt):
                drop |= set(range(stmt.lineno - 1, stmt.end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    return "\n".join(kept).rstrip()


# Helpers a card lists below the method's own code: private functions of the method's module, and
# the shared statistics (one helper per rule: the group-of-one rule lives in group_normalize).
_SHARED_HELPER_MODULES = ("labkit.core.stats",)


def _direct_calls(fn: Callable) -> list[tuple[str, Callable]]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError):
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = fn.__globals__.get(node.func.id)
            if inspect.isfunction(target) and not node.func.id.startswith(("check_", "_check")):
                calls.append((node.func.id, target))
    return calls


def called_helpers(fn: Callable, *, depth: int = 3) -> list[Callable]:
    """The helpers a card lists under ``fn``'s code, in order of first call: private functions of
    ``fn``'s own module (followed into their own private helpers, up to ``depth`` levels, so GAE's
    backward loop shows even though ``gae`` delegates it twice) and the shared statistics helpers
    of ``labkit.core.stats`` (not followed further). Argument checks are left out."""
    inner = _check_function("fn", fn)
    found: dict[str, Callable] = {}
    frontier = [inner]
    for _ in range(depth):
        nxt = []
        for caller in frontier:
            for called, target in _direct_calls(caller):
                key = f"{target.__module__}.{called}"
                if key in found or target is inner:
                    continue
                if target.__module__ == inner.__module__ and called.startswith("_"):
                    found[key] = target
                    nxt.append(target)
                elif target.__module__ in _SHARED_HELPER_MODULES:
                    found[key] = target
        frontier = nxt
    return list(found.values())


@dataclass(frozen=True)
class MethodCard:
    """What :func:`method_card` returns: renders as Markdown in Jupyter, as text in a terminal."""

    name: str
    title: str
    arxiv: tuple[str, ...]
    equation: str
    symbols: str
    formula: str
    code: str
    module: str
    collapse_code: bool = False
    helpers: tuple[tuple[str, str], ...] = ()   # (dotted name, code) of the helpers it calls
    # how faithful the lab's version is ("stand-in", "adaptation"; "" or "implemented": as published)
    # and what it substitutes: a card must carry the label the registry, the tables and the
    # inventory carry
    status: str = ""
    replaces: str = ""

    def _label(self) -> str:
        if self.status in ("", "implemented"):
            return ""
        return self.status.upper() + (f": replaces {self.replaces}" if self.replaces else "")

    def _repr_markdown_(self) -> str:
        papers = ", ".join(f"[arXiv:{a}](https://arxiv.org/abs/{a})" for a in self.arxiv)
        parts = [f"**`{self.name}`** — {self.title}" + (f" ({papers})" if papers and papers not in self.title else "")]
        if self._label():
            parts.append(f"**{self._label()}**")
        # one formula per card: the equation, rendered, reads best on the page; the docstring's
        # plain-text formula stands in where no equation is given
        if self.equation:
            parts.append(f"$$\n{self.equation}\n$$")
        elif self.formula:
            parts.append("Formula:\n\n```text\n" + self.formula + "\n```")
        if self.symbols:
            parts.append(f"<small>{self.symbols}</small>")
        code = f"```python\n{self.code}\n```"
        for where_helper, helper_code in self.helpers:
            code += f"\n\nwhich calls `{where_helper}`:\n\n```python\n{helper_code}\n```"
        where = f"`{self.module}.{self.name}`" if self.module else ""
        if self.collapse_code:
            parts.append(f"<details><summary>The code ({where})</summary>\n\n{code}\n\n</details>")
        else:
            parts.append(f"The code ({where}), argument checks left out:\n\n{code}")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        head = f"{self.name}: {self.title}"
        body = [head, "=" * min(len(head), 100)]
        if self._label():
            body += [self._label()]
        # one formula here too: in a terminal the docstring's plain-text formula reads better than
        # LaTeX source, which stands in only where the docstring has none
        if self.formula:
            body += ["formula:", textwrap.indent(self.formula, "  ")]
        elif self.equation:
            body += ["key equation (LaTeX): " + self.equation]
        body += ["code:", textwrap.indent(self.code, "  ")]
        for where_helper, helper_code in self.helpers:
            body += [f"which calls {where_helper}:", textwrap.indent(helper_code, "  ")]
        return "\n".join(body)


def method_card(fn: Callable, *, equation: str = "", symbols: str = "", name: str | None = None,
                collapse_code: bool = False, keep_checks: bool = False, helpers: bool = True,
                status: str = "", replaces: str = "") -> MethodCard:
    """A card for one method: title and arXiv link, one formula (``equation``, LaTeX, rendered when
    given; otherwise the docstring's Formula section) and the code (see :func:`method_code`),
    followed, when ``helpers``, by the code of the helpers it calls (:func:`called_helpers`), so
    GAE's backward loop is on the card even though ``gae`` delegates it. ``name`` defaults to the registered name (``fn.estimator_name``)
    or the function's name; ``collapse_code`` folds the listing (for notebooks that introduce
    many methods at once). ``status`` and ``replaces`` label a method the lab runs in another form
    than its paper ("stand-in" or "adaptation", and what it substitutes) at the top of the card."""
    inner = _check_function("fn", fn)
    for arg, value in (("equation", equation), ("symbols", symbols), ("status", status), ("replaces", replaces)):
        if not isinstance(value, str):
            raise TypeError(f"{arg}: expected a str, got {type(value).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name: expected a str or None, got {type(name).__name__}")
    doc = inspect.getdoc(inner) or ""
    title = doc.split("\n\n")[0].replace("\n", " ").strip() or inner.__name__
    return MethodCard(name=name or getattr(fn, "estimator_name", inner.__name__), title=title,
                      arxiv=tuple(arxiv_ids(inner)), equation=equation.strip(), symbols=symbols.strip(),
                      formula=formula_section(inner), code=method_code(inner, keep_checks=keep_checks),
                      module=inner.__module__ or "", collapse_code=collapse_code,
                      status=status.strip(), replaces=replaces.strip(),
                      helpers=tuple((f"{h.__module__}.{h.__name__}", method_code(h, keep_checks=keep_checks))
                                    for h in (called_helpers(inner) if helpers else [])))


@dataclass(frozen=True)
class MethodCards:
    """Several cards shown as one output (one Markdown block, a rule between cards)."""

    cards: tuple[MethodCard, ...]

    def _repr_markdown_(self) -> str:
        return "\n\n---\n\n".join(card._repr_markdown_() for card in self.cards)

    def __repr__(self) -> str:
        return "\n\n".join(repr(card) for card in self.cards)

    def __len__(self) -> int:
        return len(self.cards)


def method_cards(cards: Sequence[MethodCard]) -> MethodCards:
    """Show several :class:`MethodCard` s as one output."""
    cards = tuple(cards)
    if not cards or not all(isinstance(c, MethodCard) for c in cards):
        raise TypeError("cards: expected a non-empty sequence of MethodCard (from method_card)")
    return MethodCards(cards)
