"""Predict, then reveal: the learner commits to a guess before the notebook shows its answer.

Every "Predict, then move" block of the course asks its question in prose, then calls ``predict``
once with the answer the cell has just COMPUTED at the named settings:

    best = lesson.best_cosine(horizon=200)          # computed here, never typed in
    predict("At T = 200, what is the best estimator's cosine with the exact gradient?",
            answer=best, low=0.0, high=1.0,
            reveal=f"At T = 200 the best cosine is {best:.3f}.")

In JupyterLab this shows the question, a slider (or buttons, for ``choices``) and "Lock in my
guess". Only once the guess is locked does the answer appear, with how close the guess was; the
guess cannot be changed afterwards. Without a live widget (a script, a test, a kernel with no
front end) ``Prediction.lock(guess)`` does the same and returns the verdict as text.

Stored outputs never depend on a guess: the cell's display also carries a static form of the
reveal, plain text (what nbval compares, so the answer is pinned or banded like any printed
number) and HTML inside a collapsed ``<details>`` (what the static site shows: the question in
view, the answer one click away). ``guesses()`` lists the guesses locked in this kernel, for an
instructor who wants to see how the room did.
"""
from __future__ import annotations

import html
import math
import re
import numbers
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as W
from IPython.display import HTML

__all__ = ["Prediction", "predict", "guesses", "CLOSE", "SPOT_ON"]

#: A guess within this share of the guess range from the answer is "spot on" ...
SPOT_ON = 0.05
#: ... and within this share "close"; farther is "far off".
CLOSE = 0.15

# every guess locked in this kernel, oldest first: (question, guess, answer, verdict)
_LOCKED: list[tuple[str, Any, Any, str]] = []


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


@dataclass
class Prediction:
    """One prediction block: the ``question``, the computed ``answer`` (a number in [low, high],
    or one of ``choices``), the ``reveal`` text shown with it (Markdown-like: a line starting
    "* " is a bullet), ``decimals`` to show numbers with and an optional ``unit``. ``guess`` is
    None until ``lock`` records one."""

    question: str
    answer: Any
    reveal: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    decimals: int = 3
    unit: str = ""
    guess: Any = None
    _widget: Any = field(default=None, repr=False)

    # ------------------------------------------------------------------ the verdict
    def fmt(self, value: Any) -> str:
        """``value`` as the block shows it: a number to ``decimals`` places (an integer answer as
        an integer) with the unit, a choice as itself."""
        if self.choices is not None:
            return str(value)
        whole = isinstance(self.answer, numbers.Integral) and float(value).is_integer()
        text = f"{int(value):,}" if whole else f"{float(value):.{self.decimals}f}"
        return f"{text} {self.unit}".rstrip()

    def verdict(self) -> str:
        """How close the locked guess is to the answer, in one sentence."""
        if self.guess is None:
            raise RuntimeError("guess: no guess is locked yet; call lock(guess) first")
        if self.choices is not None:
            if self.guess == self.answer:
                return f"You picked {self.guess}: right."
            return f"You picked {self.guess}; the answer is {self.answer}."
        off = abs(float(self.guess) - float(self.answer))
        share = off / (self.high - self.low)
        word = "spot on" if share <= SPOT_ON else "close" if share <= CLOSE else "far off"
        return (f"You guessed {self.fmt(self.guess)}; the notebook computed {self.fmt(self.answer)}: "
                f"{word} (off by {self.fmt(off)}, {100 * share:.0f} % of the range "
                f"{self.fmt(self.low)} to {self.fmt(self.high)}).")

    def lock(self, guess: Any) -> str:
        """Record ``guess`` (a number in [low, high], or one of the choices) and return the verdict.
        A block takes one guess: locking a second time raises."""
        if self.guess is not None:
            raise RuntimeError(f"guess: already locked at {self.fmt(self.guess)}; a block takes one guess")
        if self.choices is not None:
            if guess not in self.choices:
                raise ValueError(f"guess: must be one of {list(self.choices)}, got {guess!r}")
        else:
            if not _is_number(guess) or not math.isfinite(guess):
                raise ValueError(f"guess: must be a finite number, got {guess!r}")
            if not self.low <= guess <= self.high:
                raise ValueError(f"guess: must lie in [{self.fmt(self.low)}, {self.fmt(self.high)}], got {guess!r}")
        self.guess = guess
        verdict = self.verdict()
        _LOCKED.append((self.question, guess, self.answer, verdict))
        return verdict

    # ------------------------------------------------------------------ static forms
    def answer_text(self) -> str:
        """The answer line and the reveal, as plain text (what a stored output and nbval see)."""
        lines = [f"Answer: {self.fmt(self.answer)}"]
        if self.reveal:
            lines.append(self.reveal.strip())
        return "\n".join(lines)

    def text(self) -> str:
        """The whole block as plain text: the question, then the answer (no guess involved)."""
        return f"Predict: {self.question}\n{self.answer_text()}"

    def html(self) -> str:
        """The block as static HTML: the question in view, the answer in a collapsed ``<details>``."""
        return (f'<div class="prediction"><p><strong>Predict:</strong> {_inline(self.question)}</p>'
                f'<details class="reveal"><summary>Guess first, then open: the answer computed in this notebook'
                f'</summary>{_html_paragraphs(self.answer_text())}</details></div>')

    # ------------------------------------------------------------------ the live widget
    @property
    def widget(self) -> W.Widget:
        """The live block: question, guess control, "Lock in my guess", and the reveal area."""
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    def _build_widget(self) -> W.Widget:
        question = W.HTML(f"<b>Predict:</b> {_inline(self.question)}")
        if self.choices is not None:
            control = W.ToggleButtons(options=list(self.choices), value=None, description="")
        else:
            start = self.low + (self.high - self.low) / 2
            step = (self.high - self.low) / 100
            if isinstance(self.answer, numbers.Integral) and step >= 1:
                control = W.IntSlider(min=int(self.low), max=int(self.high), step=max(1, round(step)),
                                      value=int(start), continuous_update=False)
            else:
                control = W.FloatSlider(min=self.low, max=self.high, step=step, value=start,
                                        readout_format=f".{self.decimals}f", continuous_update=False)
        control.description = "your guess"
        button = W.Button(description="Lock in my guess", button_style="primary")
        out = W.Output()

        def on_click(_):
            out.outputs = ()
            if control.value is None:  # a choice not yet picked
                out.append_display_data(HTML("<p>Pick an answer first.</p>"))
                return
            verdict = self.lock(control.value)
            control.disabled = button.disabled = True
            out.append_display_data(HTML(_html_paragraphs(f"{verdict}\n{self.answer_text()}")))

        button.on_click(on_click)
        box = W.VBox([question, W.HBox([control, button]), out])
        box.add_class("labkit-prediction")
        return box

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        # the widget where a front end can show it; the static reveal for nbval and the site
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text()
        bundle["text/html"] = self.html()
        return bundle


