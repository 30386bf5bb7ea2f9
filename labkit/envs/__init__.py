"""Toy environments with exact ground truth."""
from labkit.envs.arithmetic import ArithmeticTask
from labkit.envs.bifurcation import BifurcationChain

__all__ = ["ArithmeticTask", "BifurcationChain"]
