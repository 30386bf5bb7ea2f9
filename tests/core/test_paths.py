"""Where labkit finds data/ (labkit.core.paths): $LABKIT_DATA first, and a missing file says where it looked."""

import os

import pytest


def test_labkit_data_overrides_and_a_missing_file_says_where_labkit_looked(tmp_path, monkeypatch):
    from labkit.core import paths

    monkeypatch.setenv("LABKIT_DATA", str(tmp_path))
    assert paths.data_dir() == tmp_path and paths.data_path("tiny_lm") == tmp_path / "tiny_lm"
    with pytest.raises(FileNotFoundError, match=r"^name_or_path: the tiny LM not found at .*\$LABKIT_DATA: "
                                                r".*the installed package: .*the repository clone: "):
        paths.require_data(paths.data_path("tiny_lm"), "the tiny LM", "name_or_path")
    assert paths.require_data(tmp_path, "a folder") == tmp_path
    monkeypatch.delenv("LABKIT_DATA")
    assert paths.data_dir() in (paths.PACKAGE_DATA, paths.CHECKOUT_DATA)
    assert (paths.data_dir() / "methods.csv").is_file()


def test_a_wrong_labkit_data_is_reported_not_skipped(tmp_path):
    # LABKIT_DATA is read when labkit is imported, so this runs in a fresh interpreter
    import subprocess
    import sys

    code = "from labkit.survey import load_methods\nload_methods()"
    env = dict(os.environ, LABKIT_DATA=str(tmp_path / "no_such_folder"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode != 0
    assert "FileNotFoundError: path: the reporting checklist not found" in out.stderr
    assert "$LABKIT_DATA: " + str(tmp_path / "no_such_folder") in out.stderr
