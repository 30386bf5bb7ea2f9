"""ArithmeticTask: multi-operand addition written out as a checkable chain of thought.

A prompt is a sum of two to four two-digit operands, ``23+48+19=``. The target completion adds
them left to right, one written step per operand, then states the answer::

    23+48=71;71+19=90;#90

followed by the end-of-sequence token. Every step can be checked on its own, so the task has
exact *process* labels (which step went wrong first) next to the sparse *outcome* reward (is the
final ``#n`` right) — the two signals whose gap credit assignment is about.

Vocabulary: the characters ``0123456789+=;#`` plus the special tokens ``<pad> <bos> <eos> <unk>``
(``<unk>`` exists only so that arbitrary text can be tokenized without an error). ``;`` is the
step boundary that the rest of the lab uses to cut a completion into steps.

Train / held-out split: every operand tuple is assigned to one side by a hash of the tuple and the
task's ``seed``, so the split is stable across runs and machines, disjoint by construction and
needs no stored list. Order matters: (23, 48) and (48, 23) are different problems.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from typing import Sequence

from labkit.core.checks import check_choice, check_int, check_number
from labkit.policies.vocab import (ANSWER_MARK, BOS, CHARS, DIGITS, EOS, PAD,  # noqa: F401  (the task's alphabet)
                                   SPECIAL_TOKENS, STEP_SEP, UNK)

MIN_OPERAND, MAX_OPERAND = 10, 99
MIN_OPERANDS, MAX_OPERANDS = 2, 4
SPLITS = ("train", "held_out")

# A number is canonical decimal: no sign, no leading zero (the model is trained on canonical text,
# and accepting "071" would give a digit-substitution a second way to look right).
_NUMBER = r"(0|[1-9][0-9]*)"
_STEP_RE = re.compile(rf"{_NUMBER}\+{_NUMBER}={_NUMBER}")
_ANSWER_RE = re.compile(rf"#{_NUMBER}")


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Problem:
    """One task instance. ``target`` is the reference completion without the end-of-sequence token."""

    operands: tuple[int, ...]
    prompt: str
    target: str
    answer: int

    @property
    def n_operands(self) -> int:
        return len(self.operands)

    @property
    def n_steps(self) -> int:
        """Number of ``a+b=c`` steps in the reference (the ``#n`` answer segment not counted)."""
        return len(self.operands) - 1


@dataclass(frozen=True)
class Step:
    """One ``;``-separated segment of a completion.

    ``completion[start:end] == text``; the separator that closes the segment (if any) sits at
    ``completion[end]`` and is not part of the span. With the lab's character-level tokenizer,
    character i of the completion is completion token i, so spans are token spans too.

    ``kind`` is ``"step"`` for a well-formed ``a+b=c`` (then ``lhs``, ``rhs``, ``result`` are
    set), ``"answer"`` for a well-formed ``#n`` (then ``result`` is n) and ``"malformed"``
    otherwise (all three are None).
    """

    index: int
    text: str
    start: int
    end: int
    kind: str
    lhs: int | None = None
    rhs: int | None = None
    result: int | None = None


@dataclass(frozen=True)
class Verdict:
    """What the verifier says about one completion of one problem.

    ``step_correct[k]`` judges segment k of ``steps`` (= ``parse_steps(completion)``), the final
    ``#n`` segment included, so it aligns one-to-one with the segments' character spans:

    * a step segment ``a+b=c`` at position k is correct iff it is well formed, ``a`` is the
      previous step's written result (the first operand when k = 0), ``b`` is operand k + 1 and
      ``c == a + b``. Correctness is *local*: after a wrong step, a step that carries the wrong
      number forward and adds correctly is correct — the error is blamed where it was made;
    * the answer segment ``#n`` is correct iff it is the last segment, comes right after the
      last step, and n is the true answer;
    * anything else (garbage, an extra step, a second answer) is incorrect.

    ``answer_correct``: the last segment is ``#n`` with n equal to the true answer.
    ``well_formed``: the completion has exactly the reference's shape (n_operands - 1 syntactically
    valid steps, then one ``#n``, nothing else), whatever the numbers.
    ``reward``: the outcome reward, 1.0 iff ``answer_correct`` and ``well_formed`` (format plus
    answer, as in common RL-for-reasoning setups), else 0.0. Intermediate steps do not enter it —
    a wrong step with a right answer still earns 1.0, which is exactly what outcome reward misses.
    ``first_error``: index of the first incorrect segment, or None if every segment present is
    correct (a completion cut short after correct steps has first_error None and reward 0).
    ``predicted``: the n of a final ``#n`` segment, or None.
    """

    step_correct: list[bool]
    answer_correct: bool
    reward: float
    first_error: int | None
    well_formed: bool
    predicted: int | None
    steps: tuple[Step, ...]

    @property
    def all_correct(self) -> bool:
        """Every segment right and the shape right: the completion is exactly the reference."""
        return self.well_formed and self.answer_correct and all(self.step_correct)


# --------------------------------------------------------------------------- pure functions
def _check_operands(operands: Sequence[int]) -> tuple[int, ...]:
    """Validate an operand tuple: 2-4 integers in [10, 99]."""
    if isinstance(operands, (str, bytes)) or not isinstance(operands, Sequence):
        raise TypeError(f"operands: expected a sequence of integers, got {type(operands).__name__}")
    check_int("operands", len(operands), low=MIN_OPERANDS, high=MAX_OPERANDS)
    out = []
    for i, x in enumerate(operands):
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"operands: entry {i} is {x!r}, expected an integer")
        if not MIN_OPERAND <= x <= MAX_OPERAND:
            raise ValueError(f"operands: entry {i} is {x}, expected {MIN_OPERAND}..{MAX_OPERAND}")
        out.append(int(x))
    return tuple(out)


