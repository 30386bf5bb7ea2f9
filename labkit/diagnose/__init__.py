"""labkit.diagnose: classify a training setup from its own rollouts, walk notebook 00's decision
tree from the measured numbers, and compare the estimators the data supports. A dump that spans
training steps is also read as a run (:mod:`.training_steps`: each step's numbers and their
drift), the framework's own logged advantages are recomputed (:mod:`.framework_credit`: which
setting made them), and the red flags say what to change (:mod:`.advice`).

``diagnose(source)`` takes a ``Rollouts`` (or a rollout file, streamed in chunks by
``labkit.io.iter_rollouts`` into a :class:`Tally`, so memory stays bounded by the chunk size and
the comparison's sample whatever the file's size) and returns a :class:`Diagnosis`, whose
``save(out_dir)`` writes ``report.md`` and a self-contained ``report.html``; ``python -m labkit.diagnose FILE`` does the same from a shell.

Layer: top of the stack beside ``course`` and ``bridges``: it may import the stack, ``survey``,
``viz`` and ``scoring``; nothing in labkit imports it except ``course``.
"""
from labkit.diagnose.advice import Flag, red_flags
from labkit.diagnose.compare import (FEATURES, EstimatorComparison, agreement_matrix, compare_estimators,
                                     compare_sample, data_features, disagreement, rms_scaled, sample_groups,
                                     sample_rows, supported_estimators, tally_features)
from labkit.diagnose.decide import Answer, decision_inputs, walk_tree
from labkit.diagnose.diagnosis import CREDIT_CHECK_ROWS, DEFAULT_SAMPLE, STREAM_BATCH_ROWS, Diagnosis, diagnose
from labkit.diagnose.framework_credit import AdvantageCheck, check_framework_advantages
from labkit.diagnose.measure import (measure_groups, measure_lengths, measure_positions, measure_rewards,
                                     measure_stochasticity, position_kinds)
from labkit.diagnose.results import (INTERMEDIATE_MIN_SHARE, STOCHASTIC_THRESHOLD, GroupStats, Histogram, Lengths,
                                     PositionStats, RewardStats, Stochasticity)
from labkit.diagnose.situations import Situations
from labkit.diagnose.training_steps import Drift, RunSteps, run_steps
from labkit.diagnose.tally import Tally

__all__ = [
    "diagnose", "Diagnosis", "DEFAULT_SAMPLE", "STREAM_BATCH_ROWS",
    "measure_lengths", "measure_rewards", "measure_groups", "measure_positions", "measure_stochasticity",
    "position_kinds", "Tally", "Situations", "Lengths", "RewardStats", "GroupStats", "PositionStats",
    "Stochasticity", "Histogram",
    "INTERMEDIATE_MIN_SHARE", "STOCHASTIC_THRESHOLD",
    "decision_inputs", "walk_tree", "Answer",
    "run_steps", "RunSteps", "Drift", "red_flags", "Flag",
    "check_framework_advantages", "AdvantageCheck", "CREDIT_CHECK_ROWS",
    "FEATURES", "data_features", "tally_features", "supported_estimators", "sample_groups",
    "sample_rows", "compare_estimators", "compare_sample",
    "agreement_matrix", "disagreement", "rms_scaled", "EstimatorComparison",
]
