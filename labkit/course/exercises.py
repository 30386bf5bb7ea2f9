"""Exercises with autograders: one per notebook, graded against the lab's own estimators.

Each ``Exercise`` asks the reader to write the core of one notebook's method as a short function
on plain tensors (the GRPO advantage, GAE's backward loop, ...). ``check(fn, exercise)`` runs the
reader's function on randomised cases and on the degenerate ones every estimator documents (a
group of one, zero variance, a single-token trajectory, gamma = 0 / 1, ...), compares each answer
with the lab's registered estimator within the exercise's tolerance, and answers with ONE hint:
the first property, in the exercise's order, that some case breaks. The order goes from the
coarse (the function raised, wrong shape, NaN) through the named mistakes (biased std, the
group-of-one rule, a bootstrap past the end, ...) to a plain mismatch, so the hint names the
most specific thing that is wrong.

    >>> from labkit.course.exercises import check
    >>> def grpo_advantage(scores, group_ids): ...
    >>> check(grpo_advantage, "01")        # prints one line on success, hint + case on failure

Reference solutions live apart from the chapters in ``labkit.course.solutions``.
"""
from __future__ import annotations

import contextlib
import math
import signal
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from labkit.core.checks import check_bool, check_int, check_number
from labkit.core.rollouts import Cost, Rollouts
from labkit.core.stats import constant_groups
from labkit.credit import episode, group, hindsight, mc, process, td
from labkit.credit.entropy import carl
from labkit.core.games import exact_shapley
from labkit.scoring import rank_correlation

__all__ = ["Case", "Rule", "CheckResult", "Exercise", "EXERCISES", "check", "get_exercise", "list_exercises"]

F64 = torch.float64


# --------------------------------------------------------------------------- machinery
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


def _clone(x: Any) -> Any:
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


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return bool(torch.equal(a.bool(), b.bool()))
    a, b = a.to(F64), b.to(F64)
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool((((a - b).abs() <= tol * (1 + b.abs())) | both_nan).all())


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
            want = self.reference(**{k: _clone(v) for k, v in case.args.items()})
            args = {k: _clone(v) for k, v in case.args.items()}
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
            Rule("your answer contains NaN or inf", lambda c, g, w: g.is_floating_point() and not bool(torch.isfinite(g).all())),
            Rule(f"your answer differs from the lab's by more than the tolerance ({self.tolerance:g})",
                 lambda c, g, w: not _close(g, w, self.tolerance)),
        )
        for rule in rules:
            seen = [a for a in answers if rule.tags is None or rule.tags & a[0].tags]
            if rule.every:
                wrong = [a for a in seen if not _close(a[1], a[2], self.tolerance)]
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


EXERCISES: dict[str, Exercise] = {}


def _add(ex: Exercise) -> Exercise:
    EXERCISES[ex.notebook] = ex
    return ex


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


# --------------------------------------------------------------------------- helpers for the cases
def _rand(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=gen, dtype=F64)


def _randint(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _looks_like(variant: Callable[..., torch.Tensor], tol: float = 1e-5):
    """A rule test: the answer is wrong, and equals what ``variant`` (a known mistake) gives."""
    def broken(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
        if _close(got, want, tol):
            return False
        alt = torch.as_tensor(variant(**{k: _clone(v) for k, v in case.args.items()}))
        alt = alt if alt.dtype == torch.bool else alt.to(F64)
        return alt.shape == got.shape and _close(got, alt, tol)
    return broken


def _nonfinite(case: Case, got: torch.Tensor, want: torch.Tensor) -> bool:
    return got.is_floating_point() and not bool(torch.isfinite(got).all())


def _one_token_rollouts(rewards: torch.Tensor, mask: torch.Tensor | None = None, **kw) -> Rollouts:
    """A batch whose every position is one token (token ids 0): steps and turns are positions."""
    rewards = rewards.to(F64)
    mask = torch.ones_like(rewards, dtype=torch.bool) if mask is None else mask
    return Rollouts(tokens=torch.zeros(rewards.shape, dtype=torch.long), mask=mask,
                    rewards=torch.where(mask, rewards, 0.0), **kw)


def _prefix_ids(present: torch.Tensor) -> torch.Tensor:
    """Labels 0, 1, 2, ... on the present entries of each row, -1 elsewhere."""
    return torch.where(present, present.long().cumsum(1) - 1, -1)


# =========================================================================== 00 reward-to-go
def _rtg_reference(rewards, mask, gamma):
    return _one_token_rollouts(rewards, mask).returns(gamma)


def _rtg_cases(gen):
    cases = []
    for i in range(5):
        B, T = _randint(gen, 2, 3), _randint(gen, 4, 7)
        mask = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):
            n = _randint(gen, 2, T)
            mask[b, :n] = True
            if n >= 4:  # tool output inside the trajectory: no credit, and no discount step
                mask[b, _randint(gen, 1, n - 2)] = False
        # an outcome on the last generated token, sometimes an intermediate reward before it
        rewards = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            on = mask[b].nonzero().flatten()
            rewards[b, on[-1]] = float(_randint(gen, 0, 1))
            if _rand(gen, 1).item() < 0.5:
                rewards[b, on[0]] = round(float(torch.randn(1, generator=gen, dtype=F64)), 1)
        gamma = round(0.5 + 0.5 * float(_rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, mask=mask, gamma=gamma), frozenset({"gap", "disc"})))
    m3 = torch.tensor([[True, True, False, True, False, False]])
    r3 = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=F64)
    cases += [
        Case("single-token trajectory", dict(rewards=torch.tensor([[1.0]], dtype=F64), mask=torch.tensor([[True]]),
                                             gamma=0.9)),
        Case("outcome only, gamma = 1", dict(rewards=torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=F64),
                                             mask=torch.tensor([[True, True, True, True]]), gamma=1.0)),
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                  mask=torch.tensor([[False, False, False], [True, True, False]]),
                                                  gamma=0.9)),
        Case("tool output inside", dict(rewards=r3, mask=m3, gamma=0.5), frozenset({"gap", "disc"})),
        Case("gamma = 0", dict(rewards=torch.tensor([[0.5, 0.0, 1.0]], dtype=F64), mask=torch.tensor([[True, True, True]]),
                               gamma=0.0), frozenset({"disc"})),
    ]
    return cases


def _rtg_variant(how):
    """Typical mistakes: summing the past instead of the future, discounting through tool output,
    counting the reward of t itself one step late."""
    def variant(rewards, mask, gamma):
        B, T = rewards.shape
        out = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            cols = range(T) if how == "forward" else range(T - 1, -1, -1)
            running = 0.0
            for t in cols:
                if how == "per_column":   # every column discounts, tool output included
                    running = float(rewards[b, t]) + gamma * running
                    out[b, t] = running if mask[b, t] else 0.0
                    continue
                if not mask[b, t]:
                    continue
                if how == "exclusive":    # G_t = gamma * G_{t'}: the reward of t itself left out
                    out[b, t] = gamma * running
                    running = float(rewards[b, t]) + gamma * running
                else:                     # "forward": the past, not the future
                    running = float(rewards[b, t]) + gamma * running
                    out[b, t] = running
        return out
    return variant


