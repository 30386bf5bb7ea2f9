"""The learner (``labkit.core.protocols.Learner``) for a ToolWorld: a memoryless tabular agent."""
from __future__ import annotations

import torch

from labkit.core.checks import check_has, check_int
from labkit.core.rollouts import Rollouts
from labkit.core.stats import group_spread


class ToolLearner:
    """A memoryless tabular softmax agent (``ToolWorld.make_policy``) on a ``ToolWorld``.

    Each iteration samples ``n_tasks`` fresh tasks (bug locations) with ``group_size`` episodes
    each (one GRPO group per task). ``batch_filter`` (optional, e.g.
    ``functools.partial(starpo_filter, keep=0.25)``) maps the sampled Rollouts to the ones that
    are trained on; the env steps of the whole sampled batch are still charged (its
    ``info["sampled_steps"]``). ``evaluate`` is the exact success probability J from the
    ToolWorld dynamic programme, so learning curves carry no evaluation noise; ``last_truth``
    keeps that truth for the caller.
    """

    default_lr = 0.1

    def __init__(self, env, policy, *, n_tasks: int = 8, group_size: int = 8, batch_filter=None):
        check_has("env", env, ("sample", "truth", "make_policy"), "a ToolWorld")
        env._check_policy(policy)
        self.env, self.policy = env, policy
        self.n_tasks = check_int("n_tasks", n_tasks, low=1)
        self.group_size = check_int("group_size", group_size, low=1)
        if batch_filter is not None and not callable(batch_filter):
            raise TypeError("batch_filter: expected a function rollouts -> rollouts (or None)")
        self.batch_filter = batch_filter
        self.last_truth = None

    def parameters(self):
        return self.policy.parameters()

    def collect(self, iteration: int, seed: int) -> Rollouts:
        ro = self.env.sample(self.policy, self.n_tasks, group_size=self.group_size, seed=seed)
        if self.batch_filter is None:
            return ro
        sampled = int(ro.mask.sum())
        spread = group_spread(ro)
        out = self.batch_filter(ro)
        if not isinstance(out, Rollouts):
            raise TypeError(f"batch_filter: returned {type(out).__name__}, expected Rollouts")
        out.info = {**out.info, "sampled_steps": sampled, "generation_cost": sampled, "sampled_spread": spread}
        return out

    def logprobs(self, rollouts: Rollouts, rows: torch.Tensor) -> torch.Tensor:
        return self.policy.log_prob(rollouts.states[rows], rollouts.tokens[rows])

    def evaluate(self, seed: int = 0) -> float:
        self.last_truth = self.env.truth(self.policy)
        return self.last_truth.J
