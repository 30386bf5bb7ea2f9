"""JSONL files (labkit.io.jsonl): a malformed record is refused with its line and field."""
from __future__ import annotations

import json

import pytest

from labkit.io import RecordError, iter_rollouts, read_rollouts

from io_cases import small_record, write_jsonl


# --------------------------------------------------------------------------- malformed files
def _lines(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


OK = {"group_id": 0, "tokens": [1, 2, 3], "reward": 1.0}
JSONL_CASES = [
    # (file text, line, field, message fragment)
    (_lines(OK, {"group_id": 0, "tokens": [1, 2]}), 2, "reward", "missing"),
    (_lines(OK, OK, {**OK, "reward": "abc"}), 3, "reward", "expected a finite number, got 'abc'"),
    (_lines(OK, {**OK, "tokens": [1, "x", 3]}), 2, "tokens", "got 'x' at position 1"),
    (_lines(OK, {**OK, "generated": [1, 0, 1], "rewards": [0, 2.0, 0]}), 2, "rewards",
     "position 1 carries reward 2 but is not generated"),
    (_lines(OK, {**OK, "logprobs": [-1.0, -1.0]}), 2, "logprobs", "has 2 entries but 'tokens' has 3"),
    (_lines(OK, OK, '{"group_id": 0, "tokens": [1, 2'), 3, "tokens", "cut off"),
    (_lines(OK, "{'group_id': 0}"), 2, None, "not valid JSON"),
    (_lines(OK, "[1, 2, 3]"), 2, None, "expected a JSON object"),
    (_lines({**OK, "entropies": [0.1, 0.1, 0.1]}, OK), 2, "entropies", "missing, but line 1 has it"),
    (_lines(OK, "", OK, {**OK, "step_ids": [0, 2, 3]}), 4, "step_ids", "without gaps"),
    (_lines(*[{**OK, "logprobs": [-0.1, 0.3 if i == 4 else -0.1, -0.1]} for i in range(7)]), 5, "logprobs",
     "at position 1"),
    (_lines(OK, {**OK, "tokens": [], "reward": 1.0}), 2, "reward", "no generated position"),
    (_lines({**OK, "anchor_keys": ["a", "b"]}), 1, "anchor_keys", "3 steps but 2 keys"),
]


@pytest.mark.parametrize("text,line,field,fragment", JSONL_CASES,
                         ids=["missing", "wrong type", "bad element", "reward on tool output", "length mismatch",
                              "truncated", "invalid json", "not an object", "all or none", "label order",
                              "positive logprob", "reward without position", "anchor count"])
def test_a_bad_jsonl_record_is_refused_with_its_line_and_field(text, line, field, fragment, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(RecordError) as info:
        read_rollouts(path)
    err = info.value
    assert (err.record, err.field) == (line, field)
    message = str(err)
    assert message.startswith(f"source: line {line}") and fragment in message
    if field is not None:
        assert f"field {field!r}" in message


def test_an_empty_file_is_refused(tmp_path):
    for text in ("", "\n\n"):
        path = tmp_path / "empty.jsonl"
        path.write_text(text)
        with pytest.raises(RecordError, match="^source: empty file"):
            read_rollouts(path)


def test_a_bad_record_in_a_later_chunk_is_named_by_its_line_in_the_file(tmp_path):
    records = [small_record(i) for i in range(9)]
    records[7] = small_record(7, tokens=[1, -4, 2])
    path = write_jsonl(tmp_path, records, blank_after=2)  # a blank line: record 7 sits on line 9
    chunks = iter_rollouts(path, batch_rows=3)
    assert next(chunks).info["first_record"] == 1
    assert next(chunks).info["first_record"] == 5  # the blank line 4 is counted, not read
    with pytest.raises(RecordError) as info:
        next(chunks)
    assert (info.value.record, info.value.field) == (9, "tokens")
    assert str(info.value).startswith("source: line 9, field 'tokens'")
