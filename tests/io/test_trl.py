"""TRL's shapes (labkit.io.trl): rows in memory, ``trainer._logs``, and TRL's own completions files,
read as a real ``GRPOTrainer`` run wrote them.

The run is ``data/framework_runs/trl_grpo`` (scripts/build_trl_run.py; in TRL's side environment
``make test-trl`` writes it again and points ``LABKIT_FRAMEWORK_RUNS`` at the new one). Every
number is checked against TRL's own log of the same run (``log_history.json``)."""
from __future__ import annotations

import json
from collections import defaultdict, deque

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from labkit.core.paths import data_path
from labkit.diagnose import diagnose, measure_groups
from labkit.io import RecordError, iter_rollouts, read_rollouts
from labkit.io.text_positions import display_text
from framework_runs import IS_COMMITTED, TRL, trl_log_history
from io_cases import assert_chunks_are_the_whole, assert_rows_are_the_whole

FILES = sorted((TRL / "completions").glob("completions_*.parquet"))
META = json.loads((TRL / "meta.json").read_text())
REWARDS = META["reward_funcs"]
TINY_LM = str(data_path("tiny_lm"))


def frame() -> pd.DataFrame:
    return pd.concat([pd.read_parquet(f) for f in FILES], ignore_index=True)


def per_step_zero_share(ro) -> dict[int, float]:
    steps = ro.info["training_steps"]
    return {s: measure_groups(ro.select(torch.nonzero(steps == s).flatten())).share_rows_zero_variance
            for s in steps.unique().tolist()}


@pytest.mark.parametrize("where", ["output_dir", "completions", "file"])
def test_the_completions_files_read_as_trl_wrote_them(where):
    path = {"output_dir": TRL, "completions": TRL / "completions", "file": FILES[0]}[where]
    ro = read_rollouts(path)
    files = FILES if where != "file" else FILES[:1]
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    assert ro.batch_size == len(df) and ro.info["format"] == "trl"
    assert ro.info["grouping"] == "training step and prompt" and ro.info["position_unit"] == "character"
    assert ro.info["reward_columns"] == tuple(REWARDS) and ro.info["reward_part_names"] == tuple(REWARDS)
    assert torch.equal(ro.info["training_steps"], torch.tensor(df["step"].to_numpy()))
    assert torch.equal(ro.info["advantages"], torch.tensor(df["advantage"].to_numpy(), dtype=torch.float64))
    # the reward is the unweighted sum of the reward functions (TRL's default weights are 1)
    assert np.allclose(ro.scores.numpy(), df[REWARDS].sum(axis=1).to_numpy())
    # no per-position strings are stored: the characters are the ids, shown by display_text
    assert ro.text is None
    assert ["".join(t) for t in display_text(ro, range(ro.batch_size))] == df["completion"].tolist()
    assert ro.prompts == df["prompt"].tolist()
    # one group per (step, prompt): a prompt drawn at two steps is two groups
    keys = list(zip(df["step"], df["prompt"]))
    assert ro.group_ids.unique().numel() == len(set(keys))
    assert len({p for _, p in keys}) < len(set(keys)) or where == "file"


def test_zero_variance_share_is_trls_own_per_step_and_over_the_run():
    ro = read_rollouts(TRL)
    history = trl_log_history()
    by_step = per_step_zero_share(ro)
    assert by_step == pytest.approx({h["step"]: h["frac_reward_zero_std"] for h in history})
    trl_mean = float(np.mean([h["frac_reward_zero_std"] for h in history]))
    d = diagnose(TRL, estimators=[], progress=False)
    assert d.groups.share_rows_zero_variance == pytest.approx(trl_mean)
    assert d.grouping == "training step and prompt" and d.unit == "character"
    # and the per-step reward means are TRL's logged ones
    steps = ro.info["training_steps"]
    assert {s: float(ro.scores[steps == s].mean()) for s in by_step} == pytest.approx(
        {h["step"]: h["reward"] for h in history})
    if IS_COMMITTED:  # this particular run: 4 steps of 4 prompts x 4 completions
        assert ro.batch_size == 64 and d.groups.n_groups == 16 and d.groups.n_zero_variance == 11
        assert d.groups.share_rows_zero_variance == 0.6875


