"""TRL rows (labkit.io.trl) read as Rollouts; a bad row is refused."""
from __future__ import annotations

import pytest

from labkit.io import RecordError, read_rollouts


def test_trl_rows_read_as_rollouts():
    cols = {"prompt": ["1+1=", "1+1=", [{"role": "user", "content": "hi"}]],
            "completion": ["2", "11", [{"role": "assistant", "content": "hé"}]], "reward": [1.0, 0.0, 0.5],
            "extra": [1, 2, 3]}
    ro = read_rollouts(cols)
    assert ro.tokens[:, :2].tolist() == [[ord("2"), 0], [ord("1"), ord("1")], [ord("h"), ord("é")]]
    assert ro.text[2][:2] == ["h", "é"] and ro.mask.sum(1).tolist() == [1, 2, 2]
    assert ro.group_ids.tolist() == [0, 0, 1] and ro.prompts[2] == "user: hi"
    assert ro.scores.tolist() == [1.0, 0.0, 0.5] and ro.info["tokenizer"].startswith("unicode code points")
    assert ro.info["ignored_fields"] == ("extra",)
    rows = [{"prompt": "p", "completion": "ab", "completion_ids": [7, 8], "reward": 1}]
    ro = read_rollouts(rows, "trl")
    assert ro.tokens.tolist() == [[7, 8]] and ro.text is None and "tokenizer" not in ro.info
    with pytest.raises(RecordError, match=r"^source: row 1, field 'reward': expected a finite number, got 'abc'"):
        read_rollouts({"prompt": ["a", "b"], "completion": ["x", "y"], "reward": [1, "abc"]}, "trl")
    with pytest.raises(RecordError, match=r"^source: row 0, field 'completion': missing"):
        read_rollouts([{"prompt": "a", "reward": 1}], "trl")
