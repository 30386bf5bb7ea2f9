"""labkit.io.text_positions: text without ids, cut by a tokenizer or into characters (and said so)."""
from __future__ import annotations

import pytest

from labkit.core.paths import data_path
from labkit.io.text_positions import load_tokenizer, text_positions

TINY_LM = data_path("tiny_lm")


def test_characters_without_a_tokenizer():
    p = text_positions(["hé", ""])
    assert p.ids == [[ord("h"), ord("é")], []] and p.text == [["h", "é"], []]
    assert p.unit == "character" and p.how.startswith("characters:")


def test_a_tokenizer_folder_or_object_encodes_without_special_tokens():
    p = text_positions(["12+3=15;#15"], TINY_LM)
    tok = load_tokenizer(TINY_LM)
    assert p.unit == "token" and p.ids == [tok.encode("12+3=15;#15", add_special_tokens=False)]
    assert p.text == [list("12+3=15;#15")] and "tiny_lm" in p.how
    assert text_positions(["12+3"], tok).ids == [tok.encode("12+3", add_special_tokens=False)]
    # a bare tokenizers.Tokenizer (encode gives an Encoding) works too
    assert text_positions(["12+3"], tok.backend_tokenizer).ids == [tok.encode("12+3", add_special_tokens=False)]


def test_a_tokenizer_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^tokenizer: no tokenizer folder at"):
        text_positions(["a"], tmp_path / "missing")
    with pytest.raises(ValueError, match=r"^tokenizer: .* could not be loaded as a tokenizer"):
        text_positions(["a"], tmp_path)
    with pytest.raises(TypeError, match=r"^tokenizer: expected a tokenizer folder or a tokenizer object"):
        text_positions(["a"], 42)