def test_grouping_by_prompt_alone_would_merge_steps_and_change_the_share():
    df = frame()
    pooled = read_rollouts(df.drop(columns=["step"]))
    assert pooled.info["grouping"] == "prompt"
    assert pooled.group_ids.unique().numel() == df["prompt"].nunique()
    by_step = read_rollouts(df)
    assert by_step.group_ids.unique().numel() == len(df.groupby(["step", "prompt"]))
    if IS_COMMITTED:
        assert measure_groups(pooled).share_rows_zero_variance == 0.25
        assert measure_groups(by_step).share_rows_zero_variance == 0.6875


def test_containers_read_alike():
    want = read_rollouts(TRL)
    df = frame()
    for source in (df, pq.read_table(FILES[0]), pq.read_table(FILES[0]).to_pandas(), {k: df[k].to_numpy() for k in df.columns},
                   df.to_dict("records"), {k: torch.tensor(df[k].to_numpy()) if df[k].dtype.kind in "if"
                                           else df[k].tolist() for k in df.columns}):
        ro = read_rollouts(source)
        n = ro.batch_size
        assert torch.equal(ro.tokens, want.tokens[:n, :ro.horizon]) and torch.equal(ro.scores, want.scores[:n])
        assert ro.info["grouping"] == "training step and prompt"


def test_reward_chooses_columns():
    ro = read_rollouts(TRL, reward=REWARDS[0])
    assert np.array_equal(ro.scores.numpy(), frame()[REWARDS[0]].to_numpy()) and ro.info["reward_columns"] == (REWARDS[0],)
    assert torch.equal(read_rollouts(TRL, reward=REWARDS).scores, read_rollouts(TRL).scores)
    with pytest.raises(ValueError, match=r"^reward: no column 'nope' in .*reward columns are \['correct_reward'"):
        read_rollouts(TRL, reward="nope")


def test_a_none_reward_counts_as_zero_as_trl_sums_it():
    df = frame()
    df.loc[3, REWARDS[1]] = None
    ro = read_rollouts(df)
    assert ro.info["missing_rewards"] == 1 and float(ro.scores[3]) == float(df.loc[3, REWARDS[0]])
    assert bool(torch.isnan(ro.info["reward_parts"][3, 1]))
    d = diagnose(ro, estimators=[], progress=False)
    assert any("1 missing reward values (None / NaN) counted as 0" in n for n in d.source_notes)


def test_a_tokenizer_counts_tokens():
    ro = read_rollouts(TRL, tokenizer=TINY_LM)
    chars = read_rollouts(TRL)
    assert ro.info["position_unit"] == "token" and "tiny_lm" in ro.info["tokenizer"]
    # the lab's tokenizer has one token per character of its alphabet: the same positions
    rows = range(ro.batch_size)
    assert torch.equal(ro.mask.sum(1), chars.mask.sum(1)) and display_text(ro, rows) == display_text(chars, rows)
    assert set(ro.info["vocab_text"]) == set(ro.tokens[ro.mask].tolist())
    assert not torch.equal(ro.tokens, chars.tokens)
    d = diagnose(TRL, estimators=[], tokenizer=TINY_LM, progress=False)
    assert d.unit == "token" and "characters per token" not in d.answers[0].evidence
    with pytest.raises(FileNotFoundError, match=r"^tokenizer: no tokenizer folder at"):
        read_rollouts(TRL, tokenizer="no/such/folder")


def test_characters_are_named_characters_and_converted_for_the_tree():
    d = diagnose(TRL, estimators=[], progress=False)
    text = d.to_markdown()
    assert "generated characters" in text and "generated tokens" not in text and "generated characters" in d.summary()
    assert "at 4 characters per token" in d.answers[0].evidence
    assert "groups: by training step and prompt" in text