_add(Exercise(
    notebook="00", name="reward_to_go", title="Reward-to-go, the credit every method refines",
    signature="reward_to_go(rewards, mask, gamma) -> tensor (B, T)",
    prompt=(
        "Write the reward-to-go (Williams 1992), the credit each token gets before any method refines it.\n"
        "(REINFORCE weighs every token by it; REINFORCE++, arXiv 2501.03262, whitens it over the batch.)\n"
        "  rewards: (B, T) float tensor; rewards[b, t] arrives right after token t (an outcome sits on the last token)\n"
        "  mask: (B, T) bool, True where the policy generated the token (False: tool output, padding)\n"
        "  gamma: float in [0, 1]\n"
        "Walk backwards over the generated positions of each row:  G_t = r_t + gamma * G_{t'}\n"
        "t' is the next GENERATED position (tool output in between does not discount); after the last one\n"
        "G = 0. Return G, with 0 off the mask."),
    cases=_rtg_cases, reference=_rtg_reference,
    rules=(
        Rule("credit off the mask must be 0 (tool output and padding get no credit)",
             lambda c, g, w: bool((g[~c.args["mask"]].abs() > 1e-9).any())),
        Rule("you summed the rewards BEFORE each token; reward-to-go sums those from t onwards (walk backwards)",
             _looks_like(_rtg_variant("forward")), every=True),
        Rule("you left out the token's own reward: G_t = r_t + gamma * G_{t'}, and r_t arrives right after token t",
             _looks_like(_rtg_variant("exclusive")), every=True),
        Rule("tool output is not a step: discount once per GENERATED position (t' skips tool output)",
             _looks_like(_rtg_variant("per_column")), frozenset({"gap"}), every=True),
        Rule("with gamma = 1 and only an outcome, every generated token gets the outcome itself",
             lambda c, g, w: not _close(g, w, 1e-5) and c.name == "outcome only, gamma = 1"),
    ),
))


# =========================================================================== 01 GRPO advantage
GRPO_EPS = 1e-6


def _grpo_reference(scores, group_ids):
    s = torch.as_tensor(scores, dtype=F64)
    r = _one_token_rollouts(s[:, None], group_ids=torch.as_tensor(group_ids))
    return episode.grpo(r, eps=GRPO_EPS).token[:, 0]


def _group_lists(group_ids: torch.Tensor) -> list[torch.Tensor]:
    return [torch.nonzero(group_ids == g).flatten() for g in torch.unique(group_ids)]


def _grpo_cases(gen):
    cases = []
    for i in range(6):
        sizes = [_randint(gen, 2, 5) for _ in range(_randint(gen, 1, 3))]
        ids = torch.cat([torch.full((n,), g, dtype=torch.long) for g, n in enumerate(sizes)])
        ids = ids[torch.randperm(len(ids), generator=gen)]  # groups interleaved, as in a real batch
        scores = (_rand(gen, len(ids)) < 0.5).to(F64) if i % 2 else torch.round(torch.randn(len(ids), generator=gen, dtype=F64), decimals=2)
        cases.append(Case(f"random #{i}", dict(scores=scores, group_ids=ids)))
    cases += [
        Case("two groups of three", dict(scores=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=F64),
                                         group_ids=torch.tensor([0, 0, 0, 1, 1, 1]))),
        Case("group of one", dict(scores=torch.tensor([0.7], dtype=F64), group_ids=torch.tensor([3])),
             frozenset({"singleton"})),
        Case("a group of one beside a group of three", dict(scores=torch.tensor([1.0, 0.0, 1.0, 2.0], dtype=F64),
                                                            group_ids=torch.tensor([0, 0, 0, 7])), frozenset({"singleton"})),
        Case("zero variance", dict(scores=torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=F64), group_ids=torch.tensor([0, 0, 0, 0])),
             frozenset({"zero_var"})),
        Case("an all-equal group beside a mixed one", dict(scores=torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0], dtype=F64),
                                                         group_ids=torch.tensor([2, 2, 2, 5, 5])), frozenset({"zero_var"})),
    ]
    return cases


def _grpo_sums_to_zero_broken(case, got, want):
    ids = case.args["group_ids"]
    return any(len(idx) > 1 and abs(float(got[idx].sum())) > 1e-5 for idx in _group_lists(ids))


def _grpo_singleton_broken(case, got, want):
    ids, s = case.args["group_ids"], case.args["scores"]
    return any(len(idx) == 1 and abs(float(got[idx[0]]) - float(s[idx[0]]) / (1 + GRPO_EPS)) > 1e-5
               for idx in _group_lists(ids))


def _grpo_zero_var_broken(case, got, want):
    ids, s = case.args["group_ids"], case.args["scores"]
    return any(len(idx) > 1 and bool((s[idx] == s[idx[0]]).all()) and bool((got[idx].abs() > 1e-5).any())
               for idx in _group_lists(ids))


def _grpo_variant(scores, group_ids, *, unbiased=True, divide=True):
    out = torch.zeros_like(scores, dtype=F64)
    for idx in _group_lists(group_ids):
        s = scores[idx].to(F64)
        if len(idx) == 1:
            out[idx] = s / (1 + GRPO_EPS) if divide else s
            continue
        a = s - s.mean()
        out[idx] = a / (s.std(unbiased=unbiased) + GRPO_EPS) if divide else a
    return out


SINGLETON_HINT = ("a group of one should get its raw score / (1 + eps) (the group-of-one rule: mean 0, std 1, "
                  "as verl does)")

_add(Exercise(
    notebook="01", name="grpo_advantage", title="GRPO advantage",
    signature="grpo_advantage(scores, group_ids) -> tensor (n,)",
    prompt=(
        "Write GRPO's group-relative advantage (Shao et al. 2024, arXiv 2402.03300).\n"
        "  scores: (n,) float tensor, one outcome score per trajectory\n"
        "  group_ids: (n,) long tensor; trajectories with the same id answered the same prompt\n"
        "Return the (n,) advantages\n"
        "  A_i = (s_i - mean_group(i)) / (std_group(i) + eps),  eps = 1e-6, std unbiased (torch.std's default)\n"
        "A group of one has nothing to compare with: give it mean 0 and std 1, i.e. s / (1 + eps)\n"
        "(verl's convention). A group whose scores are all equal gets 0."),
    cases=_grpo_cases, reference=_grpo_reference,
    rules=(
        # first: a batch mean breaks this on every finite case, whatever it does to a group of one
        Rule("your advantages do not sum to zero within a group: subtract each group's own mean, not the batch's",
             _grpo_sums_to_zero_broken),
        Rule(SINGLETON_HINT + "; torch.std of one value is NaN", _nonfinite, frozenset({"singleton"})),
        Rule("a group whose scores are all equal should get 0: add eps outside the std, "
             "A = (s - mean) / (std + eps), so 0 / (0 + eps) = 0, not 0 / 0", _nonfinite, frozenset({"zero_var"})),
        Rule(SINGLETON_HINT, _grpo_singleton_broken, frozenset({"singleton"})),
        Rule("a group whose scores are all equal should get 0 for everyone", _grpo_zero_var_broken),
        Rule("you used the biased std (dividing by n); GRPO uses the unbiased one (n - 1), torch.std's default",
             _looks_like(lambda scores, group_ids: _grpo_variant(scores, group_ids, unbiased=False)), every=True),
        Rule("you did not divide by the group std (that is Dr. GRPO, arXiv 2503.20783): A = (s - mean) / (std + eps)",
             _looks_like(lambda scores, group_ids: _grpo_variant(scores, group_ids, divide=False)), every=True),
    ),
))


# =========================================================================== 02 GAE
def _gae_reference(rewards, values, mask, gamma, lam):
    r = _one_token_rollouts(rewards, mask)
    return td.gae(r, values=values.to(F64), gamma=gamma, lam=lam).token


def _next_generated(mask: torch.Tensor) -> torch.Tensor:
    """Column of the next generated position after t in the same row, -1 when there is none."""
    B, T = mask.shape
    out = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):
        nxt = -1
        for t in range(T - 1, -1, -1):
            out[b, t] = nxt
            if mask[b, t]:
                nxt = t
    return out


