"""Run-and-interpret exercises: run an experiment at the settings the exercise names, read one
number (or make one choice) off it, and enter it.

``check(answer, "08b")`` compares the reader's reading with the lab's own run of the same
experiment (``Reading.measure``, the function ``reveal_solution("08b")`` prints), within the
exercise's stated tolerance. A failure names what to look at again, never the lab's number: a
reading that matches a known misreading (the number at another setting, the other column, the
complement) gets that misreading's hint; any other gets the exercise's general hint. The lab's
run is computed once per session, on the first answer that needs it.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable

from labkit.course.exercises.grader import CheckResult, Stated, check_exercise_fields

__all__ = ["Reading", "Misreading"]

#: the lab's measured value per exercise id, computed on the first answer that needs it
_MEASURED: dict[str, Any] = {}


@dataclass(frozen=True)
class Misreading:
    """A known way to read the experiment wrong: ``value`` (a number, a choice, or a function of
    no arguments computing it, such as the same measurement at another setting) and the ``hint``
    a reading equal to it gets."""

    value: Any
    hint: str


@dataclass(frozen=True)
class Reading(Stated):
    """One run-and-interpret exercise of a notebook.

    ``prompt`` names the experiment and its settings and what to read. ``measure()`` is the lab's
    own run at those settings, returning a number or (with ``choices``) one of the choices. A
    number counts as right within ``tolerance`` (absolute; state it in the prompt); a choice must
    be one of ``choices`` (case and surrounding spaces aside). ``misreadings`` are tried in order
    on a wrong reading; ``hint`` is what any other wrong reading is told. ``name`` is the variable
    the notebook's cell stores the reading in."""

    notebook: str
    name: str
    title: str
    prompt: str
    measure: Callable[[], Any]
    hint: str
    tolerance: float = 0.0
    choices: tuple = ()
    misreadings: tuple = ()
    letter: str = "b"
    path: str = "deep dive"
    kind: str = "interpret"

    def __post_init__(self):
        check_exercise_fields(self)
        if self.kind != "interpret":
            raise ValueError(f"kind: a Reading is a run-and-interpret exercise ('interpret'), got {self.kind!r}")
        if not callable(self.measure):
            raise TypeError("measure: expected a function of no arguments that runs the lab's experiment")
        if self.choices and self.tolerance:
            raise ValueError("tolerance: a choice is right or wrong; give a tolerance only for a number")
        if not self.choices and not (isinstance(self.tolerance, numbers.Real) and self.tolerance > 0):
            raise ValueError("tolerance: a numeric reading needs a tolerance > 0 (state it in the prompt)")

    @property
    def signature(self) -> str:
        what = "one of " + ", ".join(repr(c) for c in self.choices) if self.choices else "a number"
        return f"{self.name} = {what}"

    __repr__ = Stated.__str__

    @property
    def template(self) -> str:
        """What a notebook's cell starts from: the reading left open (it runs, and fails the check)."""
        what = "one of " + ", ".join(repr(c) for c in self.choices) if self.choices else "the number you read"
        return f"{self.name} = ...  # {what}\n"

    def lab_value(self) -> Any:
        """The lab's own run at the named settings (computed once per session)."""
        if self.id not in _MEASURED:
            _MEASURED[self.id] = self.measure()
        return _MEASURED[self.id]

    def _parse(self, answer: Any) -> tuple[Any, str | None]:
        """(the reading, None), or (None, why it is no reading)."""
        if answer is Ellipsis or answer is None:
            what = "one of " + ", ".join(repr(c) for c in self.choices) if self.choices else "a number"
            return None, f"enter your reading: replace ... with {what}, read off the run the exercise names"
        if self.choices:
            if not isinstance(answer, str):
                return None, f"answer with one of {list(self.choices)} (a string), got {type(answer).__name__}"
            for c in self.choices:
                if answer.strip().lower() == str(c).lower():
                    return c, None
            return None, f"{answer!r} is not one of the choices {list(self.choices)}"
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            try:  # a one-element tensor or array reads as its number
                answer = float(answer.item()) if hasattr(answer, "item") and getattr(answer, "size", 1) else answer
            except (TypeError, ValueError, RuntimeError):
                pass
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            return None, f"answer with a number, got {type(answer).__name__}"
        if not math.isfinite(float(answer)):
            return None, f"answer with a finite number, got {answer}"
        return float(answer), None

    def _matches(self, reading: Any, value: Any) -> bool:
        if self.choices:
            return str(reading).lower() == str(value).lower()
        return abs(float(reading) - float(value)) <= self.tolerance + 1e-12

    def check(self, answer: Any, *, seed: int | None = None, verbose: bool = True, timeout: float | None = None
              ) -> CheckResult:
        """Grade the reader's reading ``answer`` (see the module docstring); ``seed`` and
        ``timeout`` are accepted for the common ``check`` call and unused (a reading has no random
        cases and runs no code of the reader's)."""
        reading, problem = self._parse(answer)
        if problem is not None:
            result = CheckResult(self.key, False, problem, got=None if answer is Ellipsis else answer, n_cases=1)
        elif self._matches(reading, self.lab_value()):
            result = CheckResult(self.key, True, n_cases=1)
        else:
            hint = self.hint
            for m in self.misreadings:
                value = m.value() if callable(m.value) else m.value
                if not self._matches(value, self.lab_value()) and self._matches(reading, value):
                    hint = m.hint
                    break
            result = CheckResult(self.key, False, hint, got=reading, want=self.lab_value(), n_cases=1)
        result.origin = "reading"
        if verbose:
            print(result)
            result.printed = True
        return result