def test_trainer_logs_in_memory():
    logs = json.loads((TRL / "logs.json").read_text())
    n = len(logs["prompt"])
    # the shape GRPOTrainer keeps: deques, and defaultdicts of deques for rewards and extras
    live = {"images": deque(maxlen=n), "prompt": deque(logs["prompt"], maxlen=n),
            "completion": deque(logs["completion"], maxlen=n),
            "rewards": defaultdict(lambda: deque(maxlen=n), {k: deque(v, maxlen=n) for k, v in logs["rewards"].items()}),
            "advantages": deque(logs["advantages"], maxlen=n), "extra": defaultdict(lambda: deque(maxlen=n))}
    ro = read_rollouts(live)
    assert ro.batch_size == n and ro.info["source"] == "TRL trainer._logs" and ro.info["grouping"] == "prompt"
    last = frame().query(f"step == {max(trl_log_history(), key=lambda h: h['step'])['step']}")
    assert ro.prompts == last["prompt"].tolist()
    assert np.allclose(ro.scores.numpy(), last[REWARDS].sum(axis=1).to_numpy())
    assert torch.equal(ro.info["advantages"], torch.tensor(last["advantage"].to_numpy(), dtype=torch.float64))


def test_bad_files_are_refused_naming_file_row_and_field(tmp_path):
    df = pd.read_parquet(FILES[0])
    bad = df.astype({REWARDS[0]: str})  # a reward function that returned text
    (tmp_path / "completions").mkdir()
    bad.to_parquet(tmp_path / "completions" / "completions_00001.parquet")
    with pytest.raises(RecordError, match=rf"^source: row 0, field '{REWARDS[0]}': expected a number, got '[0-9.]+' "
                                          rf"\(in .*completions_00001.parquet\)"):
        read_rollouts(tmp_path, reward=REWARDS[0])
    # without reward=, a text column is no reward function's: it is listed as not used
    ro = read_rollouts(tmp_path)
    assert ro.info["reward_columns"] == tuple(REWARDS[1:]) and REWARDS[0] in ro.info["ignored_fields"]
    df.drop(columns=["advantage"]).to_parquet(tmp_path / "completions" / "completions_00001.parquet")
    df.to_parquet(tmp_path / "completions" / "completions_00002.parquet")
    with pytest.raises(RecordError, match=r"columns .* differ from completions_00001.parquet's"):
        read_rollouts(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"is a folder without TRL completions files"):
        read_rollouts(empty)
    with pytest.raises(ValueError, match=r"^tokenizer: TRL rows carries token ids"):
        read_rollouts({"prompt": ["a"], "completion": ["b"], "completion_ids": [[1]], "reward": [1]}, tokenizer=TINY_LM)


def test_token_ids_as_arrays_and_tensors(tmp_path):
    rows = pd.DataFrame({"prompt": ["p", "p"], "completion": ["ab", "c"], "completion_ids": [[7, 8], [9]],
                         "reward": [1.0, 0.0]})
    rows.to_parquet(tmp_path / "rows.parquet")
    back = pd.read_parquet(tmp_path / "rows.parquet")  # the ids come back as numpy arrays
    assert isinstance(back["completion_ids"][0], np.ndarray)
    ro = read_rollouts(back)
    assert ro.tokens.tolist() == [[7, 8], [9, 0]] and ro.info["position_unit"] == "token"
    ro = read_rollouts({"prompt": ["p", "p"], "completion_ids": [torch.tensor([7, 8]), torch.tensor([9])],
                        "reward": torch.tensor([1.0, 0.0])})
    assert ro.tokens.tolist() == [[7, 8], [9, 0]] and ro.scores.tolist() == [1.0, 0.0]