def _gae_cases(gen):
    cases = []
    for i in range(5):
        B, T = _randint(gen, 2, 3), _randint(gen, 4, 7)
        mask = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):
            n = _randint(gen, 2, T)
            mask[b, :n] = True
            if n >= 4:  # tool output inside the trajectory: not generated, no credit
                mask[b, _randint(gen, 1, n - 2)] = False
        rewards = torch.where(mask & (_rand(gen, B, T) < 0.3), torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=1), 0.0)
        values = torch.round(_rand(gen, B, T), decimals=2)  # nonzero also off the mask: it must not leak in
        gamma = round(0.5 + 0.5 * float(_rand(gen, 1)), 2)
        lam = round(float(_rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, values=values, mask=mask, gamma=gamma, lam=lam),
                          frozenset({"gap"})))
    m3 = torch.tensor([[True, True, False, True, False, False]])
    r3 = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=F64)
    v3 = torch.tensor([[0.5, 0.4, 0.9, 0.7, 0.8, 0.6]], dtype=F64)
    cases += [
        Case("single-token trajectory", dict(rewards=torch.tensor([[1.0]], dtype=F64), values=torch.tensor([[0.3]], dtype=F64),
                                             mask=torch.tensor([[True]]), gamma=0.9, lam=0.8)),
        Case("one token, then padding", dict(rewards=torch.tensor([[1.0, 0.0, 0.0]], dtype=F64),
                                             values=torch.tensor([[0.3, 0.5, 0.5]], dtype=F64),
                                             mask=torch.tensor([[True, False, False]]), gamma=0.9, lam=0.8)),
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                  values=torch.tensor([[0.2, 0.4, 0.6], [0.5, 0.5, 0.5]], dtype=F64),
                                                  mask=torch.tensor([[False, False, False], [True, True, False]]),
                                                  gamma=0.9, lam=0.8)),
        Case("tool output inside", dict(rewards=r3, values=v3, mask=m3, gamma=0.9, lam=0.5), frozenset({"gap"})),
        Case("gamma = 0", dict(rewards=r3, values=v3, mask=m3, gamma=0.0, lam=0.5), frozenset({"gap"})),
        Case("lambda = 0", dict(rewards=r3, values=v3, mask=m3, gamma=0.9, lam=0.0), frozenset({"gap", "lam0"})),
        Case("gamma = lambda = 1", dict(rewards=r3, values=v3, mask=m3, gamma=1.0, lam=1.0), frozenset({"gap"})),
    ]
    return cases


def _gae_residuals(case, got, disc):
    """Per masked position: got_t - (delta_t + disc * got_{t'}) with t' the next generated
    position (V = A = 0 after the last one); also which positions are followed by a gap."""
    a = case.args
    r, v, m, g = a["rewards"].to(F64), a["values"].to(F64), a["mask"], a["gamma"]
    nxt = _next_generated(m)
    res, before_gap, last = [], [], []
    for b, t in m.nonzero().tolist():
        n = int(nxt[b, t])
        v_next = float(v[b, n]) if n >= 0 else 0.0
        a_next = float(got[b, n]) if n >= 0 else 0.0
        delta = float(r[b, t]) + g * v_next - float(v[b, t])
        res.append(abs(float(got[b, t]) - delta - disc(a) * a_next))
        before_gap.append(n > t + 1)
        last.append(n < 0)
    return res, before_gap, last


def _gae_last_broken(case, got, want):
    res, _, last = _gae_residuals(case, got, lambda a: a["gamma"] * a["lam"])
    return any(e > 1e-5 for e, l in zip(res, last) if l)


def _gae_recursion_broken(disc):
    return lambda case, got, want: any(e > 1e-5 for e in _gae_residuals(case, got, disc)[0])


def _gae_gap_broken(case, got, want):
    res, gap, _ = _gae_residuals(case, got, lambda a: a["gamma"] * a["lam"])
    wrong = [e > 1e-5 for e in res]
    return any(w and g for w, g in zip(wrong, gap)) and not any(w and not g for w, g in zip(wrong, gap))


def _gae_off_mask_broken(case, got, want):
    return bool((got[~case.args["mask"]].abs() > 1e-9).any())


_add(Exercise(
    notebook="02", name="gae", title="GAE's backward loop",
    signature="gae(rewards, values, mask, gamma, lam) -> tensor (B, T)",
    prompt=(
        "Write generalised advantage estimation (Schulman et al. 2016, arXiv 1506.02438).\n"
        "  rewards, values: (B, T) float tensors; values[b, t] = V(s_t), the critic's value before token t\n"
        "  mask: (B, T) bool, True where the policy generated the token (False: tool output, padding)\n"
        "  gamma, lam: floats in [0, 1]\n"
        "Walk backwards over the generated positions of each row:\n"
        "  delta_t = r_t + gamma * V_{t'} - V_t,   A_t = delta_t + gamma * lam * A_{t'}\n"
        "t' is the next GENERATED position (tool output in between is skipped); after the last one\n"
        "V = A = 0 (no bootstrap past the end). Return A, with 0 off the mask."),
    cases=_gae_cases, reference=_gae_reference,
    rules=(
        Rule("credit off the mask must be 0 (tool output and padding get no credit)", _gae_off_mask_broken),
        Rule("your answer contains NaN or inf", _nonfinite),
        Rule("you bootstrapped past the end of the trajectory: after the last generated token V = 0, "
             "so its advantage is r - V", _gae_last_broken),
        Rule("your recursion discounts by gamma, not gamma * lam: A_t = delta_t + gamma * lam * A_{t'}",
             lambda c, g, w: _gae_recursion_broken(lambda a: a["gamma"] * a["lam"])(c, g, w)
             and not _gae_recursion_broken(lambda a: a["gamma"])(c, g, w)),
        Rule("tool output is not a step: delta_t uses V at the next GENERATED position, and A passes "
             "over tool output unchanged", _gae_gap_broken, frozenset({"gap"})),
        Rule("at lam = 0 GAE is the one-step TD error: A_t = delta_t = r_t + gamma * V_{t'} - V_t",
             lambda c, g, w: any(e > 1e-5 for e in _gae_residuals(c, g, lambda a: 0.0)[0]), frozenset({"lam0"})),
        Rule("A_t must equal delta_t + gamma * lam * A_{t'}, computed backwards from the end",
             _gae_recursion_broken(lambda a: a["gamma"] * a["lam"])),
    ),
))


# =========================================================================== 03 VinePPO
def _vine_reference(vine_outcomes, rewards):
    S, K = vine_outcomes.shape
    r = _one_token_rollouts(rewards.to(F64)[None])
    values = vine_outcomes.to(F64).mean(1)[None]
    return mc.vineppo(r, value_fn=lambda rollouts, k: (values, Cost()), k=K).token[0]


def _vine_cases(gen):
    cases = []
    for i in range(6):
        S, K = _randint(gen, 2, 6), _randint(gen, 2, 9)
        vines = (_rand(gen, S, K) < _rand(gen, S, 1)).to(F64)
        rewards = torch.zeros(S, dtype=F64)
        rewards[-1] = float(_rand(gen, 1) < 0.5)
        if i >= 4:  # intermediate rewards too (a format bonus, a step cost)
            rewards[:-1] = torch.round(0.2 * torch.randn(S - 1, generator=gen, dtype=F64), decimals=1)
        cases.append(Case(f"random #{i}", dict(vine_outcomes=vines, rewards=rewards)))
    cases += [
        Case("one step", dict(vine_outcomes=torch.tensor([[1.0, 0.0, 1.0]], dtype=F64), rewards=torch.tensor([1.0], dtype=F64))),
        Case("K = 1 vine", dict(vine_outcomes=torch.tensor([[1.0], [0.0], [1.0]], dtype=F64),
                                rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64))),
        Case("every vine fails", dict(vine_outcomes=torch.zeros(3, 4, dtype=F64), rewards=torch.tensor([0.0, 0.0, 0.0], dtype=F64))),
        Case("step rewards", dict(vine_outcomes=torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]], dtype=F64),
                                  rewards=torch.tensor([-0.1, 0.2, 1.0], dtype=F64))),
    ]
    return cases


