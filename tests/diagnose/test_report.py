"""The diagnosis reports (labkit.diagnose.report): Markdown and HTML files hold the numbers."""
from __future__ import annotations

import re

import pytest

from labkit.diagnose import diagnose
from labkit.envs.toolworld import ToolWorld

from diagnose_cases import reasoning_like


# --------------------------------------------------------------------------- reports and errors
def test_report_files_are_written_and_hold_the_numbers(tmp_path):
    ro = ToolWorld().sample(ToolWorld().scripted_policy(2.0), 4, group_size=4, seed=0)
    d = diagnose(ro, estimators=["grpo", "gigpo"])
    md, page = d.save(tmp_path / "out")
    text, html = md.read_text(), page.read_text()
    for number in (f"{d.lengths.generated_median:g}", f"{d.rewards.share_nonzero:.1%}",
                   f"{d.stochasticity.rate:.3f}", d.recommendation.method_class):
        assert number in text and number in html.replace("&amp;", "&")
    assert "data:image/png;base64," in html and "<script" not in html
    assert not re.search(r"(src|href)=\"(?!data:)", html) and "://" not in html  # nothing to fetch
    assert (tmp_path / "out" / "report_files" / "tree.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "report_files/tree.png" in text
    assert "gigpo" in text and "grpo" in d.summary()


def test_save_refuses_a_file_as_folder(tmp_path):
    d = diagnose(reasoning_like(n_groups=2, size=2), estimators=[])
    f = tmp_path / "x"
    f.write_text("")
    with pytest.raises(ValueError, match="^out_dir:"):
        d.save(f)


def test_a_long_run_shows_evenly_spaced_steps_and_every_step_in_its_charts():
    import torch

    from labkit.diagnose.report import STEP_TABLE_ROWS

    ro = reasoning_like()
    steps = torch.arange(ro.batch_size) * 30 // ro.batch_size  # 30 training steps
    d = diagnose(ro.with_(info={**ro.info, "training_steps": steps}), estimators=[])
    assert len(d.steps.table) == 30
    text = d.to_markdown()
    assert f"{STEP_TABLE_ROWS} of the 30 steps, evenly spaced" in text
    assert "Over training steps (30 steps)" in text and "report_files/steps_shares.png" in text
