"""BifurcationChain: a token-level MDP where only a few positions decide the outcome.

A trajectory is ``horizon`` tokens long. At most positions the token is routine: whatever the
policy emits, nothing changes. At the ``bifurcations`` positions one token is correct; emitting
any other token dooms the episode. The outcome reward ``success_reward`` arrives after the last
token if every bifurcation was passed, 0 otherwise — the sparse, delayed signal of a
chain-of-thought graded only on its answer (bsuite's umbrella chain, with the deciding positions
placed where you like and possibly several of them).

Knobs that make credit assignment harder:
* ``noise_std``: zero-mean Gaussian distractor reward after every token (pure noise),
* ``slip``: with this probability the environment executes a uniformly random token instead of
  the one the policy chose (stochastic transitions: a correct choice can still fail).

Steps. ``step_len`` m cuts a trajectory into steps of m tokens (``step_ids`` t // m; the last step
may be shorter), the reasoning steps of a chain of thought. Step-level methods fork there: VinePPO's
vines (``vine_value_fn``) start only at a step's first token, so with m = 1 (the default: every
token its own step) they fork T times per episode and cost ~ T^2 / 2 tokens, with m about T^2 / (2 m).

State: (position t, still-on-track flag), index ``2 * t + ok``; the policy sees the state.
Exact truth: ``env.mdp()`` is the tabular MDP for ``labkit.envs.tabular.exact_truth``.
"""
from __future__ import annotations

from typing import Sequence

import torch

from labkit.core.checks import as_tensor, check_int, check_number, check_policy
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.envs.tabular import TabularMDP