def _vine_variant(how):
    def variant(vine_outcomes, rewards):
        v = vine_outcomes.to(F64).sum(1) if how == "sum" else vine_outcomes.to(F64).mean(1)
        r = rewards.to(F64)
        v_next = torch.cat([v[1:], v.new_zeros(1)])
        if how == "sum":
            return r + v_next - v
        if how == "flip":
            return r + v - v_next
        if how == "no_reward":
            return v_next - v
        raise ValueError(how)
    return variant


def _vine_last_broken(case, got, want):
    v = case.args["vine_outcomes"].to(F64).mean(1)
    return abs(float(got[-1]) - (float(case.args["rewards"][-1]) - float(v[-1]))) > 1e-5


_add(Exercise(
    notebook="03", name="vineppo_advantage", title="VinePPO step advantage",
    signature="vineppo_advantage(vine_outcomes, rewards) -> tensor (S,)",
    prompt=(
        "Write VinePPO's step advantage from vine values (Kazemnejad et al. 2024, arXiv 2410.01679).\n"
        "  vine_outcomes: (S, K) float tensor; row i holds the outcomes (0/1) of K continuations\n"
        "                 ('vines') sampled from the prefix that ends just before step i\n"
        "  rewards: (S,) float tensor, the reward received inside each step (the outcome on the last)\n"
        "Return the (S,) step advantages (gamma = 1):\n"
        "  V_i = mean of row i,   A_i = r_i + V_{i+1} - V_i,   V_S = 0 after the final step"),
    cases=_vine_cases, reference=_vine_reference,
    rules=(
        Rule("V_i is the MEAN outcome of the K vines, not their sum", _looks_like(_vine_variant("sum")), every=True),
        Rule("the advantage is what the step added: r_i + V_{i+1} - V_i (after minus before), not before minus after",
             _looks_like(_vine_variant("flip")), every=True),
        Rule("add the reward received inside the step: A_i = r_i + V_{i+1} - V_i",
             _looks_like(_vine_variant("no_reward")), every=True),
        Rule("you bootstrapped past the end of the trajectory: after the final step V = 0, so the last "
             "step's advantage is r - V_last", _vine_last_broken),
    ),
))


# =========================================================================== 04 PURE min-form
def _pure_reference(step_scores, outcome, temperature):
    p = step_scores.to(F64)
    S = len(p)
    rewards = torch.zeros(1, S, dtype=F64)
    rewards[0, -1] = outcome
    r = _one_token_rollouts(rewards)
    return process.pure(r, step_scores=p[None], form="min", temperature=temperature).info["returns"][0]


def _pure_cases(gen):
    cases = []
    for i in range(6):
        S = _randint(gen, 2, 6)
        p = torch.round(_rand(gen, S), decimals=2)
        temperature = [0.1, 0.5, 1.0][i % 3]
        cases.append(Case(f"random #{i}", dict(step_scores=p, outcome=float(_rand(gen, 1) < 0.5), temperature=temperature)))
    cases += [
        Case("one step", dict(step_scores=torch.tensor([0.3], dtype=F64), outcome=1.0, temperature=0.1)),
        Case("a tie for the worst step", dict(step_scores=torch.tensor([0.9, 0.2, 0.8, 0.2], dtype=F64), outcome=0.0, temperature=0.1)),
        Case("all steps equal", dict(step_scores=torch.tensor([0.6, 0.6, 0.6], dtype=F64), outcome=1.0, temperature=0.1)),
        Case("temperature 0.001 (near the hard minimum)", dict(step_scores=torch.tensor([0.95, 0.05, 0.9], dtype=F64),
                                                               outcome=1.0, temperature=0.001), frozenset({"cold"})),
    ]
    return cases


def _pure_variant(how):
    def variant(step_scores, outcome, temperature):
        p = step_scores.to(F64)
        r = p if how == "p" else 2 * p - 1
        if how == "sum":
            shaped = r.clone()
        else:
            shaped = torch.softmax((r if how == "softmax_plus" else -r) / temperature, 0) * r
        if how != "no_outcome":
            shaped[-1] += outcome
        if how == "forward":
            return shaped.cumsum(0)
        return shaped.flip(0).cumsum(0).flip(0)
    return variant


_add(Exercise(
    notebook="04", name="pure_min_form", title="PURE min-form returns",
    signature="pure_min_form(step_scores, outcome, temperature) -> tensor (S,)",
    prompt=(
        "Write PURE's min-form credit for one response (Cheng et al. 2025, arXiv 2504.08662).\n"
        "  step_scores: (S,) float tensor, the PRM's probability p_s that step s is good\n"
        "  outcome: float, the verifiable reward R received at the last step;  temperature: T > 0\n"
        "Return the (S,) returns G_s:\n"
        "  r_s = 2 p_s - 1,   w = softmax(-r / T) over the steps,   r'_s = w_s r_s\n"
        "  G_s = sum_{s' >= s} r'_{s'} + R\n"
        "The weights concentrate on the worst step, so the return is about the minimum step reward."),
    cases=_pure_cases, reference=_pure_reference,
    rules=(
        Rule("your weights overflow at a small temperature: compute them with torch.softmax (it subtracts the "
             "max before exp)", _nonfinite, frozenset({"cold"})),
        Rule("you summed the step rewards (the sum form PURE argues against): weight them by w = softmax(-r / T) "
             "over the response's steps", _looks_like(_pure_variant("sum")), every=True),
        Rule("the soft minimum puts the weight on the WORST step: w = softmax(-r / T), not softmax(+r / T)",
             _looks_like(_pure_variant("softmax_plus")), every=True),
        Rule("the step reward is r = 2p - 1 (p(good) - p(bad)), not p", _looks_like(_pure_variant("p")), every=True),
        Rule("add the verifiable reward R at the last step, so every return G_s includes it",
             _looks_like(_pure_variant("no_outcome")), every=True),
        Rule("G_s sums from step s to the END (a reverse cumulative sum), not from the start",
             _looks_like(_pure_variant("forward")), every=True),
    ),
))


# =========================================================================== 05 turn returns
def _turn_reference(rewards, turn_ids, gamma):
    ids = turn_ids.long()[None]
    mask = ids >= 0
    r = _one_token_rollouts(rewards.to(F64)[None], mask, turn_ids=ids)
    n = int(ids.max()) + 1
    return td.turn_gae(r, values=torch.zeros(1, n, dtype=F64), gamma=gamma, lam=1.0).values[0]


def _turn_cases(gen):
    cases = []
    for i in range(6):
        ids = []
        n_turns = _randint(gen, 2, 4)
        for k in range(n_turns):
            ids += [k] * _randint(gen, 1, 3)
            if k < n_turns - 1 and _rand(gen, 1) < 0.7:
                ids += [-1] * _randint(gen, 1, 2)  # the tool's answer between two turns
        ids = torch.tensor(ids + [-1] * _randint(gen, 0, 2))  # padding
        rewards = torch.where((ids >= 0) & (_rand(gen, len(ids)) < 0.4),
                              torch.round(torch.randn(len(ids), generator=gen, dtype=F64), decimals=1), 0.0)
        last = int((ids >= 0).nonzero().max())
        rewards[last] = 1.0
        gamma = round(0.5 + 0.45 * float(_rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, turn_ids=ids, gamma=gamma)))
    ids = torch.tensor([0, 0, 0, -1, -1, 1, 1, -1, 2, 2])
    rew = torch.tensor([0.0, -0.1, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0], dtype=F64)
    cases += [
        Case("one turn", dict(rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64), turn_ids=torch.tensor([0, 0, 0]), gamma=0.9)),
        Case("three turns, tool output between", dict(rewards=rew, turn_ids=ids, gamma=0.9)),
        Case("gamma = 0", dict(rewards=rew, turn_ids=ids, gamma=0.0)),
        Case("gamma = 1", dict(rewards=rew, turn_ids=ids, gamma=1.0)),
    ]
    return cases


