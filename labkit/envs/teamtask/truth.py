"""Exact truth of a TeamTask: coalition values, team success J and per-agent gradients under
fixed policies, by enumerating every joint action (``enumerate_truth``, which ``TeamTask.truth``
runs)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(eq=False)
class TeamTruth:
    """Exact quantities of a TeamTask under fixed policies (float64, detached).

    values (2**n,): expected coalition values (column = bitmask); J: exact team success v(N);
    grads: per agent dJ/dlogits (n_obs_i, n_actions_i); pi: per agent action probabilities.
    """

    values: torch.Tensor
    J: float
    grads: list
    pi: list
    agent_names: list

    def grad_norms(self) -> torch.Tensor:
        """||dJ/dlogits_i|| per agent, (n,)."""
        return torch.stack([g.norm() for g in self.grads])


def enumerate_truth(team, policies) -> TeamTruth:
    """Exact per-policy quantities of ``team`` by enumerating every task type and joint action.

    P(k, a) = (1/K) prod_i pi_i(a_i | o_i(k, a_<i)); values[S] = sum P(k, a) v_S(k, a);
    J = values[full team]; ``grads[i]`` = dJ/dlogits of agent i (autograd through P). ``team``
    supplies ``joint_actions()``, ``observations(task, actions, i)``, ``success_prob`` and
    ``coalition_masks()``; ``policies`` are already checked against it.
    """
    task, actions = team.joint_actions()
    thetas = [p.logits.detach().to(torch.float64).clone().requires_grad_(True) for p in policies]
    logp = torch.full((task.shape[0],), -torch.log(torch.tensor(float(team.n_types), dtype=torch.float64)))
    for i, theta in enumerate(thetas):
        obs = team.observations(task, actions, i)
        logp = logp + torch.log_softmax(theta, -1)[obs, actions[:, i]]
    weight = logp.exp()
    table = team.success_prob(task, actions, team.coalition_masks())   # (E, 2**n), no grad
    values = weight @ table
    J = values[-1]
    grads = torch.autograd.grad(J, thetas)
    return TeamTruth(values=values.detach(), J=float(J.detach()), grads=[g.detach() for g in grads],
                     pi=[torch.softmax(t.detach(), -1) for t in thetas], agent_names=list(team.agent_names))
