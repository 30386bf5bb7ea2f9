"""Worlds with exact ground truth, one subpackage each (env, truth, learner, labels)."""
from labkit.envs.arithmetic import ArithmeticTask
from labkit.envs.chain import BifurcationChain
from labkit.envs.teamtask import TeamLearner, TeamTask, TeamTruth
from labkit.envs.toolworld import ToolTruth, ToolWorld

__all__ = ["ArithmeticTask", "BifurcationChain", "TeamLearner", "TeamTask", "TeamTruth", "ToolTruth", "ToolWorld"]
