"""labkit: the Credit Assignment Lab's library.

One data path: an environment produces ``Rollouts``; an estimator turns them into ``Credit``;
each environment's truth module gives the exact answer to score it against; ``labkit.viz`` draws it.
"""
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts

__version__ = "0.1.0"
__all__ = ["Cost", "Credit", "Rollouts", "__version__"]
