"""The tiny LM's character vocabulary.

It belongs to the model (the tokenizer is built from it), so it lives with the policies; the
arithmetic task writes its text in it and imports it from here.

Characters ``0123456789+=;#`` plus the special tokens ``<pad> <bos> <eos> <unk>`` (``<unk>``
exists only so that arbitrary text can be tokenized without an error). ``;`` is the step boundary
the rest of the lab cuts completions at; ``#`` marks the final answer.
"""
DIGITS = "0123456789"
CHARS = DIGITS + "+=;#"
PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
STEP_SEP = ";"
ANSWER_MARK = "#"
