"""Learned critics: value estimates fitted to sampled returns, the thing TD credit bootstraps from.

A critic here is anything with ``value(rollouts) -> (B, T)``: the estimated V(s_t) before every
generated position. Learned critics are imperfect by construction (finite data, limited
capacity), and that imperfection is what the lambda dial of GAE trades against variance.
"""
from __future__ import annotations

import torch

from labkit._checks import check_int, check_number
from labkit.rollouts import Rollouts


class TabularCritic:
    """V(s) for a tabular environment, fitted as the average return observed from each state.

    ``fit`` uses every visit of every trajectory (the Monte Carlo regression target is the
    reward-to-go G_t). States never visited fall back to ``prior`` (default 0), the way an
    untrained value head outputs roughly a constant. ``shrinkage`` pulls a state seen n times
    towards the prior by weight shrinkage / (n + shrinkage): a crude stand-in for a network's
    limited capacity to fit rare states.
    """

    def __init__(self, n_states: int, *, prior: float = 0.0, shrinkage: float = 0.0):
        self.n_states = check_int("n_states", n_states, low=1)
        self.prior = check_number("prior", prior)
        self.shrinkage = check_number("shrinkage", shrinkage, low=0.0)
        self.sums = torch.zeros(self.n_states, dtype=torch.float64)
        self.counts = torch.zeros(self.n_states, dtype=torch.float64)

    def fit(self, rollouts: Rollouts, *, gamma: float = 1.0) -> "TabularCritic":
        """Accumulate returns from ``rollouts`` (can be called repeatedly with more data)."""
        if rollouts.states is None:
            raise ValueError("rollouts.states: a tabular critic needs the state of every position")
        if int(rollouts.states[rollouts.mask].max()) >= self.n_states:
            raise ValueError(f"rollouts.states: index beyond this critic's {self.n_states} states")
        G = rollouts.returns(gamma).to(torch.float64)
        s = rollouts.states[rollouts.mask]
        self.sums.index_add_(0, s, G[rollouts.mask])
        self.counts.index_add_(0, s, torch.ones_like(G[rollouts.mask]))
        return self

    @property
    def table(self) -> torch.Tensor:
        """The fitted V(s) for every state, (n_states,)."""
        return (self.sums + self.shrinkage * self.prior) / (self.counts + self.shrinkage).clamp(min=1e-12) \
            if self.shrinkage > 0 else torch.where(self.counts > 0, self.sums / self.counts.clamp(min=1), self.prior)

    def value(self, rollouts: Rollouts) -> torch.Tensor:
        """Estimated V(s_t) at every generated position, (B, T); 0 off-mask."""
        if rollouts.states is None:
            raise ValueError("rollouts.states: a tabular critic needs the state of every position")
        v = self.table[rollouts.states.clamp(0, self.n_states - 1)]
        return torch.where(rollouts.mask, v, 0.0)

    __call__ = value
