"""labkit: the Credit Assignment Lab's library.

One data path: an environment produces ``Rollouts``; an estimator turns them into ``Credit``;
``labkit.truth`` gives the exact answer to score it against; ``labkit.viz`` draws it.
"""
from labkit.rollouts import Cost, Credit, Rollouts

__version__ = "0.1.0"
__all__ = ["Cost", "Credit", "Rollouts", "__version__"]
