"""The one documented way to see an exercise's reference solution: ``reveal_solution("01b")``.

The solutions to the exercises that ask for a function live in ``labkit.course.solutions``, which
nothing a notebook imports brings along: this module imports it only when the reader asks, prints
the solution's source with the imports it needs under a one-line header, and returns nothing to
call, so the grader's cell cannot be passed by handing it the lab's function. A run-and-interpret
exercise's solution is the lab's own run (``Reading.measure``): its source is printed the same way.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any

from labkit.course.exercises.grader import get_exercise

__all__ = ["reveal_solution", "solution_source", "solved_cell"]


def _imports(module) -> list[str]:
    source = inspect.getsource(module)
    return [ast.get_source_segment(source, node) for node in ast.parse(source).body
            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__"]


def solution_source(exercise: Any) -> str:
    """The text ``reveal_solution`` prints for ``exercise`` (an id, a notebook number or an
    exercise name): a header line saying it is the lab's reference, the imports of the module it
    lives in, then the function's source. Returns that text."""
    ex = get_exercise(exercise)
    if ex.kind == "interpret":
        fn = ex.measure
        module = importlib.import_module(fn.__module__)
        header = f"# The lab's own run for exercise {ex.key}: its value is what your reading is graded against"
    else:
        # imported here, on request only: the exercises' namespace never holds a solution
        module = importlib.import_module(ex.cases.__module__.replace(".exercises.", ".solutions.", 1))
        fn = getattr(module, ex.name)
        header = f"# The lab's reference solution to exercise {ex.key}"
    return "\n".join([header, *_imports(module), "", "", inspect.getsource(fn).rstrip()]) + "\n"


def reveal_solution(exercise: Any) -> None:
    """Print the lab's reference solution to ``exercise`` (an id such as "01b", a notebook number
    such as 1 for its first exercise, or an exercise name such as "grpo_advantage"): a one-line
    header, the imports it needs and the function's source. An unknown exercise raises ValueError
    naming the known ones. Returns None: the solution is there to read and compare, not to hand
    to ``check``."""
    print(solution_source(exercise), end="")


def solved_cell(exercise: Any, source: str) -> str:
    """The notebook cell ``source`` that holds ``exercise``'s starting point (the empty or buggy
    function, or the reading left open, then its ``check``), as a student who solved it would
    have it: the function replaced by the reference solution, or the open reading by the lab's
    run (its source, then the reading taken from it). Code before a reading's line (the run the
    student makes) stays. For timing the course as a student who did every exercise
    (benchmarks/notebook_budget.py --solutions). Returns the new source; raises ValueError if
    ``source`` is not that exercise's cell."""
    ex = get_exercise(exercise)
    call = f'check({ex.name}, "{ex.id}")'
    if call not in source:
        raise ValueError(f"source: not exercise {ex.id}'s cell (no {call})")
    body = solution_source(ex)
    if ex.kind != "interpret":
        return f"{body}\n\n{call}\n"
    lines = source.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith(f"{ex.name} = ...")]
    if not at:
        raise ValueError(f"source: exercise {ex.id}'s cell has no line '{ex.name} = ...'")
    reading = [body.rstrip(), f"{ex.name} = {ex.measure.__name__}()"]
    return "\n".join(lines[: at[0]] + reading + lines[at[0] + 1:]) + "\n"
