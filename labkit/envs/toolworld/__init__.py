"""ToolWorld: a multi-turn tool-using agent task with a hidden state and an exact DP truth."""
from labkit.envs.toolworld.env import (RUN_TESTS, SEARCH, START, SUBMIT, TESTS_FAIL, TESTS_PASS, THINK, THOUGHT,
                                       ToolWorld)
from labkit.envs.toolworld.labels import SHORT_ACTIONS, turn_labels
from labkit.envs.toolworld.learner import ToolLearner
from labkit.envs.toolworld.truth import ToolTruth, exact_hindsight, success_prob

__all__ = ["ToolWorld", "ToolTruth", "ToolLearner", "exact_hindsight", "success_prob", "turn_labels", "SHORT_ACTIONS", "THINK", "SEARCH", "RUN_TESTS", "SUBMIT", "START", "THOUGHT", "TESTS_PASS", "TESTS_FAIL"]
