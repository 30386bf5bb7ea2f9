"""ArithmeticTask: checkable chain-of-thought addition. The task lives in ``env``; the tiny LM
playing it in ``lm`` (``ArithmeticLM``), its cached Monte Carlo truth in ``truth`` and its
learner in ``learner`` (import those submodules directly: they load transformers)."""
from labkit.envs.arithmetic.env import (ANSWER_MARK, BOS, CHARS, DIGITS, EOS, MAX_OPERAND, MAX_OPERANDS,
                                        MIN_OPERAND, MIN_OPERANDS, PAD, SPECIAL_TOKENS, SPLITS, STEP_SEP, UNK,
                                        ArithmeticTask, Problem, Step, Verdict, operands_of, parse_steps, prompt_for,
                                        segment_ids, solution, verify)

__all__ = ["ArithmeticTask", "Problem", "Step", "Verdict", "operands_of", "parse_steps", "prompt_for", "segment_ids", "solution", "verify", "ANSWER_MARK", "BOS", "CHARS", "DIGITS", "EOS", "PAD", "SPECIAL_TOKENS", "STEP_SEP", "UNK", "MIN_OPERAND", "MAX_OPERAND", "MIN_OPERANDS", "MAX_OPERANDS", "SPLITS"]
