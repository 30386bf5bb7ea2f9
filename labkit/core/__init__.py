"""The bottom layer: the data structures (Rollouts, Credit, Cost), input checks, shared
statistics, the protocols the layers above expect of each other, where the data lives and how
its caches are stamped (``paths``, ``cache``), and whether a progress bar shows (``progress``).
Imports nothing from labkit outside ``labkit.core``."""
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts

__all__ = ["Cost", "Credit", "Rollouts"]
