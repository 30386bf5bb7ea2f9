"""The record format (labkit.io.record): the JSON Schema and the reader agree, what the lab writes
validates, writers keep records small, unknown fields are listed.
"""
from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.io import RecordError, load_schema, read_rollouts
from labkit.io.record import rollout_records

from io_cases import hand_made


def test_writers_keep_records_small(tmp_path):
    records = rollout_records(hand_made())
    assert records[2] == {"group_id": 0, "prompt": "p2", "tokens": [], "reward": 0.0, "logprobs": [],
                          "entropies": [], "states": [], "anchor_keys": [], "text": []}
    assert records[0]["reward"] == 1.0 and records[0]["rewards"][1] == 0.25 and records[0]["rewards"][5] == 0.0
    assert records[0]["generated"] == [1, 1, 0, 0, 1, 1] and len(records[1]["tokens"]) == 3
    plain = Rollouts(tokens=torch.ones(2, 3, dtype=torch.long), mask=torch.ones(2, 3, dtype=torch.bool),
                     rewards=torch.tensor([[0, 0, 1.0], [0, 0, 0]]))
    assert rollout_records(plain)[0] == {"group_id": 0, "tokens": [1, 1, 1], "reward": 1.0}


# --------------------------------------------------------------------------- the schema
def test_schema_is_valid_draft_2020_12_and_found_through_paths():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"group_id", "tokens", "reward"}


def _reader_accepts(record: dict, tmp_path) -> bool:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record) + "\n")
    try:
        read_rollouts(path)
    except RecordError:
        return False
    return True


def test_schema_accepts_what_the_lab_writes(toolworld):
    validator = jsonschema.Draft202012Validator(load_schema())
    for ro in (toolworld, hand_made()):
        for rec in rollout_records(ro):
            validator.validate(rec)


GOOD = {"group_id": "q1", "prompt": "2+2=", "tokens": [3, 4, 5], "reward": 1, "generated": [1, 0, 1],
        "rewards": [0.5, 0, 0], "turn_ids": [0, -1, 1], "logprobs": [-0.1, 0.0, -0.2], "anchor_keys": ["a", 7],
        "notes": "ignored"}
STRUCTURAL = [  # refused by the schema and by the reader alike
    ("group_id", None), ("tokens", None), ("reward", None),  # missing (None = drop the field)
    ("reward", "abc"), ("reward", True), ("tokens", [1, "2"]), ("tokens", "123"), ("tokens", [1, 2.5]),
    ("tokens", [-1, 0, 0]), ("group_id", 1.5), ("group_id", -2), ("group_id", True), ("prompt", 3),
    ("generated", [1, 2, 1]), ("rewards", [0, "x", 0]), ("turn_ids", [0, -2, 1]), ("states", [0, -1, 0]),
    ("anchor_keys", [["nested"], 1]), ("text", ["a", 1, "c"]), ("logprobs", [True, 0, 0]),
]
CROSS_FIELD = [  # the schema cannot see these; the reader refuses them
    ("rewards", [0, 0.5, 0]),          # a reward on a tool-output position
    ("generated", [1, 0]),             # length differs from tokens
    ("logprobs", [0.5, 0.0, -0.2]),    # a positive log-probability where generated
    ("turn_ids", [1, -1, 2]),          # turns must count from 0
    ("anchor_keys", ["a"]),            # one key per step: two steps here
]


@pytest.mark.parametrize("field,value", [(None, None)] + STRUCTURAL + CROSS_FIELD,
                         ids=["valid"] + [f"{f}={v!r}" for f, v in STRUCTURAL + CROSS_FIELD])
def test_schema_and_reader_agree(field, value, tmp_path):
    record = dict(GOOD)
    if field is not None:
        if value is None:
            del record[field]
        else:
            record[field] = value
    schema_ok = jsonschema.Draft202012Validator(load_schema()).is_valid(record)
    reader_ok = _reader_accepts(record, tmp_path)
    if field is None:
        assert schema_ok and reader_ok
    elif (field, value) in CROSS_FIELD:
        assert schema_ok and not reader_ok
    else:
        assert not schema_ok and not reader_ok


def test_unknown_fields_are_ignored_and_listed(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "data_source": "gsm8k"}) + "\n")
    ro = read_rollouts(path)
    assert ro.info["ignored_fields"] == ("data_source", "notes")
    assert ro.group_ids.tolist() == [0, 0] and ro.info["group_names"] == ("q1",)
    assert ro.mask.tolist() == [[True, False, True]] * 2
    assert ro.rewards[0].tolist() == [0.5, 0.0, 1.0]  # intermediate 0.5 + outcome 1 on the last generated
    assert ro.turn_ids[0].tolist() == [0, -1, 1] and ro.step_ids[0].tolist() == [0, -1, 1]
