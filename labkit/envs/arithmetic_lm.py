"""The tiny LM on the arithmetic task: moved to ``labkit.envs.arithmetic.lm`` / ``.truth``."""
# transitional: notebooks move to labkit.course in the next step
from labkit.envs.arithmetic.lm import ArithmeticLM
from labkit.envs.arithmetic.truth import REFERENCE_DIR, load_reference, load_step_alternatives

__all__ = ["ArithmeticLM", "REFERENCE_DIR", "load_reference", "load_step_alternatives"]