def prompt_for(operands: Sequence[int]) -> str:
    """``(23, 48, 19) -> "23+48+19="``."""
    return "+".join(str(x) for x in _check_operands(operands)) + "="


def operands_of(prompt: str) -> tuple[int, ...]:
    """``"23+48+19=" -> (23, 48, 19)``: the inverse of :func:`prompt_for`; a ValueError naming
    ``prompt`` for text that is not such a prompt."""
    if not isinstance(prompt, str) or not prompt.endswith("="):
        raise ValueError(f"prompt: expected a problem such as '23+48+19=', got {prompt!r}")
    try:
        return _check_operands([int(x) for x in prompt[:-1].split("+")])
    except (TypeError, ValueError):
        raise ValueError(f"prompt: expected a problem such as '23+48+19=', got {prompt!r}") from None


def solution(operands: Sequence[int]) -> str:
    """The reference chain of thought, e.g. ``(23, 48, 19) -> "23+48=71;71+19=90;#90"``.

    The end-of-sequence token is not included (it is a token, not text).
    """
    ops = _check_operands(operands)
    steps, acc = [], ops[0]
    for b in ops[1:]:
        steps.append(f"{acc}+{b}={acc + b}")
        acc += b
    return STEP_SEP.join(steps + [f"{ANSWER_MARK}{acc}"])


def _strip_eos(completion: str) -> str:
    """Cut at the first end-of-sequence marker, so text decoded with special tokens also works."""
    cut = completion.find(EOS)
    return completion if cut < 0 else completion[:cut]


def parse_steps(completion: str) -> list[Step]:
    """Split a completion on ``;`` into segments with character spans. Never raises on bad text.

    An empty completion has no segments; otherwise every ``;`` starts a new segment (so a
    trailing ``;`` gives a final empty, malformed segment). Text after an ``<eos>`` marker is
    ignored, so completions decoded with or without ``skip_special_tokens`` parse the same.
    """
    if not isinstance(completion, str):
        raise TypeError(f"completion: expected a string, got {type(completion).__name__}")
    text = _strip_eos(completion)
    if not text:
        return []
    out, start = [], 0
    for k, seg in enumerate(text.split(STEP_SEP)):
        end = start + len(seg)
        m = _STEP_RE.fullmatch(seg)
        if m:
            step = Step(k, seg, start, end, "step", int(m[1]), int(m[2]), int(m[3]))
        elif (m := _ANSWER_RE.fullmatch(seg)):
            step = Step(k, seg, start, end, "answer", result=int(m[1]))
        else:
            step = Step(k, seg, start, end, "malformed")
        out.append(step)
        start = end + len(STEP_SEP)
    return out


def segment_ids(completion: str) -> list[int]:
    """Per-character segment label of ``completion``: the ``;`` closing a segment belongs to it.

    ``"23+48=71;#71"`` -> ``[0]*9 + [1]*3``. Text after an ``<eos>`` marker gets -1. This is the
    character-level (hence token-level) step labelling for ``Rollouts.step_ids``.
    """
    steps = parse_steps(completion)
    ids = [-1] * len(completion)
    for s in steps:
        stop = min(s.end + len(STEP_SEP), len(_strip_eos(completion)))
        for i in range(s.start, stop):
            ids[i] = s.index
    return ids


