"""Completion text without token ids, cut into positions: the user's tokenizer, or characters.

TRL's completions files and verl's rollout dump store decoded text, not the ids the model
sampled. With a tokenizer (``tokenizer=``: a folder saved with ``save_pretrained``, read with
``local_files_only=True`` so nothing reaches the network, or a tokenizer object) the text is
encoded again, without special tokens. That is the model's vocabulary, though not necessarily
the exact ids it sampled (a text may have several tokenizations; the encoder picks its own).
Without one, each **Unicode character** is a position (token id ``ord(char)``): every character
stays visible, and every length is counted and labelled in characters, never called tokens.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Positions", "text_positions", "load_tokenizer", "CHARACTERS", "TOKENS", "UNITS"]

CHARACTERS, TOKENS = "character", "token"
UNITS = (TOKENS, CHARACTERS)


@dataclass
class Positions:
    """Per-text token ids and display strings, and how they were made: ``unit`` ("token" or
    "character") and ``how`` (a sentence for ``info['tokenizer']``)."""
    ids: list[list[int]]
    text: list[list[str]]
    unit: str
    how: str


def load_tokenizer(tokenizer: Any, argument: str = "tokenizer") -> Any:
    """A tokenizer object from a folder path (``transformers.AutoTokenizer``, local files only,
    no remote code) or the object itself when it can encode (``encode`` and ``decode``)."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = Path(tokenizer).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{argument}: no tokenizer folder at {path} (a folder saved with "
                                    f"save_pretrained, holding tokenizer.json or the vocabulary files)")
        from transformers import AutoTokenizer
        try:
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        except (OSError, ValueError) as err:
            raise ValueError(f"{argument}: {path} could not be loaded as a tokenizer ({str(err).splitlines()[0]})") from None
    if callable(getattr(tokenizer, "encode", None)) and callable(getattr(tokenizer, "decode", None)):
        return tokenizer
    raise TypeError(f"{argument}: expected a tokenizer folder or a tokenizer object (with encode and decode), "
                    f"got {type(tokenizer).__name__}")


def _encode(tok: Any, text: str) -> list[int]:
    try:
        ids = tok.encode(text, add_special_tokens=False)
    except TypeError:  # tokenizers.Tokenizer: encode(text) -> Encoding
        ids = tok.encode(text)
    return list(getattr(ids, "ids", ids))


def text_positions(texts: list[str], tokenizer: Any = None, argument: str = "tokenizer") -> Positions:
    """Positions of each text: encoded by ``tokenizer`` (see the module docstring), or one per
    Unicode character when ``tokenizer`` is None."""
    if tokenizer is None:
        return Positions([[ord(c) for c in t] for t in texts], [list(t) for t in texts], CHARACTERS,
                         "characters: no token ids and no tokenizer, so one position per Unicode character "
                         "(pass tokenizer= to count tokens)")
    name = str(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else type(tokenizer).__name__
    tok = load_tokenizer(tokenizer, argument)
    ids = [_encode(tok, t) for t in texts]
    shown: dict[int, str] = {}
    text = [[shown[i] if i in shown else shown.setdefault(i, tok.decode([i])) for i in row] for row in ids]
    return Positions(ids, text, TOKENS, f"tokens: the text encoded again by {name} (no special tokens); "
                                        f"the sampled ids may differ where a text has several tokenizations")
