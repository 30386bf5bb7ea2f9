"""The run-and-interpret grader on a made-up reading: a right reading within the tolerance
passes, a known misreading gets its own hint, any other wrong one the general hint, something
that is no reading says what to enter; the lab's number is never printed and is measured once."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from labkit.course.exercises import Misreading, Reading

calls = []


def _measure():
    calls.append(1)
    return 0.4321


def _at_other_setting():
    return 0.1234


def reading(**kw) -> Reading:
    args = dict(notebook="97", letter="b", name="share", title="A made-up share",
                prompt="Run it at noise 0.3 and read the share (within 0.01).", measure=_measure,
                hint="re-run at noise 0.3 and read the 'share' column", tolerance=0.01,
                misreadings=(Misreading(_at_other_setting, "that is the share at noise 0.1"),
                             Misreading(1 - 0.4321, "that is 1 minus the share")))
    return Reading(**{**args, **kw})


def test_a_reading_within_the_tolerance_passes_and_the_lab_runs_once(capsys):
    ex = reading(letter="c")
    calls.clear()
    assert ex.check(0.44).passed and ex.check(np.float32(0.425), verbose=False).passed
    assert ex.check(torch.tensor(0.4321), verbose=False).passed
    assert len(calls) == 1
    assert capsys.readouterr().out.startswith("\u2713 97c \u00b7 A made-up share: your reading agrees")


@pytest.mark.parametrize("answer,hint", [
    (0.1234, "that is the share at noise 0.1"),
    (0.5679, "that is 1 minus the share"),
    (0.45, "re-run at noise 0.3"),
    (..., "enter your reading: replace ... with a number"),
    (None, "enter your reading"),
    ("0.43", "answer with a number, got str"),
    (True, "answer with a number, got bool"),
    (math.nan, "answer with a finite number"),
])
def test_a_wrong_reading_gets_its_hint_and_never_the_lab_value(answer, hint, capsys):
    result = reading().check(answer)
    out = capsys.readouterr().out
    assert not result.passed and hint in result.hint
    assert "0.432" not in out and "0.432" not in repr(result)


def test_a_choice_is_read_without_case_and_spaces():
    ex = reading(letter="d", name="which", choices=("GRPO", "GiGPO"), tolerance=0.0, measure=lambda: "GiGPO",
                 misreadings=(), hint="compare the two bars at 40,000 steps")
    assert ex.check(" gigpo ", verbose=False).passed
    assert "compare the two bars" in ex.check("GRPO", verbose=False).hint
    assert "not one of the choices" in ex.check("PPO", verbose=False).hint
    assert ex.signature == "which = one of 'GRPO', 'GiGPO'" and "one of 'GRPO', 'GiGPO'" in ex.template


@pytest.mark.parametrize("kw,match", [
    (dict(tolerance=0.0), "tolerance: a numeric reading needs a tolerance > 0"),
    (dict(choices=("a", "b")), "tolerance: a choice is right or wrong"),
    (dict(kind="debug"), "kind: a Reading is a run-and-interpret exercise"),
    (dict(letter="B"), "letter:"),
    (dict(path="optional"), "path:"),
    (dict(name="two words"), "name:"),
    (dict(notebook="7"), "notebook:"),
])
def test_a_malformed_reading_is_refused_naming_the_field(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        reading(**kw)