def _inline(text: str) -> str:
    """Plain text as HTML, escaped, with `code spans` shown as code (the prompts name controls so)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _html_paragraphs(text: str) -> str:
    """Plain text as HTML: each line a paragraph, a run of "* " lines a bullet list."""
    out, items = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("* "):
            items.append(f"<li>{_inline(line[2:])}</li>")
            continue
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items = []
        if line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    return "".join(out)


def predict(question: str, answer: Any, *, low: float | None = None, high: float | None = None,
            choices: Any = None, reveal: str = "", decimals: int = 3, unit: str = "") -> Prediction:
    """A prediction block: show ``question``, take a guess, then reveal the computed ``answer``.

    A number: give ``low`` and ``high``, the range the guess slider spans (the answer must lie in
    it); how close a guess was is judged on that range (within 5 % spot on, 15 % close). A choice:
    give ``choices`` (the answer must be one of them). ``reveal``: what else to show with the
    answer, written from the cell's computed values (an f-string), one bullet ("* ") per finding.
    Returns the ``Prediction``; displayed (the last line of a cell) it shows the live block.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question: must be a non-empty string, got {question!r}")
    if not isinstance(reveal, str):
        raise TypeError(f"reveal: must be a string, got {type(reveal).__name__}")
    if isinstance(decimals, bool) or not isinstance(decimals, int) or not 0 <= decimals <= 6:
        raise ValueError(f"decimals: must be an integer in [0, 6], got {decimals!r}")
    if not isinstance(unit, str):
        raise TypeError(f"unit: must be a string, got {type(unit).__name__}")
    if choices is not None:
        if low is not None or high is not None:
            raise ValueError("low: a prediction takes either choices or a low-high range, not both")
        if isinstance(choices, str) or len(choices := tuple(choices)) < 2:
            raise ValueError(f"choices: must be at least two options, got {choices!r}")
        if answer not in choices:
            raise ValueError(f"answer: {answer!r} is not one of the choices {list(choices)}")
        return Prediction(question.strip(), answer, reveal, choices=choices, decimals=decimals, unit=unit)
    if low is None or high is None:
        raise ValueError("low: a numeric prediction needs low and high (the range a guess can take), "
                         "or pass choices")
    for name, v in (("answer", answer), ("low", low), ("high", high)):
        if not _is_number(v) or not math.isfinite(v):
            raise ValueError(f"{name}: must be a finite number, got {v!r}")
    if not low < high:
        raise ValueError(f"high: must be larger than low ({low}), got {high}")
    if not low <= answer <= high:
        raise ValueError(f"answer: {answer} lies outside the guess range [{low}, {high}]; widen the range")
    return Prediction(question.strip(), answer, reveal, low=low, high=high, decimals=decimals, unit=unit)


def guesses():
    """The guesses locked in this kernel, oldest first: a DataFrame with the question, the guess,
    the answer and the verdict (empty when none was locked)."""
    import pandas as pd

    return pd.DataFrame(_LOCKED, columns=["question", "guess", "answer", "verdict"])
