"""The shipped tiny LM: loads offline from safetensors, tokenizes per character, samples reproducibly."""
import hashlib
import json

import pytest
import torch

from labkit.envs import ArithmeticTask
from labkit.envs.arithmetic import verify
from labkit.policies import lm as lm_module
from labkit.policies.lm import DEFAULT_LM_PATH, build_tokenizer, load_lm, task_tokens

PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".h5", ".msgpack"}


def _offline(mp: pytest.MonkeyPatch) -> None:
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    # huggingface_hub reads the variable at import; patch the constant too in case it is imported.
    import huggingface_hub.constants as hub_constants
    mp.setattr(hub_constants, "HF_HUB_OFFLINE", True)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shipped():
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp)
        model, tok = load_lm()
    return model, tok


def test_shipped_folder_is_small_and_pickle_free():
    names = {p.name for p in DEFAULT_LM_PATH.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
            "MODEL_CARD.md", "train_log.json"} <= names
    assert not [n for n in names if any(n.endswith(s) for s in PICKLE_SUFFIXES)]
    assert sum(p.stat().st_size for p in DEFAULT_LM_PATH.iterdir()) < 5_000_000


def test_shipped_weights_are_the_measured_ones():
    log = json.loads((DEFAULT_LM_PATH / "train_log.json").read_text())
    digest = hashlib.sha256((DEFAULT_LM_PATH / "model.safetensors").read_bytes()).hexdigest()
    assert digest == log["model_sha256"]  # the card's accuracies belong to these exact weights
    card = (DEFAULT_LM_PATH / "MODEL_CARD.md").read_text()
    assert f"{log['n_parameters']:,}" in card and "python scripts/train_tiny_lm.py" in card


def test_loads_offline_in_eval_mode(shipped, monkeypatch):
    _offline(monkeypatch)
    model, tok = shipped
    assert type(model).__name__ == "GPT2LMHeadModel" and not model.training
    assert 700_000 < sum(p.numel() for p in model.parameters()) < 900_000
    assert model.config.vocab_size == len(tok) == 18
    assert (tok.pad_token, tok.bos_token, tok.eos_token) == ("<pad>", "<bos>", "<eos>")
    assert tok.padding_side == "left"
    assert model.config.eos_token_id == tok.eos_token_id


def test_tokenizer_is_per_character_and_round_trips(shipped):
    _, tok = shipped
    ids = tok.encode("23+48=", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(ids) == list("23+48=")
    assert tok.encode("23+48=") == [tok.bos_token_id] + ids  # <bos> is prepended by default
    text = "23+48=71;71+19=90;#90"
    assert tok.decode(tok.encode(text), skip_special_tokens=True) == text
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert tok.encode("2 x", add_special_tokens=False) == [tok.convert_tokens_to_ids(c) for c in "2"] + [
        tok.unk_token_id] * 2  # unknown characters do not raise
    assert tok.get_vocab() == build_tokenizer().get_vocab()


def test_task_tokens(shipped):
    _, tok = shipped
    tt = task_tokens(tok)
    assert tok.convert_ids_to_tokens([tt.step_sep, tt.answer_mark, tt.equals]) == [";", "#", "="]
    assert tt.eos == tok.eos_token_id
    with pytest.raises(TypeError, match="^tokenizer"):
        task_tokens("not a tokenizer")


def _generate(model, tok, prompts, **kw):
    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=40, **kw)
    return tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def test_seeded_sampling_is_deterministic(shipped):
    model, tok = shipped
    prompts = [p.prompt for p in ArithmeticTask().sample_prompts(8, 4, split="held_out", seed=9)]
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        runs.append(_generate(model, tok, prompts, do_sample=True))
    assert runs[0] == runs[1]


def test_greedy_is_mostly_right_on_held_out_two_operand_prompts(shipped):
    model, tok = shipped
    problems = ArithmeticTask().sample_prompts(10, 2, split="held_out", seed=4, unique=True)
    texts = _generate(model, tok, [p.prompt for p in problems], do_sample=False)
    rewards = [verify(p, t).reward for p, t in zip(problems, texts)]
    assert sum(rewards) >= 8, list(zip([p.prompt for p in problems], texts))


def test_left_padded_batch_matches_single_prompts(shipped):
    # Mixed operand counts force padding; results must not depend on the batch's other prompts.
    model, tok = shipped
    prompts = ["23+48=", "23+48+19+55=", "61+17+30="]
    batched = _generate(model, tok, prompts, do_sample=False)
    alone = [_generate(model, tok, [p], do_sample=False)[0] for p in prompts]
    assert batched == alone


def test_missing_paths_raise_clear_errors(tmp_path, monkeypatch):
    _offline(monkeypatch)
    with pytest.raises(FileNotFoundError, match="^name_or_path"):
        load_lm(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_lm(tmp_path)  # exists, but is not a saved model
    with pytest.raises(FileNotFoundError, match="^name_or_path"):
        load_lm("./definitely/not/here")
    monkeypatch.setattr(lm_module, "DEFAULT_LM_PATH", tmp_path / "gone")
    with pytest.raises(FileNotFoundError, match="train_tiny_lm.py"):
        load_lm()


def test_bad_arguments():
    with pytest.raises(TypeError, match="^name_or_path"):
        load_lm(42)
    with pytest.raises(ValueError, match="^name_or_path"):
        load_lm("")
    with pytest.raises(TypeError, match="^device"):
        load_lm(device=0)
    with pytest.raises(ValueError, match="^device"):
        load_lm(device="warp-drive")
    with pytest.raises(ValueError, match="^model_max_length"):
        build_tokenizer(0)


def test_local_load_shows_no_progress_bar_and_restores_the_setting(capfd):
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    load_lm()
    assert "Loading weights" not in capfd.readouterr().err  # nothing to clutter notebook cells
    assert hf_logging.is_progress_bar_enabled()
