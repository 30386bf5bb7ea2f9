"""labkit.io.text_positions: text without ids, cut by a tokenizer or into characters (and said so)."""
from __future__ import annotations

import pytest

from labkit.core.paths import data_path
from labkit.io.text_positions import TextCutter, display_text, load_tokenizer, text_positions
from io_cases import hand_made

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


def test_positions_are_flat_ids_and_lengths():
    p = text_positions(["hé", "", "\U0001F600!"])
    assert p.lengths.tolist() == [2, 0, 2] and p.flat.tolist() == [ord("h"), ord("é"), 0x1F600, ord("!")]
    assert p.vocab is None and p.ids[2] == [0x1F600, ord("!")]


def test_a_cutter_loads_its_tokenizer_once_and_decodes_each_id_once():
    class Counting:
        decoded: list = []

        def encode(self, text, add_special_tokens=False):
            return [ord(c) - 96 for c in text]

        def decode(self, ids):
            self.decoded.append(ids[0])
            return chr(ids[0] + 96)

    cutter = TextCutter(Counting())
    first, second = cutter.cut(["ab", "b"]), cutter.cut(["bc"])
    assert first.vocab == {1: "a", 2: "b"} and second.vocab == {2: "b", 3: "c"}
    assert sorted(Counting.decoded) == [1, 2, 3] and cutter.unit == "token"


def test_display_text_from_text_characters_or_the_vocabulary():
    from labkit.io import read_rollouts

    ro = read_rollouts({"prompt": ["p", "p"], "completion": ["hé", "abc"], "reward": [1.0, 0.0]})
    assert ro.text is None and ro.info["position_unit"] == "character"
    assert display_text(ro, [0, 1]) == [["h", "é", ""], ["a", "b", "c"]]
    assert display_text(ro, [1], width=2) == [["a", "b"]] and display_text(ro, [1], width=9) == [["a", "b", "c"]]
    tok = read_rollouts({"prompt": ["p"], "completion": ["12+3"], "reward": [1.0]}, tokenizer=TINY_LM)
    assert display_text(tok, [0]) == [["1", "2", "+", "3"]] and set(tok.info["vocab_text"]) == set(tok.tokens[0].tolist())
    ro = hand_made()  # the record format's own text is shown as it is
    assert display_text(ro, [1], width=3) == [["a", "<t>", "e"]]
    assert display_text(ro.with_(text=None), [1]) is None  # token ids without a way to show them
    with pytest.raises(ValueError, match=r"^rows: row 5 is outside the batch"):
        display_text(ro, [5])
    with pytest.raises(ValueError, match=r"^width"):
        display_text(ro, [0], width=0)
