"""verl's rollout dump (labkit.io.verl_dump), read as verl's own trainer wrote it; and, in verl's
side environment, the ``DataProto`` batches behind it, saved with ``save_to_disk``.

The dump is ``data/framework_runs/verl_dump`` (scripts/build_verl_dump.py: verl's own
``RayPPOTrainer._log_rollout_data`` writing real DataProto batches). In verl's side environment the
runner writes it again, with the DataProto pickles, and points ``LABKIT_FRAMEWORK_RUNS`` at it:
the tests that need verl itself run there only."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from labkit.diagnose import check_framework_advantages, diagnose, measure_groups
from labkit.io import RecordError, iter_rollouts, read_rollouts
from labkit.io.text_positions import display_text
from framework_runs import IS_COMMITTED, VERL
from io_cases import assert_chunks_are_the_whole, assert_rows_are_the_whole

FILES = sorted(VERL.glob("*.jsonl"), key=lambda p: int(p.stem))


def lines() -> list[dict]:
    return [json.loads(line) for f in FILES for line in f.read_text().splitlines() if line.strip()]


def test_the_rollout_dump_reads_as_verl_wrote_it():
    ro = read_rollouts(VERL)
    rows = lines()
    assert ro.batch_size == len(rows) and ro.info["format"] == "verl"
    assert ro.info["grouping"] == "training step and prompt" and ro.info["position_unit"] == "character"
    assert ro.scores.tolist() == [r["score"] for r in rows] and ro.info["reward_columns"] == ("score",)
    assert ro.info["training_steps"].tolist() == [r["step"] for r in rows]
    assert ro.prompts == [r["input"] for r in rows] and "gts" in ro.info["ignored_fields"]
    extras = [k for k in rows[0] if k not in ("input", "output", "gts", "score", "step")]
    assert ro.info["reward_part_names"] == ("score", *extras)
    assert ro.text is None
    assert ["".join(t) for t in display_text(ro, range(ro.batch_size))] == [r["output"] for r in rows]
    keys = [(r["step"], r["input"]) for r in rows]
    assert ro.group_ids.unique().numel() == len(set(keys)) > len({k[1] for k in keys})  # a prompt at two steps
    one = read_rollouts(FILES[-1])
    assert one.batch_size == sum(1 for r in rows if r["step"] == int(FILES[-1].stem))
    if IS_COMMITTED:
        assert ro.batch_size == 32 and measure_groups(ro).n_groups == 8
        assert measure_groups(ro).n_zero_variance == 5


def test_reward_picks_an_extra_field_and_the_diagnosis_says_how_it_read():
    rows = lines()
    ro = read_rollouts(VERL, reward="acc")
    assert ro.scores.tolist() == [r["acc"] for r in rows]
    d = diagnose(VERL, estimators=[], progress=False)
    assert d.grouping == "training step and prompt" and d.unit == "character"
    assert "reward: column 'score'" in d.to_markdown() and "fields not used: gts" in d.to_markdown()


def test_a_bad_line_names_its_file_line_and_field(tmp_path):
    text = FILES[0].read_text().splitlines()
    bad = json.loads(text[2])
    bad["score"] = "n/a"
    text[2] = json.dumps(bad)
    (tmp_path / "1.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(RecordError, match=r"^source: line 3, field 'score': expected a number, got 'n/a' \(in .*1.jsonl\)"):
        read_rollouts(tmp_path)
    del bad["output"]
    text[2] = json.dumps(bad)
    (tmp_path / "1.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(RecordError, match=r"^source: line 3, field 'output': missing"):
        read_rollouts(tmp_path / "1.jsonl", "verl")


# ---- verl itself: in its side environment, on the batches it saved (scripts/run_verl.py)
def _pickles():
    return sorted((VERL / "batches").glob("step_*.pkl"))


def test_verls_own_saved_dataproto():
    pytest.importorskip("verl")
    if not _pickles():
        pytest.skip("no saved DataProto here: scripts/run_verl.py writes them with the dump")
    from verl import DataProto

    for path in _pickles():
        ro = read_rollouts(path, trust_pickle=True)
        dp = DataProto.load_from_disk(str(path))
        live = read_rollouts(dp)
        assert torch.equal(ro.tokens, live.tokens) and torch.equal(ro.rewards, live.rewards)
        assert torch.equal(ro.info["advantages"], dp.batch["advantages"].double())
        assert ro.info["grouping"] == "uid" and ro.info["position_unit"] == "token"
        step = int(path.stem.split("_")[1])
        dump = read_rollouts(VERL / f"{step}.jsonl")
        # the dump's score is the batch's token-level scores summed; its groups are the batch's uids
        assert np.allclose(dump.scores.numpy(), ro.scores.numpy())
        assert measure_groups(dump).n_zero_variance == measure_groups(ro).n_zero_variance
        # verl's own GRPO advantages, read back and recomputed: its default, to round-off
        check = check_framework_advantages(ro)
        assert check.framework == "verl" and check.matches and check.cause == "default"


def test_the_command_line_reads_the_dump_with_format_given(tmp_path, monkeypatch, capsys):
    from labkit.diagnose.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main([str(FILES[0]), "--format", "verl", "--estimators", "none", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "by training step and prompt" in out and "generated characters" in out
    assert main([str(VERL), "--format", "jsonl", "--estimators", "none", "--no-progress",
                 "--out", str(tmp_path / "as_jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: source: ")


# ---- the dump read in chunks (iter_rollouts, diagnose) and in part (rows=)
@pytest.mark.parametrize("batch_rows", [1, 3, 10, 1000])
def test_chunks_are_the_dump_read_whole(batch_rows):
    chunks = assert_chunks_are_the_whole(VERL, batch_rows)
    where = [(str(f), n) for f in FILES for n, line in enumerate(f.read_text().splitlines(), 1) if line.strip()]
    assert [(c.info["first_file"], c.info["first_record"]) for c in chunks] == [where[c.info["offset"]]
                                                                                for c in chunks]


def test_rows_parses_only_the_lines_asked_for(tmp_path):
    rows = lines()
    assert_rows_are_the_whole(VERL, [0, 1, len(rows) - 1])
    # a line not asked for is skipped unparsed: a broken one does not stop the read
    text = FILES[0].read_text().splitlines()
    text[3] = "{not json"
    (tmp_path / "1.jsonl").write_text("\n".join(text) + "\n")
    sub = read_rollouts(tmp_path, rows=[0, 1])
    assert sub.prompts == [rows[0]["input"], rows[1]["input"]]
    with pytest.raises(RecordError, match=r"^source: line 4: not valid JSON"):
        read_rollouts(tmp_path, rows=[3])
    with pytest.raises(ValueError, match=r"^rows: record 99 is past the last record"):
        read_rollouts(VERL, rows=[99])


def test_a_bad_line_in_a_later_file_is_named_when_its_chunk_is_read(tmp_path):
    for f in FILES[:2]:
        (tmp_path / f.name).write_text(f.read_text())
    text = FILES[1].read_text().splitlines()
    bad = json.loads(text[1])
    bad["score"] = "n/a"
    text[1] = json.dumps(bad)
    (tmp_path / FILES[1].name).write_text("\n".join(text) + "\n")
    first = sum(1 for line in FILES[0].read_text().splitlines() if line.strip())
    chunks = iter_rollouts(tmp_path, batch_rows=first, progress=False)
    assert next(chunks).batch_size == first
    with pytest.raises(RecordError, match=rf"^source: line 2, field 'score': expected a number, got 'n/a' "
                                          rf"\(in .*{FILES[1].name}\)"):
        next(chunks)


def test_a_numeric_field_first_seen_after_the_first_chunk_is_listed_not_summed(tmp_path):
    rows = [{"input": "p", "output": "ab", "score": 1.0, "step": 1}, {"input": "p", "output": "a", "score": 0.0, "step": 1},
            {"input": "p", "output": "b", "score": 1.0, "step": 2, "acc": 1.0}]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    chunks = list(iter_rollouts(tmp_path, batch_rows=2, progress=False))
    assert chunks[0].info["reward_part_names"] == ("score",) == chunks[1].info["reward_part_names"]
    assert chunks[1].info["ignored_fields"] == ("acc",)
    assert read_rollouts(tmp_path).info["reward_part_names"] == ("score", "acc")  # read whole: every field seen
    assert torch.cat([c.scores for c in chunks]).tolist() == [1.0, 0.0, 1.0]


def test_long_outputs_make_chunks_of_fewer_lines(tmp_path, monkeypatch):
    import labkit.io.text_rows as text_rows

    rows = [{"input": "p", "output": "o" * n, "score": 1.0, "step": 1} for n in (6, 1, 2, 9)]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(text_rows, "CHUNK_POSITIONS", 12)
    chunks = list(iter_rollouts(tmp_path, batch_rows=100, progress=False))
    assert [c.batch_size for c in chunks] == [2, 1, 1] and [c.info["first_record"] for c in chunks] == [1, 3, 4]
