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

from labkit.diagnose import diagnose, measure_groups
from labkit.io import RecordError, read_rollouts
from framework_runs import IS_COMMITTED, VERL

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
    assert ["".join(t).rstrip("") for t in ro.text] == [r["output"] + "" for r in rows] or all(
        "".join(t[:len(r["output"])]) == r["output"] for t, r in zip(ro.text, rows))
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


def test_the_command_line_reads_the_dump_with_format_given(tmp_path, monkeypatch, capsys):
    from labkit.diagnose.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main([str(FILES[0]), "--format", "verl", "--estimators", "none", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "by training step and prompt" in out and "generated characters" in out
    assert main([str(VERL), "--format", "jsonl", "--estimators", "none", "--no-progress",
                 "--out", str(tmp_path / "as_jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: source: ")
