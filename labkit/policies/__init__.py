"""Policies: a tabular softmax policy now; a tiny causal LM wrapper later."""
from labkit.policies.tabular import TabularSoftmaxPolicy

__all__ = ["TabularSoftmaxPolicy"]
