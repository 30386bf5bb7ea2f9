"""The lab's real language model: loading it, and the character-level tokenizer it speaks.

No pretrained model can be downloaded where the lab runs (Binder, CI, an offline laptop), so the
lab ships its own: a 0.8 M-parameter GPT-2 trained from scratch on ``labkit.envs.arithmetic``
(see ``data/tiny_lm/MODEL_CARD.md``; regenerate with ``python scripts/train_tiny_lm.py``). It is a
genuine causal LM with a Hugging Face interface, so everything built on it works unchanged with
any Hugging Face causal LM for a user who has internet: ``load_lm("gpt2")``.

Safety: weights are loaded from safetensors only (never pickle), and ``trust_remote_code`` is
never enabled, so loading a model cannot run code that ships with it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch

from labkit.core.paths import data_path
from labkit.policies.vocab import ANSWER_MARK, BOS, CHARS, EOS, PAD, SPECIAL_TOKENS, STEP_SEP, UNK

DEFAULT_LM_PATH = data_path("tiny_lm")
REGENERATE_HINT = "regenerate it with `python scripts/train_tiny_lm.py` (about 8 minutes on 2 idle CPU cores)"


class TaskTokens(NamedTuple):
    """Token ids the arithmetic task's structure rests on (``;`` is the step boundary)."""

    step_sep: int
    answer_mark: int
    equals: int
    eos: int


def build_tokenizer(model_max_length: int = 64):
    """A character-level tokenizer for the arithmetic task, as a ``PreTrainedTokenizerFast``.

    Every character of ``0123456789+=;#`` is one token (a WordLevel model behind a pre-tokenizer
    that isolates each character, so there are no merges and no whitespace handling); special
    tokens ``<pad> <bos> <eos> <unk>`` take ids 0-3. Encoding prepends ``<bos>`` (so
    ``tokenizer(prompts)`` gives exactly what the model was trained on); pass
    ``add_special_tokens=False`` for the bare characters. Any other character maps to ``<unk>``
    rather than raising. Padding is on the left, which batched generation with a decoder-only
    model needs (every prompt then ends at the same position).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from labkit.core.checks import check_int

    model_max_length = check_int("model_max_length", model_max_length, low=1)
    vocab = {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + list(CHARS))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()  # join the characters back with no separator
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])])
    core.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK,
        padding_side="left", model_max_length=model_max_length,
        # no token_type_ids: transformers 4.x would return them and GPT-2 would add their embedding
        model_input_names=["input_ids", "attention_mask"])


def _resolve(name_or_path: str | os.PathLike | None) -> tuple[str, bool]:
    """(what to pass to from_pretrained, whether it is a local folder)."""
    if name_or_path is None:
        if not (DEFAULT_LM_PATH / "config.json").is_file():
            raise FileNotFoundError(
                f"name_or_path: the shipped tiny model is missing from {DEFAULT_LM_PATH}; {REGENERATE_HINT}")
        return str(DEFAULT_LM_PATH), True
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path: expected a folder path or a model name, got "
                        f"{type(name_or_path).__name__}")
    text = os.fspath(name_or_path)
    if not text:
        raise ValueError("name_or_path: must not be empty")
    path = Path(text).expanduser()
    # A hub name is "name" or "owner/name"; anything else that looks like a path (absolute,
    # relative with ./ or ../, ~, deeper than one slash, or a PathLike) is treated as a folder,
    # so a typo in a local path gives a clear error instead of a network request.
    looks_like_path = (isinstance(name_or_path, os.PathLike) or path.is_absolute()
                       or text.startswith((".", "~")) or text.count("/") > 1 or os.sep != "/" and os.sep in text)
    if path.exists() or looks_like_path:
        if not path.is_dir():
            raise FileNotFoundError(f"name_or_path: no model folder at {path}")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"name_or_path: {path} has no config.json; is it a model folder "
                                    f"saved with save_pretrained?")
        return str(path), True
    return text, False


def load_lm(name_or_path: str | os.PathLike | None = None, *, device: str | torch.device = "cpu"):
    """Load a causal LM and its tokenizer; returns ``(model, tokenizer)`` with the model in eval mode.

    ``name_or_path``:
    * None (default): the lab's shipped tiny arithmetic model in ``data/tiny_lm`` (offline).
    * a local folder written by ``save_pretrained``: loaded with ``local_files_only=True``, so
      nothing ever reaches the network.
    * a Hugging Face model name such as ``"gpt2"``: passed through to ``from_pretrained`` for users
      with internet (or a populated local cache).

    Weights load from safetensors only (``use_safetensors=True``; a model published only as
    pickled ``.bin`` files is refused) and ``trust_remote_code`` is never enabled. If the
    tokenizer has no pad token, its eos token is used; padding is set to the left for batched
    generation.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device: expected a string or torch.device, got {type(device).__name__}")
    try:
        device = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"device: {err}") from None
    source, local = _resolve(name_or_path)
    kwargs = {"local_files_only": True} if local else {}
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, **kwargs)
    # No "Loading weights" progress bar for a local folder: the tiny model loads in milliseconds,
    # and the bar would be noise in every notebook cell (and in nbval's output comparison).
    bar_was_on = hf_logging.is_progress_bar_enabled()
    if local:
        hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(source, use_safetensors=True,
                                                     trust_remote_code=False, **kwargs)
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(device)
    model.eval()
    return model, tokenizer


