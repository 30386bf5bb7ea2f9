"""Exact ground truth for tabular environments: V, Q, A under the current policy and the exact
policy gradient.

An episodic tabular MDP is given as a sub-stochastic transition tensor P[s, a, s'] (the mass
missing from a row is the probability that the episode ends), expected rewards R[s, a] and a
start distribution. Every state is transient, so under policy pi

    V = (I - gamma P_pi)^{-1} r_pi,      Q = R + gamma P V,      A = Q - V,

is one linear solve, and J = start . V. Because the solve is differentiable, autograd through it
gives the exact gradient dJ/dlogits; the closed form d(s) pi(a|s) A(s, a) (policy-gradient
theorem for a softmax table, d = expected discounted visit counts) is computed too and the tests
check that the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.core.checks import as_tensor, check_finite, check_ids_in_range, check_number, check_shape
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts, check_rollouts


@dataclass(eq=False)
class TabularMDP:
    """P (S, A, S) sub-stochastic, R (S, A) expected reward, start (S,) distribution."""

    transitions: torch.Tensor
    rewards: torch.Tensor
    start: torch.Tensor

    def __post_init__(self) -> None:
        self.transitions = as_tensor("transitions", self.transitions, dtype=torch.float64)
        if self.transitions.dim() != 3 or self.transitions.shape[0] != self.transitions.shape[2]:
            raise ValueError(f"transitions: expected shape (S, A, S), got {tuple(self.transitions.shape)}")
        S, A, _ = self.transitions.shape
        self.rewards = as_tensor("rewards", self.rewards, dtype=torch.float64)
        check_shape("rewards", self.rewards, (S, A))
        self.start = as_tensor("start", self.start, dtype=torch.float64)
        check_shape("start", self.start, (S,))
        for name in ("transitions", "rewards", "start"):
            check_finite(name, getattr(self, name))
        if bool((self.transitions < 0).any()) or bool((self.transitions.sum(-1) > 1 + 1e-9).any()):
            raise ValueError("transitions: rows must be non-negative and sum to at most 1")
        if bool((self.start < 0).any()) or abs(float(self.start.sum()) - 1) > 1e-9:
            raise ValueError("start: must be a probability distribution")

    @property
    def n_states(self) -> int:
        return self.transitions.shape[0]

    @property
    def n_actions(self) -> int:
        return self.transitions.shape[1]


@dataclass(eq=False)
class Truth:
    """Exact quantities under one fixed policy (all float64, detached).

    ``transitions`` and ``start`` are the MDP's (what ``exact_truth`` records): with them the
    per-position methods refuse rollouts that this MDP cannot produce (another world, another
    horizon); a Truth built without them checks only that the ids index its tables.
    """

    V: torch.Tensor          # (S,)
    Q: torch.Tensor          # (S, A)
    A: torch.Tensor          # (S, A)
    J: float                 # expected return from the start distribution
    grad: torch.Tensor       # (S, A) exact dJ/dlogits
    occupancy: torch.Tensor  # (S,) expected (discounted) visits
    pi: torch.Tensor         # (S, A) the policy the truth was computed for
    transitions: torch.Tensor | None = None  # (S, A, S) the MDP's sub-stochastic P
    start: torch.Tensor | None = None        # (S,) the MDP's start distribution

    @property
    def sizes(self) -> dict[str, int]:
        """What this truth was built for: {"n_states": S, "n_actions": A}."""
        S, A = self.Q.shape
        return {"n_states": int(S), "n_actions": int(A)}

    def advantage(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact A(s_t, a_t) at every generated position of ``rollouts``, (B, T), 0 off-mask.
        Rollouts this truth's MDP cannot have produced are refused (``_index``)."""
        s, a = self._index(rollouts)
        return torch.where(rollouts.mask, self.A[s, a], 0)

    def q_value(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact Q(s_t, a_t) at every generated position of ``rollouts``, (B, T), 0 off-mask."""
        s, a = self._index(rollouts)
        return torch.where(rollouts.mask, self.Q[s, a], 0)

    def value(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact V(s_t) before each generated position, (B, T), 0 off-mask."""
        s, _ = self._index(rollouts)
        return torch.where(rollouts.mask, self.V[s], 0)

    def step_value_fn(self):
        """A ``value_fn`` for ``labkit.credit.mc`` that returns the exact V at the start of every
        step (ignores k; zero cost): Monte Carlo credit with perfect values."""
        def value_fn(rollouts: Rollouts, k: int):
            v = self.value(rollouts)
            return rollouts.view(v, "step", "first")[0], Cost()
        return value_fn

    def _index(self, rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
        """(state, action) index of every position, (B, T) each, 0 off-mask. Refuses (naming
        ``rollouts``) ids outside this truth's tables and, when the MDP is recorded, any
        trajectory it cannot produce: an impossible start, step or end (rollouts of another
        world or horizon read this truth's entries at the wrong states)."""
        check_rollouts(rollouts, "the world this truth was computed for")
        if rollouts.states is None:
            raise ValueError("rollouts.states: exact truth needs the state index of every position")
        S, A = self.Q.shape
        m = rollouts.mask
        check_ids_in_range("rollouts", rollouts.states, S, where=m, what="state ids", owner="this truth: n_states")
        check_ids_in_range("rollouts", rollouts.tokens, A, where=m, what="action ids (tokens)",
                           owner="this truth: n_actions")
        s = torch.where(m, rollouts.states, 0)
        a = torch.where(m, rollouts.tokens, 0)
        if self.transitions is not None and self.start is not None:
            self._check_possible(s, a, m)
        return s, a

    def _check_possible(self, s: torch.Tensor, a: torch.Tensor, m: torch.Tensor) -> None:
        """Refuse a generated sequence of (state, action) this MDP gives probability 0: a first
        state outside the start distribution, a step to a state P cannot reach, or an end where
        the episode cannot end (all of P's mass stays in the MDP)."""
        B, T = m.shape
        if not bool(m.any()):
            return
        pos = torch.where(m, torch.arange(T).expand(B, T), T)
        # the next generated position after t (T when none), by a reversed running minimum
        after = torch.cat([pos[:, 1:], torch.full((B, 1), T)], 1)
        nxt = after.flip(1).cummin(1).values.flip(1)
        first = pos.min(1).values
        rows = (first < T).nonzero().squeeze(1)
        bad_start = self.start[s[rows, first[rows]]] <= 0
        hint = "score rollouts sampled from the world (and horizon) this truth was computed for"
        if bool(bad_start.any()):
            b = int(rows[bad_start.nonzero()[0, 0]])
            raise ValueError(f"rollouts: row {b} starts in state {int(s[b, first[b]])}, where this truth's MDP "
                             f"never starts; {hint}")
        goes_on = m & (nxt < T)
        s_next = s.gather(1, nxt.clamp(max=T - 1))
        p_step = self.transitions[s, a, s_next]
        bad = goes_on & (p_step <= 0)
        if bool(bad.any()):
            b, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"rollouts: row {b} steps from state {int(s[b, t])} with action {int(a[b, t])} to "
                             f"state {int(s_next[b, t])} at position {t}, which this truth's MDP cannot do; {hint}")
        # the episode ends after a row's last generated position: the MDP must let it end there
        ends = m & (nxt == T)
        end_mass = 1 - self.transitions[s, a].sum(-1)
        bad = ends & (end_mass <= 1e-12)
        if bool(bad.any()):
            b, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"rollouts: row {b} ends at position {t} (state {int(s[b, t])}), where this "
                             f"truth's MDP cannot end (a shorter horizon?); {hint}")


