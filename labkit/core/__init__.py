"""The bottom layer: the data structures (Rollouts, Credit, Cost), input checks, shared
statistics and the protocols the layers above expect of each other. Imports nothing from labkit
outside ``labkit.core``."""
from labkit.core.rollouts import Cost, Credit, Rollouts

__all__ = ["Cost", "Credit", "Rollouts"]