def task_tokens(tokenizer) -> TaskTokens:
    """Ids of ``;`` (step boundary), ``#`` (answer mark), ``=`` and the eos token.

    Raises ValueError if the tokenizer does not encode each of those characters as one token
    (true of the shipped tokenizer; a general-purpose tokenizer may merge them).
    """
    if not (callable(getattr(tokenizer, "encode", None)) and hasattr(tokenizer, "eos_token_id")):
        raise TypeError(f"tokenizer: expected a Hugging Face tokenizer, got {type(tokenizer).__name__}")
    ids = []
    for ch in (STEP_SEP, ANSWER_MARK, "="):
        enc = tokenizer.encode(ch, add_special_tokens=False)
        if len(enc) != 1:
            raise ValueError(f"tokenizer: {ch!r} is not a single token (encodes to {enc})")
        ids.append(int(enc[0]))
    if tokenizer.eos_token_id is None:
        raise ValueError("tokenizer: has no eos token")
    return TaskTokens(*ids, eos=int(tokenizer.eos_token_id))


def _next_token_logp(model: torch.nn.Module, prompts: list[list[int]], tokens: torch.Tensor,
                     mask: torch.Tensor, pad_id: int) -> torch.Tensor:
    """log pi(. | prompt_b, tokens[b, :t]) over the vocabulary at every position, (B, T, V).

    Each row is prompt + completion, right-padded (positions start at 0 on every row, as in
    the sampler); the logits at position p score the token at p + 1.
    """
    B, T = tokens.shape
    if len(prompts) != B:
        raise ValueError(f"prompts: expected {B} (one per row of tokens), got {len(prompts)}")
    lengths = mask.sum(1)
    seqs = [p + tokens[b, :int(lengths[b])].tolist() for b, p in enumerate(prompts)]
    L = max(len(s) for s in seqs)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    attention = torch.zeros(B, L, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s)
        attention[b, :len(s)] = 1
    logp_all = torch.log_softmax(model(input_ids=ids, attention_mask=attention).logits.float(), dim=-1)
    # generated token t of row b sits at position len(prompt_b) + t and is scored at one before it
    prompt_len = torch.tensor([len(p) for p in prompts])
    pos = (prompt_len[:, None] - 1 + torch.arange(T)[None, :]).clamp(max=L - 1)
    return logp_all.gather(1, pos[..., None].expand(B, T, logp_all.shape[-1]))


def sequence_logprobs(model: torch.nn.Module, prompts: list[list[int]], tokens: torch.Tensor,
                      mask: torch.Tensor, *, pad_id: int = 0) -> torch.Tensor:
    """log pi(tokens[b, t] | prompt_b, tokens[b, :t]) for every generated position, (B, T),
    differentiable with respect to the model; 0 off the mask."""
    picked = _next_token_logp(model, prompts, tokens, mask, pad_id)
    out = picked.gather(-1, tokens.clamp(min=0)[..., None]).squeeze(-1)
    return torch.where(mask, out, torch.zeros((), dtype=out.dtype))


def sequence_sum_pi_squared(model: torch.nn.Module, prompts: list[list[int]], tokens: torch.Tensor,
                            mask: torch.Tensor, *, pad_id: int = 0) -> torch.Tensor:
    """sum_v pi(v | prompt_b, tokens[b, :t])^2 at every generated position, (B, T), 0 off the
    mask: how concentrated the next-token distribution is (1: one certain token)."""
    out = _next_token_logp(model, prompts, tokens, mask, pad_id).mul(2).exp().sum(-1)
    return torch.where(mask, out, torch.zeros((), dtype=out.dtype))
