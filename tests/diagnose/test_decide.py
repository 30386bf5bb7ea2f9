"""The decision tree walked from the measurements (labkit.diagnose.decide)."""
from __future__ import annotations

from labkit.diagnose import decision_inputs, measure_lengths, measure_rewards, measure_stochasticity
from labkit.survey.decision_tree import QUESTIONS

from diagnose_cases import tool_toy


def test_unmeasurable_stochasticity_is_assumed_deterministic_unless_given():
    s = measure_stochasticity(tool_toy([7, 8], groups=[0, 1]))
    lengths, rewards = measure_lengths(tool_toy([7, 8])), measure_rewards(tool_toy([7, 8]))
    inputs, evidence = decision_inputs(lengths, rewards, s)
    assert inputs.stochastic_env is False and evidence["stochastic"][1] == "assumed"
    inputs, evidence = decision_inputs(lengths, rewards, s, stochastic_env=True)
    assert inputs.stochastic_env is True and evidence["stochastic"][1] == "given"


def test_every_question_of_the_tree_has_a_source_of_evidence():
    s = measure_stochasticity(tool_toy([7, 7]))
    _, evidence = decision_inputs(measure_lengths(tool_toy([7, 7])), measure_rewards(tool_toy([7, 7])), s)
    assert set(evidence) == set(QUESTIONS)
