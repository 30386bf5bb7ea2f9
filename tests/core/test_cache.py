"""One cache module (labkit.core.cache): a script stamps what it writes to data/ with its name, its
arguments and the SHA-256 of every input file; a loader reads the cache back only while that holds,
and otherwise says which argument and which command rebuild it.
"""

import argparse
import json
import shutil

import pytest

from labkit.core import cache
from labkit.core.paths import DATA_ENV


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A data folder of its own (``$LABKIT_DATA``) with one input file, ``model/weights.bin``."""
    root = tmp_path / "data"
    (root / "model").mkdir(parents=True)
    (root / "model" / "weights.bin").write_bytes(b"weights v1")
    monkeypatch.setenv(DATA_ENV, str(root))
    return root


def test_a_stamped_meta_reads_back_as_written(data):
    folder = data / "runs"
    folder.mkdir()
    (folder / "curves.csv").write_text("x\n1\n")
    written = cache.write_meta(folder / "meta.json", {"k": 9, "seeds": [0, 1]}, script="/somewhere/scripts/build_runs.py",
                               args=["--k", "9"], inputs=["model/weights.bin"], indent=1)
    meta, files = cache.read_cache(folder, script="build_runs.py", files=["curves.csv"])
    assert meta["k"] == 9 and meta["seeds"] == [0, 1] and files["curves.csv"] == folder / "curves.csv"
    stamp = meta["provenance"]
    assert stamp == {"script": "scripts/build_runs.py", "args": ["--k", "9"],
                     "inputs": {"model/weights.bin": cache.file_sha256(data / "model" / "weights.bin")}}
    assert json.loads(written.read_text()) == meta
    # a second write replaces the stamp instead of keeping an old one inside the meta
    cache.write_meta(folder / "meta.json", meta, script="build_runs.py", args=["--k", "3"])
    assert cache.read_meta(folder / "meta.json", script="build_runs.py")["provenance"]["args"] == ["--k", "3"]


def test_a_stale_cache_is_refused_with_the_command_that_rebuilt_it(data):
    cache.write_meta(data / "meta.json", {}, script="build_runs.py", args=["--k", "9", "--seeds", "0", "1"],
                     inputs=["model/weights.bin"])
    (data / "model" / "weights.bin").write_bytes(b"weights v2: retrained")
    with pytest.raises(ValueError, match=r"^path: .* is stale: model/weights.bin has changed") as err:
        cache.read_meta(data / "meta.json", script="build_runs.py")
    assert str(err.value).endswith("rebuild it with: python scripts/build_runs.py --k 9 --seeds 0 1")


def test_a_foreign_or_unstamped_cache_is_refused(data):
    cache.write_meta(data / "meta.json", {}, script="build_other.py")
    with pytest.raises(ValueError, match=r"^hits: .* was built by scripts/build_other.py, not by scripts/build_runs.py; "
                                         r"rebuild it with: python scripts/build_runs.py --seed 3$"):
        cache.read_meta(data / "meta.json", script="build_runs.py", args=["--seed", "3"], argument="hits")
    (data / "plain.json").write_text(json.dumps({"k": 9}))
    with pytest.raises(ValueError, match="^path: .* carries no provenance stamp"):
        cache.read_meta(data / "plain.json", script="build_runs.py")
    (data / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="^path: .* is not JSON"):
        cache.read_meta(data / "broken.json", script="build_runs.py")


def test_a_missing_cache_names_the_command_that_builds_it(data):
    with pytest.raises(FileNotFoundError, match=r"^path: no cached runs at .*; build it with: "
                                                r"python scripts/build_runs.py --lrs 3e-5$"):
        cache.read_meta(data / "nowhere" / "meta.json", script="build_runs.py", args=["--lrs", "3e-5"],
                        what="cached runs")
    cache.write_meta(data / "meta.json", {}, script="build_runs.py")
    with pytest.raises(FileNotFoundError, match=r"^path: no cache at .*curves.csv; build it with: python scripts/build_runs.py$"):
        cache.read_cache(data, script="build_runs.py", files=["curves.csv"])


def test_a_cache_built_in_pieces_rebuilds_with_every_piece():
    pieces = [["--lrs", "3e-05", "--methods", "GRPO"], ["--lrs", "0.0001"]]
    assert cache.rebuild_command("build_sweep.py", pieces) == \
        "python scripts/build_sweep.py --lrs 3e-05 --methods GRPO && python scripts/build_sweep.py --lrs 0.0001"
    assert cache.provenance("build_sweep.py", pieces)["args"] == pieces
    with pytest.raises(ValueError, match="^args"):
        cache.rebuild_command("build_sweep.py", ["--lrs", ["3e-05"]])


def test_cli_args_spell_every_option_out():
    ns = argparse.Namespace(truth_k=64, ks=[1, 3], rl=True, fresh=False, max_states=None, out="/tmp/x", lr=1e-05)
    assert cache.cli_args(ns) == ["--truth-k", "64", "--ks", "1", "3", "--rl", "--lr", "1e-05"]
    assert cache.cli_args(ns, skip=())[-4:-2] == ["--out", "/tmp/x"]


def test_bad_arguments_name_themselves(data):
    with pytest.raises(ValueError, match="^script"):
        cache.script_name("build_runs")
    with pytest.raises(ValueError, match="^inputs"):
        cache.provenance("build_runs.py", inputs=["model/missing.bin"])


def test_an_input_missing_from_the_data_folder_is_not_compared(data):
    cache.write_meta(data / "meta.json", {}, script="build_runs.py", inputs=["model/weights.bin"])
    shutil.rmtree(data / "model")
    assert cache.read_meta(data / "meta.json", script="build_runs.py")["provenance"]["inputs"]
