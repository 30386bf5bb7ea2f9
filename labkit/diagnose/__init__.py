"""labkit.diagnose: classify a training setup from its own rollouts, walk notebook 00's decision
tree from the measured numbers, and compare the estimators the data supports.

``diagnose(source)`` takes a ``Rollouts`` (or a rollout file, read by ``labkit.io``) and returns a
:class:`Diagnosis`, whose ``save(out_dir)`` writes ``report.md`` and a self-contained
``report.html``; ``python -m labkit.diagnose FILE`` does the same from a shell.

Layer: top of the stack beside ``course`` and ``bridges``: it may import the stack, ``survey``,
``viz`` and ``scoring``; nothing in labkit imports it except ``course``.
"""
from labkit.diagnose.compare import (FEATURES, EstimatorComparison, agreement_matrix, compare_estimators,
                                     data_features, disagreement, load_needs, sample_groups,
                                     supported_estimators)
from labkit.diagnose.decide import Answer, decision_inputs, walk_tree
from labkit.diagnose.diagnosis import DEFAULT_SAMPLE, Diagnosis, diagnose
from labkit.diagnose.measure import (INTERMEDIATE_MIN_SHARE, STOCHASTIC_THRESHOLD, GroupStats, Histogram, Lengths,
                                     PositionStats, RewardStats, Stochasticity, measure_groups, measure_lengths,
                                     measure_positions, measure_rewards, measure_stochasticity, position_kinds)

__all__ = [
    "diagnose", "Diagnosis", "DEFAULT_SAMPLE",
    "measure_lengths", "measure_rewards", "measure_groups", "measure_positions", "measure_stochasticity",
    "position_kinds", "Lengths", "RewardStats", "GroupStats", "PositionStats", "Stochasticity", "Histogram",
    "INTERMEDIATE_MIN_SHARE", "STOCHASTIC_THRESHOLD",
    "decision_inputs", "walk_tree", "Answer",
    "FEATURES", "load_needs", "data_features", "supported_estimators", "sample_groups", "compare_estimators",
    "agreement_matrix", "disagreement", "EstimatorComparison",
]
