"""The grader every exercise shares: cases, rules, results, the time limit, the registry, ``check``.

``check(fn, exercise)`` runs the reader's function on the exercise's cases, compares each answer
with the lab's registered estimator within the exercise's tolerance, and answers with ONE hint:
the first property, in the exercise's order, that some case breaks, shown with the smallest case
that breaks it and the reader's own answer there, never the lab's (a failure teaches the rule,
not the numbers to copy).

Each attempt draws its random cases from a fresh seed (``secrets``), so no answer can be fitted
to the cases of an earlier attempt; the result names the seed, and ``check(fn, exercise,
seed=S)`` repeats exactly those cases. The environment variable LABKIT_GRADER_SEED fixes the
seed of every attempt that names none (the scripted notebook run sets it, so the stored outputs
stay the same from one run to the next).

It grades in two passes. First the main cases (no tags: the randomised ones and the plain
examples of the formula), then, only if every one of them passes, the edge cases every estimator
documents (tagged: a group of one, zero variance, a single-token trajectory, gamma = 0, ...), so
a reader hears about the formula before its edges. In each pass the hints go from what the whole
answer shows (0 everywhere, the sign flipped) through the coarse (the function raised, wrong
shape, NaN) and the named mistakes (biased std, the group-of-one rule, a bootstrap past the end,
...) to a plain mismatch, so the hint names the most specific thing that is wrong.

Nothing here knows a particular exercise: each lives in its notebook's module beside this one and
registers itself with ``register``.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re
import secrets
import signal
import textwrap
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from labkit.core.checks import check_bool, check_int, check_number

__all__ = ["Case", "Rule", "CheckResult", "Exercise", "EXERCISES", "KINDS", "PATHS", "DEFAULT_TIMEOUT", "NOT_FINITE", "F64", "WIDTH",
           "SEED_ENV", "SEEDS", "Stated", "check", "check_exercise_fields", "once_passed", "get_exercise", "list_exercises", "register", "copy_args", "close",
           "not_finite", "all_zero", "sign_flipped", "draw_seed"]

F64 = torch.float64

#: What an exercise asks, and how the course names it: write a formula from its statement; fix a
#: planted mistake in working-looking code; run an experiment at named settings and report what it
#: measured; write a piece of the training machinery and run it (one per half of the course).
KINDS = {"implement": "implement", "debug": "find the bug", "interpret": "run and interpret",
         "capstone": "capstone"}
#: Where an exercise sits in its notebook: on the core path every workshop plan runs, or in a deep dive.
PATHS = ("core", "deep dive")

#: Characters per printed line: JupyterLab's output column at 1366 px holds about 90 before it
#: wraps a line itself, mid-word; the grader wraps first, between words.
WIDTH = 88

#: The environment variable that fixes the seed of every attempt that names none.
SEED_ENV = "LABKIT_GRADER_SEED"
#: A fresh seed is drawn from 0 ... SEEDS - 1: six digits at most to copy into ``seed=``, and a
#: million sets of cases, too many to learn by heart.
SEEDS = 1_000_000


def draw_seed(seed: int | None = None) -> tuple[int, str]:
    """The seed of one attempt and where it came from: ``seed`` itself ("given"); else the
    integer in the environment variable LABKIT_GRADER_SEED ("env"); else a fresh one from
    ``secrets`` ("fresh"). Returns (seed, origin)."""
    if seed is not None:
        return check_int("seed", seed, low=0, high=2 ** 63 - 1), "given"
    fixed = os.environ.get(SEED_ENV, "").strip()
    if fixed:
        if not fixed.isdigit():
            raise ValueError(f"{SEED_ENV}: expected a whole number >= 0 (or unset for fresh cases), got {fixed!r}")
        return check_int(SEED_ENV, int(fixed), high=2 ** 63 - 1), "env"
    return secrets.randbelow(SEEDS), "fresh"


# --------------------------------------------------------------------------- cases and rules
@dataclass(frozen=True)
class Case:
    """One input to a reader's function: a short ``name`` (shown on failure), the keyword
    ``args`` it is called with, and ``tags`` naming what is degenerate about it. A case without
    tags is a main case (graded first); a tagged one is an edge case (graded once every main
    case passes), and a rule with tags looks only at edge cases carrying one of them."""

    name: str
    args: dict
    tags: frozenset = frozenset()


@dataclass(frozen=True)
class Rule:
    """A property every answer must have: ``broken(case, got, want) -> bool`` says the reader's
    answer ``got`` breaks it on ``case`` (``want`` is the lab's answer); ``hint`` is what the
    reader is told. ``tags``: look only at cases carrying one of them (None: every case).
    ``every``: the rule names a known mistake and fires only when that mistake reproduces every
    answer that is wrong (two mistakes can coincide on one case; they do not on all of them).
    ``always``: the rule names what the function does whatever its input (returns zeros) and
    fires only when every answer, right or wrong, breaks it."""

    hint: str
    broken: Callable[[Case, torch.Tensor, torch.Tensor], bool]
    tags: frozenset | None = None
    #: a named mistake must explain EVERY wrong answer (not one case where two mistakes coincide)
    every: bool = False
    #: EVERY answer must break it (an answer that is 0 only where it is wrong is no placeholder)
    always: bool = False


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


def all_zero(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
    """A rule test: the answer is 0 (False, for a selection) everywhere."""
    return not bool(got.any())


def sign_flipped(tol: float) -> Callable[[Case, torch.Tensor, torch.Tensor], bool]:
    """A rule test: the answer is minus the lab's within ``tol`` (never for a selection)."""
    return lambda case, got, want: got.dtype != torch.bool and close(got, -want, tol)


# --------------------------------------------------------------------------- the result
@dataclass
class CheckResult:
    """What ``check`` found: ``passed``, the ``hint`` (None when passed), the failing ``case``
    (the smallest that breaks the hint's rule) and the reader's answer on it (``got``),
    ``n_cases`` graded, and the ``seed`` the random cases came from with its ``origin``
    ("fresh", "given" or "env", see ``draw_seed``; "reading" for a run-and-interpret answer); ``again`` is the call that repeats the
    attempt. The lab's answer on the case (``want``) is kept for tests and never shown: the
    printed result, its repr and its notebook display leave it out."""

    exercise: str
    passed: bool
    hint: str | None = None
    case: Case | None = None
    got: Any = None
    want: Any = field(default=None, repr=False)
    n_cases: int = 0
    error: BaseException | None = None
    seed: int | None = None
    origin: str = "given"
    again: str | None = None
    printed: bool = field(default=False, repr=False)

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        # a notebook cell ending in check(...) would show the result twice: printed, then displayed
        if not self.printed:
            print(self)

    def __str__(self) -> str:
        if self.passed and self.origin == "reading":
            return _wrap(f"\u2713 {self.exercise}: your reading agrees with the lab's own run", "", "  ")
        if self.passed:
            return _wrap(f"\u2713 {self.exercise}: all {self.n_cases} cases pass{self._drawn()}", "", "  ")
        lines = [_wrap(f"\u2717 {self.exercise}: {self.hint}", "", "  ")]
        if self.case is not None:
            args = ", ".join(f"{k}={_show(v)}" for k, v in self.case.args.items())
            lines.append(_wrap(f"smallest failing case '{self.case.name}': {args}", "  ", "    "))
        if self.got is not None:  # the reader's own answer only: the lab's is never printed
            lines.append(_wrap(_show(self.got), "  yours: ", " " * 9))
        if self.seed is not None:
            again = f": {self.again} repeats these cases" if self.again else ""
            lines.append(_wrap(f"seed {self.seed} ({self._origin_words()}){again}", "  ", "    "))
        return "\n".join(lines)

    def _origin_words(self) -> str:
        return {"fresh": "fresh", "env": f"fixed by {SEED_ENV}", "given": "as asked"}.get(self.origin, self.origin)

    def _drawn(self) -> str:
        """Where a passing attempt's random cases came from, for its one line."""
        if self.seed is None:
            return ""
        if self.origin == "fresh":
            return f", drawn fresh (seed {self.seed})"
        if self.origin == "env":
            return f", on seed {self.seed} fixed by {SEED_ENV} (unset it for fresh cases)"
        return f", on seed {self.seed} (as asked; without seed= the cases are fresh)"

    __repr__ = __str__


def _wrap(text: str, first: str, rest: str) -> str:
    """``text`` on lines of at most WIDTH characters (where its words allow), broken between
    words only (a negative number keeps its minus), the first line after ``first`` and the
    others after the hanging indent ``rest``."""
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def _reflow(prompt: str) -> str:
    """An exercise's prompt within WIDTH: each run of unindented lines is one paragraph, filled
    again; an indented line (an argument, a formula) keeps its own line, wrapped with a hanging
    indent."""
    out, paragraph = [], []
    for line in prompt.splitlines() + [""]:
        indent = line[: len(line) - len(line.lstrip())]
        if line.strip() and not indent:
            paragraph.append(line.strip())
            continue
        if paragraph:
            out.append(_wrap(" ".join(paragraph), "", ""))
            paragraph = []
        if line.strip():
            out.append(_wrap(line.strip(), indent, indent + "  "))
    return "\n".join(out)


def _show(x: Any) -> str:
    """A short, rounded rendering of a case argument or an answer."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool:  # 0/1 per row, a space between rows: a long table wraps between rows
            rows = x.int().tolist()
            if x.dim() == 2:
                return "[" + ", ".join(str(row).replace(" ", "") for row in rows) + "]"
            return str(rows).replace(" ", "")
        if x.is_floating_point():
            x = torch.round(x.to(F64), decimals=3)
            return str([_tidy(v) for v in x.tolist()] if x.dim() == 1 else
                       [[_tidy(v) for v in row] for row in x.tolist()] if x.dim() == 2 else _tidy(x.item())
                       if x.dim() == 0 else x.tolist())
        return str(x.tolist())
    if isinstance(x, float):
        return str(_tidy(round(x, 3)))
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
class Stated:
    """What every kind of exercise states the same way: its ``id`` (notebook + letter), its
    ``key`` (id and title, as results name it), its ``minutes`` by the course's time rule and its
    text (the task, its kind and path, what to write and the prompt). A dataclass that mixes it in
    has ``notebook``, ``letter``, ``title``, ``kind``, ``path``, ``signature`` and ``prompt``."""

    @property
    def id(self) -> str:
        return self.notebook + self.letter

    @property
    def key(self) -> str:
        return f"{self.id} \u00b7 {self.title}"

    @property
    def minutes(self) -> float:
        """What the course's time rule charges for doing it (``labkit.course.timing``), besides its words."""
        from labkit.course.timing import EXERCISE_MINUTES
        return EXERCISE_MINUTES[self.kind]

    def __str__(self) -> str:
        return (f"Exercise {self.key} ({KINDS[self.kind]}, {self.path})\n\n    {self.signature}\n\n"
                f"{_reflow(self.prompt)}")


@dataclass(frozen=True)
class Exercise(Stated):
    """One notebook's exercise: what to write (``signature``, ``prompt`` with the formula and its
    arXiv id), how to grade it (``cases(gen)`` -> list of Case, ``reference(**args)`` -> the lab's
    answer, ``rules`` in the order their hints are tried) and the tolerance (relative and
    absolute, per entry) within which an answer counts as equal. ``sign_note``: what a flipped
    sign means in this exercise, added to the shared hint for it (see ``all_rules``)."""

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
    sign_note: str = ""
    #: which of the notebook's exercises: "a", "b", ... (the id is notebook + letter, e.g. "01b")
    letter: str = "a"
    #: one of KINDS: "implement", "debug" (fix ``buggy``) or "capstone"; a reading is a ``Reading``
    kind: str = "implement"
    #: one of PATHS
    path: str = "core"
    #: kind "debug": the function with the planted mistake, written as the reader will see it (its
    #: source, renamed to ``name``, is the template)
    buggy: Callable | None = None
    #: how the reader's function is called on a case's arguments and what of it is graded
    #: (default: ``fn(*args.values())``, its return value); a capstone that grades what a training
    #: step did to a model, say, calls it and returns the parameters
    call: Callable[[Callable, dict], Any] | None = None

    def __post_init__(self):
        check_exercise_fields(self)
        if self.kind == "interpret":
            raise ValueError("kind: a run-and-interpret exercise is a Reading (labkit.course.exercises.reading)")
        if (self.kind == "debug") != (self.buggy is not None):
            raise ValueError("buggy: a 'debug' exercise needs the buggy function, and only it has one")


    @property
    def template(self) -> str:
        """What a notebook's exercise cell starts from (it runs, and fails the check): an empty
        function, or for a "debug" exercise the buggy one under the exercise's name."""
        if self.buggy is not None:
            source = textwrap.dedent(inspect.getsource(self.buggy))
            return re.sub(rf"def {self.buggy.__name__}\(", f"def {self.name}(", source, count=1)
        head, _, returns = self.signature.partition(" -> ")
        return (f"def {head}:\n    \"\"\"{self.prompt.splitlines()[0]} Returns {returns}.\"\"\"\n"
                f"    ...  # your code here\n")

    __repr__ = Stated.__str__

    def check(self, fn: Callable, *, seed: int | None = None, verbose: bool = True,
              timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
        """Grade ``fn`` (see ``check``)."""
        if not callable(fn):
            raise TypeError(f"fn: expected the function you wrote, got {type(fn).__name__} ({fn!r:.60})")
        verbose = check_bool("verbose", verbose)
        if timeout is not None:
            timeout = check_number("timeout", timeout, low=0.0, low_open=True)
        seed, origin = draw_seed(seed)
        result = self._grade(fn, seed, timeout)
        name = getattr(fn, "__name__", "")
        name = name if name.isidentifier() else "fn"
        result.seed, result.origin = seed, origin
        result.again = f'check({name}, "{self.id}", seed={seed})'
        if verbose:
            print(result)
            result.printed = True
        return result

    def all_rules(self) -> tuple:
        """Every rule in the order its hint is tried. First what the whole answer shows: 0
        everywhere (a placeholder still in place) and the sign flipped; they come before the
        exercise's own rules, which such an answer would trip by accident (a zero answer breaks
        the group-of-one rule too, yet that is not what is wrong). Then the exercise's rules, NaN,
        and the plain mismatch."""
        where = f'get_exercise("{self.id}") shows the task again'
        if self.output == "bool":
            first = (Rule(f"your answer is False everywhere, as a placeholder's would be: mark the entries the "
                          f"task asks for ({where}), starting with the case below", all_zero, always=True),)
        else:
            sign = ("your answer is minus the expected one (right size, wrong sign): look for a difference "
                    "written the wrong way round, b - a where the formula has a - b")
            first = (Rule(f"your answer is 0 everywhere, as a placeholder's would be (e.g. torch.zeros_like(...)): "
                          f"compute the task's formula ({where}), starting with the case below", all_zero, always=True),
                     Rule(sign + (f"; here: {self.sign_note}" if self.sign_note else ""),
                          sign_flipped(self.tolerance), every=True))
        return first + self.rules + (
            NOT_FINITE,
            Rule(f"your answer differs from the lab's by more than the tolerance ({self.tolerance:g})",
                 lambda c, g, w: not close(g, w, self.tolerance)),
        )

    def _grade(self, fn: Callable, seed: int, timeout: float | None = None) -> CheckResult:
        cases = self.cases(torch.Generator().manual_seed(seed))
        # the formula before its edges: edge cases are graded only once every main case passes
        for part in ([c for c in cases if not c.tags], [c for c in cases if c.tags]):
            answers, failed = [], []
            for case in part:
                answer = self._answer(fn, case, timeout)
                if isinstance(answer, CheckResult):
                    answer.n_cases = len(cases)
                    if isinstance(answer.error, _TookTooLong):  # one stop is enough: each costs the whole limit
                        answer.error = None
                        return answer
                    failed.append(answer)
                    continue
                answers.append(answer)
            if failed:  # raised, wrong type or shape, input changed: shown on the smallest such case
                return min(failed, key=lambda r: _size(r.case))
            for rule in self.all_rules():
                broken = self._broken(rule, answers)
                if broken:  # show the smallest case that breaks it
                    return CheckResult(self.key, False, rule.hint, *min(broken, key=lambda a: _size(a[0])),
                                       n_cases=len(cases))
        return CheckResult(self.key, True, n_cases=len(cases))

    def _answer(self, fn: Callable, case: Case, timeout: float | None) -> tuple | CheckResult:
        """(case, the reader's answer, the lab's) on one case, or the failed CheckResult when the
        function raised, ran too long, changed its input or returned no tensor of the right shape."""
        fail = lambda hint, got=None, want=None, error=None: CheckResult(  # noqa: E731
            self.key, False, hint, case, got, want, error=error)
        want = self.reference(**copy_args(case))
        args = copy_args(case)
        try:
            with warnings.catch_warnings(), _time_limit(timeout):  # e.g. torch.std of one value: the hint says it shorter
                warnings.simplefilter("ignore")
                # positionally, in the signature's order: any parameter names work
                got = fn(*args.values()) if self.call is None else self.call(fn, args)
        except _TookTooLong as stop:
            return fail(f"your function did not return within {timeout:g} s on this case: is there a loop "
                        f"that never ends (e.g. a while loop whose index never moves)?", error=stop)
        except Exception as err:  # the reader's bug is reported, not raised
            extra = f" (the signature is {self.signature})" if isinstance(err, TypeError) else ""
            return fail(f"your function raised {type(err).__name__}: {str(err)[:200]}{extra}", error=err)
        changed = [k for k in args if not _same(args[k], case.args[k])]
        if changed:
            return fail(f"your function changed its input {changed[0]!r} in place: work on a copy "
                        f"(e.g. x = x.clone())")
        got_t = self._as_output(got)
        if got_t is None:
            what = "True/False values" if self.output == "bool" else "numbers"
            return fail(f"your function should return a tensor (or list) of {what} shaped "
                        f"{tuple(want.shape)}, got {type(got).__name__}", want=want)
        if got_t.shape != want.shape:
            return fail(f"your function should return shape {tuple(want.shape)} on this case, "
                        f"got {tuple(got_t.shape)}", got_t, want)
        return case, got_t, want

    def _broken(self, rule: Rule, answers: list) -> list:
        """The (case, got, want) triples on which ``rule`` fires (empty: it does not)."""
        seen = [a for a in answers if rule.tags is None or rule.tags & a[0].tags]
        wrong = [a for a in seen if not close(a[1], a[2], self.tolerance)]
        if rule.always:
            return wrong if wrong and all(rule.broken(*a) for a in seen) else []
        if rule.every:
            return wrong if wrong and all(rule.broken(*a) for a in wrong) else []
        return [a for a in seen if rule.broken(*a)]

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
#: id ("00a", "01a", "01b", ...) -> the exercise (an ``Exercise`` or a ``Reading``), in the order
#: the notebooks' modules registered them
EXERCISES: dict[str, Any] = {}

_LETTER = re.compile(r"[a-z]")


def check_exercise_fields(ex: Any) -> None:
    """What every registered exercise must state: a notebook "00" ... "99", a one-letter
    ``letter``, a ``kind`` of KINDS, a ``path`` of PATHS and an identifier ``name``."""
    if not (isinstance(ex.notebook, str) and len(ex.notebook) == 2 and ex.notebook.isdigit()):
        raise ValueError(f"notebook: expected two digits such as '01', got {ex.notebook!r}")
    if not (isinstance(ex.letter, str) and _LETTER.fullmatch(ex.letter)):
        raise ValueError(f"letter: expected one lower-case letter such as 'b', got {ex.letter!r}")
    if ex.kind not in KINDS:
        raise ValueError(f"kind: expected one of {list(KINDS)}, got {ex.kind!r}")
    if ex.path not in PATHS:
        raise ValueError(f"path: expected one of {list(PATHS)}, got {ex.path!r}")
    if not (isinstance(ex.name, str) and ex.name.isidentifier()):
        raise ValueError(f"name: expected a Python identifier (what the reader's function or answer is called), "
                         f"got {ex.name!r}")


def register(exercise: Any) -> Any:
    """Add ``exercise`` (an ``Exercise`` or a ``Reading``) to the registry under its id; each
    notebook's module calls it once per exercise. A second exercise with the same id or name is refused."""
    if not callable(getattr(exercise, "check", None)) or not hasattr(exercise, "id"):
        raise TypeError(f"exercise: expected an Exercise or a Reading, got {type(exercise).__name__}")
    for ex in EXERCISES.values():
        if ex is not exercise and (ex.id == exercise.id or ex.name == exercise.name):
            raise ValueError(f"exercise: {exercise.id} ({exercise.name}) clashes with {ex.id} ({ex.name})")
    EXERCISES[exercise.id] = exercise
    return exercise


def get_exercise(exercise: Any) -> Any:
    """The exercise named by ``exercise``: an exercise itself, an id ("01b"), a notebook number
    (1 or "01": that notebook's first exercise) or an exercise name ("grpo_advantage")."""
    if hasattr(exercise, "id") and callable(getattr(exercise, "check", None)):
        return exercise
    if isinstance(exercise, bool) or not isinstance(exercise, (int, str)):
        raise TypeError(f"exercise: expected an exercise id such as '01b', a notebook number or an exercise name, "
                        f"got {type(exercise).__name__}")
    key = f"{exercise:02d}" if isinstance(exercise, int) else exercise.strip()
    if key.isdigit():
        key = f"{int(key):02d}"
        first = [ex for ex in EXERCISES.values() if ex.notebook == key]
        if first:
            return first[0]
    if key in EXERCISES:
        return EXERCISES[key]
    for ex in EXERCISES.values():
        if ex.name == key:
            return ex
    raise ValueError(f"exercise: unknown {exercise!r}; choose an id {list(EXERCISES)} or a name "
                     f"{[e.name for e in EXERCISES.values()]}")


def list_exercises(notebook: Any = None) -> list[str]:
    """One line per exercise (of ``notebook`` only, if given): id, kind, path, title and what to write."""
    if notebook is not None:
        notebook = get_exercise(notebook).notebook
    return [f"{ex.id}  {KINDS[ex.kind]:<17} {ex.path:<9} {ex.title:<40} {ex.signature}"
            for ex in EXERCISES.values() if notebook is None or ex.notebook == notebook]


def check(fn: Any, exercise: Any, *, seed: int | None = None, verbose: bool = True,
          timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
    """Grade the reader's ``fn`` (their function; for a run-and-interpret exercise, the number or
    choice they read) on ``exercise`` (an id such as "01b", a notebook number or a name).

    A function is run on the exercise's randomised cases and its degenerate ones and compared with
    the lab's estimator within the exercise's tolerance; a reading is compared with the lab's own
    run at the settings the exercise names (``Reading``). Returns a ``CheckResult`` (``.passed``,
    ``.hint``, ``.case``, ``.got``, ``.seed``); with ``verbose`` (default) it also prints it: one
    line on success, otherwise the hint, the smallest failing case, the reader's answer on it and
    the call that repeats the attempt; never the lab's answer. The random cases come from a fresh
    seed each call (``seed=None``), or from LABKIT_GRADER_SEED when that is set; ``seed=S`` repeats
    the cases of seed S. An exception inside ``fn`` is reported with the case that raised it, not
    raised; a call that takes longer than ``timeout`` seconds (default 10; None: no limit) is
    stopped and reported (where SIGALRM exists, i.e. not on Windows, and in the main thread, where
    a kernel runs cells).
    """
    return get_exercise(exercise).check(fn, seed=seed, verbose=verbose, timeout=timeout)


def once_passed(fn: Any, exercise: Any, run: Callable[[], Any], *, what: str = "training") -> Any:
    """``run()`` once the reader's ``fn`` passes ``check(fn, exercise)`` (graded quietly, on fresh
    cases); until then one printed line saying what waits and for which check, and None, so a
    capstone's training cell neither trains nor raises while its exercise is unsolved. Returns
    what ``run()`` returns, or None."""
    ex = get_exercise(exercise)
    name = getattr(fn, "__name__", "")
    name = name if name.isidentifier() else "fn"
    if not callable(fn) or not check(fn, ex, verbose=False).passed:
        print(f"Not {what} yet: {name} does not pass check({name}, \"{ex.id}\"); fix it in the exercise cell "
              f"above (the check says what is wrong), then run this cell again.")
        return None
    return run()
