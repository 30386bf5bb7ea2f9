"""Toy environments with exact ground truth."""
from labkit.envs.bifurcation import BifurcationChain

__all__ = ["BifurcationChain"]
