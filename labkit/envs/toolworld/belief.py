"""What the agent could have known: ToolWorld's exact values given the agent's own information.

``ToolTruth`` (``env.truth(policy)``) conditions every value on the hidden state: the buggy file b
that the agent never sees. Its advantage A_t(b, ...) therefore calls an action skilful when it
happened to suit the hidden file, even where nothing the agent had seen pointed there: the search
that landed on the right hint by chance is luck in what it revealed, counted as skill. The survey
(section 4.2) splits agentic failures into decision errors and information gaps; this module
measures the second by conditioning on what the agent saw instead.

The agent's information before turn t is its history h_t = (o_0, a_0, o_1, ..., a_{t-1}, o_t).
Tasks draw b uniformly, so Bayes' rule gives the belief

    beta_t(b) = P(b | h_t)  proportional to  prod_{k < t} K[b, f_{k+1}(b), a_k, o_{k+1}]

with K the tools' answer kernel and f_{k+1}(b) the fixed flag file b would have after a_0..a_k
(set by an edit of b). Given h_t and b the state (b, fixed, o_t) is known, and the policy is
memoryless, so the exact values given the agent's information are the belief's averages of the
hidden-state ones:

    V_info_t = sum_b beta_t(b) V_t(b, f_t(b), o_t)       Q_info_t(a) = sum_b beta_t(b) Q_t(b, f_t(b), a)
    A_info_t = Q_info_t(a_t) - V_info_t                  (the advantage the agent could have earned)

and the hidden-state advantage splits as A_t = A_info_t + information luck_t, where information
luck_t = A_t - A_info_t has mean zero given (h_t, a_t): it is how the file the agent could not see
made its action look better or worse. ``BeliefTruth.skill_luck`` mirrors ``ToolTruth.skill_luck``
from the agent's side (skill A_info, luck r_t + V_info_{t+1} - Q_info_t, both tool and information
luck), so ``labkit.scoring.luck`` reads it unchanged.

Oracle side: it reads the rollouts' actions and observations (what the agent saw) and the exact
DP tables; it never needs ``truth["hidden_states"]`` except to give the hidden-state terms.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.envs.toolworld.truth import ToolTruth


@dataclass(eq=False)
class BeliefTruth:
    """Exact values of sampled ToolWorld rollouts given the agent's information (module docstring),
    each (B, T) and 0 off the mask: ``belief`` (B, T, N) beta_t(b); ``value`` V_info_t;
    ``q_all`` (B, T, A) Q_info_t of every action; ``q_value`` of the action taken; ``advantage``
    A_info_t; ``next_value`` V_info_{t+1} (0 after the last turn); ``hidden_advantage`` A_t
    given the hidden state (``ToolTruth.advantage``), for the split."""

    belief: torch.Tensor
    value: torch.Tensor
    q_all: torch.Tensor
    q_value: torch.Tensor
    advantage: torch.Tensor
    next_value: torch.Tensor
    hidden_advantage: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor
    gamma: float = 1.0

    def information_luck(self) -> torch.Tensor:
        """A_t - A_info_t per played turn, (B, T): the part of the hidden-state advantage that came
        from the hidden file, not from what the agent saw."""
        return torch.where(self.mask, self.hidden_advantage - self.advantage, 0.0)

    def skill_luck(self, rollouts: Rollouts | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(skill, luck) from the agent's side, each (B, T): skill_t = A_info_t; luck_t = r_t + gamma
        V_info_{t+1} - Q_info_t(a_t), the tools' answers and the hidden file together. Per
        trajectory V_info_0 + sum_t gamma^t (skill_t + luck_t) = the realised return. ``rollouts``
        is accepted (and ignored) so this reads like ``ToolTruth.skill_luck``."""
        luck = self.rewards + self.gamma * self.next_value - self.q_value
        return self.advantage, torch.where(self.mask, luck, 0.0)


def belief_truth(env, truth: ToolTruth, rollouts: Rollouts) -> BeliefTruth:
    """The exact values of ``rollouts`` (sampled with ``env.sample`` under the policy ``truth``
    was computed for) given each turn's history of actions and observations: the belief over the
    buggy file, V_info, Q_info and A_info (module docstring), with the hidden-state advantage
    beside them. Raises if ``env`` is not a ToolWorld or ``rollouts`` are not its rollouts.

    Cost: O(B T N A) tensor work, no sampling."""
    missing = [a for a in ("kernel", "fixed_after", "edit_action", "n_files", "max_turns") if not hasattr(env, a)]
    if missing:
        raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")
    if not isinstance(truth, ToolTruth):
        raise TypeError(f"truth: expected the ToolTruth of env.truth(policy), got {type(truth).__name__}")
    check_rollouts(rollouts, "ToolWorld.sample")
    hidden_adv = truth.advantage(rollouts)          # also checks that the rollouts decode under truth
    B, T = rollouts.mask.shape
    N = env.n_files
    if rollouts.states is None:
        raise ValueError("rollouts.states: the observation before every turn is needed (ToolWorld.sample)")
    if truth.Q.shape[1] != N:
        raise ValueError(f"truth: computed for {truth.Q.shape[1]} files, env has {N}")
    m = rollouts.mask
    act = torch.where(m, rollouts.tokens, 0).long()
    obs = torch.where(m, rollouts.states, 0).long()
    files = torch.arange(N)
    # fixed_before[b', i, t]: had file b' been the buggy one, was it fixed before turn t?
    edited = (act[None, :, :] == env.edit_action(files)[:, None, None]) & m[None]
    fixed_before = (edited.long().cumsum(2) - edited.long()) > 0
    fixed_after = fixed_before | edited
    # likelihood of the observation after turn k (the next turn's observation), per candidate file
    nxt = torch.zeros_like(obs)
    nxt[:, :-1] = obs[:, 1:]
    answered = torch.zeros_like(m)
    answered[:, :-1] = m[:, 1:]
    K = env.kernel                                  # (N, 2, A, n_obs)
    like = K[files[:, None, None], fixed_after.long(), act[None], nxt[None]]   # (N, B, T)
    loglik = torch.where(answered[None], like.clamp(min=1e-300).log(), 0.0)
    before = loglik.cumsum(2) - loglik              # evidence from turns k < t, about turn t's history
    belief = torch.softmax(before, dim=0).permute(1, 2, 0)                    # (B, T, N), uniform prior
    t = torch.arange(T).clamp(max=truth.Q.shape[0] - 1)[None, :].expand(B, T)
    fb = fixed_before.long().permute(1, 2, 0)       # (B, T, N)
    Q_b = truth.Q[t[..., None], files, fb]          # (B, T, N, A)
    V_b = truth.V[t[..., None], files, fb, obs[..., None]]                   # (B, T, N)
    q_all = (belief[..., None] * Q_b).sum(2)
    value = (belief * V_b).sum(2)
    q_taken = q_all.gather(2, act[..., None]).squeeze(2)
    value = torch.where(m, value, 0.0)
    q_taken = torch.where(m, q_taken, 0.0)
    next_value = torch.zeros_like(value)
    next_value[:, :-1] = torch.where(m[:, 1:], value[:, 1:], 0.0)
    next_value = torch.where(m, next_value, 0.0)
    return BeliefTruth(belief=torch.where(m[..., None], belief, 0.0), value=value,
                       q_all=torch.where(m[..., None], q_all, 0.0), q_value=q_taken, advantage=q_taken - value,
                       next_value=next_value, hidden_advantage=hidden_adv, mask=m,
                       rewards=torch.where(m, rollouts.rewards.to(torch.float64), 0.0), gamma=truth.gamma)
