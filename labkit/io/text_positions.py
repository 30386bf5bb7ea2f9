"""Completion text without token ids, cut into positions: the user's tokenizer, or characters.

TRL's completions files and verl's rollout dump store decoded text, not the ids the model
sampled. With a tokenizer (``tokenizer=``: a folder saved with ``save_pretrained``, read with
``local_files_only=True`` so nothing reaches the network, or a tokenizer object) the text is
encoded again, without special tokens. That is the model's vocabulary, though not necessarily
the exact ids it sampled (a text may have several tokenizations; the encoder picks its own).
Without one, each **Unicode character** is a position (token id ``ord(char)``): every character
stays visible, and every length is counted and labelled in characters, never called tokens.

The ids are made without a Python step per character or token (the texts of a batch are encoded
at once, as UTF-32 for characters, with the tokenizer's batch encoder otherwise) and kept flat
(:class:`Positions`). A position's display string is not stored per position: it is ``chr(id)``
for a character and, for a token, the tokenizer's decoding of that one id, kept once per distinct
id (``Positions.vocab``; a reader puts it in ``info['vocab_text']``). :func:`display_text` gives
the strings of a few rows of a batch from whichever the batch has.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["Positions", "TextCutter", "text_positions", "load_tokenizer", "display_text", "position_texts",
           "CHARACTERS", "TOKENS", "UNITS"]

CHARACTERS, TOKENS = "character", "token"
UNITS = (TOKENS, CHARACTERS)
_CHARACTERS_HOW = ("characters: no token ids and no tokenizer, so one position per Unicode character "
                   "(pass tokenizer= to count tokens)")


@dataclass
class Positions:
    """The positions of some texts, and how they were made.

    ``flat``: every text's ids one after the other (int64; for characters the code points as
    uint32, widened where they are padded); ``lengths[i]``: text i's number of positions. ``unit``: "token" or "character"; ``how``: a sentence for ``info['tokenizer']``.
    ``vocab``: {id: display string} of every id that occurs, for tokens (None for characters,
    whose display string is ``chr(id)``)."""
    flat: np.ndarray
    lengths: np.ndarray
    unit: str
    how: str
    vocab: dict[int, str] | None = None

    @property
    def ids(self) -> list[list[int]]:
        """Each text's ids as a list (a Python list per text: for small inputs)."""
        ends = np.cumsum(self.lengths)
        return [self.flat[e - n:e].tolist() for e, n in zip(ends.tolist(), self.lengths.tolist())]

    @property
    def text(self) -> list[list[str]]:
        """Each text's display strings, one per position (for small inputs)."""
        show = chr if self.vocab is None else self.vocab.__getitem__
        return [[show(i) for i in row] for row in self.ids]


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


def _encode_all(tok: Any, texts: list[str]) -> list:
    """Every text's ids, by the tokenizer's batch encoder where it gives the same ids as
    ``encode(text, add_special_tokens=False)`` one by one (a transformers tokenizer; a bare
    ``tokenizers.Tokenizer`` without padding or truncation set), else text by text."""
    if not texts:
        return []
    transformers = sys.modules.get("transformers")
    if transformers is not None and isinstance(tok, transformers.PreTrainedTokenizerBase):
        return tok(texts, add_special_tokens=False, padding=False, truncation=False)["input_ids"]
    if callable(getattr(tok, "encode_batch", None)) and getattr(tok, "padding", 0) is None \
            and getattr(tok, "truncation", 0) is None:
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    return [_encode(tok, t) for t in texts]


