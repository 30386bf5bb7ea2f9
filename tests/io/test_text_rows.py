"""labkit.io.text_rows: the rules both frameworks' text logs are read by (groups, reward, missing values)."""
from __future__ import annotations

import pytest
import torch

from labkit.io import RecordError
from labkit.io.text_rows import TextRows, numeric_columns, read_text_rows


def rows(**cols) -> TextRows:
    n = len(next(iter(cols.values())))
    rewards = numeric_columns(cols, {"step", "advantage"})
    return TextRows(source="test rows", format="trl", unit="row", columns=cols, numbers=list(range(n)),
                    wheres=[None] * n, step="step", advantage="advantage", reward_columns=rewards)


def test_groups_are_step_and_prompt_when_the_step_is_known():
    r = rows(step=[1, 1, 2, 2], prompt=["a", "a", "a", "b"], completion=["x", "y", "x", "y"], f=[1.0, 0.0, 1.0, 1.0])
    ro = read_text_rows(r)
    assert ro.group_ids.tolist() == [0, 0, 1, 2] and ro.info["grouping"] == "training step and prompt"
    assert ro.info["group_names"] == ("step 1 | a", "step 2 | a", "step 2 | b")
    del r.columns["step"]
    ro = read_text_rows(r)
    assert ro.group_ids.tolist() == [0, 0, 0, 1] and ro.info["grouping"] == "prompt"
    r.columns["group_id"] = [5, 6, 7, 8]
    assert read_text_rows(r).info["grouping"] == "group_id as given"


def test_the_reward_is_the_sum_of_the_functions_and_missing_values_count_zero():
    r = rows(prompt=["a", "a"], completion=["x", "y"], f=[1.0, None], g=[0.5, float("nan")])
    ro = read_text_rows(r)
    assert ro.scores.tolist() == [1.5, 0.0] and ro.info["missing_rewards"] == 2
    assert ro.info["reward_columns"] == ("f", "g")
    assert torch.isnan(ro.info["reward_parts"][1]).all()
    assert read_text_rows(r, reward="g").scores.tolist() == [0.5, 0.0]
    with pytest.raises(TypeError, match=r"^reward: expected a column name"):
        read_text_rows(r, reward=3)


def test_bad_rows_name_the_row_and_field():
    with pytest.raises(RecordError, match=r"^source: row 1, field 'step': expected a non-negative integer training step"):
        read_text_rows(rows(step=[1, 1.5], prompt=["a", "a"], completion=["x", "y"], f=[1.0, 0.0]))
    with pytest.raises(RecordError, match=r"^source: row 0, field 'prompt': missing: rows are grouped by their prompt"):
        read_text_rows(rows(prompt=[None, "a"], completion=["x", "y"], f=[1.0, 0.0]))
    with pytest.raises(RecordError, match=r"^source: field 'reward': missing: no reward column"):
        read_text_rows(rows(prompt=["a"], completion=["x"]))
    with pytest.raises(RecordError, match=r"^source: row 0, field 'advantage': missing \(None or NaN\)"):
        read_text_rows(rows(prompt=["a"], completion=["x"], f=[1.0], advantage=[None]))
