"""Policies: a tabular softmax policy, a softmax policy whose parameters are shared across
states (``SharedFeaturePolicy``), and the tiny causal LM's wrapper."""
from labkit.policies.shared import SharedFeaturePolicy
from labkit.policies.tabular import TabularSoftmaxPolicy

__all__ = ["SharedFeaturePolicy", "TabularSoftmaxPolicy"]