class TextCutter:
    """Cuts texts into positions (see the module docstring), the same way batch after batch:
    the tokenizer is loaded once and each id's display string decoded once."""

    def __init__(self, tokenizer: Any = None, argument: str = "tokenizer") -> None:
        self._given, self._argument, self._tok = tokenizer, argument, None
        self._shown: dict[int, str] = {}
        if tokenizer is None:
            self.unit, self.how = CHARACTERS, _CHARACTERS_HOW
            return
        name = str(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else type(tokenizer).__name__
        self.unit = TOKENS
        self.how = (f"tokens: the text encoded again by {name} (no special tokens); the sampled ids may differ "
                    f"where a text has several tokenizations")

    @property
    def tok(self) -> Any:
        """The tokenizer object (loaded at first use, so a batch that needs none never loads it);
        None for characters."""
        if self._tok is None and self._given is not None:
            self._tok = load_tokenizer(self._given, self._argument)
        return self._tok

    def cut(self, texts: Sequence[str]) -> Positions:
        """The positions of ``texts`` (strings)."""
        texts = list(texts)
        if self.tok is None:
            # one C-level pass: UTF-32 is one 4-byte code point per character (lone surrogates,
            # which JSON can carry, kept as their code points as ord would)
            lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            data = "".join(texts).encode("utf-32-le", "surrogatepass")
            return Positions(np.frombuffer(data, dtype=np.uint32), lengths, CHARACTERS, self.how)
        ids = _encode_all(self.tok, texts)
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        return Positions(flat, lengths, TOKENS, self.how, self.vocab_text(flat))

    def vocab_text(self, flat: np.ndarray) -> dict[int, str]:
        """{id: display string} of the ids in ``flat`` (each decoded once per cutter)."""
        if flat.size == 0:
            return {}
        present = np.nonzero(np.bincount(flat))[0].tolist() if int(flat.min()) >= 0 else np.unique(flat).tolist()
        shown = self._shown
        for i in present:
            if i not in shown:
                shown[i] = self.tok.decode([i])
        return {i: shown[i] for i in present}


def text_positions(texts: list[str], tokenizer: Any = None, argument: str = "tokenizer") -> Positions:
    """Positions of each text: encoded by ``tokenizer`` (see the module docstring), or one per
    Unicode character when ``tokenizer`` is None."""
    return TextCutter(tokenizer, argument).cut(texts)


def display_text(rollouts, rows: Sequence[int], width: int | None = None) -> list[list[str]] | None:
    """Display strings of the first ``width`` positions (default: all) of trajectories ``rows``
    of ``rollouts``, a list per row.

    From ``rollouts.text`` when the batch carries it; else, for text a reader cut into positions
    (``info['position_unit']``), ``chr(id)`` per character or ``info['vocab_text'][id]`` per
    token. Padding (after a row's last generated position) shows as ``""``. None when the batch
    has no display strings (token ids without text or a map from ids to strings)."""
    from labkit.core.checks import check_int

    idx = [int(r) for r in rows]
    B, T = rollouts.tokens.shape
    for r in idx:
        if not -B <= r < B:
            raise ValueError(f"rows: row {r} is outside the batch ({B} trajectories)")
    W = T if width is None else min(check_int("width", width, low=1), T)
    if rollouts.text is not None:
        return [list(rollouts.text[r][:W]) for r in idx]
    info = rollouts.info or {}
    unit, vocab = info.get("position_unit"), info.get("vocab_text")
    if unit == CHARACTERS:
        show = chr
    elif unit == TOKENS and isinstance(vocab, dict):
        def show(t: int) -> str:
            return vocab.get(t, "")
    else:
        return None
    if not idx:
        return []
    mask = rollouts.mask[idx, :W].numpy()
    ends = np.where(mask.any(1), W - 1 - mask[:, ::-1].argmax(1), -1)  # last generated position in view
    tokens = rollouts.tokens[idx, :W].tolist()
    return [[show(t) if k <= e else "" for k, t in enumerate(row)] for row, e in zip(tokens, ends.tolist())]


def position_texts(rollouts) -> list[list[str]] | None:
    """Every position's display string, a list of ``horizon`` strings per trajectory (what
    ``Rollouts.text`` holds): ``rollouts.text``, or :func:`display_text` of every row; None when
    the batch has none. The writers store it, so text read without ids keeps its text in the
    record format, in ``to_trl``'s completions and in a verl batch."""
    if rollouts.text is not None:
        return rollouts.text
    return display_text(rollouts, range(rollouts.batch_size))
