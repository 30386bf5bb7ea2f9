"""Learned turn-reward models for the implicit and redistribution estimators on tabular agents.

* ``ImplicitStepRewardModel``: iStar's implicit process reward model (arXiv:2509.19199). A copy
  of the policy table (logits over actions per observation) trained with a DPO loss on pairs of
  whole trajectories of one task (the better outcome preferred); its per-turn log-ratio to the
  reference table is the step reward. Tabular, so a fit takes milliseconds.
* ``ProgressEstimator``: SPA-RL's progress estimator (arXiv:2505.20732). A per-turn
  contribution c(observation, action) (a table fitted by ridge least squares, or a tiny MLP
  that also sees the turn index) trained so that a trajectory's contributions sum to its
  outcome.
* ``policy_logprobs``: the (B, T) log-probabilities of the taken actions under a tabular
  policy, what ``itpo`` needs for the policy and its reference.

The estimators (``labkit.credit.implicit.itpo`` / ``istar``,
``labkit.credit.redistribution.spa_rl``) take what these produce as explicit tensors or
callables; nothing here is read by them implicitly. ``rollouts.states`` must hold the
observation of every turn (ToolWorld's do) and ``rollouts.tokens`` the action.
"""
from __future__ import annotations

import time

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts, check_rollouts

__all__ = ["ImplicitStepRewardModel", "ProgressEstimator", "policy_logprobs", "preference_pairs"]


