"""The notebook checks (labkit.course.bands): exact text without negative zeros, learned numbers within
measured bands.
"""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from labkit.core.checks import STRICT_ENV
from labkit.course import bands
from labkit.course.bands import NotebookChecks, flatten, tidy, use_threads


def test_tidy_turns_negative_zero_into_zero_everywhere():
    assert f"{tidy(-0.0004):.3f}" == "0.000"
    assert f"{tidy(-0.0006):.3f}" == "-0.001"
    df = tidy(pd.DataFrame({"x": [-0.0001, 0.25], "name": ["a", "b"]}))
    assert df.to_string() == pd.DataFrame({"x": [0.0, 0.25], "name": ["a", "b"]}).to_string()
    assert "-" not in np.array2string(tidy(np.array([-1e-9, 1e-9])))
    assert "-" not in str(tidy(torch.tensor([-1e-9])).tolist())
    with pytest.raises(ValueError, match="decimals"):
        tidy(1.0, decimals=-1)
    with pytest.raises(TypeError, match="x must be"):
        tidy("0.1")


def test_flatten_labels_rows_columns_and_nested_keys():
    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}, index=["r0", "r1"])
    assert flatten(df) == {"r0/a": 1.0, "r1/a": 2.0}
    assert flatten({"t": df, "n": 3, "ok": True}) == {"t/r0/a": 1.0, "t/r1/a": 2.0, "n": 3.0, "ok": 1.0}
    assert flatten(pd.Series({0.5: 1.0, 2.0: 3.0})) == {"0.5": 1.0, "2": 3.0}
    assert flatten(torch.tensor(0.25)) == {"": 0.25}
    with pytest.raises(TypeError, match="value must hold numbers"):
        flatten("text")


@pytest.fixture
def checks(tmp_path, monkeypatch):
    for var in (bands.RECORD_ENV, STRICT_ENV, bands.LOG_ENV):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "nb.json").write_text(json.dumps({
        "score": {"band": 0.05, "spread": 0.01, "note": "test", "values": {"a": 0.5, "b": None}},
        "table": {"band": {"x": 0.1, "n": 0}, "spread": None, "note": "", "values": {"r/x": 1.0, "r/n": 4.0}},
    }))
    return NotebookChecks("nb", directory=tmp_path)


def test_expect_passes_inside_the_band_and_fails_outside_in_strict_mode(checks, monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")
    table = pd.DataFrame({"x": [1.09], "n": [4]}, index=["r"])
    assert checks.expect("table", table) is table
    checks.expect("score", {"a": 0.549, "b": float("nan")})
    with pytest.raises(AssertionError, match=r"a: 0.56, stored 0.5 ± 0.05"):
        checks.expect("score", {"a": 0.56, "b": float("nan")})
    with pytest.raises(AssertionError, match="left their band"):
        checks.expect("score", {"a": 0.5, "b": 0.1})          # NaN stored: a number is a change
    with pytest.raises(AssertionError, match="r/n"):
        checks.expect("table", pd.DataFrame({"x": [1.0], "n": [5]}, index=["r"]))
    with pytest.raises(AssertionError, match="changed shape"):
        checks.expect("score", {"a": 0.5})
    with pytest.raises(KeyError, match="no stored check 'other'"):
        checks.expect("other", 1.0)


def test_outside_the_band_a_reader_gets_a_note_not_a_traceback(checks, capsys):
    checks.expect("score", {"a": 0.9, "b": float("nan")})
    assert "differ from the course's stored run" in capsys.readouterr().out


def test_record_mode_rewrites_values_and_keeps_bands(checks, monkeypatch):
    monkeypatch.setenv(bands.RECORD_ENV, "1")
    checks.expect("score", {"a": 0.7, "b": 0.1})
    checks.expect("new", 2.0)
    stored = json.loads(checks.path.read_text())
    assert stored["score"]["values"] == {"a": 0.7, "b": 0.1} and stored["score"]["band"] == 0.05
    assert stored["new"]["band"] is None


def test_log_mode_appends_one_line_per_check(checks, monkeypatch, tmp_path):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(bands.LOG_ENV, str(log))
    checks.expect("score", {"a": 0.5, "b": float("nan")})
    rec = json.loads(log.read_text())
    assert rec["notebook"] == "nb" and rec["key"] == "score" and rec["values"]["a"] == 0.5


def test_use_threads_honours_the_matrix_override(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv(bands.THREADS_ENV, raising=False)
        use_threads(1)
        assert torch.get_num_threads() == 1
        monkeypatch.setenv(bands.THREADS_ENV, "3")
        use_threads(1)
        assert torch.get_num_threads() == 3
        monkeypatch.setenv(bands.THREADS_ENV, "many")
        with pytest.raises(ValueError, match="LABKIT_THREADS"):
            use_threads(1)
        with pytest.raises(ValueError, match="n must be"):
            use_threads(0)
    finally:
        torch.set_num_threads(before)
