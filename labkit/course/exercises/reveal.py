"""The one documented way to see an exercise's reference solution: ``reveal_solution(1)``.

The solutions live in ``labkit.course.solutions``, which nothing a notebook imports brings
along: this module imports it only when the reader asks, prints the solution's source with the
imports it needs under a one-line header, and returns nothing to call, so the grader's cell
cannot be passed by handing it the lab's function.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any

from labkit.course.exercises.grader import get_exercise

__all__ = ["reveal_solution", "solution_source"]


def solution_source(exercise: Any) -> str:
    """The text ``reveal_solution`` prints for ``exercise`` (a notebook number or an exercise
    name): a header line saying it is the lab's reference, the solution module's imports, then
    the function's source. Returns that text."""
    ex = get_exercise(exercise)
    # imported here, on request only: the exercises' namespace never holds a solution
    module = importlib.import_module(ex.cases.__module__.replace(".exercises.", ".solutions.", 1))
    fn = getattr(module, ex.name)
    tree = ast.parse(inspect.getsource(module))
    imports = [ast.get_source_segment(inspect.getsource(module), node) for node in tree.body
               if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__"]
    header = f"# The lab's reference solution to exercise {ex.key}"
    return "\n".join([header, *imports, "", "", inspect.getsource(fn).rstrip()]) + "\n"


def reveal_solution(exercise: Any) -> None:
    """Print the lab's reference solution to ``exercise`` (a notebook number such as 1 or "01",
    or an exercise name such as "grpo_advantage"): a one-line header, the imports it needs and
    the function's source. An unknown exercise raises ValueError naming the known ones. Returns
    None: the solution is there to read and compare, not to hand to ``check``."""
    print(solution_source(exercise), end="")
