"""TeamTask: a small multi-agent task with exact coalition values (Shapley truth)."""
from labkit.envs.teamtask.env import (DEFAULT_REWARD_PROFILE, PRESET_STORIES, PRESETS, REWARD_MODES, ROLES,
                                      TYPE_NAMES, TeamTask)
from labkit.envs.teamtask.learner import TeamLearner
from labkit.envs.teamtask.truth import TeamTruth

__all__ = ["TeamTask", "TeamTruth", "TeamLearner", "PRESETS", "PRESET_STORIES", "ROLES", "REWARD_MODES", "TYPE_NAMES", "DEFAULT_REWARD_PROFILE"]
