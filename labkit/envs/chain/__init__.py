"""The controlled bifurcation chain: a tabular world whose exact truth is the generic tabular DP
(``labkit.envs.tabular.exact_truth`` on ``BifurcationChain.mdp()``)."""
from labkit.envs.chain.env import TOKEN_NAMES, BifurcationChain
from labkit.envs.chain.features import chain_features, shared_policy
from labkit.envs.chain.learner import ChainLearner

__all__ = ["BifurcationChain", "ChainLearner", "TOKEN_NAMES", "chain_features", "shared_policy"]
