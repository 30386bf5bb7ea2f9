"""The learner (``labkit.core.protocols.Learner``) for a BifurcationChain: a softmax policy over
its states, tabular (one logit row per state) or with parameters shared across positions
(``labkit.envs.chain.shared_policy``)."""
from __future__ import annotations

import torch

from labkit.core.checks import check_has, check_int, check_policy
from labkit.core.rollouts import Rollouts
from labkit.envs.tabular import exact_truth


class ChainLearner:
    """A softmax policy on a ``BifurcationChain`` (anything with the chain's ``logits`` table,
    ``log_prob`` and ``parameters``); ``evaluate`` is the exact success probability J from dynamic
    programming (no sampling noise in the learning curve)."""

    default_lr = 0.1

    def __init__(self, env, policy, *, batch_size: int = 32, group_size: int = 8):
        self.env = check_has("env", env, ("sample", "mdp"), "a BifurcationChain")
        self.policy = check_policy("policy", policy)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.group_size = check_int("group_size", group_size, low=1)
        if self.batch_size % self.group_size:
            raise ValueError(f"group_size: {group_size} does not divide batch_size = {batch_size}")

    def parameters(self):
        return self.policy.parameters()

    def collect(self, iteration: int, seed: int) -> Rollouts:
        return self.env.sample(self.policy, self.batch_size, group_size=self.group_size, seed=seed)

    def logprobs(self, rollouts: Rollouts, rows: torch.Tensor) -> torch.Tensor:
        return self.policy.log_prob(rollouts.states[rows], rollouts.tokens[rows])

    def evaluate(self, seed: int = 0) -> float:
        return float(exact_truth(self.env.mdp(), self.policy).J)  # (also computes the exact gradient)