def _obs_actions(rollouts: Rollouts, n_obs: int, n_actions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(observation, action) per position, clamped into the table, after checking the played ones."""
    check_rollouts(rollouts)
    if rollouts.states is None:
        raise ValueError("rollouts.states: a tabular turn model needs the observation of every turn")
    o, a, m = rollouts.states.long(), rollouts.tokens.long(), rollouts.mask
    if bool(((o < 0) | (o >= n_obs))[m].any()):
        raise ValueError(f"rollouts.states: observation ids must lie in [0, {n_obs - 1}] for this model")
    if bool(((a < 0) | (a >= n_actions))[m].any()):
        raise ValueError(f"rollouts.tokens: action ids must lie in [0, {n_actions - 1}] for this model")
    return o.clamp(0, n_obs - 1), a.clamp(0, n_actions - 1)


def _counts(rollouts: Rollouts, n_obs: int, n_actions: int) -> torch.Tensor:
    """(B, n_obs * n_actions) float64: how often each trajectory played each (observation, action)."""
    o, a = _obs_actions(rollouts, n_obs, n_actions)
    idx = o * n_actions + a
    C = torch.zeros(rollouts.batch_size, n_obs * n_actions, dtype=torch.float64)
    C.scatter_add_(1, idx, rollouts.mask.to(torch.float64))
    return C


def policy_logprobs(policy, rollouts: Rollouts) -> torch.Tensor:
    """log pi(a_t | o_t) of every taken action under a tabular ``policy``, (B, T) float64, 0 off-mask.

    ``policy`` needs ``log_probs()`` (an (n_obs, n_actions) table), e.g. a
    ``TabularSoftmaxPolicy``; for ITPO pass the current policy and a frozen copy taken before
    training (``copy.deepcopy(policy)``)."""
    table = getattr(policy, "log_probs", None)
    if not callable(table):
        raise TypeError("policy: expected a tabular policy with log_probs() -> (n_obs, n_actions)")
    lp = table().detach().to(torch.float64)
    o, a = _obs_actions(rollouts, lp.shape[0], lp.shape[1])
    return torch.where(rollouts.mask, lp[o, a], torch.zeros((), dtype=torch.float64))


def preference_pairs(rollouts: Rollouts, outcome=None, *, max_pairs: int | None = None,
                     seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) row indices: every pair of trajectories of one group (one task) whose
    outcomes differ, the better one chosen. ``max_pairs`` keeps a seeded random subset."""
    z = rollouts.scores if outcome is None else as_tensor("outcome", outcome)
    z = z.to(torch.float64).reshape(-1)
    check_shape("outcome", z, (rollouts.batch_size,))
    check_finite("outcome", z)
    g = rollouts.group_ids
    better = (g[:, None] == g[None, :]) & (z[:, None] > z[None, :])
    chosen, rejected = better.nonzero(as_tuple=True)
    if max_pairs is not None:
        max_pairs = check_int("max_pairs", max_pairs, low=1)
        if chosen.numel() > max_pairs:
            keep = torch.randperm(chosen.numel(), generator=torch.Generator().manual_seed(seed))[:max_pairs]
            chosen, rejected = chosen[keep], rejected[keep]
    return chosen, rejected


class ImplicitStepRewardModel:
    """iStar's implicit step reward model, tabular over (observation, action).

        r_phi(o, a) = beta * (log pi_phi(a | o) - log pi_ref(a | o))

    pi_phi is a softmax table initialised at the reference's logits ``ref_logits`` (the policy
    that sampled the data, as iStar initialises its PRM from the policy), so every step reward
    starts at 0. ``fit`` minimises the trajectory-level DPO loss over preference pairs (w better
    than l, same task):

        L = - mean_pairs log sigmoid( sum_{t in w} r_phi(o_t, a_t) - sum_{t in l} r_phi(o_t, a_t) )
            + l2 * ||phi - phi_ref||^2

    with Adam for ``steps`` full-batch steps; ``l2`` keeps the table finite when the pairs are
    separable (they usually are: DPO alone would push the margins to infinity). ``fit_info``
    records the number of pairs, the final loss and the fit time. ``step_rewards(rollouts)`` (also
    ``model(rollouts)``) gives r_phi at every played turn, (B, T) float64, 0 off-mask: the
    ``step_rewards`` argument of ``labkit.credit.implicit.istar``.
    """

    def __init__(self, ref_logits, *, beta: float = 0.1, l2: float = 1e-3):
        ref = as_tensor("ref_logits", ref_logits).detach().to(torch.float64)
        if ref.dim() != 2:
            raise ValueError(f"ref_logits: expected an (n_obs, n_actions) table, got shape {tuple(ref.shape)}")
        check_finite("ref_logits", ref)
        self.beta = check_number("beta", beta, low=0.0, low_open=True)
        self.l2 = check_number("l2", l2, low=0.0)
        self.ref_logits = ref
        self.logits = ref.clone()
        self.fit_info: dict = {}

    @classmethod
    def for_policy(cls, policy, **kw) -> "ImplicitStepRewardModel":
        """A model whose reference is ``policy``'s current table (``policy.logits``)."""
        logits = getattr(policy, "logits", None)
        if logits is None:
            raise TypeError("policy: expected a tabular policy with a .logits table")
        return cls(logits, **kw)

    @property
    def table(self) -> torch.Tensor:
        """r_phi(o, a) for every observation and action, (n_obs, n_actions)."""
        return self.beta * (torch.log_softmax(self.logits, -1) - torch.log_softmax(self.ref_logits, -1))

    def fit(self, rollouts: Rollouts, outcome=None, *, steps: int = 200, lr: float = 0.1,
            max_pairs: int | None = 20000, seed: int = 0) -> "ImplicitStepRewardModel":
        steps = check_int("steps", steps, low=0)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        t0 = time.perf_counter()
        n_obs, n_act = self.ref_logits.shape
        C = _counts(rollouts, n_obs, n_act)
        w, l = preference_pairs(rollouts, outcome, max_pairs=max_pairs, seed=seed)
        D = C[w] - C[l]  # a pair's margin is linear in the table: D @ r
        phi = self.ref_logits.clone().requires_grad_(True)
        lref = torch.log_softmax(self.ref_logits, -1)
        opt = torch.optim.Adam([phi], lr=lr)
        loss = torch.zeros((), dtype=torch.float64)
        if D.shape[0] > 0:
            for _ in range(steps):
                r = self.beta * (torch.log_softmax(phi, -1) - lref)
                loss = -torch.nn.functional.logsigmoid(D @ r.reshape(-1)).mean() \
                    + self.l2 * ((phi - self.ref_logits) ** 2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.logits = phi.detach()
        self.fit_info = {"pairs": int(D.shape[0]), "loss": float(loss.detach()), "steps": steps,
                         "seconds": time.perf_counter() - t0}
        return self

    def step_rewards(self, rollouts: Rollouts) -> torch.Tensor:
        n_obs, n_act = self.ref_logits.shape
        o, a = _obs_actions(rollouts, n_obs, n_act)
        return torch.where(rollouts.mask, self.table[o, a], torch.zeros((), dtype=torch.float64))

    __call__ = step_rewards


PROGRESS_KINDS = ("tabular", "mlp")


class ProgressEstimator:
    """SPA-RL's progress estimator: a contribution c per turn whose sum over a trajectory fits
    the outcome,

        min  sum_i ( sum_{t in traj i} c(x_t) - R_i )^2

    ``kind="tabular"`` (default): x_t = (o_t, a_t), c a table over observation x action, solved
    in closed form by ridge least squares on the trajectories' (observation, action) counts
    (``ridge`` on the table; pairs never played stay 0). ``kind="mlp"``: x_t = one-hot o_t,
    one-hot a_t and t / max_turns, c a two-layer MLP (``hidden`` units, seeded) trained with
    Adam; it can tell early turns from late ones, the table cannot. The progress after turn t is
    P_t = sum_{k <= t} c_k (``progress``). ``contributions(rollouts)`` (also ``model(rollouts)``)
    gives c at every played turn, (B, T) float64, 0 off-mask: the ``contributions`` argument of
    ``labkit.credit.redistribution.spa_rl``. ``fit_info``: training mean squared error of the
    summed contributions against the outcome, the outcome's variance, the fit time.
    """

    def __init__(self, n_obs: int, n_actions: int, *, kind: str = "tabular", ridge: float = 1e-2,
                 hidden: int = 32, max_turns: int | None = None, seed: int = 0):
        self.n_obs = check_int("n_obs", n_obs, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        if kind not in PROGRESS_KINDS:
            raise ValueError(f"kind: expected one of {PROGRESS_KINDS}, got {kind!r}")
        self.kind = kind
        self.ridge = check_number("ridge", ridge, low=0.0)
        self.hidden = check_int("hidden", hidden, low=1)
        self.max_turns = None if max_turns is None else check_int("max_turns", max_turns, low=1)
        self.seed = check_int("seed", seed)
        self.table = torch.zeros(n_obs, n_actions, dtype=torch.float64)
        self.net = None
        self.fit_info: dict = {}

    @classmethod
    def for_env(cls, env, **kw) -> "ProgressEstimator":
        """Sized for a ToolWorld-like env (``n_obs``, ``n_actions``, ``max_turns``)."""
        kw.setdefault("max_turns", getattr(env, "max_turns", None))
        return cls(env.n_obs, env.n_actions, **kw)

    def _features(self, rollouts: Rollouts) -> torch.Tensor:
        o, a = _obs_actions(rollouts, self.n_obs, self.n_actions)
        T = self.max_turns or rollouts.horizon
        t = rollouts.turn_ids.clamp(min=0).to(torch.float64) / T
        return torch.cat([torch.nn.functional.one_hot(o, self.n_obs).to(torch.float64),
                          torch.nn.functional.one_hot(a, self.n_actions).to(torch.float64), t[..., None]],
                         -1).to(torch.float32)  # the MLP runs in float32: twice as fast on CPU

    def fit(self, rollouts: Rollouts, outcome=None, *, steps: int = 200, lr: float = 0.02) -> "ProgressEstimator":
        steps = check_int("steps", steps, low=0)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        z = rollouts.scores if outcome is None else as_tensor("outcome", outcome)
        z = z.to(torch.float64).reshape(-1)
        check_shape("outcome", z, (rollouts.batch_size,))
        check_finite("outcome", z)
        t0 = time.perf_counter()
        if self.kind == "tabular":
            C = _counts(rollouts, self.n_obs, self.n_actions)
            played = C.sum(0) > 0
            X = C[:, played]
            A = X.T @ X + self.ridge * torch.eye(X.shape[1], dtype=torch.float64)
            w = torch.linalg.solve(A, X.T @ z) if X.shape[1] else torch.zeros(0, dtype=torch.float64)
            flat = torch.zeros(self.n_obs * self.n_actions, dtype=torch.float64)
            flat[played] = w
            self.table = flat.reshape(self.n_obs, self.n_actions)
        else:
            torch.manual_seed(self.seed)
            d = self.n_obs + self.n_actions + 1
            self.net = torch.nn.Sequential(torch.nn.Linear(d, self.hidden), torch.nn.Tanh(),
                                           torch.nn.Linear(self.hidden, 1))
            X, m = self._features(rollouts), rollouts.mask.to(torch.float32)
            opt = torch.optim.Adam(self.net.parameters(), lr=lr)
            for _ in range(steps):
                c = self.net(X).squeeze(-1) * m
                loss = ((c.sum(1) - z.float()) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            mse = float(((self.contributions(rollouts).sum(1) - z) ** 2).mean())
        self.fit_info = {"mse": mse, "outcome_var": float(z.var(unbiased=False)) if z.numel() else 0.0,
                         "seconds": time.perf_counter() - t0}
        return self

    @torch.no_grad()
    def contributions(self, rollouts: Rollouts) -> torch.Tensor:
        if self.kind == "tabular" or self.net is None:
            o, a = _obs_actions(rollouts, self.n_obs, self.n_actions)
            c = self.table[o, a]
        else:
            c = self.net(self._features(rollouts)).squeeze(-1).to(torch.float64)
        return torch.where(rollouts.mask, c, torch.zeros((), dtype=torch.float64))

    __call__ = contributions

    def progress(self, rollouts: Rollouts) -> torch.Tensor:
        """P_t = sum_{k <= t} c_k, the estimated progress after every turn, (B, T), 0 off-mask."""
        return torch.where(rollouts.mask, self.contributions(rollouts).cumsum(1), 0.0)
