"""Exact truth of a ToolWorld: the time-indexed DP (``backward_induction``, which
``ToolWorld.truth`` runs), its result ``ToolTruth``, and the exact hindsight distribution HCA is
scored against.

Everything here may read the hidden state: it is the oracle side of the lab. Estimators never
import it; a caller passes what they need (``hindsight=exact_hindsight(...)``, ``truth=...``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.core.checks import as_tensor, check_ids_in_range, check_in_range, check_pairing, check_turn_columns
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.turns import binary_outcome, turn_hidden_states, turn_table


@dataclass(eq=False)
class ToolTruth:
    """Exact quantities of a ToolWorld under one fixed policy (float64, detached).

    V (T + 1, N, 2, n_obs): V[t, b, f, o] expected return-to-go before turn t; V[T] = 0.
    Q (T, N, 2, A): Q[t, b, f, a] (the observation only selects the action, so Q ignores it).
    J: expected return of a fresh task (b uniform); task_values (N,) the same per bug location.
    grad (n_obs, A): exact dJ/dlogits. occupancy (T, N, 2, n_obs): P(turn t played in that state).
    pi (n_obs, A): the policy the truth was computed for. gamma: the discount per turn (1 by
    default: the lab's worlds are undiscounted; POAD's lesson in notebook 05 discounts).
    ``sizes`` is what it was built for; the per-position methods (``value``, ``advantage``, ...)
    refuse, naming ``rollouts``, rollouts of a ToolWorld of other sizes or another horizon.
    """

    V: torch.Tensor
    Q: torch.Tensor
    J: float
    task_values: torch.Tensor
    grad: torch.Tensor
    occupancy: torch.Tensor
    pi: torch.Tensor
    n_obs: int
    gamma: float = 1.0

    @property
    def A(self) -> torch.Tensor:
        """A[t, b, f, o, a] = Q[t, b, f, a] - V[t, b, f, o], (T, N, 2, n_obs, A)."""
        return self.Q[:, :, :, None, :] - self.V[:-1, :, :, :, None]

    @property
    def sizes(self) -> dict[str, int]:
        """What this truth was built for: the world's ``max_turns`` (the horizon), ``n_files``,
        ``n_obs`` and ``n_actions``, named as ``ToolWorld`` names them (``check_pairing``)."""
        T, N, _, A = self.Q.shape
        return {"max_turns": int(T), "n_files": int(N), "n_obs": int(self.n_obs), "n_actions": int(A)}

    def policy_gradient_theorem(self) -> torch.Tensor:
        """Closed-form gradient sum_{t,b,f} gamma^t d_t(b, f, o) pi(a | o) A_t(b, f, o, a), (n_obs, A)."""
        weight = self.gamma ** torch.arange(self.Q.shape[0], dtype=torch.float64)
        return (weight[:, None, None, None, None] * self.occupancy[..., None] * self.pi * self.A).sum((0, 1, 2))

    def _index(self, rollouts: Rollouts):
        check_rollouts(rollouts, "ToolWorld.sample")
        hidden = rollouts.truth.get("hidden_states")
        if not isinstance(hidden, torch.Tensor) or tuple(hidden.shape) != tuple(rollouts.mask.shape):
            raise ValueError("rollouts.truth['hidden_states']: missing or mis-shaped; sample with ToolWorld.sample")
        T, N, _, A = self.Q.shape
        t = rollouts.turn_ids
        if bool((t >= T).any()):
            raise ValueError(f"rollouts.turn_ids: turns beyond this truth's max_turns ({T})")
        m = rollouts.mask
        # ToolWorld.sample gives one column per possible turn: rollouts of a world with another
        # horizon would read values computed for a different number of turns left
        check_turn_columns("rollouts", rollouts, T, owner="this truth",
                           hint="score rollouts sampled from the ToolWorld this truth was computed for")
        # Rollouts from another ToolWorld (other n_files) would index the tables with a wrong
        # stride and return plausible-looking numbers; refuse anything that does not decode
        # consistently under this truth's sizes.
        owner = f"this truth: {N} files, {self.n_obs} observations, {A} actions"
        check_ids_in_range("rollouts", hidden, N * 2 * self.n_obs, where=m, what="hidden states", owner=owner)
        check_ids_in_range("rollouts", rollouts.tokens, A, where=m, what="actions (tokens)", owner=owner)
        h = hidden.clamp(min=0)
        o = h % self.n_obs
        f = (h // self.n_obs) % 2
        b = h // (2 * self.n_obs)
        bug = rollouts.truth.get("bug")
        off_obs = rollouts.states is not None and bool((rollouts.states[m] != o[m]).any())
        off_bug = (isinstance(bug, torch.Tensor) and tuple(bug.shape) == (rollouts.batch_size,)
                   and bool((b != bug[:, None])[m].any()))
        if off_obs or off_bug:
            what = "states" if off_obs else "truth['bug']"
            raise ValueError(f"rollouts: {what} disagree with the hidden states "
                             f"decoded for this truth ({N} files, {self.n_obs} observations): the rollouts come "
                             f"from another ToolWorld (or a token view); score rollouts sampled from the "
                             f"ToolWorld this truth was computed for")
        return t.clamp(min=0), b, f, o, rollouts.tokens.clamp(0, A - 1)

    def hidden_q(self, turn: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Exact Q_t(s, .) of every action at hidden-state indices ``hidden`` before turns ``turn``
        (same shapes), (..., A): what the exact modes of C3 / CCPO compare against. Turns past
        the horizon read the last turn's table; negative turns and hidden indices outside this
        truth's tables are refused by name."""
        h = as_tensor("hidden", hidden).long()
        t = as_tensor("turn", turn).long()
        T, N = self.Q.shape[:2]
        check_ids_in_range("hidden", h, N * 2 * self.n_obs, what="hidden-state indices",
                           owner=f"this truth: {N} files, {self.n_obs} observations")
        check_in_range("turn", t, low=0, what="turns")  # any turn >= 0: later ones read the last table
        bug, fixed = h // (2 * self.n_obs), (h // self.n_obs) % 2
        return self.Q[t.clamp(max=T - 1), bug, fixed]

    def value(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact V_t(s_t) before every played turn, (B, T), 0 off-mask."""
        t, b, f, o, _ = self._index(rollouts)
        return torch.where(rollouts.mask, self.V[t, b, f, o], 0.0)

    def q_value(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact Q_t(s_t, a_t) of the action taken, (B, T), 0 off-mask."""
        t, b, f, _, a = self._index(rollouts)
        return torch.where(rollouts.mask, self.Q[t, b, f, a], 0.0)

    def advantage(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact A_t(s_t, a_t) = Q - V of the action taken, (B, T), 0 off-mask."""
        return self.q_value(rollouts) - self.value(rollouts)

    def next_value(self, rollouts: Rollouts) -> torch.Tensor:
        """V_{t+1}(s_{t+1}) after every played turn (0 after submit or the last turn), (B, T)."""
        v = self.value(rollouts)
        nxt = torch.zeros_like(v)
        nxt[:, :-1] = torch.where(rollouts.mask[:, 1:], v[:, 1:], 0.0)
        return torch.where(rollouts.mask, nxt, 0.0)

    def skill_luck(self, rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor]:
        """(skill, luck), each (B, T): skill_t = A_t(s_t, a_t), what the choice was worth;
        luck_t = r_t + gamma V_{t+1}(s_{t+1}) - Q_t(s_t, a_t), what the tool's random answer added.
        V_0(s_0) + sum_t gamma^t (skill_t + luck_t) = realised (discounted) return, per trajectory."""
        q = self.q_value(rollouts)
        skill = q - self.value(rollouts)
        r = rollouts.rewards.to(torch.float64)
        luck = torch.where(rollouts.mask, r + self.gamma * self.next_value(rollouts) - q, 0.0)
        return skill, luck

    def step_value_fn(self):
        """A ``value_fn`` for ``labkit.credit.mc``: exact V at every turn (ignores k; zero cost)."""
        def value_fn(rollouts: Rollouts, k: int):
            return rollouts.view(self.value(rollouts), "step", "first")[0], Cost()
        return value_fn


# --------------------------------------------------------------------------- success probability (IGPO's p_k)
def success_prob(env, truth: ToolTruth, rollouts: Rollouts) -> torch.Tensor:
    """The exact probability of success before the first turn and after every turn, (B, N + 1):
    an oracle that can stand in for IGPO's belief p_k.

    p_0 = V(s_0), p_k = V(s_k) after turn k (``truth``: exact DP under the sampling policy), and
    after a trajectory's last turn p = its outcome (1 if it succeeded, else 0); N is the batch's
    largest number of turns and columns past a trajectory's end repeat its outcome. V is a
    probability only when turns and wrong submits cost nothing and success pays 1, so ``env``
    must have step_cost = 0, wrong_submit = 0 and success_reward = 1 (a ValueError naming
    ``env`` otherwise); ``rollouts`` must be ToolWorld's (one position per turn, truth['success']).
    A ``truth`` computed for a ToolWorld of other sizes than ``env`` is refused naming ``truth``.
    """
    for name, want in (("step_cost", 0.0), ("wrong_submit", 0.0), ("success_reward", 1.0)):
        if float(getattr(env, name)) != want:
            raise ValueError(f"env: {name} must be {want:g} for V to be a success probability, "
                             f"got {getattr(env, name)}")
    check_pairing("truth", truth.sizes, env, sides=("this truth", "env"),
                  hint="compute it with env.truth(policy) for the env the rollouts came from")
    check_rollouts(rollouts)
    if "success" not in rollouts.truth:
        raise ValueError("rollouts: need truth['success'] (sample with ToolWorld.sample)")
    if bool((rollouts.turn_ids != torch.where(rollouts.mask, torch.arange(rollouts.horizon), -1)).any()):
        raise ValueError("rollouts: expected one position per turn, numbered 0, 1, ... (ToolWorld rollouts)")
    v, after = truth.value(rollouts), truth.next_value(rollouts)
    n_turns = rollouts.mask.sum(1)
    N = int(n_turns.max())
    outcome = rollouts.truth["success"].to(torch.float64)
    p = outcome[:, None].repeat(1, N + 1)
    p[:, 0] = v[:, 0]
    # after turn k < n the episode goes on: p_k is the exact value of the state it reached
    inside = torch.arange(1, N + 1)[None, :] < n_turns[:, None]
    p[:, 1:] = torch.where(inside, after[:, :N], p[:, 1:])
    p[torch.arange(rollouts.batch_size), n_turns] = outcome
    return p


# --------------------------------------------------------------------------- exact hindsight (HCA oracle)
def backward_induction(world, policy, *, start_obs: int, gamma: float = 1.0) -> ToolTruth:
    """Exact V, Q, A, J and dJ/dlogits of ``world`` under ``policy``, by backward induction over turns.

    ``world`` supplies its one-turn dynamics (``kernel``, ``fixed_after``, ``expected_reward``),
    its sizes and ``occupancy(pi)``; ``start_obs`` is the observation every task starts from.
    Because the world's answers depend on (bug, fixed, observation) only, one sweep of T turns
    over that hidden state gives every Q_t and V_t; autograd through the sweep gives dJ/dlogits.
    ``gamma`` discounts once per turn: Q_t = r + gamma E[V_{t+1}].
    """
    N, T = world.n_files, world.max_turns
    K, f_after, R = world.kernel, world.fixed_after, world.expected_reward
    theta = policy.logits.detach().to(torch.float64).clone().requires_grad_(True)
    pi = torch.softmax(theta, dim=-1)
    V_next = torch.zeros(N, 2, world.n_obs, dtype=torch.float64)  # V after the last turn
    Vs, Qs = [V_next], []
    for _ in range(T):
        # W[b, f', a]: expected value of the answer to action a when the flag is now f'.
        W = torch.einsum("bfao,bfo->bfa", K, V_next)
        Q = R + gamma * W.gather(1, f_after)                     # Q_t(b, f, a), independent of o
        V_next = torch.einsum("bfa,oa->bfo", Q, pi)      # V_t(b, f, o)
        Qs.append(Q)
        Vs.append(V_next)
    V = torch.stack(Vs[::-1])                            # (T + 1, N, 2, n_obs), V[T] = 0
    Q = torch.stack(Qs[::-1])                            # (T, N, 2, A)
    task_values = V[0, :, 0, start_obs]
    J = task_values.mean()                               # tasks draw b uniformly
    (grad,) = torch.autograd.grad(J, theta)
    with torch.no_grad():
        occupancy = world.occupancy(pi.detach())
    return ToolTruth(V=V.detach(), Q=Q.detach(), J=float(J.detach()), task_values=task_values.detach(),
                     grad=grad, occupancy=occupancy, pi=pi.detach(), n_obs=world.n_obs, gamma=float(gamma))


def exact_hindsight(env, policy, rollouts: Rollouts, hidden_states: torch.Tensor, outcome=None) -> torch.Tensor:
    """Exact h(a_t | s_t, Z) of every turn's action, (B, N), from the DP (uses the HIDDEN state).

    For the binary outcome Z = success, Bayes' rule on the exact success probabilities gives

        h(a | s, Z=1) = pi(a | o) P(success | s, a) / P(success | s)  = pi Q_s / V_s
        h(a | s, Z=0) = pi(a | o) (1 - Q_s) / (1 - V_s)

    with s = (t, bug, fixed, o). Q_s, V_s are success probabilities: they come from the DP of a
    twin ToolWorld with the same tools and step_cost = 0, wrong_submit = 0, success_reward = 1,
    so this is exact for Z = the success flag whatever the env's rewards are. (Where Z is
    impossible from s, V_s = 0 with Z = 1 or V_s = 1 with Z = 0, h = pi: ratio 1.)
    ``hidden_states`` is the privileged input (``rollouts.truth["hidden_states"]``), passed
    explicitly. An oracle: no agent knows s; see ``labkit.learn.critics.LearnedHindsight`` for the realistic one.
    ``rollouts`` must come from ``env``: more turns than ``env.max_turns``, or (one position per
    turn) a horizon other than it, is refused naming ``rollouts``.
    """
    missing = [a for a in ("n_files", "mislead", "noise", "flaky", "decode_hidden", "truth") if not hasattr(env, a)]
    if missing:
        raise ValueError(f"env: exact hindsight needs a ToolWorld, got {type(env).__name__}")
    z = binary_outcome(rollouts, outcome)
    hs, present = turn_hidden_states(rollouts, hidden_states, env.n_hidden, "exact hindsight reads each turn's hidden state")
    twin = type(env)(env.n_files, max_turns=env.max_turns, mislead=env.mislead, noise=env.noise, flaky=env.flaky)
    truth = twin.truth(policy)
    if present.shape[1] > env.max_turns:
        raise ValueError(f"rollouts: more turns ({present.shape[1]}) than env.max_turns ({env.max_turns}); "
                         f"pass the ToolWorld the rollouts came from")
    check_turn_columns("rollouts", rollouts, env.max_turns, owner="env", hint="pass the ToolWorld the rollouts came from")
    obs, act, _ = turn_table(rollouts)
    b, f, o = env.decode_hidden(hs)
    t = torch.arange(present.shape[1]).expand_as(hs)
    q = truth.Q[t, b, f, act]
    v = truth.V[t, b, f, o]
    p = truth.pi[o, act]
    zz = z[:, None].expand_as(q)
    h1 = torch.where(v > 0, p * q / v.clamp(min=1e-300), p)
    h0 = torch.where(v < 1, p * (1 - q) / (1 - v).clamp(min=1e-300), p)
    return torch.where(present, torch.where(zz > 0, h1, h0).clamp(0.0, 1.0), 1.0)