def exact_truth(mdp: TabularMDP, policy, *, gamma: float = 1.0) -> Truth:
    """Solve for V, Q, A, J and the exact gradient of J with respect to ``policy.logits``.

    ``policy`` is anything with a ``logits`` tensor of shape (S, A) and softmax semantics
    (``labkit.policies.TabularSoftmaxPolicy``; for a ``SharedFeaturePolicy`` the gradient is with
    respect to its logit table, and its ``parameter_gradient`` carries it to the weights). Raises ValueError if the policy does not match the
    MDP or if some state can loop forever with probability 1 (I - gamma P_pi singular).
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    logits = policy.logits
    if tuple(logits.shape) != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"policy: logits have shape {tuple(logits.shape)}, the MDP needs "
                         f"({mdp.n_states}, {mdp.n_actions})")
    theta = logits.detach().to(torch.float64).clone().requires_grad_(True)
    pi = torch.softmax(theta, dim=-1)
    P, R = mdp.transitions, mdp.rewards
    P_pi = torch.einsum("sa,sat->st", pi, P)
    r_pi = (pi * R).sum(-1)
    eye = torch.eye(mdp.n_states, dtype=torch.float64)
    system = eye - gamma * P_pi
    try:
        V = torch.linalg.solve(system, r_pi)
    except RuntimeError as err:  # singular: an episode can fail to end
        raise ValueError(f"mdp: episodes may never terminate under this policy ({err})") from None
    J = mdp.start @ V
    (grad,) = torch.autograd.grad(J, theta)
    with torch.no_grad():
        Q = R + gamma * torch.einsum("sat,t->sa", P, V)
        occupancy = torch.linalg.solve(system.T, mdp.start)
    return Truth(V=V.detach(), Q=Q, A=Q - V.detach()[:, None], J=float(J.detach()), grad=grad,
                 occupancy=occupancy, pi=pi.detach(), transitions=P, start=mdp.start)


def policy_gradient_theorem(truth: Truth) -> torch.Tensor:
    """Closed-form exact gradient for a softmax table: d(s) * pi(a|s) * A(s, a), (S, A)."""
    return truth.occupancy[:, None] * truth.pi * truth.A
