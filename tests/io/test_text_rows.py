"""labkit.io.text_rows: the rules both frameworks' text logs are read by (groups, reward, missing values)."""
from __future__ import annotations

import pytest
import torch

from labkit.io import RecordError
from labkit.io.text_rows import TextRows, chunk_rows, numeric_columns, read_text_rows, stream_text_rows, text_length


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


def test_rows_carrying_record_fields_are_checked_as_records():
    r = rows(prompt=["a", "a"], completion=["xy", None], completion_ids=[None, [7, 8, 9]], f=[1.0, 0.0],
             generated=[[1, 1], None], logprobs=[[-0.5, -0.25], [-0.1, -0.2, -0.3]])
    ro = read_text_rows(r)
    assert ro.tokens.tolist() == [[ord("x"), ord("y"), 0], [7, 8, 9]] and ro.mask.sum(1).tolist() == [2, 3]
    assert ro.logprobs[1].tolist() == [-0.1, -0.2, -0.3]
    r.columns["logprobs"][1] = [-0.1]
    with pytest.raises(RecordError, match=r"^source: row 1, field 'logprobs': has 1 entries but 'tokens' has 3"):
        read_text_rows(r)
    r.columns["logprobs"][1] = None
    with pytest.raises(RecordError, match=r"^source: row 1, field 'logprobs': missing, but row 0 has it"):
        read_text_rows(r)
    r.columns["logprobs"] = [None, None]
    r.columns["completion_ids"][1] = [7, -8, 9]
    with pytest.raises(RecordError, match=r"^source: row 1, field 'tokens': must be >= 0, got -8 at position 1"):
        read_text_rows(r)


def test_a_stream_numbers_groups_alike_in_every_chunk():
    def part(first, steps, prompts):
        n = len(steps)
        cols = {"step": steps, "prompt": prompts, "completion": ["x"] * n, "f": [1.0] * n}
        return TextRows(source="run", format="trl", unit="row", columns=cols, numbers=list(range(first, first + n)),
                        wheres=["file 1"] * n, step="step", reward_columns=["f"])

    chunks = list(stream_text_rows([part(0, [1, 1], ["a", "b"]), part(2, [1, 2], ["a", "a"])]))
    assert [c.group_ids.tolist() for c in chunks] == [[0, 1], [0, 2]]
    assert chunks[1].info["group_names"] == ("step 1 | a", "step 1 | b", "step 2 | a")
    assert [(c.info["offset"], c.info["first_record"], c.info["first_file"]) for c in chunks] == [
        (0, 0, "file 1"), (2, 2, "file 1")]


def test_chunks_of_long_text_take_fewer_rows(monkeypatch):
    import labkit.io.text_rows as text_rows

    monkeypatch.setattr(text_rows, "CHUNK_POSITIONS", 10)
    # rows padded to their longest: 3 rows of 3 fit in 10 positions, a 4th row of 5 does not
    assert chunk_rows([3, 3, 3, 5, 1], batch_rows=8, final=False) == 3
    assert chunk_rows([3, 3], batch_rows=8, final=False) is None and chunk_rows([3, 3], batch_rows=8, final=True) == 2
    assert chunk_rows([3, 3, 3], batch_rows=2, final=False) == 2
    assert chunk_rows([50, 1], batch_rows=8, final=False) == 1  # one row at least, however long
    assert text_length([{"role": "assistant", "content": "abc"}]) == 3 and text_length(None) == 0
