"""The learner (``labkit.core.protocols.Learner``) for a TeamTask: the team's tabular policies."""
from __future__ import annotations

import pandas as pd
import torch

from labkit.core.checks import check_has, check_int
from labkit.core.rollouts import Rollouts
from labkit.envs.teamtask.env import TeamTask
from labkit.envs.teamtask.truth import TeamTruth


class TeamLearner:
    """The team's tabular policies on a ``TeamTask``, for ``labkit.learn.loop.train``.

    Each iteration samples ``n_tasks`` task instances with ``group_size`` episodes each (one
    group per task). ``logprobs`` gives agent t's log pi(a | o) at position t. ``evaluate`` is
    the exact team success J (enumeration), so learning curves carry no evaluation noise.
    ``track_grads=True`` records, at every backward pass, the gradient norm of each agent's
    logits before any clipping (``grad_log()``): the per-agent gradient scale Dr. MAS is about.
    """

    default_lr = 0.5

    def __init__(self, env: TeamTask, policies, *, n_tasks: int = 8, group_size: int = 8,
                 track_grads: bool = True):
        self.env = check_has("env", env, ("sample", "truth", "make_policies"), "a TeamTask")
        self.policies = env._check_policies(policies)
        self.n_tasks = check_int("n_tasks", n_tasks, low=1)
        self.group_size = check_int("group_size", group_size, low=1)
        self._events: list[list[float]] = [[] for _ in self.policies]
        self.last_truth: TeamTruth | None = None
        if track_grads:
            for i, pol in enumerate(self.policies):
                pol.logits.register_hook(self._recorder(i))

    def _recorder(self, i: int):
        def hook(grad):
            self._events[i].append(float(grad.norm()))
        return hook

    def parameters(self):
        for pol in self.policies:
            yield from pol.parameters()

    def collect(self, iteration: int, seed: int) -> Rollouts:
        return self.env.sample(self.policies, self.n_tasks, group_size=self.group_size, seed=seed)

    def logprobs(self, rollouts: Rollouts, rows: torch.Tensor) -> torch.Tensor:
        cols = [pol.log_prob(rollouts.states[rows, i], rollouts.tokens[rows, i]) for i, pol in enumerate(self.policies)]
        return torch.stack(cols, dim=1)

    def evaluate(self, seed: int = 0) -> float:
        self.last_truth = self.env.truth(self.policies)
        return self.last_truth.J

    def grad_log(self):
        """Per backward pass and agent: the gradient norm of that agent's logits (a DataFrame with
        columns ``backward`` (1-based), ``agent``, ``role``, ``grad_norm``)."""
        rows = []
        for i, events in enumerate(self._events):
            for k, v in enumerate(events):
                rows.append({"backward": k + 1, "agent": self.env.agent_names[i], "role": self.env.roles[i],
                             "grad_norm": v})
        return pd.DataFrame(rows, columns=["backward", "agent", "role", "grad_norm"])
