"""Toy environments with exact ground truth."""
from labkit.envs.arithmetic import ArithmeticTask
from labkit.envs.bifurcation import BifurcationChain
from labkit.envs.teamtask import TeamLearner, TeamTask, TeamTruth
from labkit.envs.toolworld import ToolTruth, ToolWorld

__all__ = ["ArithmeticTask", "BifurcationChain", "TeamLearner", "TeamTask", "TeamTruth", "ToolTruth", "ToolWorld"]