def test_the_command_line_on_trls_output_folder(tmp_path, monkeypatch, capsys):
    from labkit.diagnose.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main([str(TRL), "--estimators", "none", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "by training step and prompt" in out and "generated characters" in out
    assert (tmp_path / "trl_grpo_diagnosis" / "report.html").is_file()
    assert main([str(TRL), "--estimators", "none", "--tokenizer", TINY_LM, "--reward", REWARDS[0],
                 "--out", str(tmp_path / "tok"), "--no-progress"]) == 0
    assert "generated tokens" in capsys.readouterr().out
    assert main([str(TRL), "--reward", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: reward: no column 'nope'") and err.count("\n") == 1 and "--debug" in err
    with pytest.raises(ValueError, match="reward: no column"):
        main([str(TRL), "--reward", "nope", "--debug"])


def test_a_datasets_dataset():
    datasets = pytest.importorskip("datasets")  # in TRL's side environment (scripts/run_trl.py)
    want = read_rollouts(TRL)
    ds = datasets.Dataset.from_pandas(frame())
    ro = read_rollouts(ds)
    assert torch.equal(ro.tokens, want.tokens) and torch.equal(ro.scores, want.scores)
    assert torch.equal(ro.group_ids, want.group_ids) and ro.info["grouping"] == "training step and prompt"


def test_trl_rows_read_as_rollouts():
    cols = {"prompt": ["1+1=", "1+1=", [{"role": "user", "content": "hi"}]],
            "completion": ["2", "11", [{"role": "assistant", "content": "hé"}]], "reward": [1.0, 0.0, 0.5],
            "extra": [1, 2, 3]}
    ro = read_rollouts(cols)
    assert ro.tokens[:, :2].tolist() == [[ord("2"), 0], [ord("1"), ord("1")], [ord("h"), ord("é")]]
    assert display_text(ro, [2], 2) == [["h", "é"]] and ro.mask.sum(1).tolist() == [1, 2, 2]
    assert ro.group_ids.tolist() == [0, 0, 1] and ro.prompts[2] == "user: hi"
    assert ro.scores.tolist() == [1.0, 0.0, 0.5] and ro.info["position_unit"] == "character"
    assert ro.info["ignored_fields"] == ("extra",)
    rows = [{"prompt": "p", "completion": "ab", "completion_ids": [7, 8], "reward": 1}]
    ro = read_rollouts(rows, "trl")
    assert ro.tokens.tolist() == [[7, 8]] and ro.text is None and "tokenizer" not in ro.info
    with pytest.raises(RecordError, match=r"^source: row 1, field 'reward': expected a number, got 'abc'"):
        read_rollouts({"prompt": ["a", "b"], "completion": ["x", "y"], "reward": [1, "abc"]}, "trl")
    with pytest.raises(RecordError, match=r"^source: row 0, field 'completion': missing"):
        read_rollouts([{"prompt": "a", "reward": 1}], "trl")


# ---- a run read in chunks (iter_rollouts, diagnose) and in part (rows=)
def write_run(folder, steps: dict[int, list[tuple]]) -> list:
    """TRL-shaped files in ``folder``: {step: [(prompt, completion, reward), ...]}."""
    import pyarrow as pa

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for step, rows in steps.items():
        table = pa.table({"step": [step] * len(rows), "prompt": [r[0] for r in rows],
                          "completion": [r[1] for r in rows], "f_reward": [r[2] for r in rows],
                          "advantage": [0.0] * len(rows)})
        out.append(folder / f"completions_{step:05d}.parquet")
        pq.write_table(table, out[-1])
    return out


@pytest.mark.parametrize("batch_rows", [1, 5, 16, 1000])
def test_chunks_are_the_run_read_whole(batch_rows):
    chunks = assert_chunks_are_the_whole(TRL, batch_rows)
    starts = np.cumsum([pq.read_metadata(f).num_rows for f in FILES])
    for c in chunks:
        k = int(np.searchsorted(starts, c.info["offset"], side="right"))  # the file of the chunk's first row
        assert c.info["first_file"] == str(FILES[k])
        assert c.info["first_record"] == c.info["offset"] - (starts[k - 1] if k else 0)


def test_chunks_with_a_tokenizer_carry_their_ids_display_strings():
    for c in assert_chunks_are_the_whole(TRL, 7, tokenizer=TINY_LM):
        assert set(c.info["vocab_text"]) == set(c.tokens[c.mask].tolist())
        assert all("".join(t) for t in display_text(c, range(c.batch_size)))


def test_groups_are_numbered_alike_across_files_and_chunks(tmp_path):
    write_run(tmp_path, {1: [("a", "xx", 1.0), ("a", "x", 0.0), ("b", "y", 1.0)],
                         2: [("b", "yy", 0.0), ("a", "x", 1.0), ("a", "xy", 1.0)]})
    chunks = list(iter_rollouts(tmp_path, batch_rows=2, progress=False))
    assert [c.group_ids.tolist() for c in chunks] == [[0, 0], [1, 2], [3, 3]]
    assert chunks[-1].info["group_names"] == ("step 1 | a", "step 1 | b", "step 2 | b", "step 2 | a")
    assert chunks[1].info["group_names"] == ("step 1 | a", "step 1 | b", "step 2 | b")
    # the chunk across the two files says where its rows came from
    assert chunks[1].info["first_file"].endswith("completions_00001.parquet") and chunks[1].info["first_record"] == 2
    assert chunks[1].info["training_steps"].tolist() == [1, 2]


def test_rows_reads_only_the_files_holding_them(monkeypatch):
    import labkit.io.trl as trl

    read = []
    real = trl._read_table
    monkeypatch.setattr(trl, "_read_table", lambda f, rows=None: read.append(f) or real(f, rows))
    n = sum(pq.read_metadata(f).num_rows for f in FILES)
    sub = assert_rows_are_the_whole(TRL, [1, 2, n - 1])
    assert sub.info["training_steps"].tolist() == [int(pd.read_parquet(FILES[0])["step"][0])] * 2 + [
        int(pd.read_parquet(FILES[-1])["step"][0])]
    read.clear()
    read_rollouts(TRL, rows=[1, 2, n - 1])
    assert read == [FILES[0], FILES[-1]]
    with pytest.raises(ValueError, match=rf"^rows: record {n} is past the last record \({n} records\)"):
        read_rollouts(TRL, rows=[n])


def test_a_bad_row_in_a_later_file_is_named_when_its_chunk_is_read(tmp_path):
    files = write_run(tmp_path, {1: [("a", "x", 1.0), ("a", "y", 0.0)], 2: [("a", "x", 1.0), ("a", "y", 0.0)]})
    pd.read_parquet(files[1]).astype({"f_reward": str}).to_parquet(files[1])  # the step's rewards logged as text
    chunks = iter_rollouts(tmp_path, batch_rows=2, progress=False)
    assert next(chunks).batch_size == 2  # the first file's rows are handed out
    with pytest.raises(RecordError, match=r"^source: row 0, field 'f_reward': expected a number, got '1.0' "
                                          r"\(in .*completions_00002.parquet\)"):
        next(chunks)
    # a fault found on the padded batch names the row's file too
    files = write_run(tmp_path / "b", {1: [("a", "x", 1.0)], 2: [("a", "x", 1.0), ("a", "", 1.0)]})
    with pytest.raises(RecordError, match=r"^source: row 1, field 'reward': is 1, but the trajectory has no "
                                          r"generated position .*completions_00002.parquet"):
        read_rollouts(tmp_path / "b")
    # a file that is not Parquet is refused before any chunk, from the files' footers
    (tmp_path / "b" / "completions_00003.parquet").write_text("not parquet")
    with pytest.raises(RecordError, match=r"not a readable Parquet file .*completions_00003.parquet"):
        iter_rollouts(tmp_path / "b", batch_rows=1)


def test_long_completions_make_chunks_of_fewer_rows(tmp_path, monkeypatch):
    import labkit.io.text_rows as text_rows

    write_run(tmp_path, {1: [("a", "x" * 6, 1.0), ("a", "x", 0.0), ("a", "xx", 1.0)], 2: [("b", "y" * 9, 0.0)]})
    monkeypatch.setattr(text_rows, "CHUNK_POSITIONS", 12)
    chunks = list(iter_rollouts(tmp_path, batch_rows=100, progress=False))
    assert [c.batch_size for c in chunks] == [2, 1, 1] and [c.horizon for c in chunks] == [6, 2, 9]
    assert torch.cat([c.group_ids for c in chunks]).tolist() == [0, 0, 0, 1]


def test_text_read_without_ids_is_written_with_its_text(tmp_path):
    from labkit.io import to_trl, to_verl_batch, write_rollouts

    ro = read_rollouts(TRL)
    completions = frame()["completion"].tolist()
    assert to_trl(ro)["completion"] == completions
    for name in ("run.jsonl", "run.parquet"):
        back = read_rollouts(write_rollouts(ro, tmp_path / name))
        assert ["".join(t) for t in back.text] == completions
    assert ["".join(t) for t in to_verl_batch(ro)["text"]] == completions


def test_missing_rewards_in_several_files_add_up_in_the_diagnosis(tmp_path):
    (tmp_path / "completions").mkdir()
    for f in FILES[:2]:
        df = pd.read_parquet(f)
        df.loc[0, REWARDS[1]] = None
        df.to_parquet(tmp_path / "completions" / f.name)
    d = diagnose(tmp_path, estimators=[], progress=False, batch_rows=8)
    assert any(n.startswith("2 missing reward values") for n in d.source_notes)
