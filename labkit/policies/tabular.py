"""A tabular softmax policy: one row of logits per state.

Small enough that exact values and the exact policy gradient are a linear solve away (see
``labkit.envs.tabular``), which is what lets the lab score estimators against ground truth.
"""
from __future__ import annotations

import torch
from torch import nn

from labkit.core.checks import as_tensor, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts


class SoftmaxOverTable:
    """What every policy that reads pi(. | s) off an (n_states, n_actions) table of ``logits``
    does alike: probabilities, log-probabilities, entropies and sampling. A class supplies
    ``logits`` (a parameter, or a property computed from shared weights) and, where it checks
    state indices, ``_states``."""

    def probs(self) -> torch.Tensor:
        return torch.softmax(self.logits, dim=-1)

    def log_probs(self) -> torch.Tensor:
        return torch.log_softmax(self.logits, dim=-1)

    def entropy(self) -> torch.Tensor:
        """Entropy of pi(. | s) for every state, (n_states,)."""
        logp = self.log_probs()
        return -(logp.exp() * logp).sum(-1)

    def _states(self, states: torch.Tensor) -> torch.Tensor:
        return states

    @torch.no_grad()
    def sum_pi_squared(self, rollouts: Rollouts) -> torch.Tensor:
        """sum_a pi(a | s)^2 at every position's recorded state, (B, T) float64, 0 off the mask:
        how concentrated the policy is there (1: one certain action); the optimal token
        baseline's ``sum_pi_squared`` (labkit.credit.token_baseline)."""
        if rollouts.states is None:
            raise ValueError(f"rollouts.states: {type(self).__name__} needs the state index of every position")
        S = self.logits.shape[0]
        per_state = self.probs().double().pow(2).sum(-1)
        out = per_state[self._states(rollouts.states.clamp(0, S - 1))]
        return torch.where(rollouts.mask, out, torch.zeros((), dtype=out.dtype))

    def greedy(self) -> "TabularSoftmaxPolicy":
        """A tabular policy that always takes this one's most likely action (the first on a tie):
        the policy's greedy response, as ReMax's baseline samples it. Other actions get logit
        -1e4, so probability exactly 0 in float64 and finite log-probabilities."""
        with torch.no_grad():
            logits = self.logits.detach()
            best = logits.argmax(-1)
            table = torch.full_like(logits, -1e4)
            table[torch.arange(logits.shape[0]), best] = 0.0
        greedy = TabularSoftmaxPolicy(logits.shape[0], logits.shape[1], dtype=logits.dtype)
        greedy.logits.data.copy_(table)
        return greedy

    @torch.no_grad()
    def sample(self, states: torch.Tensor, generator: torch.Generator,
               log_probs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample one action per entry of ``states``; returns (actions, log-probs, entropies).

        Pass ``log_probs`` (this policy's ``log_probs()`` table) when sampling many steps in a
        row, so the table is not recomputed every step.
        """
        table = self.log_probs() if log_probs is None else log_probs
        logp = table[self._states(states)]
        p = logp.exp()
        actions = torch.multinomial(p, 1, generator=generator).squeeze(-1)
        ent = -(p * logp).sum(-1)
        return actions, logp.gather(-1, actions[:, None]).squeeze(-1), ent

    @torch.no_grad()
    def _logit_score_terms(self, rollouts: Rollouts, credit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(terms, states): c_bt * grad_{logits[s_bt]} log pi(a_bt | s_bt) = c_bt * (onehot(a_bt) -
        pi(. | s_bt)) per position, (B, T, n_actions), 0 off the mask, and the state index of each
        position; a policy carries them to its own parameters."""
        if rollouts.states is None:
            raise ValueError(f"rollouts.states: {type(self).__name__} needs the state index of every position")
        credit = as_tensor("credit", credit)
        check_shape("credit", credit, (rollouts.batch_size, rollouts.horizon))
        S, A = self.logits.shape
        pi = self.probs()
        states = rollouts.states.clamp(0, S - 1)
        score = torch.nn.functional.one_hot(rollouts.tokens.clamp(0, A - 1), A).to(pi.dtype) - pi[states]
        return torch.where(rollouts.mask[..., None], credit.to(pi.dtype)[..., None] * score, 0), states

    def gradient_estimate(self, rollouts: Rollouts, credit: torch.Tensor) -> torch.Tensor:
        """The batch policy-gradient estimate (1/B) sum_b sum_t c_bt grad log pi, shaped like the
        policy's parameters."""
        return self.trajectory_gradients(rollouts, credit).mean(0)

    def logit_change(self, parameter_gradient) -> torch.Tensor:
        """How a small gradient step along ``parameter_gradient`` (shaped like the policy's
        parameters, optionally with leading batch dimensions) moves the logit table, to first
        order and per unit step: (..., n_states, n_actions). What a step does to one state's
        logits, whichever parameters carry it."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its parameters move its logits")


class TabularSoftmaxPolicy(SoftmaxOverTable, nn.Module):
    """pi(a | s) = softmax(logits[s])_a with ``logits`` of shape (n_states, n_actions).

    ``init_std`` = 0 gives the uniform policy; otherwise logits ~ N(0, init_std^2) from ``seed``.
    float64 by default so exact gradients are not blurred by rounding.
    """

    def __init__(self, n_states: int, n_actions: int, *, init_std: float = 0.0, seed: int = 0,
                 dtype: torch.dtype = torch.float64):
        super().__init__()
        n_states = check_int("n_states", n_states, low=1)
        n_actions = check_int("n_actions", n_actions, low=1)
        init_std = check_number("init_std", init_std, low=0.0)
        g = torch.Generator().manual_seed(int(seed))
        self.logits = nn.Parameter(torch.randn(n_states, n_actions, generator=g, dtype=dtype) * init_std)

    @property
    def n_states(self) -> int:
        return self.logits.shape[0]

    @property
    def n_actions(self) -> int:
        return self.logits.shape[1]

    def set_probs(self, state: int, probs) -> None:
        """Overwrite pi(. | state) (handy for building a specific, known policy)."""
        p = as_tensor("probs", probs, dtype=self.logits.dtype)
        check_shape("probs", p, (self.n_actions,))
        if bool((p <= 0).any()) or abs(float(p.sum()) - 1) > 1e-9:
            raise ValueError("probs: must be strictly positive and sum to 1")
        with torch.no_grad():
            self.logits[state] = p.log()

    def log_prob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(actions | states), differentiable with respect to the logits."""
        return self.log_probs()[states].gather(-1, actions[..., None]).squeeze(-1)

    def logit_change(self, parameter_gradient) -> torch.Tensor:
        """How a small gradient step along ``parameter_gradient`` ((..., n_states, n_actions), a
        gradient with respect to the logits, optionally with leading batch dimensions) moves the
        logit table, per unit step: the gradient itself, since every state's logits are its own
        parameters. A step moves only the rows its gradient has entries in."""
        g = as_tensor("parameter_gradient", parameter_gradient, dtype=self.logits.dtype)
        if g.dim() < 2 or tuple(g.shape[-2:]) != (self.n_states, self.n_actions):
            raise ValueError(f"parameter_gradient: expected shape (..., {self.n_states}, {self.n_actions}), "
                             f"got {tuple(g.shape)}")
        return g

    @torch.no_grad()
    def trajectory_gradients(self, rollouts: Rollouts, credit: torch.Tensor) -> torch.Tensor:
        """Per-trajectory policy-gradient terms sum_t c_bt * grad log pi(a_bt | s_bt), (B, S, A).

        For a softmax table, grad_{logits[s]} log pi(a | s) = onehot(a) - pi(. | s), so this is a
        scatter instead of B backward passes. The batch estimate is the mean over B.
        """
        terms, states = self._logit_score_terms(rollouts, credit)
        B, S, A = rollouts.batch_size, self.n_states, self.n_actions
        flat = (torch.arange(B)[:, None] * S + states).reshape(-1)
        out = torch.zeros(B * S, A, dtype=terms.dtype).index_add_(0, flat, terms.reshape(-1, A))
        return out.reshape(B, S, A)