def _turn_variant(how, where="first"):
    def variant(rewards, turn_ids, gamma):
        ids = turn_ids.long()
        r = rewards.to(F64)
        n = int(ids.max()) + 1
        if how in ("token", "position"):
            keep = ids >= 0 if how == "token" else torch.ones_like(ids, dtype=torch.bool)
            g, out = 0.0, torch.zeros(len(r), dtype=F64)
            for t in range(len(r) - 1, -1, -1):
                if keep[t]:
                    g = float(r[t]) + gamma * g
                    out[t] = g
            pos = [int((ids == k).nonzero().min() if where == "first" else (ids == k).nonzero().max()) for k in range(n)]
            return out[pos]
        per_turn = torch.zeros(n, dtype=F64)
        for k in range(n):
            sel = (ids == k).nonzero().flatten()
            per_turn[k] = r[sel[-1]] if how == "last_only" else r[sel].sum()
        if how == "forward":
            return torch.stack([sum(gamma ** (k - j) * per_turn[j] for j in range(k + 1)) for k in range(n)])
        if how == "absolute":
            return torch.stack([sum(gamma ** j * per_turn[j] for j in range(k, n)) for k in range(n)])
        return torch.stack([sum(gamma ** (j - k) * per_turn[j] for j in range(k, n)) for k in range(n)])
    return variant


def _any_of(*tests):
    return lambda c, g, w: any(t(c, g, w) for t in tests)


_add(Exercise(
    notebook="05", name="turn_returns", title="Returns discounted per turn",
    signature="turn_returns(rewards, turn_ids, gamma) -> tensor (n_turns,)",
    prompt=(
        "Write the return of every turn of one agent episode, discounted once per TURN (the turn-level\n"
        "MDP of POAD, arXiv 2405.15821, and Turn-PPO, arXiv 2512.17008), not once per token.\n"
        "  rewards: (T,) float tensor, the reward after each position\n"
        "  turn_ids: (T,) long tensor, the turn of each generated token (0, 1, 2, ...), -1 for tool output / padding\n"
        "  gamma: float in [0, 1]\n"
        "Return the (n_turns,) returns, n_turns = max(turn_ids) + 1:\n"
        "  r_k = sum of the rewards inside turn k,   G_k = r_k + gamma * G_{k+1},   G after the last turn = 0"),
    cases=_turn_cases, reference=_turn_reference,
    rules=(
        Rule("your values are discounted per token, not per turn: a turn of several tokens is ONE step of the "
             "turn-level MDP and is discounted once",
             _any_of(*(_looks_like(_turn_variant(h, w)) for h in ("token", "position") for w in ("first", "last"))),
             every=True),
        Rule("a turn's reward is the sum of every reward inside it, not just its last token's",
             _looks_like(_turn_variant("last_only")), every=True),
        Rule("a return sums the rewards from turn k to the END, G_k = r_k + gamma * G_{k+1}, not those before it",
             _looks_like(_turn_variant("forward")), every=True),
        Rule("discount relative to turn k: gamma^(j - k) for turn j, not gamma^j", _looks_like(_turn_variant("absolute")), every=True),
    ),
))


