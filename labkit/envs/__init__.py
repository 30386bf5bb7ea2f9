"""Toy environments with exact ground truth."""
from labkit.envs.bifurcation import BifurcationChain

__all__ = ["BifurcationChain"]
from labkit.envs.arithmetic import ArithmeticTask; __all__ += ["ArithmeticTask"]  # noqa: E402,E702
