"""A softmax policy whose parameters are shared across states: logits = features @ weight.T.

Where a ``TabularSoftmaxPolicy`` gives every state its own row of logits, this policy computes
every state's logits from one small weight matrix through a fixed feature map,

    logits[s] = weight @ phi(s),    pi(. | s) = softmax(logits[s]),

so a gradient step taken on the log-probability of one state's token moves the logits of every
state whose features overlap it. That is what a language model does (every token's gradient lands
in the same weights) and what a table cannot show: the noise that routine tokens add to the
policy gradient reaches the parameters of the decisive tokens. With one-hot features (phi(s) the
s-th unit vector) this is a table again; the sharing comes from having far fewer features than
states.

The policy still offers the tabular interface the lab's worlds and exact solvers read: ``logits``
and ``probs()`` are full (n_states, n_actions) tables, computed from the weights, so dynamic
programming (``labkit.envs.tabular.exact_truth``) and sampling work unchanged.
``parameter_gradient`` carries a gradient with respect to that table (exact truth's ``grad``)
into weight space by the chain rule, and ``trajectory_gradients`` gives the per-trajectory
policy-gradient terms in weight space, so ``labkit.scoring.gradient_study`` measures the noise of
the gradient the weights actually receive; ``logit_change`` carries a weight-space step back to
the logit table it moves, so the noise can be read where it lands (a decisive state's logits).
"""
from __future__ import annotations

import torch
from torch import nn

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts
from labkit.policies.tabular import SoftmaxOverTable


class SharedFeaturePolicy(SoftmaxOverTable, nn.Module):
    """pi(a | s) = softmax(weight @ features[s])_a with one ``weight`` (n_actions, n_features)
    shared by every state.

    ``features`` (n_states, n_features) is the fixed feature map (a constant column gives each
    action a bias). ``init_std`` = 0 gives the uniform policy; otherwise weights ~ N(0, init_std^2)
    from ``seed``. float64 by default so exact gradients are not blurred by rounding.
    """

    def __init__(self, features, n_actions: int, *, init_std: float = 0.0, seed: int = 0,
                 dtype: torch.dtype = torch.float64):
        super().__init__()
        phi = as_tensor("features", features, dtype=dtype)
        if phi.dim() != 2 or phi.shape[0] < 1 or phi.shape[1] < 1:
            raise ValueError(f"features: expected a (n_states, n_features) matrix, got shape {tuple(phi.shape)}")
        check_finite("features", phi)
        n_actions = check_int("n_actions", n_actions, low=1)
        init_std = check_number("init_std", init_std, low=0.0)
        g = torch.Generator().manual_seed(check_int("seed", seed))
        # a buffer, not a parameter: the feature map is fixed, only the weights learn
        self.register_buffer("features", phi.clone())
        self.weight = nn.Parameter(torch.randn(n_actions, phi.shape[1], generator=g, dtype=dtype) * init_std)

    @property
    def n_states(self) -> int:
        return self.features.shape[0]

    @property
    def n_actions(self) -> int:
        return self.weight.shape[0]

    @property
    def n_features(self) -> int:
        return self.features.shape[1]

    @property
    def logits(self) -> torch.Tensor:
        """The (n_states, n_actions) logit table, differentiable with respect to ``weight``."""
        return self.features @ self.weight.T

    def _states(self, states) -> torch.Tensor:
        s = as_tensor("states", states).long()
        if bool(((s < 0) | (s >= self.n_states)).any()):
            raise ValueError(f"states: indices must lie in [0, {self.n_states - 1}]")
        return s

    def log_prob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(actions | states), differentiable with respect to ``weight``."""
        s = self._states(states)
        a = as_tensor("actions", actions).long()
        if tuple(a.shape) != tuple(s.shape):
            raise ValueError(f"actions: expected the shape of states {tuple(s.shape)}, got {tuple(a.shape)}")
        if bool(((a < 0) | (a >= self.n_actions)).any()):
            raise ValueError(f"actions: indices must lie in [0, {self.n_actions - 1}]")
        return self.log_probs()[s].gather(-1, a[..., None]).squeeze(-1)

    def parameter_gradient(self, logit_gradient) -> torch.Tensor:
        """A gradient with respect to the logit table (n_states, n_actions), e.g. exact truth's
        ``grad``, as the gradient with respect to ``weight`` (n_actions, n_features): by the
        chain rule, sum_s logit_gradient[s] (outer) features[s]."""
        g = as_tensor("logit_gradient", logit_gradient, dtype=self.features.dtype)
        check_shape("logit_gradient", g, (self.n_states, self.n_actions))
        return g.T @ self.features

    def logit_change(self, parameter_gradient) -> torch.Tensor:
        """How a small gradient step along ``parameter_gradient`` ((..., n_actions, n_features), a
        gradient with respect to ``weight``, optionally with leading batch dimensions) moves the
        logit table, per unit step: features @ parameter_gradient.T, (..., n_states, n_actions).
        Every state whose features overlap the step's moves, decisive or routine."""
        g = as_tensor("parameter_gradient", parameter_gradient, dtype=self.features.dtype)
        if g.dim() < 2 or tuple(g.shape[-2:]) != (self.n_actions, self.n_features):
            raise ValueError(f"parameter_gradient: expected shape (..., {self.n_actions}, {self.n_features}), "
                             f"got {tuple(g.shape)}")
        return self.features @ g.transpose(-1, -2)

    @torch.no_grad()
    def trajectory_gradients(self, rollouts: Rollouts, credit: torch.Tensor) -> torch.Tensor:
        """Per-trajectory policy-gradient terms sum_t c_bt * grad_weight log pi(a_bt | s_bt),
        (B, n_actions, n_features): the weights' gradient, where every position of a trajectory,
        routine or decisive, adds to the same entries. The batch estimate is the mean over B.
        """
        terms, states = self._logit_score_terms(rollouts, credit)
        # the chain rule from the logits of s to the weights multiplies by phi(s)
        return torch.einsum("bta,btf->baf", terms, self.features[states])