def verify(problem: Problem, completion: str) -> Verdict:
    """Judge ``completion`` against ``problem``; see ``Verdict``. Never raises on bad text."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem: expected a Problem, got {type(problem).__name__}")
    steps = tuple(parse_steps(completion))
    ops = problem.operands
    n_steps = len(ops) - 1
    correct: list[bool] = []
    acc = ops[0]  # the running value the next step must start from (as written, not as true)
    for k, s in enumerate(steps):
        if s.kind == "step":
            ok = k < n_steps and s.lhs == acc and s.rhs == ops[k + 1] and s.result == s.lhs + s.rhs
            acc = s.result  # local correctness: carry forward what was written
        elif s.kind == "answer":
            ok = k == n_steps and k == len(steps) - 1 and s.result == problem.answer
        else:
            ok = False
        correct.append(bool(ok))
    last = steps[-1] if steps else None
    predicted = last.result if last is not None and last.kind == "answer" else None
    answer_correct = predicted is not None and predicted == problem.answer
    well_formed = (len(steps) == n_steps + 1 and all(s.kind == "step" for s in steps[:-1])
                   and steps[-1].kind == "answer")
    first_error = next((k for k, ok in enumerate(correct) if not ok), None)
    return Verdict(step_correct=correct, answer_correct=answer_correct,
                   reward=1.0 if (answer_correct and well_formed) else 0.0,
                   first_error=first_error, well_formed=well_formed, predicted=predicted,
                   steps=steps)


# --------------------------------------------------------------------------- the task
class ArithmeticTask:
    """Addition chains with a deterministic, disjoint train / held-out split of operand tuples.

    ``held_out_fraction`` of all operand tuples (of every length) are held out; which ones is
    decided by a hash of (``seed``, tuple). A model trained on ``split="train"`` never sees a
    held-out tuple, so held-out accuracy measures generalisation rather than memory.
    """

    min_operand, max_operand = MIN_OPERAND, MAX_OPERAND
    operand_counts = tuple(range(MIN_OPERANDS, MAX_OPERANDS + 1))
    chars = CHARS
    special_tokens = SPECIAL_TOKENS

    def __init__(self, seed: int = 0, held_out_fraction: float = 0.1):
        self.seed = check_int("seed", seed)
        self.held_out_fraction = check_number("held_out_fraction", held_out_fraction,
                                              low=0.0, high=1.0, low_open=True, high_open=True)

    def __repr__(self) -> str:
        return f"ArithmeticTask(seed={self.seed}, held_out_fraction={self.held_out_fraction})"

    # ---- split
    def _unit(self, operands: tuple[int, ...]) -> float:
        """A uniform number in [0, 1) fixed by (seed, operands); blake2b is stable everywhere
        (unlike Python's ``hash``, which is salted per process)."""
        key = f"arith-split/{self.seed}/{'+'.join(map(str, operands))}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2.0 ** 64

    def split_of(self, operands: Sequence[int]) -> str:
        """``"train"`` or ``"held_out"``."""
        return "held_out" if self._unit(_check_operands(operands)) < self.held_out_fraction else "train"

    def is_held_out(self, operands: Sequence[int]) -> bool:
        return self.split_of(operands) == "held_out"

    # ---- problems
    def problem(self, operands: Sequence[int]) -> Problem:
        """The Problem for these operands (either split)."""
        ops = _check_operands(operands)
        return Problem(operands=ops, prompt=prompt_for(ops), target=solution(ops), answer=sum(ops))

    @staticmethod
    def solution(operands: Sequence[int]) -> str:
        """See the module-level ``solution``."""
        return solution(operands)

    @staticmethod
    def parse_steps(completion: str) -> list[Step]:
        """See the module-level ``parse_steps``."""
        return parse_steps(completion)

    @staticmethod
    def verify(problem: Problem, completion: str) -> Verdict:
        """See the module-level ``verify``."""
        return verify(problem, completion)

    def sample_prompts(self, n: int, n_operands: int | Sequence[int] = (2, 3, 4), split: str = "train",
                       seed: int = 0, *, unique: bool = False) -> list[Problem]:
        """``n`` problems from ``split``, reproducible from (task seed, ``seed``).

        ``n_operands``: an int, or a sequence of counts each problem draws uniformly from.
        Operands are uniform on 10..99 (rejection sampling keeps only tuples of ``split``).
        ``unique=True`` draws without replacement (useful for evaluation; the held-out 2-operand
        pool has only about ``held_out_fraction * 8100`` tuples) and raises ValueError when the
        pool is too small.
        """
        n = check_int("n", n, low=0)
        check_choice("split", split, SPLITS)
        seed = check_int("seed", seed)
        if isinstance(n_operands, bool):
            raise TypeError(f"n_operands: expected an int or a sequence of ints, got {n_operands!r}")
        counts = (n_operands,) if isinstance(n_operands, int) else tuple(n_operands)
        if not counts:
            raise ValueError("n_operands: must name at least one operand count")
        for c in counts:
            check_int("n_operands", c, low=MIN_OPERANDS, high=MAX_OPERANDS)
        want_held_out = split == "held_out"
        # Mix the task seed into the sampling seed so two tasks with different splits do not
        # share their random streams; random.Random on an int is identical on every platform.
        mixed = int.from_bytes(hashlib.blake2b(f"arith-sample/{self.seed}/{seed}".encode(),
                                               digest_size=8).digest(), "big")
        rng = random.Random(mixed)
        span = MAX_OPERAND - MIN_OPERAND + 1
        out: list[Problem] = []
        seen: set[tuple[int, ...]] = set()
        for _ in range(n):
            k = counts[rng.randrange(len(counts))]
            # Rejection sampling: the expected number of tries is 1 / fraction of the split.
            for _attempt in range(200_000):
                ops = tuple(MIN_OPERAND + rng.randrange(span) for _ in range(k))
                if (self._unit(ops) < self.held_out_fraction) == want_held_out and not (
                        unique and ops in seen):
                    break
            else:
                raise ValueError(f"n: cannot draw {n} distinct {split} problems with {k} operands "
                                 f"(found {len(out)}); lower n or allow repeats")
            seen.add(ops)
            out.append(Problem(operands=ops, prompt=prompt_for(ops), target=solution(ops),
                               answer=sum(ops)))
        return out
