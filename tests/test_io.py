"""labkit.io: the record format, its readers and writers, and the shipped sample dumps.

Round trips start from the lab's own rollouts (ToolWorld, notebook 05's setting; the tiny LM's
shipped sample) and a hand-made batch that uses every field (tool output inside trajectories,
intermediate rewards, agents, string group ids); every malformed input must be refused with a
RecordError naming the record (line / row) and the field.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest
import torch

from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.io import FORMATS, RecordError, load_schema, read_rollouts, to_trl, to_verl_batch, write_rollouts
from labkit.io.record import rollout_records

TENSORS = ("tokens", "mask", "rewards", "group_ids", "step_ids", "turn_ids", "agent_ids", "logprobs", "entropies",
           "states")
LISTS = ("anchor_keys", "text", "prompts")
SAMPLES = data_path("sample_rollouts")


@pytest.fixture(scope="module")
def toolworld():
    from labkit.course.nb05_why_agents_harder import noisy_world

    env = noisy_world(0.2, 30)
    return env.sample(env.scripted_policy(3.0), 3, group_size=4, seed=0)


def hand_made() -> Rollouts:
    """Every field, tool output inside trajectories, a trajectory with nothing generated."""
    m = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    turn = torch.tensor([[0, 0, -1, -1, 1, 1], [0, -1, 1, -1, -1, -1], [-1] * 6])
    rewards = torch.zeros(3, 6, dtype=torch.float64)
    rewards[0, 1], rewards[0, 5], rewards[1, 2] = 0.25, 1.0, -0.5
    return Rollouts(
        tokens=torch.tensor([[5, 6, 90, 91, 7, 8], [5, 92, 9, 0, 0, 0], [0] * 6]), mask=m, rewards=rewards,
        group_ids=torch.tensor([3, 3, 0]), step_ids=turn, turn_ids=turn.clone(),
        agent_ids=torch.tensor([[1, 1, -1, -1, 0, 0], [0, -1, 1, -1, -1, -1], [-1] * 6]),
        logprobs=torch.where(m, -0.5, 0.0).to(torch.float64), entropies=torch.where(m, 1.25, 0.0).to(torch.float64),
        states=torch.tensor([[0, 1, 1, 2, 2, 3], [0, 4, 4, 0, 0, 0], [0] * 6]),
        anchor_keys=[["s0", "s2"], ["s0", "s4"], []],
        text=[["a", "b", "<tool>", "</tool>", "c", "d"], ["a", "<t>", "e", "", "", ""], [""] * 6],
        prompts=["p0", "p1", "p2"])


def assert_same(a: Rollouts, b: Rollouts) -> None:
    """Equal in every field the format stores; ``b`` may drop trailing padding columns of ``a``."""
    T = b.horizon
    assert T <= a.horizon
    assert not bool(a.mask[:, T:].any()) and not bool(a.rewards[:, T:].any())
    for name in TENSORS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is None:
            continue
        if x.dim() == 2:
            x = x[:, :T]
        assert x.shape == y.shape, name
        assert torch.equal(x.double(), y.double()) if x.is_floating_point() else torch.equal(x, y), name
    for name in LISTS:
        x, y = getattr(a, name), getattr(b, name)
        if name == "text" and x is not None:
            x = [row[:T] for row in x]
        assert x == y, name


def roundtrip(ro: Rollouts, fmt: str, tmp_path) -> Rollouts:
    if fmt in ("jsonl", "parquet"):
        return read_rollouts(write_rollouts(ro, tmp_path / f"r.{fmt}"))
    return read_rollouts(to_verl_batch(ro) if fmt == "verl" else to_trl(ro), fmt)


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("fmt", FORMATS)
def test_lab_rollouts_round_trip_through_every_format(fmt, toolworld, tmp_path):
    back = roundtrip(toolworld, fmt, tmp_path)
    assert_same(toolworld, back)
    assert back.info["format"] == fmt and back.rewards.dtype == torch.float64


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_field_round_trips(fmt, tmp_path):
    ro = hand_made()
    back = roundtrip(ro, fmt, tmp_path)
    assert_same(ro, back)
    assert back.scores.tolist() == [1.25, -0.5, 0.0]
    # and a second trip changes nothing, the source's ids included
    again = roundtrip(back, fmt, tmp_path)
    assert_same(back, again)


def test_string_group_ids_survive_a_round_trip(tmp_path):
    ro = hand_made().with_(group_ids=torch.tensor([1, 1, 0]), info={"group_names": ("task-b", "task-a")})
    path = write_rollouts(ro, tmp_path / "g.jsonl")
    assert [json.loads(line)["group_id"] for line in path.read_text().splitlines()] == ["task-a", "task-a", "task-b"]
    back = read_rollouts(path)
    # first appearance numbers them: task-a -> 0, task-b -> 1
    assert back.group_ids.tolist() == [0, 0, 1] and back.info["group_names"] == ("task-a", "task-b")
    for fmt in ("parquet", "verl", "trl"):
        b2 = roundtrip(back, fmt, tmp_path)
        assert b2.group_ids.tolist() == [0, 0, 1] and b2.info["group_names"] == ("task-a", "task-b"), fmt


def test_float32_stays_float32_in_parquet_and_verl(tmp_path):
    ro = hand_made()
    ro = ro.with_(rewards=ro.rewards.float(), logprobs=ro.logprobs.float(), entropies=ro.entropies.float())
    for fmt in ("parquet", "verl"):
        back = roundtrip(ro, fmt, tmp_path)
        assert back.rewards.dtype == torch.float32 and back.logprobs.dtype == torch.float32, fmt
    assert roundtrip(ro, "jsonl", tmp_path).rewards.dtype == torch.float64  # JSON numbers are doubles


def test_mixed_anchor_key_types_go_to_jsonl_not_parquet(tmp_path):
    ro = hand_made().with_(anchor_keys=[["s0", 2], [0, 4], []])
    assert read_rollouts(write_rollouts(ro, tmp_path / "k.jsonl")).anchor_keys == [["s0", 2], [0, 4], []]
    with pytest.raises(TypeError, match="^rollouts: anchor_keys must be all strings or all integers"):
        write_rollouts(ro, tmp_path / "k.parquet")


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


def _parquet(tmp_path, **columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    return path


def test_bad_parquet_rows_are_refused_with_their_row_and_field(tmp_path):
    import pyarrow as pa

    base = dict(group_id=[0, 0, 1], tokens=[[1, 2], [3], [4, 5, 6]], reward=[1.0, 0.0, 1.0])
    cases = [
        (dict(base, reward=["1", "0", "x"]), 0, "reward", "expected a number"),
        (dict(base, tokens=[[1, 2], None, [4]]), 1, "tokens", "missing"),
        (dict(base, logprobs=[[-1.0, -1.0], [-1.0], [-1.0]]), 2, "logprobs", "has 1 entries but 'tokens' has 3"),
        (dict(base, generated=[[1, 1], [1], [1, 0, 1]], rewards=[[0, 0], [0], [0, 3.0, 0]]), 2, "rewards",
         "position 1 carries reward 3"),
        (dict(base, turn_ids=[[0, 0], [1], [0, 1, 2]]), 1, "turn_ids", "must count 0, 1, 2"),
        (dict(base, tokens=pa.array([[1, 2], [3, None], [4]])), 1, "tokens", "null at position 1"),
        ({k: v for k, v in base.items() if k != "group_id"}, 0, "group_id", "missing"),
    ]
    for columns, row, field, fragment in cases:
        with pytest.raises(RecordError) as info:
            read_rollouts(_parquet(tmp_path, **columns))
        assert (info.value.record, info.value.field) == (row, field), columns
        assert str(info.value).startswith(f"source: row {row}, field {field!r}") and fragment in str(info.value)
    with pytest.raises(RecordError, match="empty file"):
        read_rollouts(_parquet(tmp_path, group_id=pa.array([], pa.int64()), tokens=pa.array([], pa.list_(pa.int64())),
                               reward=pa.array([], pa.float64())))


def test_arguments_are_named_in_errors(tmp_path):
    with pytest.raises(ValueError, match="^source: cannot tell the format"):
        read_rollouts(tmp_path / "x.csv")
    with pytest.raises(FileNotFoundError, match="^source: no such file"):
        read_rollouts(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="^fmt: must be one of"):
        read_rollouts(tmp_path / "x.jsonl", fmt="csv")
    with pytest.raises(ValueError, match="^fmt: write_rollouts writes files"):
        write_rollouts(hand_made(), tmp_path / "x.jsonl", fmt="verl")
    with pytest.raises(TypeError, match="^rollouts: expected a Rollouts"):
        write_rollouts({"tokens": []}, tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="^source: expected a path"):
        read_rollouts(42)
    with pytest.raises(TypeError, match="^progress: expected True or False"):
        read_rollouts(write_rollouts(hand_made(), tmp_path / "x.jsonl"), progress="yes")


# --------------------------------------------------------------------------- verl and TRL shapes
def verl_batch(B=4, T=5):
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 3:] = 0          # a shorter response
    mask[2, 1:3] = 0         # tool output inside a multi-turn response
    scores = torch.zeros(B, T)
    scores[0, 4], scores[1, 2], scores[3, 4] = 1.0, 1.0, 0.5
    return {"responses": torch.randint(0, 50, (B, T), generator=g), "response_mask": mask,
            "token_level_scores": scores, "token_level_rewards": scores - 0.01 * mask,
            "old_log_probs": -torch.rand(B, T, generator=g), "entropys": torch.rand(B, T, generator=g),
            "attention_mask": torch.ones(B, 3 + T, dtype=torch.long), "prompts": torch.zeros(B, 3, dtype=torch.long),
            "uid": np.array(["9f1c", "9f1c", "07ab", "07ab"], dtype=object)}


def test_a_verl_batch_reads_as_rollouts():
    d = verl_batch()
    ro = read_rollouts(d, "verl")
    assert ro.mask.tolist() == d["response_mask"].bool().tolist()
    assert torch.equal(ro.rewards, d["token_level_scores"]) and ro.info["reward_key"] == "token_level_scores"
    assert ro.group_ids.tolist() == [0, 0, 1, 1] and ro.info["group_names"] == ("9f1c", "07ab")
    assert torch.equal(ro.logprobs, d["old_log_probs"]) and torch.equal(ro.entropies, d["entropys"])
    assert ro.info["ignored_fields"] == ("attention_mask", "prompts")
    # a DataProto: tensors in .batch, numpy arrays in .non_tensor_batch; fmt inferred
    proto = SimpleNamespace(batch={k: v for k, v in d.items() if k != "uid"}, non_tensor_batch={"uid": d["uid"]})
    assert torch.equal(read_rollouts(proto).rewards, ro.rewards)
    # without scores, token_level_rewards; without response_mask, the attention mask's response part
    d2 = {k: v for k, v in d.items() if k not in ("token_level_scores", "response_mask")}
    d2["attention_mask"] = torch.cat([torch.ones(4, 3, dtype=torch.long), d["response_mask"]], 1)
    ro2 = read_rollouts(d2, "verl")
    assert ro2.info["reward_key"] == "token_level_rewards" and torch.equal(ro2.mask, ro.mask)


def test_bad_verl_batches_name_row_and_key():
    d = verl_batch()
    d["token_level_scores"][2, 1] = 1.0  # on tool output
    with pytest.raises(RecordError, match=r"^source: row 2, field 'token_level_scores': position 1 carries") as info:
        read_rollouts(d, "verl")
    assert (info.value.record, info.value.field) == (2, "token_level_scores")
    d = verl_batch()
    d["old_log_probs"][3, 2] = 0.7
    with pytest.raises(RecordError, match=r"^source: row 3, field 'old_log_probs': .*at position 2"):
        read_rollouts(d, "verl")
    d = verl_batch()
    d["uid"] = d["uid"][:3]
    with pytest.raises(RecordError, match=r"^source: field 'uid': expected one id per row"):
        read_rollouts(d, "verl")
    with pytest.raises(RecordError, match=r"^source: field 'uid': missing"):
        read_rollouts({k: v for k, v in verl_batch().items() if k != "uid"}, "verl")


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


# --------------------------------------------------------------------------- the shipped samples
def test_the_arithmetic_sample_reads_with_its_fields():
    path = SAMPLES / "arithmetic_lm.jsonl"
    assert path.stat().st_size < 1.5 * 2 ** 20
    ro = read_rollouts(path)
    assert ro.batch_size == 512 and ro.logprobs is not None and ro.entropies is not None
    assert ro.text is not None and ro.prompts is not None and "ignored_fields" not in ro.info
    sizes = torch.bincount(ro.group_ids)
    assert sizes.numel() == 64 and bool((sizes == 8).all())
    assert set(ro.scores.unique().tolist()) == {0.0, 1.0}
    assert int(ro.n_steps.max()) >= 3  # the ;-separated reasoning steps
    assert bool(ro.mask.any(1).all())


def test_the_toolworld_sample_reads_with_its_fields():
    path = SAMPLES / "toolworld.jsonl"
    assert path.stat().st_size < 1.5 * 2 ** 20
    ro = read_rollouts(path)
    assert ro.batch_size == 256 and bool((torch.bincount(ro.group_ids) == 8).all())
    assert ro.states is not None and ro.anchor_keys is not None and ro.logprobs is not None
    inside = torch.arange(ro.horizon)[None, :] < (ro.horizon - ro.mask.flip(1).int().argmax(1))[:, None]
    assert bool((inside & ~ro.mask).any())  # tool output between the agent's actions
    assert torch.equal(ro.turn_ids, ro.step_ids) and int(ro.n_turns.max()) > 5
    assert [len(k) for k in ro.anchor_keys] == ro.n_turns.tolist()


def test_the_toolworld_sample_is_rebuilt_by_its_script(tmp_path, torch_is_locked):
    import importlib.util

    root = data_path().parent
    script = root / "scripts" / "build_sample_rollouts.py"
    if not script.is_file():
        pytest.skip("scripts/ is not next to the data folder (an installed copy)")
    spec = importlib.util.spec_from_file_location("build_sample_rollouts", script)
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    path = write_rollouts(build.toolworld(), tmp_path / "toolworld.jsonl")
    if torch_is_locked:
        assert path.read_bytes() == (SAMPLES / "toolworld.jsonl").read_bytes()
    else:  # another torch samples other episodes (its RNG streams differ): same layout, not same bytes
        new, shipped = read_rollouts(path), read_rollouts(SAMPLES / "toolworld.jsonl")
        assert new.batch_size == shipped.batch_size and torch.equal(new.group_ids, shipped.group_ids)
        assert [json.loads(x).keys() for x in path.read_text().splitlines()[:1]] == \
            [json.loads(x).keys() for x in (SAMPLES / "toolworld.jsonl").read_text().splitlines()[:1]]


def test_progress_bar_only_when_asked(tmp_path, capsys):
    path = write_rollouts(hand_made(), tmp_path / "x.jsonl")
    read_rollouts(path)
    assert "x.jsonl" not in capsys.readouterr().err
    read_rollouts(path, progress=True)
    assert "x.jsonl" in capsys.readouterr().err
