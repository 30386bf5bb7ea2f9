"""The grader every exercise shares: cases, rules, results, the time limit, the registry, ``check``.

``check(fn, exercise)`` runs the reader's function on the exercise's randomised cases and on the
degenerate ones every estimator documents (a group of one, zero variance, a single-token
trajectory, gamma = 0 / 1, ...), compares each answer with the lab's registered estimator within
the exercise's tolerance, and answers with ONE hint: the first property, in the exercise's order,
that some case breaks. The order goes from the coarse (the function raised, wrong shape, NaN)
through the named mistakes (biased std, the group-of-one rule, a bootstrap past the end, ...) to a
plain mismatch, so the hint names the most specific thing that is wrong.

Nothing here knows a particular exercise: each lives in its notebook's module beside this one and
registers itself with ``register``.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from labkit.core.checks import check_bool, check_int, check_number

__all__ = ["Case", "Rule", "CheckResult", "Exercise", "EXERCISES", "DEFAULT_TIMEOUT", "NOT_FINITE", "F64",
           "check", "get_exercise", "list_exercises", "register", "copy_args", "close", "not_finite"]

F64 = torch.float64


# --------------------------------------------------------------------------- cases and rules
@dataclass(frozen=True)
class Case:
    """One input to a reader's function: a short ``name`` (shown on failure), the keyword
    ``args`` it is called with, and ``tags`` naming what is degenerate about it."""

    name: str
    args: dict
    tags: frozenset = frozenset()


@dataclass(frozen=True)
class Rule:
    """A property every answer must have: ``broken(case, got, want) -> bool`` says the reader's
    answer ``got`` breaks it on ``case`` (``want`` is the lab's answer); ``hint`` is what the
    reader is told. ``tags``: look only at cases carrying one of them (None: every case).
    ``every``: the rule names a known mistake and fires only when that mistake reproduces every
    answer that is wrong (two mistakes can coincide on one case; they do not on all of them)."""

    hint: str
    broken: Callable[[Case, torch.Tensor, torch.Tensor], bool]
    tags: frozenset | None = None
    #: a named mistake must explain EVERY wrong answer (not one case where two mistakes coincide)
    every: bool = False


def copy_args(case: Case) -> dict:
    """The case's arguments, each a copy: neither the reader nor a reference can change the case."""
    return {k: _copy(v) for k, v in case.args.items()}


def _copy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return dict(x)
    if isinstance(x, list):
        return list(x)
    return x


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    return a == b


def close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    """Equal shapes and every entry within ``tol`` (relative and absolute); bools compare exactly,
    and NaN on both sides counts as equal."""
    if a.shape != b.shape:
        return False
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return bool(torch.equal(a.bool(), b.bool()))
    a, b = a.to(F64), b.to(F64)
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool((((a - b).abs() <= tol * (1 + b.abs())) | both_nan).all())


def not_finite(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
    """A rule test: the answer holds NaN or inf."""
    return got.is_floating_point() and not bool(torch.isfinite(got).all())


#: Every exercise ends with it; one whose named mistakes produce NaN tries it earlier as well.
NOT_FINITE = Rule("your answer contains NaN or inf", not_finite)


# --------------------------------------------------------------------------- the result
@dataclass
class CheckResult:
    """What ``check`` found: ``passed``, the ``hint`` (None when passed), the failing ``case``
    and the reader's and the lab's answers on it (``got`` / ``want``), ``n_cases`` graded."""

    exercise: str
    passed: bool
    hint: str | None = None
    case: Case | None = None
    got: Any = None
    want: Any = None
    n_cases: int = 0
    error: BaseException | None = None
    printed: bool = field(default=False, repr=False)

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        # a notebook cell ending in check(...) would show the result twice: printed, then displayed
        if not self.printed:
            print(self)

    def __str__(self) -> str:
        if self.passed:
            return f"\u2713 {self.exercise}: all {self.n_cases} cases pass"
        lines = [f"\u2717 {self.exercise}: {self.hint}"]
        if self.case is not None:
            args = ", ".join(f"{k}={_show(v)}" for k, v in self.case.args.items())
            lines.append(f"  case '{self.case.name}': {args}")
        if self.got is not None:
            lines.append(f"  yours:    {_show(self.got)}")
        if self.want is not None:
            lines.append(f"  expected: {_show(self.want)}")
        return "\n".join(lines)

    __repr__ = __str__


def _show(x: Any) -> str:
    """A short, rounded rendering of a case argument or an answer."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool:
            return str(x.int().tolist()).replace(" ", "")
        if x.is_floating_point():
            x = torch.round(x.to(F64), decimals=3)
            return str([_tidy(v) for v in x.tolist()] if x.dim() == 1 else
                       [[_tidy(v) for v in row] for row in x.tolist()] if x.dim() == 2 else _tidy(x.item())
                       if x.dim() == 0 else x.tolist())
        return str(x.tolist())
    if isinstance(x, float):
        return _tidy(round(x, 3))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_show(k)}: {_show(v)}" for k, v in x.items()) + "}"
    if isinstance(x, frozenset):
        return "{" + ",".join(str(i) for i in sorted(x)) + "}"
    return repr(x)


def _tidy(v: float):
    v = 0.0 if v == 0 else v  # no -0.0 on the page
    return int(v) if float(v).is_integer() and abs(v) < 1e6 else v


def _size(case: Case) -> int:
    """How much a case shows on the page: entries of its tensors, lists and dicts."""
    return sum(v.numel() if isinstance(v, torch.Tensor) else len(v) if isinstance(v, (list, dict)) else 1
               for v in case.args.values())


# --------------------------------------------------------------------------- the time limit
#: Seconds one call of the reader's function may take before ``check`` stops it (every exercise's
#: solution takes milliseconds; a loop that never ends would otherwise hang the kernel).
DEFAULT_TIMEOUT = 10.0


class _TookTooLong(BaseException):
    """Raised inside the reader's function by the alarm: a BaseException, so a bare ``except
    Exception`` in their code cannot swallow it."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Stop the body after ``seconds`` with ``_TookTooLong``, using SIGALRM. Only where that
    exists and only in the main thread (a Jupyter kernel runs cells there); elsewhere, e.g. on
    Windows, no limit applies."""
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def stop(signum, frame):
        raise _TookTooLong()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- the exercise
@dataclass(frozen=True)
class Exercise:
    """One notebook's exercise: what to write (``signature``, ``prompt`` with the formula and its
    arXiv id), how to grade it (``cases(gen)`` -> list of Case, ``reference(**args)`` -> the lab's
    answer, ``rules`` in the order their hints are tried) and the tolerance (relative and
    absolute, per entry) within which an answer counts as equal."""

    notebook: str
    name: str
    title: str
    signature: str
    prompt: str
    cases: Callable[[torch.Generator], list]
    reference: Callable[..., torch.Tensor]
    rules: tuple = ()
    tolerance: float = 1e-5
    output: str = "float"  # "float" or "bool"

    @property
    def key(self) -> str:
        return f"{self.notebook} \u00b7 {self.title}"

    def __str__(self) -> str:
        return f"Exercise {self.key}\n\n    {self.signature}\n\n{self.prompt}"

    @property
    def template(self) -> str:
        """The empty function a notebook's exercise cell starts from (it runs, and fails the check)."""
        head, _, returns = self.signature.partition(" -> ")
        return (f"def {head}:\n    \"\"\"{self.prompt.splitlines()[0]} Returns {returns}.\"\"\"\n"
                f"    ...  # your code here\n")

    __repr__ = __str__

    def check(self, fn: Callable, *, seed: int = 0, verbose: bool = True,
              timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
        """Grade ``fn`` (see ``check``)."""
        if not callable(fn):
            raise TypeError(f"fn: expected the function you wrote, got {type(fn).__name__} ({fn!r:.60})")
        seed = check_int("seed", seed, low=0)
        verbose = check_bool("verbose", verbose)
        if timeout is not None:
            timeout = check_number("timeout", timeout, low=0.0, low_open=True)
        result = self._grade(fn, seed, timeout)
        if verbose:
            print(result)
            result.printed = True
        return result

    def _grade(self, fn: Callable, seed: int, timeout: float | None = None) -> CheckResult:
        gen = torch.Generator().manual_seed(seed)
        cases = self.cases(gen)
        fail = lambda hint, case, got=None, want=None, error=None: CheckResult(  # noqa: E731
            self.key, False, hint, case, got, want, len(cases), error)
        answers = []
        for case in cases:
            want = self.reference(**copy_args(case))
            args = copy_args(case)
            try:
                with warnings.catch_warnings(), _time_limit(timeout):  # e.g. torch.std of one value: the hint says it shorter
                    warnings.simplefilter("ignore")
                    got = fn(*args.values())  # positionally, in the signature's order: any parameter names work
            except _TookTooLong:
                return fail(f"your function did not return within {timeout:g} s on this case: is there a loop "
                            f"that never ends (e.g. a while loop whose index never moves)?", case)
            except Exception as err:  # the reader's bug is reported, not raised
                extra = f" (the signature is {self.signature})" if isinstance(err, TypeError) else ""
                return fail(f"your function raised {type(err).__name__}: {str(err)[:200]}{extra}", case, error=err)
            changed = [k for k in args if not _same(args[k], case.args[k])]
            if changed:
                return fail(f"your function changed its input {changed[0]!r} in place: work on a copy "
                            f"(e.g. x = x.clone())", case)
            got_t = self._as_output(got)
            if got_t is None:
                what = "True/False values" if self.output == "bool" else "numbers"
                return fail(f"your function should return a tensor (or list) of {what} shaped "
                            f"{tuple(want.shape)}, got {type(got).__name__}", case, got=None, want=want)
            if got_t.shape != want.shape:
                return fail(f"your function should return shape {tuple(want.shape)} on this case, "
                            f"got {tuple(got_t.shape)}", case, got_t, want)
            answers.append((case, got_t, want))
        rules = self.rules + (
            NOT_FINITE,
            Rule(f"your answer differs from the lab's by more than the tolerance ({self.tolerance:g})",
                 lambda c, g, w: not close(g, w, self.tolerance)),
        )
        for rule in rules:
            seen = [a for a in answers if rule.tags is None or rule.tags & a[0].tags]
            if rule.every:
                wrong = [a for a in seen if not close(a[1], a[2], self.tolerance)]
                broken = wrong if wrong and all(rule.broken(*a) for a in wrong) else []
            else:
                broken = [a for a in seen if rule.broken(*a)]
            if broken:  # show the smallest case that breaks it
                return fail(rule.hint, *min(broken, key=lambda a: _size(a[0])))
        return CheckResult(self.key, True, n_cases=len(cases))

    def _as_output(self, got: Any) -> torch.Tensor | None:
        try:
            t = got if isinstance(got, torch.Tensor) else torch.as_tensor(got)
        except (TypeError, ValueError, RuntimeError):
            return None
        if self.output == "bool":
            if t.dtype != torch.bool:
                if t.is_floating_point() and not bool(((t == 0) | (t == 1)).all()):
                    return None
                t = t != 0
            return t
        if t.dtype == torch.bool or t.is_complex():
            return None
        return t.detach().to(F64)


# --------------------------------------------------------------------------- the registry
#: notebook ("00" ... "11") -> its exercise, in the order the notebooks' modules registered them
EXERCISES: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to the registry under its notebook (each notebook's module calls it once)."""
    if not isinstance(exercise, Exercise):
        raise TypeError(f"exercise: expected an Exercise, got {type(exercise).__name__}")
    EXERCISES[exercise.notebook] = exercise
    return exercise


def get_exercise(exercise: Any) -> Exercise:
    """The exercise named by ``exercise``: an ``Exercise``, a notebook number (1 or "01") or an
    exercise name ("grpo_advantage")."""
    if isinstance(exercise, Exercise):
        return exercise
    if isinstance(exercise, bool) or not isinstance(exercise, (int, str)):
        raise TypeError(f"exercise: expected a notebook number or an exercise name, got {type(exercise).__name__}")
    key = f"{exercise:02d}" if isinstance(exercise, int) else exercise.strip()
    if key.isdigit():
        key = f"{int(key):02d}"
    if key in EXERCISES:
        return EXERCISES[key]
    for ex in EXERCISES.values():
        if ex.name == key:
            return ex
    raise ValueError(f"exercise: unknown {exercise!r}; choose a notebook number {sorted(EXERCISES)} or a name "
                     f"{[e.name for e in EXERCISES.values()]}")


def list_exercises() -> list[str]:
    """One line per exercise: notebook, title and the signature to write."""
    return [f"{ex.notebook}  {ex.title:<32} {ex.signature}" for ex in EXERCISES.values()]


def check(fn: Callable, exercise: Any, *, seed: int = 0, verbose: bool = True,
          timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
    """Grade the reader's ``fn`` on ``exercise`` (an ``Exercise``, a notebook number or a name).

    Runs ``fn`` on the exercise's randomised cases (drawn from ``seed``) and its degenerate ones,
    compares with the lab's estimator within the exercise's tolerance, and returns a
    ``CheckResult`` (``.passed``, ``.hint``, ``.case``, ``.got``, ``.want``); with ``verbose``
    (default) it also prints it: one line on success, the hint and the failing case otherwise.
    An exception inside ``fn`` is reported with the case that raised it, not raised; a call that
    takes longer than ``timeout`` seconds (default 10; None: no limit) is stopped and reported
    (where SIGALRM exists, i.e. not on Windows, and in the main thread, where a kernel runs cells).
    """
    return get_exercise(exercise).check(fn, seed=seed, verbose=verbose, timeout=timeout)
