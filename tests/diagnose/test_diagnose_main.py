"""``python -m labkit.diagnose FILE`` (labkit.diagnose.__main__) writes the reports."""
from __future__ import annotations

import pytest

from labkit.envs.toolworld import ToolWorld
from labkit.io import write_rollouts


def test_command_line_writes_the_reports(tmp_path, monkeypatch, capsys):
    from labkit.diagnose.__main__ import main

    batch = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)
    dump = write_rollouts(batch, tmp_path / "run.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main([str(dump), "--can-replay", "--estimators", "grpo,gigpo", "--sample", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "run_diagnosis" / "report.html").is_file()
    text = (tmp_path / "run_diagnosis" / "report.md").read_text()
    assert str(dump) in text and "gigpo" in text
    assert f"{batch.batch_size} trajectories" in out and "recommended:" in out and "current directory" in out
    assert main([str(dump), "--out", str(tmp_path / "elsewhere"), "--format", "jsonl",
                 "--estimators", "none"]) == 0
    assert "Not run (estimators=[])." in (tmp_path / "elsewhere" / "report.md").read_text()
    with pytest.raises(SystemExit):
        main([str(dump), "--stochastic", "maybe"])