TOKEN_NAMES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class BifurcationChain:
    """See the module docstring. ``seed`` fixes which token is correct at each bifurcation."""

    MAX_HORIZON = 1000

    def __init__(self, horizon: int = 20, bifurcations: Sequence[int] | None = None, *,
                 n_bifurcations: int = 1, n_actions: int = 2, noise_std: float = 0.0,
                 slip: float = 0.0, success_reward: float = 1.0, step_len: int = 1, seed: int = 0):
        self.horizon = check_int("horizon", horizon, low=1, high=self.MAX_HORIZON)
        self.step_len = check_int("step_len", step_len, low=1, high=self.horizon)
        self.n_actions = check_int("n_actions", n_actions, low=2, high=len(TOKEN_NAMES))
        self.noise_std = check_number("noise_std", noise_std, low=0.0)
        self.slip = check_number("slip", slip, low=0.0, high=1.0)
        self.success_reward = check_number("success_reward", success_reward)
        if bifurcations is None:
            k = check_int("n_bifurcations", n_bifurcations, low=0, high=self.horizon)
            bifurcations = self.spaced_positions(self.horizon, k)
        if isinstance(bifurcations, (str, bytes)) or not hasattr(bifurcations, "__iter__"):
            raise TypeError(f"bifurcations: expected a list of positions (ints in [0, {self.horizon - 1}]), "
                            f"got {bifurcations!r}")
        if isinstance(bifurcations, torch.Tensor):
            bifurcations = bifurcations.tolist()
        # check each entry, so a float position is refused rather than truncated by int()
        positions = sorted(check_int(f"bifurcations[{i}]", p) for i, p in enumerate(bifurcations))
        if len(set(positions)) != len(positions):
            raise ValueError(f"bifurcations: positions must be distinct, got {list(bifurcations)}")
        if positions and (positions[0] < 0 or positions[-1] >= self.horizon):
            raise ValueError(f"bifurcations: positions must lie in [0, {self.horizon - 1}], got {positions}")
        self.bifurcations = tuple(positions)
        g = torch.Generator().manual_seed(check_int("seed", seed))
        self.correct = torch.full((self.horizon,), -1, dtype=torch.long)
        if positions:
            self.correct[list(positions)] = torch.randint(self.n_actions, (len(positions),), generator=g)
        self.token_names = list(TOKEN_NAMES[: self.n_actions])

    @staticmethod
    def spaced_positions(horizon: int, k: int) -> tuple[int, ...]:
        """k positions spread evenly over the chain (the centre of k equal slices)."""
        return tuple(int((i + 0.5) * horizon / k) for i in range(k))

    def __repr__(self) -> str:
        # step_len only when it is not the default, so a default chain's repr (stored in every
        # batch's info) is what it always was
        steps = f", step_len={self.step_len}" if self.step_len != 1 else ""
        return (f"BifurcationChain(horizon={self.horizon}, bifurcations={list(self.bifurcations)}, "
                f"n_actions={self.n_actions}, noise_std={self.noise_std}, slip={self.slip}{steps})")

    def step_ids(self, n: int) -> torch.Tensor | None:
        """The (n, T) step labels t // ``step_len`` of ``n`` full trajectories, or None for
        ``step_len`` 1, where ``Rollouts`` builds the same one-token steps itself."""
        n = check_int("n", n, low=1)
        if self.step_len == 1:
            return None
        return (torch.arange(self.horizon) // self.step_len).expand(n, -1).clone()

    # ---- tabular description
    @property
    def n_states(self) -> int:
        return 2 * self.horizon

    def state_index(self, t: int | torch.Tensor, ok: int | torch.Tensor):
        return 2 * t + ok

    def pass_probability(self) -> torch.Tensor:
        """P(stay on track | position t, chosen token a), (T, A), from the slip model."""
        p = torch.ones(self.horizon, self.n_actions, dtype=torch.float64)
        for t in self.bifurcations:
            hit = torch.zeros(self.n_actions, dtype=torch.float64)
            hit[self.correct[t]] = 1.0
            p[t] = (1 - self.slip) * hit + self.slip / self.n_actions
        return p

    def mdp(self) -> TabularMDP:
        """The exact tabular MDP (states 2t + ok; the episode ends after position T - 1)."""
        T, A, S = self.horizon, self.n_actions, self.n_states
        P = torch.zeros(S, A, S, dtype=torch.float64)
        R = torch.zeros(S, A, dtype=torch.float64)
        stay = self.pass_probability()
        for t in range(T):
            on, off = self.state_index(t, 1), self.state_index(t, 0)
            if t + 1 < T:
                P[on, :, self.state_index(t + 1, 1)] = stay[t]
                P[on, :, self.state_index(t + 1, 0)] = 1 - stay[t]
                P[off, :, self.state_index(t + 1, 0)] = 1.0
            else:  # last token: the outcome is paid and the episode ends
                R[on] = self.success_reward * stay[t]
        start = torch.zeros(S, dtype=torch.float64)
        start[self.state_index(0, 1)] = 1.0
        return TabularMDP(P, R, start)

    # ---- sampling
    @torch.no_grad()
    def sample(self, policy, n: int, *, group_size: int | None = None, seed: int = 0) -> Rollouts:
        """Roll out ``n`` trajectories of ``policy``: a softmax policy whose ``logits`` table is
        (n_states, n_actions), a TabularSoftmaxPolicy or a SharedFeaturePolicy (``shared_policy``).

        ``rollouts.truth["decisive"]`` (B, T) marks the bifurcations each trajectory reached while
        still on track — the positions whose choice decided its outcome (after a failure, later
        bifurcations no longer matter).
        ``group_size`` splits the batch into groups of that size (group ids 0, 0, ..., 1, 1, ...);
        by default all trajectories form one group (they all start from the same prompt).
        ``step_ids`` are the chain's steps of ``step_len`` tokens (``step_ids``).
        """
        n = check_int("n", n, low=1)
        seed = check_int("seed", seed)
        if not isinstance(getattr(policy, "logits", None), torch.Tensor):
            raise TypeError(f"policy: expected a TabularSoftmaxPolicy over ({self.n_states}, {self.n_actions}) "
                            f"(states, actions), e.g. TabularSoftmaxPolicy(chain.n_states, chain.n_actions); "
                            f"got {type(policy).__name__}")
        check_policy("policy", policy)
        if tuple(policy.logits.shape) != (self.n_states, self.n_actions):
            raise ValueError(f"policy: logits have shape {tuple(policy.logits.shape)}, this chain "
                             f"needs ({self.n_states}, {self.n_actions})")
        if group_size is None:
            group_ids = torch.zeros(n, dtype=torch.long)
        else:
            group_size = check_int("group_size", group_size, low=1)
            if n % group_size:
                raise ValueError(f"group_size: {group_size} does not divide n = {n}")
            group_ids = torch.arange(n) // group_size
        g = torch.Generator().manual_seed(seed)
        T = self.horizon
        tokens = torch.zeros(n, T, dtype=torch.long)
        states = torch.zeros(n, T, dtype=torch.long)
        logprobs = torch.zeros(n, T, dtype=torch.float64)
        entropies = torch.zeros(n, T, dtype=torch.float64)
        executed = torch.zeros(n, T, dtype=torch.long)
        ok = torch.ones(n, dtype=torch.long)
        decisive = torch.zeros(n, T, dtype=torch.bool)
        table = policy.log_probs()
        for t in range(T):
            s = self.state_index(t, ok)
            a, lp, ent = policy.sample(s, g, table)
            tokens[:, t], states[:, t], logprobs[:, t], entropies[:, t] = a, s, lp, ent
            slipped = torch.rand(n, generator=g, dtype=torch.float64) < self.slip
            random_tok = torch.randint(self.n_actions, (n,), generator=g)
            done = torch.where(slipped, random_tok, a)
            executed[:, t] = done
            if self.correct[t] >= 0:
                decisive[:, t] = ok.bool()  # the choice here still decides the outcome
                ok = ok * (done == self.correct[t]).long()
        rewards = torch.zeros(n, T, dtype=torch.float64)
        rewards[:, -1] = self.success_reward * ok
        if self.noise_std > 0:
            rewards += self.noise_std * torch.randn(n, T, generator=g, dtype=torch.float64)
        names = self.token_names
        text = [[names[i] for i in row] for row in tokens.tolist()]
        return Rollouts(
            tokens=tokens, mask=torch.ones(n, T, dtype=torch.bool), rewards=rewards,
            group_ids=group_ids, logprobs=logprobs, entropies=entropies, states=states, text=text,
            step_ids=self.step_ids(n),
            truth={"bifurcations": self.bifurcations, "decisive": decisive, "executed": executed,
                   "success": ok.bool()},
            info={"env": repr(self)},
        )

    # ---- vines: continuations from arbitrary states (what Monte Carlo credit methods need)
    @torch.no_grad()
    def continuation_returns(self, policy, states, k: int, *, seed: int = 0) -> tuple[torch.Tensor, int]:
        """Mean return of ``k`` fresh continuations from each state in ``states`` (N,), and the
        number of environment steps spent. A continuation from state (t, ok) re-runs positions
        t..T-1 with ``policy`` (the token at t included), so its expected return is V(state)."""
        check_policy("policy", policy)
        k = check_int("k", k, low=1)
        states = as_tensor("states", states).long().reshape(-1)
        if states.numel() == 0:
            return torch.zeros(0, dtype=torch.float64), 0
        if bool(((states < 0) | (states >= self.n_states)).any()):
            raise ValueError(f"states: indices must lie in [0, {self.n_states - 1}]")
        g = torch.Generator().manual_seed(check_int("seed", seed))
        t0 = (states // 2).repeat_interleave(k)
        ok = (states % 2).repeat_interleave(k)
        total = torch.zeros(len(t0), dtype=torch.float64)
        probs = policy.probs().detach()
        for t in range(int(t0.min()), self.horizon):
            active = t0 <= t
            a = torch.multinomial(probs[self.state_index(t, ok)], 1, generator=g).squeeze(-1)
            slipped = torch.rand(len(a), generator=g, dtype=torch.float64) < self.slip
            done = torch.where(slipped, torch.randint(self.n_actions, (len(a),), generator=g), a)
            if self.correct[t] >= 0:
                ok = torch.where(active, ok * (done == self.correct[t]).long(), ok)
            if self.noise_std > 0:
                noise = self.noise_std * torch.randn(len(a), generator=g, dtype=torch.float64)
                total += torch.where(active, noise, 0.0)
        total += self.success_reward * ok
        env_steps = int((self.horizon - t0).sum())
        return total.view(-1, k).mean(1), env_steps

    def _vines(self, policy, starts: torch.Tensor, where: torch.Tensor, k: int, seed: int) -> tuple[torch.Tensor, Cost]:
        """V at the positions ``where`` marks (shape of ``where``, float64, 0 elsewhere) from k
        continuations re-run from ``starts`` (the recorded states there, in order), with the cost."""
        means, env_steps = self.continuation_returns(policy, starts, k, seed=seed)
        values = torch.zeros(where.shape, dtype=torch.float64)
        values[where] = means
        n = int(starts.numel()) * k
        return values, Cost(policy_forwards=n, policy_tokens=env_steps, env_steps=env_steps, env_resets=n)

    def vine_value_fn(self, policy, *, seed: int = 0):
        """A ``value_fn`` for ``labkit.credit.mc``: V at the start of every step of the rollouts
        (the chain's steps of ``step_len`` tokens), each the mean of k continuations re-run from
        that step's first state; the Cost counts those vines only, every token they run."""
        check_policy("policy", policy)

        def value_fn(rollouts: Rollouts, k: int) -> tuple[torch.Tensor, Cost]:
            if rollouts.states is None:
                raise ValueError("rollouts.states: vines restart from recorded states")
            first_state, present = rollouts.view(rollouts.states, "step", "first")
            return self._vines(policy, first_state.long()[present], present, k, seed)
        return value_fn

    def cut_value_fn(self, policy, *, seed: int = 0):
        """A ``CutValueFn`` for SPO (``labkit.credit.mc.spo``): V of the prefix before every cut
        position, the mean of k continuations re-run from the state recorded there."""
        check_policy("policy", policy)

        def cut_value_fn(rollouts: Rollouts, cuts: torch.Tensor, k: int) -> tuple[torch.Tensor, Cost]:
            if rollouts.states is None:
                raise ValueError("rollouts.states: vines restart from recorded states")
            if tuple(cuts.shape) != tuple(rollouts.mask.shape):
                raise ValueError(f"cuts: expected shape {tuple(rollouts.mask.shape)}, got {tuple(cuts.shape)}")
            where = cuts.bool() & rollouts.mask
            return self._vines(policy, rollouts.states.long()[where], where, k, seed)
        return cut_value_fn