def _pad_turns(table: torch.Tensor, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A per-turn table (B, N') from an estimator widened to the exercise's (B, N) with zeros:
    the estimator's table ends at the longest episode, the exercise's at its padding."""
    out = torch.zeros(shape, dtype=dtype)
    out[:, : table.shape[1]] = table
    return out


# =========================================================================== 06 GiGPO step term
def _gigpo_reference(turn_rewards, present, anchors, gamma):
    present = present.bool()
    keys = [[int(k) for k in anchors[b][present[b]]] for b in range(len(present))]
    r = _one_token_rollouts(turn_rewards.to(F64), present, turn_ids=_prefix_ids(present), anchor_keys=keys)
    step = group.gigpo(r, gamma=gamma, norm="mean_norm").info["step_term"]
    return _pad_turns(step, present.shape, F64)


def _gigpo_cases(gen):
    cases = []
    for i in range(6):
        B, N = _randint(gen, 2, 4), _randint(gen, 3, 5)
        present = torch.zeros(B, N, dtype=torch.bool)
        for b in range(B):
            present[b, :_randint(gen, 2, N)] = True
        anchors = torch.randint(0, 3, (B, N), generator=gen)
        anchors[:, 0] = 0  # every episode starts from the same observation
        rewards = torch.zeros(B, N, dtype=F64)
        for b in range(B):
            n = int(present[b].sum())
            rewards[b, :n] = -0.1 * (_rand(gen, n) < 0.3)  # an occasional step cost
            rewards[b, n - 1] += float(_rand(gen, 1) < 0.5)
        gamma = [0.95, 0.9, 0.8][i % 3]
        cases.append(Case(f"random #{i}", dict(turn_rewards=rewards, present=present, anchors=anchors, gamma=gamma)))
    present = torch.tensor([[True, True, True], [True, True, False]])
    cases += [
        Case("every anchor group a singleton", dict(turn_rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                    present=present, anchors=torch.tensor([[0, 1, 2], [3, 4, 5]]), gamma=0.95),
             frozenset({"singleton"})),
        Case("equal returns in an anchor group", dict(turn_rewards=torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                      present=present, anchors=torch.tensor([[0, 1, 2], [0, 1, 9]]), gamma=0.9)),
        Case("a state visited twice in one episode", dict(turn_rewards=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=F64),
                                                          present=present, anchors=torch.tensor([[0, 1, 0], [0, 1, 0]]), gamma=0.9)),
        Case("gamma = 1", dict(turn_rewards=torch.tensor([[0.0, -0.1, 1.0], [-0.1, 1.0, 0.0]], dtype=F64),
                               present=present, anchors=torch.tensor([[0, 1, 1], [0, 1, 7]]), gamma=1.0)),
    ]
    return cases


def _anchor_groups(case) -> list[list[tuple[int, int]]]:
    present, anchors = case.args["present"].bool(), case.args["anchors"]
    groups: dict[int, list] = {}
    for b, k in present.nonzero().tolist():
        groups.setdefault(int(anchors[b, k]), []).append((b, k))
    return list(groups.values())


def _gigpo_variant(how):
    def variant(turn_rewards, present, anchors, gamma):
        present = present.bool()
        r = torch.where(present, turn_rewards.to(F64), 0.0)
        g = 1.0 if how == "undiscounted" else gamma
        R = r.clone()
        if how != "reward":
            for k in range(r.shape[1] - 2, -1, -1):
                R[:, k] = r[:, k] + g * R[:, k + 1]
        out = torch.zeros_like(R)
        case = Case("", dict(present=present, anchors=anchors))
        for members in _anchor_groups(case):
            if len(members) < 2:
                continue
            vals = torch.stack([R[b, k] for b, k in members])
            d = vals - vals.mean()
            if how == "std":
                d = d / (vals.std() + 1e-6)
            for (b, k), x in zip(members, d):
                out[b, k] = x
        return out
    return variant


def _gigpo_singleton_broken(case, got, want):
    return any(len(m) == 1 and abs(float(got[m[0]])) > 1e-6 for m in _anchor_groups(case))


def _gigpo_sum_broken(case, got, want):
    return any(len(m) > 1 and abs(float(sum(got[b, k] for b, k in m))) > 1e-5 for m in _anchor_groups(case))


_add(Exercise(
    notebook="06", name="gigpo_step_term", title="GiGPO's anchor-group step term",
    signature="gigpo_step_term(turn_rewards, present, anchors, gamma) -> tensor (B, N)",
    prompt=(
        "Write GiGPO's step term for the B episodes of ONE task (Feng et al. 2025, arXiv 2505.10978).\n"
        "  turn_rewards: (B, N) float tensor, the reward of each turn;  present: (B, N) bool (turns played)\n"
        "  anchors: (B, N) long tensor, the observation each turn starts from (its anchor state)\n"
        "  gamma: float in [0, 1]\n"
        "Return the (B, N) step terms (GiGPO's default norm, 'mean_norm'):\n"
        "  R_k = r_k + gamma * R_{k+1}  (per episode, R after the last turn = 0)\n"
        "  A^S_k = R_k - mean of R over every present turn (any episode, repeat visits included)\n"
        "          with the same anchor\n"
        "An anchor group of one has nothing to compare with: 0. Absent turns: 0."),
    cases=_gigpo_cases, reference=_gigpo_reference,
    rules=(
        Rule("absent turns (padding) must get 0", lambda c, g, w: bool((g[~c.args["present"].bool()].abs() > 1e-9).any())),
        Rule("your answer contains NaN or inf", _nonfinite),
        Rule("your step terms do not sum to zero within an anchor group: subtract the mean over the turns that "
             "share the anchor state, not over the episode or the batch", _gigpo_sum_broken),
        Rule("an anchor group of one should get step term 0 (nothing to compare with, verl-agent's convention), "
             "not its raw return", _gigpo_singleton_broken),
        Rule("compare discounted returns R_k = r_k + gamma * R_{k+1} (from turn k to the end), not the turn's own reward",
             _looks_like(_gigpo_variant("reward")), every=True),
        Rule("discount the returns by gamma once per turn: R_k = r_k + gamma * R_{k+1}",
             _looks_like(_gigpo_variant("undiscounted")), every=True),
        Rule("GiGPO's default step term is mean-normalised only (norm='mean_norm'): do not divide by the std",
             _looks_like(_gigpo_variant("std")), every=True),
    ),
))


# =========================================================================== 07 CARL selection
def _carl_reference(entropies, present, fraction):
    present = present.bool()
    H = torch.where(present, entropies.to(F64), 0.0)
    r = _one_token_rollouts(torch.zeros(present.shape, dtype=F64), present, turn_ids=_prefix_ids(present), entropies=H)
    kept = carl(r, top_fraction=fraction).info["kept"]
    return _pad_turns(kept, present.shape, torch.bool)


def _carl_cases(gen):
    cases = []
    for i in range(6):
        B, N = _randint(gen, 2, 4), _randint(gen, 3, 6)
        present = torch.zeros(B, N, dtype=torch.bool)
        for b in range(B):
            present[b, :_randint(gen, 1 if b else N, N)] = True  # row 0 full, others may be short
        H = torch.round(2.0 * _rand(gen, B, N), decimals=3)
        H = torch.where(present, H, 9.9)  # padding may hold anything: it must never be kept
        cases.append(Case(f"random #{i}", dict(entropies=H, present=present, fraction=[0.3, 0.5, 0.25][i % 3])))
    full = torch.ones(2, 4, dtype=torch.bool)
    cases += [
        Case("an episode with no turn", dict(entropies=torch.tensor([[0.4, 0.9, 0.1], [0.0, 0.0, 0.0]], dtype=F64),
                                             present=torch.tensor([[True, True, True], [False, False, False]]), fraction=0.5)),
        Case("one turn in the batch", dict(entropies=torch.tensor([[1.2]], dtype=F64), present=torch.tensor([[True]]), fraction=0.3)),
        Case("all entropies equal", dict(entropies=torch.full((2, 4), 0.7, dtype=F64), present=full, fraction=0.3),
             frozenset({"ties"})),
        Case("equal entropies across rows", dict(entropies=torch.tensor([[0.1, 1.5, 0.2], [1.5, 0.3, 1.5]], dtype=F64),
                                                 present=torch.ones(2, 3, dtype=torch.bool), fraction=0.34), frozenset({"ties"})),
        Case("fraction = 1", dict(entropies=torch.tensor([[0.5, 0.1, 0.0], [0.3, 9.9, 9.9]], dtype=F64),
                                  present=torch.tensor([[True, True, True], [True, False, False]]), fraction=1.0)),
    ]
    return cases


def _carl_variant(how):
    def variant(entropies, present, fraction):
        present = present.bool()
        H = entropies.to(F64)
        out = torch.zeros_like(present)
        if how == "per_row":
            for b in range(len(H)):
                n = int(present[b].sum())
                if n:
                    k = max(1, math.ceil(fraction * n - 1e-9))
                    idx = torch.sort(-torch.where(present[b], H[b], -math.inf), stable=True).indices[:k]
                    out[b, idx] = True
            return out
        flat_p = present.flatten()
        n = int(flat_p.sum())
        k = {"floor": max(int(fraction * n), 0), "lowest": max(1, math.ceil(fraction * n - 1e-9)),
             "all_entries": max(1, math.ceil(fraction * flat_p.numel() - 1e-9))}[how]
        score = torch.where(flat_p, -H.flatten() if how == "lowest" else H.flatten(), -math.inf)
        idx = torch.sort(-score, stable=True).indices[:min(k, n)]
        flat = torch.zeros_like(flat_p)
        flat[idx] = True
        return flat.view(present.shape)
    return variant


def _carl_count_broken(case, got, want):
    return int(got.sum()) != int(want.sum())


def _carl_ties_broken(case, got, want):
    H = case.args["entropies"].to(F64)
    return (int(got.sum()) == int(want.sum()) and not bool(torch.equal(got, want))
            and torch.equal(torch.sort(H[got]).values, torch.sort(H[want]).values))


_add(Exercise(
    notebook="07", name="carl_select", title="CARL's critical-turn selection",
    signature="carl_select(entropies, present, fraction) -> bool tensor (B, N)",
    prompt=(
        "Write CARL's selection of critical turns (Shen et al. 2025, arXiv 2512.04949): only the turns where\n"
        "the policy was most uncertain get a gradient.\n"
        "  entropies: (B, N) float tensor, the policy's entropy at each turn\n"
        "  present: (B, N) bool, which turns were played (others are padding: never keep them)\n"
        "  fraction: float in (0, 1]\n"
        "Return a (B, N) bool tensor keeping the ceil(fraction * n) present turns with the LARGEST entropy,\n"
        "n = number of present turns in the whole batch (one cut-off for the batch). Ties: keep the\n"
        "earlier turn in row-major order (row by row, left to right)."),
    cases=_carl_cases, reference=_carl_reference, output="bool",
    rules=(
        Rule("a turn that is not present (padding) must never be kept",
             lambda c, g, w: bool((g & ~c.args["present"].bool()).any())),
        Rule("rank all turns of the batch together (one cut-off for the batch), not row by row",
             _looks_like(_carl_variant("per_row")), every=True),
        Rule("keep ceil(fraction * n) turns (at least one), not int(fraction * n)", _looks_like(_carl_variant("floor")), every=True),
        Rule("n counts the present turns only, not every entry of the padded table", _looks_like(_carl_variant("all_entries")), every=True),
        Rule("CARL keeps the most uncertain turns: the LARGEST entropy, not the smallest", _looks_like(_carl_variant("lowest")), every=True),
        Rule("keep exactly ceil(fraction * n) of the n present turns", _carl_count_broken),
        Rule("break ties by position: among equal entropies keep the earlier turns (row-major order)", _carl_ties_broken),
    ),
))


# =========================================================================== 08 HCA
def _hca_reference(pi, h, z):
    N = len(pi)
    rewards = torch.zeros(1, N, dtype=F64)
    rewards[0, -1] = z
    r = _one_token_rollouts(rewards, turn_ids=torch.arange(N)[None], states=torch.zeros(1, N, dtype=torch.long),
                            logprobs=pi.to(F64).log()[None])
    return hindsight.hca(r, hindsight=h.to(F64)[None]).token[0]


def _hca_cases(gen):
    cases = []
    for i in range(6):
        N = _randint(gen, 2, 6)
        pi = torch.round(0.05 + 0.9 * _rand(gen, N), decimals=2)
        h = torch.round(0.05 + 0.9 * _rand(gen, N), decimals=2)
        cases.append(Case(f"random #{i}", dict(pi=pi, h=h, z=1.0 if i != 3 else 0.0)))
    cases += [
        Case("one turn", dict(pi=torch.tensor([0.5], dtype=F64), h=torch.tensor([0.8], dtype=F64), z=1.0)),
        Case("hindsight equals the policy", dict(pi=torch.tensor([0.2, 0.6, 0.9], dtype=F64),
                                                 h=torch.tensor([0.2, 0.6, 0.9], dtype=F64), z=1.0)),
        Case("failed episode, an action success never took (h = 0)",
             dict(pi=torch.tensor([0.3, 0.5, 0.2], dtype=F64), h=torch.tensor([0.4, 0.0, 0.1], dtype=F64), z=0.0),
             frozenset({"failed_h0"})),
    ]
    return cases


def _hca_variant(how):
    def variant(pi, h, z):
        pi, h = pi.to(F64), h.to(F64)
        with torch.no_grad():
            if how == "inverted":
                c = 1 - h / pi
            elif how == "flipped":
                c = pi / h - 1
            else:
                c = torch.log(h / pi)
        return torch.where(torch.as_tensor(z) > 0, c * z, torch.zeros_like(c))
    return variant


_add(Exercise(
    notebook="08", name="hca_credit", title="HCA's hindsight ratio",
    signature="hca_credit(pi, h, z) -> tensor (N,)",
    prompt=(
        "Write return-conditioned hindsight credit (Harutyunyan et al. 2019, arXiv 1912.02503) for one episode.\n"
        "  pi: (N,) float tensor, pi(a_t | s_t), the policy's probability of the action taken at turn t\n"
        "  h:  (N,) float tensor, h(a_t | s_t, Z), the hindsight probability given the outcome\n"
        "  z:  float, the outcome Z (0 or 1)\n"
        "Return the (N,) credits  (1 - pi / h) * Z.\n"
        "A failed episode (Z = 0) gets 0 everywhere, even where h = 0 (success never took that action)."),
    cases=_hca_cases, reference=_hca_reference,
    rules=(
        Rule("a failed episode (Z = 0) gets 0 on every turn, even where h = 0: don't divide by h when Z = 0 "
             "(0 * inf is NaN)", _nonfinite, frozenset({"failed_h0"})),
        Rule("your answer contains NaN or inf", _nonfinite),
        Rule("multiply by the outcome Z: a failed episode (Z = 0) gets credit 0 on every turn",
             lambda c, g, w: c.args["z"] == 0 and bool((g.abs() > 1e-9).any())),
        Rule("the ratio is pi / h (the policy's probability over the hindsight one): credit = (1 - pi / h) * Z, not (1 - h / pi) * Z",
             _looks_like(_hca_variant("inverted")), every=True),
        Rule("an action that success made more likely (h > pi) gets POSITIVE credit: (1 - pi / h) * Z, not (pi / h - 1) * Z",
             _looks_like(_hca_variant("flipped")), every=True),
        Rule("HCA's credit is 1 - pi / h, not a log-ratio", _looks_like(_hca_variant("log")), every=True),
    ),
))


# =========================================================================== 09 exact Shapley
PLAYERS = (0, 1, 2)


def _coalitions() -> list[frozenset]:
    return [frozenset(i for i in PLAYERS if mask >> i & 1) for mask in range(8)]


def _shapley_reference(v):
    table = torch.tensor([float(v[S]) for S in _coalitions()], dtype=F64)
    return exact_shapley(table)


def _game(values: list[float]) -> dict:
    """A 3-player game from its 8 values, in the order {}, {0}, {1}, {0,1}, {2}, {0,2}, {1,2}, {0,1,2}."""
    return dict(zip(_coalitions(), [float(x) for x in values]))


def _shapley_cases(gen):
    cases = []
    for i in range(5):
        vals = torch.round(_rand(gen, 8), decimals=2).tolist()
        vals[0] = 0.0
        cases.append(Case(f"random #{i}", dict(v=_game(vals))))
    cases += [
        Case("player 2 is a null player", dict(v=_game([0, 0.2, 0.5, 1.0, 0, 0.2, 0.5, 1.0])), frozenset({"null"})),
        Case("players 1 and 2 are interchangeable", dict(v=_game([0, 0.3, 0.1, 0.6, 0.1, 0.6, 0.4, 1.0])), frozenset({"symmetric"})),
        Case("v(empty team) is not 0", dict(v=_game([0.2, 0.4, 0.5, 0.8, 0.3, 0.6, 0.7, 1.0]))),
        Case("redundant solvers", dict(v=_game([0, 0, 1, 1, 1, 1, 1, 1]))),
    ]
    return cases


def _shapley_variant(how):
    def variant(v):
        N = frozenset(PLAYERS)
        out = []
        for i in PLAYERS:
            if how == "loo":
                out.append(v[N] - v[N - {i}])
                continue
            others = [S for S in _coalitions() if i not in S]
            out.append(sum(v[S | {i}] - v[S] for S in others) / len(others))
        return torch.tensor(out, dtype=F64)
    return variant


def _efficiency_broken(case, got, want):
    v = case.args["v"]
    return abs(float(got.sum()) - (v[frozenset(PLAYERS)] - v[frozenset()])) > 1e-5


_add(Exercise(
    notebook="09", name="shapley3", title="Exact Shapley for 3 players",
    signature="shapley3(v) -> tensor (3,)",
    prompt=(
        "Write the exact Shapley value of a 3-player team (Shapley 1953; as in Shapley-based agent credit,\n"
        "e.g. SHARP, and the survey arXiv 2604.09459, section 6).\n"
        "  v: dict from frozenset of players (subsets of {0, 1, 2}, the empty one included) to the team value\n"
        "Return a (3,) tensor (or a list) with\n"
        "  phi_i = sum over S not containing i of |S|! (n - |S| - 1)! / n! * (v(S + {i}) - v(S)),  n = 3\n"
        "i.e. player i's marginal contribution averaged over the 3! orders in which the team could form."),
    cases=_shapley_cases, reference=_shapley_reference,
    rules=(
        Rule("that is leave-one-out, v(N) - v(N without i), not Shapley: average the marginal contribution "
             "over every order in which the team could form", _looks_like(_shapley_variant("loo")), every=True),
        Rule("weight coalition S by |S|! (n - |S| - 1)! / n! (1/3, 1/6, 1/6, 1/3 for |S| = 0, 1, 1, 2), not equally",
             _looks_like(_shapley_variant("unweighted")), every=True),
        Rule("your credits do not sum to v(N) - v(empty) (efficiency): every marginal contribution is "
             "v(S + {i}) - v(S), with v(empty) where S is empty", _efficiency_broken),
        Rule("a null player (one who never changes v) must get 0",
             lambda c, g, w: abs(float(g[2])) > 1e-6, frozenset({"null"})),
        Rule("two players who are interchangeable in v must get equal credit",
             lambda c, g, w: abs(float(g[1] - g[2])) > 1e-6, frozenset({"symmetric"})),
    ),
))


# =========================================================================== 10 benchmark metric
def _rank_reference(credit, truth, mask):
    return torch.tensor(rank_correlation(credit.to(F64), truth.to(F64), mask), dtype=F64)


def _rank_cases(gen):
    cases = []
    for i in range(5):
        B, T = _randint(gen, 2, 3), _randint(gen, 4, 8)
        mask = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):
            mask[b, :_randint(gen, 2, T)] = True
        truth = torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=2)
        credit = torch.round(truth + torch.randn(B, T, generator=gen, dtype=F64), decimals=1 if i % 2 else 2)
        if i >= 3:  # episode-level credit: one value per row, so heavy ties
            credit = credit[:, :1].expand(B, T).clone()
        credit = torch.where(mask, credit, 5.0)  # padding holds junk: it must not be scored
        truth = torch.where(mask, truth, -5.0)
        cases.append(Case(f"random #{i}", dict(credit=credit, truth=truth, mask=mask)))
    m = torch.tensor([[True, True, True, True, False]])
    cases += [
        Case("monotone, not linear", dict(credit=torch.tensor([[1.0, 8.0, 27.0, 64.0, 0.0]], dtype=F64),
                                          truth=torch.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]], dtype=F64), mask=m)),
        Case("ties in the credit", dict(credit=torch.tensor([[1.0, 1.0, 2.0, 2.0, 0.0]], dtype=F64),
                                        truth=torch.tensor([[0.1, 0.4, 0.3, 0.9, 0.0]], dtype=F64), mask=m)),
        Case("constant credit", dict(credit=torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.0]], dtype=F64),
                                     truth=torch.tensor([[0.1, 0.4, 0.3, 0.9, 0.0]], dtype=F64), mask=m), frozenset({"constant"})),
        Case("one scored position", dict(credit=torch.tensor([[0.5, 0.2]], dtype=F64), truth=torch.tensor([[0.1, 0.3]], dtype=F64),
                                         mask=torch.tensor([[True, False]])), frozenset({"constant"})),
    ]
    return cases


def _plain_ranks(x: torch.Tensor) -> torch.Tensor:
    r = torch.empty_like(x)
    r[torch.argsort(x, stable=True)] = torch.arange(len(x), dtype=x.dtype)
    return r


def _average_ranks(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).to(F64)


def _corr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a - a.mean(), b - b.mean()
    return (a @ b) / (a.norm() * b.norm())


def _rank_variant(how):
    def variant(credit, truth, mask):
        c, t = (credit.to(F64).flatten(), truth.to(F64).flatten()) if how == "no_mask" else \
            (credit.to(F64)[mask], truth.to(F64)[mask])
        if how == "pearson":
            return _corr(c, t)
        if how == "plain_ranks":
            return _corr(_plain_ranks(c), _plain_ranks(t))
        return _corr(_average_ranks(c), _average_ranks(t))  # no_mask: right ranks, wrong positions
    return variant


_add(Exercise(
    notebook="10", name="rank_correlation", title="The benchmark's rank correlation",
    signature="rank_correlation(credit, truth, mask) -> float",
    prompt=(
        "Write the benchmark's headline metric: Spearman's rank correlation between an estimator's credit and\n"
        "the exact advantage (the survey's benchmark proposal, arXiv 2604.09459, section 9.2).\n"
        "  credit, truth: (B, T) float tensors;  mask: (B, T) bool, the positions to score\n"
        "Return one float: the Pearson correlation of the RANKS of credit[mask] and truth[mask], where tied\n"
        "values share their average rank. A constant side (or a single position) ranks nothing: return 0.0."),
    cases=_rank_cases, reference=_rank_reference,
    rules=(
        Rule("a constant credit (or a single position) ranks nothing: return 0.0, not NaN",
             _nonfinite, frozenset({"constant"})),
        Rule("your answer contains NaN or inf", _nonfinite),
        Rule("score only the positions where mask is True (padding and tool output are not credit)",
             _looks_like(_rank_variant("no_mask")), every=True),
        Rule("rank the values first: Spearman's rho is the Pearson correlation of the RANKS "
             "(a monotone credit that is not linear should score 1)", _looks_like(_rank_variant("pearson")), every=True),
        Rule("tied values must share their average rank (episode-level credit gives a whole row one value)",
             _looks_like(_rank_variant("plain_ranks")), every=True),
    ),
))


# =========================================================================== 11 your own rollouts
def _zero_grad_reference(scores, group_ids):
    return constant_groups(torch.as_tensor(scores, dtype=F64), torch.as_tensor(group_ids))


def _zero_grad_cases(gen):
    cases = []
    for i in range(5):
        n_groups = _randint(gen, 2, 4)
        sizes = [_randint(gen, 2, 5) for _ in range(n_groups)]
        gids = torch.cat([torch.full((k,), g, dtype=torch.long) for g, k in enumerate(sizes)])
        scores = (_rand(gen, len(gids)) < 0.5).to(F64)             # 0/1 outcomes: all-equal groups happen
        if i % 2:
            gids = gids[torch.randperm(len(gids), generator=gen)]  # a dump is not sorted by group
        cases.append(Case(f"random #{i}", dict(scores=scores, group_ids=gids), frozenset({"order"})))
    cases += [
        Case("a group of one", dict(scores=torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=F64),
                                    group_ids=torch.tensor([0, 0, 0, 1])), frozenset({"single"})),
        Case("whole batch equal, two groups", dict(scores=torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=F64),
                                                    group_ids=torch.tensor([3, 3, 7, 7]))),
        Case("equal but for round-off", dict(scores=torch.tensor([0.3, 0.1 + 0.2, 0.5, 0.5], dtype=F64),
                                             group_ids=torch.tensor([0, 0, 1, 1])), frozenset({"exact"})),
        Case("groups interleaved", dict(scores=torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], dtype=F64),
                                        group_ids=torch.tensor([0, 1, 0, 1, 2, 2])), frozenset({"order"})),
    ]
    return cases


def _zero_grad_variant(how):
    def variant(scores, group_ids):
        s = torch.as_tensor(scores, dtype=F64)
        g = torch.as_tensor(group_ids)
        if how == "batch":          # the whole batch compared, not each group
            return torch.full_like(s, bool(s.max() == s.min()), dtype=torch.bool)
        out = torch.zeros(len(s), dtype=torch.bool)
        for gid in g.unique():
            members = g == gid
            vals = s[members]
            if how == "singleton":  # a group of one counted as zero-variance
                out[members] = bool(vals.max() == vals.min())
            elif how == "std":      # a std threshold instead of equality
                out[members] = len(vals) >= 2 and bool(vals.std() < 0.5)
        return out
    return variant


_add(Exercise(
    notebook="11", name="no_gradient_rows", title="Trajectories GRPO learns nothing from",
    signature="no_gradient_rows(scores, group_ids) -> bool tensor (n,)",
    prompt=(
        "Mark the trajectories that get no GRPO gradient (Shao et al. 2024, arXiv 2402.03300).\n"
        "They are those in a group of two or more whose scores are ALL equal, so that every advantage is 0.\n"
        "  scores: (n,) float tensor, each trajectory's total reward;  group_ids: (n,) int tensor (any order)\n"
        "Return a bool tensor (n,). A group of one is NOT marked: GRPO's group-of-one rule gives it its raw\n"
        "score. Equal means exactly equal."),
    cases=_zero_grad_cases, reference=_zero_grad_reference, output="bool",
    rules=(
        Rule("compare each trajectory with its own GROUP (same group id), not with the whole batch",
             _looks_like(_zero_grad_variant("batch")), every=True),
        Rule("a group of one is not marked: GRPO's group-of-one rule gives it its raw score, so it still "
             "adds a gradient", _looks_like(_zero_grad_variant("singleton")), frozenset({"single"}), every=True),
        Rule("use exact equality of the scores (max == min), not a threshold on the std",
             _looks_like(_zero_grad_variant("std")), every=True),
    ),
))
