"""One cache module (labkit.core.cache): a script stamps what it writes to data/ with its name, its
arguments and the SHA-256 of every input file; a loader reads the cache back only while that holds,
and otherwise says which argument and which command rebuild it. Every shipped cache carries a
stamp that holds."""
import argparse
import json
import shutil

import pytest

from labkit.core import cache
from labkit.core.paths import DATA_ENV, data_path


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


# every cache a script writes to data/, the script that writes it and the files its loader needs
SHIPPED = [("lm_truth", "reference.json", "build_lm_truth.py", ["reference.safetensors"]),
           ("lm_truth", "alternatives.json", "build_step_alternatives.py", ["alternatives.safetensors"]),
           ("rl_runs", "meta.json", "build_rl_runs.py", ["curves.csv"]),
           ("rl_runs", "lr_sweep_meta.json", "build_rl_lr_sweep.py", ["lr_sweep.csv"]),
           ("vine_hits", "meta.json", "build_vine_hits.py", ["hits.csv"]),
           ("echo_trap", "meta.json", "build_echo_trap.py", ["final.csv", "curves.csv", "exact_ascent.csv",
                                                              "loss_direction.csv"]),
           ("pure_padding", "static.json", "build_pure_padding.py", []),
           ("pure_padding", "rl_it24_lr1e-05_vw0.json", "build_pure_padding.py", ["rl_it24_lr1e-05_vw0.csv"]),
           ("pure_padding", "rl_it40_lr3e-05_vw0.json", "build_pure_padding.py", ["rl_it40_lr3e-05_vw0.csv"]),
           ("offpolicy_irl", "meta.json", "build_offpolicy_irl.py", ["sorl_summary.csv", "sorl_check.csv",
                                                                      "step_agent_curves.csv"]),
           ("schedules", "meta.json", "build_schedules.py", ["curves.csv", "summary.csv", "hacking.csv",
                                                              "credit_scores.csv"]),
           ("sample_rollouts", "meta.json", "build_sample_rollouts.py", ["arithmetic_lm.jsonl", "toolworld.jsonl"]),
           ("bench/full", "meta.json", "build_bench_full.py", ["records.jsonl", "records.csv"]),
           ("bench/frontier", "meta.json", "build_frontier.py", ["frontier.csv", "crossover.csv"]),
           ("tiny_lm", "train_log.json", "train_tiny_lm.py", ["model.safetensors"]),
           ("reward_models", "train_log.json", "train_reward_models.py", ["prm.safetensors", "orm.safetensors"]),
           ("implicit_lm", "train_log.json", "train_implicit_lm.py", ["dpo_model.safetensors", "treg_model.safetensors"])]


@pytest.mark.parametrize("folder,meta,script,files", SHIPPED, ids=[f"{f}/{m}" for f, m, _, _ in SHIPPED])
def test_every_shipped_cache_is_stamped_and_current(folder, meta, script, files):
    found, _ = cache.read_cache(data_path(*folder.split("/")), script=script, meta=meta, files=files)
    command = cache.rebuild_command(found["provenance"]["script"], found["provenance"]["args"])
    assert command.startswith(f"python scripts/{script}")


def test_every_loader_reads_its_shipped_cache():
    from labkit.bench.frontier import load_frontier
    from labkit.course import nb03_vineppo, nb04_process_rewards, nb05_why_agents_harder
    from labkit.course import nb08_hindsight_counterfactual, nb10_benchmark
    from labkit.learn.reward_models import load_train_log

    assert len(nb03_vineppo.load_vine_hits()[0]) and len(nb03_vineppo.load_rl_runs()[0])
    assert len(nb03_vineppo.load_lr_sweep()[0]) and len(nb04_process_rewards.load_padding()[0])
    assert len(nb04_process_rewards.load_padding_rl()[0]) and nb04_process_rewards.implicit_training_log()
    assert set(nb05_why_agents_harder.load_echo_trap()) == {"final", "curves", "exact_ascent", "loss_direction",
                                                            "meta"}
    assert len(nb08_hindsight_counterfactual.load_offpolicy_results()["sorl"])
    assert len(nb08_hindsight_counterfactual.load_schedule_results()["curves"])
    assert len(nb10_benchmark.load_full_run()[0]) and len(load_frontier()[0]) and load_train_log()["evaluation"]
