"""Counterfactual credit: what would the outcome have been had this turn's action been different?

Both estimators here answer by *intervention* on a turn: restore the hidden state the turn
started from (``env.rollout_from``, any environment with the ``labkit.core.protocols.Env``
methods, e.g. a ToolWorld), force an action, let the policy play on, and compare outcomes.
They differ in what they compare:

* C3 (arXiv 2603.06859): the taken action against context-matched alternatives drawn from the
  policy (the paper's leave-one-out baseline), each replayed under the same continuations
  ("fixed-continuation replay": the replays of every alternative share the tools' random
  numbers and the policy's later draws, the first continuation being the episode's own); the
  earlier re-sampling reading (realised return minus a fresh replay) is kept as
  ``mode="resample"``;
* CCPO (arXiv 2603.21563): the average treatment effect E[R | do(a_t)] - E_{a~pi} E[R | do(a)].

Each has an ``"exact"`` mode (the DP expectation of what the replays estimate, for tests)
and C3 a ``"learned"`` mode for environments that cannot be reset (a Q model fitted on rollouts).
Re-execution reads the hidden state, a privileged input: it is passed explicitly
(``hidden_states=rollouts.truth["hidden_states"]``), as the simulator's save-state would be.
Returns are returns-to-go from the turn on (the shared prefix cancels in every difference).
"""
from __future__ import annotations

from typing import Any, Protocol

import torch

from labkit.core.checks import (as_tensor, check_choice, check_int, check_pairing, check_probability_table,
                                check_turn_columns)
from labkit.credit.registry import register
from labkit.core.protocols import Env, HiddenStateTruth, require
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns
from labkit.core.turns import turn_hidden_states, turn_rewards, turn_table

C3_MODES = ("fixed", "resample", "learned", "exact")
CCPO_MODES = ("reexecute", "exact")
DEFAULTS = ("policy", "others", "think")
CHUNK = 200_000  # restored episodes per call of rollout_from (bounds memory)


def _turn_states(env, rollouts: Rollouts, hidden_states) -> tuple:
    """(hidden, state, obs, turn, action, present) of every turn, (B, N) each: ``state`` is the
    tuple ``env.decode_hidden`` splits the hidden state into (its last entry the observation)."""
    require("env", env, Env, "re-execution needs an environment that can restore a hidden state and play on")
    hs, present = turn_hidden_states(rollouts, hidden_states, env.n_hidden,
                                     "re-execution restores the hidden state of every turn (the save-state)")
    _, act, _ = turn_table(rollouts)
    state = tuple(env.decode_hidden(hs))
    turn = torch.arange(present.shape[1]).expand_as(hs)
    if present.shape[1] > env.max_turns:
        raise ValueError(f"rollouts: more turns ({present.shape[1]}) than env.max_turns ({env.max_turns})")
    check_turn_columns("rollouts", rollouts, env.max_turns, owner="env",
                       hint="pass the environment the rollouts came from")
    return hs, state, state[-1], turn, act, present


def _default_dist(default, pi: torch.Tensor, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    """d(a' | turn): the distribution of the replacement action per turn, (B, N, A)."""
    A = pi.shape[1]
    if isinstance(default, str):
        check_choice("default", default, DEFAULTS)
        if default == "think":
            d = torch.zeros(*obs.shape, A, dtype=torch.float64)
            d[..., 0] = 1.0
            return d
        d = pi[obs].clone()
        if default == "others":
            d.scatter_(-1, act[..., None], 0.0)
            tot = d.sum(-1, keepdim=True)
            d = torch.where(tot > 0, d / tot.clamp(min=1e-300), pi[obs])
        return d
    a = check_int("default", default, low=0, high=A - 1)
    d = torch.zeros(*obs.shape, A, dtype=torch.float64)
    d[..., a] = 1.0
    return d


def _policy_table(policy, pi) -> torch.Tensor:
    """The (n_obs, n_actions) policy table: ``pi`` checked to be one (non-negative rows summing
    to 1, ``check_probability_table``), else ``policy.probs()``."""
    if pi is not None:
        return check_probability_table("pi", as_tensor("pi", pi).detach())
    if policy is None:
        raise ValueError("policy: needed for its action probabilities (or pass pi=)")
    return policy.probs().detach().to(torch.float64)


def _exact_truth(truth, env, rollouts: Rollouts, policy, *, n_obs: int) -> torch.Tensor:
    """Check that ``truth`` (exact mode's oracle) belongs to this env, policy and these rollouts;
    return its policy table. Refused, naming ``truth``: no ``pi`` / ``hidden_q``; sizes (horizon,
    files, observations, actions) other than the env's; a policy table that is not a
    distribution per row, differs from ``policy.probs()`` or, on rollouts with one position per
    turn and logprobs, from the probabilities the rollouts were sampled with (1e-4: float32
    logprobs)."""
    require("truth", truth, HiddenStateTruth, "exact mode needs env.truth(policy) (e.g. a ToolTruth)")
    hint = "compute it with env.truth(policy) for the env and policy the rollouts came from"
    sizes = getattr(truth, "sizes", None)
    if isinstance(sizes, dict):
        check_pairing("truth", sizes, env, sides=("this truth", "env"), hint=hint)
    table = check_probability_table("truth.pi", truth.pi)
    if table.shape[0] < n_obs:
        raise ValueError(f"truth: its policy table has {table.shape[0]} rows, the rollouts see observation "
                         f"{n_obs - 1}; {hint}")
    if policy is not None and hasattr(policy, "probs"):
        check_pairing("truth", {"policy table": table}, {"policy table": policy.probs().detach()},
                      sides=("this truth", "policy"), hint=hint)
    obs, act, present = turn_table(rollouts)
    one_per_turn = bool((rollouts.mask.sum(1) == rollouts.n_turns).all())
    if rollouts.logprobs is not None and one_per_turn and bool(present.any()):
        lp, _ = rollouts.view(rollouts.logprobs.to(torch.float64), "turn", "first")
        check_pairing("truth", {"probabilities of the taken actions": table[obs, act][present]},
                      {"probabilities of the taken actions": lp.exp()[present]},
                      sides=("this truth", "the rollouts' logprobs"), hint=hint, atol=1e-4)
    return table


def _replay_settings(policy, pi, n_continuations, seed) -> tuple[torch.Tensor, int, int]:
    """The checked (policy table, continuations per turn, seed) of a re-executing mode (C3, CCPO)."""
    if policy is None:
        raise ValueError("policy: re-execution plays the continuations with the policy")
    M = check_int("n_continuations", n_continuations, low=1)
    return _policy_table(policy, pi), M, check_int("seed", seed)


def _reexecute(env, policy, state: tuple, t, first, *, seed: int) -> tuple[torch.Tensor, int]:
    """rollout_from in chunks; returns (returns, env_steps)."""
    out, steps = [], 0
    for i, start in enumerate(range(0, t.numel(), CHUNK)):
        sl = slice(start, start + CHUNK)
        r, s = env.rollout_from(policy, *(x[sl] for x in state), t[sl],
                                first_action=None if first is None else first[sl], seed=seed + 7919 * i)
        out.append(r)
        steps += s
    return (torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)), steps


# --------------------------------------------------------------------------- C3
class NoiseReplayEnv(Protocol):
    """An environment whose replays can share random numbers, what C3's fixed-continuation replay
    needs beyond ``Env``: ``replay_noise(policy, hidden, actions, present, seed=)`` recovers the
    recorded episodes' own randomness (uniforms per turn, drawn given what was recorded) and
    ``rollout_with_noise(policy, *state, turn, noise, first_action=None)`` plays restored states
    on with given uniforms (``ToolWorld`` has both: ``labkit.envs.toolworld.replay``)."""

    def replay_noise(self, policy: Any, hidden: Any, actions: Any, present: Any, *,
                     seed: int = 0) -> torch.Tensor: ...

    def rollout_with_noise(self, policy: Any, *state: torch.Tensor, first_action: Any = None
                           ) -> tuple[torch.Tensor, int]: ...


ROW_TURNS = 2_000_000  # replayed rows x max_turns per call of rollout_with_noise (bounds memory)


def _fixed_replay(env, policy, state, t, act, present, hidden, G, d, *, K: int, M: int, seed: int):
    """C3's fixed-continuation replay over every played turn: returns (taken (B, N) the taken
    action's mean over its M continuations, baseline (B, N) the siblings' mean over K x M
    replays, siblings (n, K) the drawn alternatives, cost)."""
    require("env", env, NoiseReplayEnv, "fixed-continuation replay shares the episode's random numbers "
            "between the taken action and its alternatives (use mode='resample' for an env without them)")
    noise0 = env.replay_noise(policy, hidden, act, present, seed=seed + 2)      # (B, max_turns, U)
    idx = present.nonzero()
    n = idx.shape[0]
    sel = tuple(idx.T)
    taken = torch.zeros_like(G)
    base = torch.zeros_like(G)
    g = torch.Generator().manual_seed(seed)
    sib = torch.multinomial(d[sel], K, replacement=True, generator=g) if n else torch.zeros(0, K, dtype=torch.long)
    if n == 0:
        return taken, base, sib, Cost()
    per = (M - 1) + K * M                   # replays per turn: the taken action's, then the siblings'
    T, U = noise0.shape[1], noise0.shape[2]
    cells = max(1, ROW_TURNS // (per * T))
    cell_state = tuple(x[sel] for x in state)
    tt, aa, rows, Gs = t[sel], act[sel], idx[:, 0], G[sel]
    taken_sum, base_sum, steps = Gs.clone(), torch.zeros(n, dtype=torch.float64), 0
    for i, start in enumerate(range(0, n, cells)):
        c = torch.arange(start, min(start + cells, n))
        nc = c.numel()
        # continuation 0 is the episode's own randomness; 1..M-1 are fresh, shared by every alternative
        fresh = torch.rand(nc, M - 1, T, U, generator=torch.Generator().manual_seed(seed + 7919 * (i + 1)),
                           dtype=torch.float64)
        noise = torch.cat([noise0[rows[c]][:, None], fresh], 1)                 # (nc, M, T, U)
        local = torch.arange(nc)
        cell = torch.cat([local.repeat_interleave(M - 1), local.repeat_interleave(K * M)])
        m = torch.cat([torch.arange(1, M).repeat(nc), torch.arange(M).repeat(nc * K)])
        first = torch.cat([aa[c].repeat_interleave(M - 1), sib[c].repeat_interleave(M, dim=1).reshape(-1)])
        ret, s = env.rollout_with_noise(policy, *(x[c][cell] for x in cell_state), tt[c][cell], noise[cell, m],
                                        first_action=first)
        steps += s
        n_taken = nc * (M - 1)
        taken_sum[c] += ret[:n_taken].view(nc, M - 1).sum(1)
        base_sum[c] = ret[n_taken:].view(nc, K * M).mean(1)
    # (a sibling equal to the taken action replays, under continuation 0, the episode itself: the
    # uniforms reproduce every draw, so its return is G_t exactly and it adds nothing to the credit)
    taken[sel] = taken_sum / M
    base[sel] = base_sum
    return taken, base, sib, Cost(env_resets=n * per, env_steps=steps, policy_forwards=steps)


@register("c3", level="turn", needs=("states",),
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="adaptation",
          replaces="the messages of a Reasoner -> Actor team (the Actor's reply the continuation): one agent's "
                   "turns in a tool world, the continuation being the tools' answers and the agent's own later "
                   "turns; the sibling alternatives are replays that only form the baseline, not training samples",
          paper="2603.06859",
          equation=r"A_{i,k} = \frac{1}{M} \sum_{m=1}^{M} \Big[ G_k^{(m)}(a_k) - \frac{1}{K} \sum_{j=1}^{K} "
                   r"G_k^{(m)}(a'_j) \Big],\quad a'_j \sim d(\cdot \mid o_k),\quad G_k^{(1)}(a_k) = G_k",
          symbols="k: turn; G_k^{(m)}(a): return from turn k on with action a at turn k, replayed from the restored "
                  "state s_k under continuation m (M = 4), which every alternative shares: the same random numbers "
                  "for the tools' answers and the policy's later draws, continuation 1 being the episode's own, so "
                  "G_k^{(1)}(a_k) = G_k the realised return; a'_j: K = 1 sibling drawn from d = pi(.|o_k)")
def c3(rollouts: Rollouts, *, mode: str = "fixed", env=None, policy=None, hidden_states=None,
       default="policy", n_alternatives: int = 1, n_continuations: int = 4, seed: int = 0, truth=None,
       critic=None, pi=None) -> Credit:
    """C3 (Chen et al. 2026, arXiv:2603.06859): the taken action against context-matched alternatives
    under the same continuation, per turn.

    Inputs:
        rollouts: ``rewards``, ``turn_ids``, ``states`` and ``tokens`` (each turn's observation
        and action).
        ``env`` (env), ``policy`` (policy) and ``hidden_states`` (hidden_states) for the
        replaying modes: the environment restores the hidden state a turn started from (the
        explicit ``hidden_states`` = ``rollouts.truth["hidden_states"]``, as the simulator's
        save-state would be) and ``policy`` plays on. Mode "fixed" also needs the env to share
        random numbers between replays (``env.replay_noise`` and ``env.rollout_with_noise``, as
        ``ToolWorld`` has). Mode "exact" reads ``truth`` = ``env.truth(policy)`` instead of
        replaying; mode "learned" a fitted ``critic`` and the policy table (``pi`` or ``policy``).
        A ``truth`` of another world or policy (sizes other than the env's, a policy table other
        than ``policy``'s or than the one the rollouts' logprobs were sampled with) is refused,
        as is a ``pi`` that is not a probability table (rows summing to 1 within 1e-6).

    Formula:
        Contextual counterfactual credit assignment with fixed-continuation replay. At turn k
        the context is frozen (the restored state s_k) and K alternatives a'_1..a'_K are drawn
        from d(. | o_k) beside the taken action a_k; each is replayed under M continuations,
        and continuation m is the same for every alternative:

        credit_k = (1/M) sum_m [ G_k^(m)(a_k) - (1/K) sum_j G_k^(m)(a'_j) ]

        the taken action's mean minus its siblings' (the paper's leave-one-out baseline over
        context-matched alternatives). "The same continuation" is common random numbers: the
        tools' answers (their error coins, ``labkit.envs.toolworld.replay``) and the policy's
        draws at every later turn use the same uniforms in every alternative, so two
        alternatives differ only through what the intervention changed. Continuation 1 is the
        episode's own: its uniforms are drawn given what the episode recorded (the actions taken,
        the answers read), so G_k^(1)(a_k) = G_k, the realised return, and under a sibling the
        later turns replay the recorded actions and tool luck wherever the sibling's episode sees
        what the recorded one saw; where it sees something else the policy answers that, with
        the same uniform; after a sibling's submit nothing more is played; beyond the recorded
        end (the episode submitted) the uniforms are fresh. Continuations 2..M are fresh
        uniforms, shared the same way. ``default`` (d):

        * ``"policy"`` (default): a' ~ pi(. | o_k), alternatives from the same policy (the
          paper's siblings);
        * ``"others"``: pi renormalised over the actions other than a_k;
        * ``"think"`` (or any action id): one fixed default, "think" being ToolWorld's no-op.

        ``mode``:

        * ``"fixed"`` (default): the fixed-continuation replay above, all turns vectorised.
        * ``"resample"`` (ablation: what the lab's C3 did before): credit_k = G_k - mean of
          ``n_alternatives`` x ``n_continuations`` replays, each of its own fresh alternative
          with fresh random numbers. Its expectation given the turn's state is Q - sum d Q as
          well, but given the episode it is G_k - V_d(s_k): the luck of every tool answer from
          turn k on stays in the credit, one for one.
        * ``"exact"``: E[credit | s_k, a_k] = Q(s_k, a_k) - sum_a' d(a') Q(s_k, a') from the DP,
          the expectation of both replaying modes. For tests; an oracle.
        * ``"learned"``: where the env cannot be reset, a Q model fitted on rollouts stands in for
          the alternatives' replays: G_k - sum_a' d(a') Q_hat(o_k, a') with ``critic`` a fitted
          ``labkit.learn.critics.TurnQCritic`` (the reference code's value-assisted baseline,
          with one continuation, the realised one, on the taken side: it keeps the luck).

    Defaults:
        mode = "fixed", default = "policy", n_alternatives (K) = 1, n_continuations (M) = 4,
        seed = 0: the reference code's fan-out of 2 messages x 4 replies per context.

    Degenerate input:
        an empty trajectory has no turns (no credit); groups play no role. A turn with one
        possible action (or a sibling equal to the taken action) gets 0 under "fixed": the same
        action under the same continuations returns the same. M = 1 compares the realised
        return with the siblings' replays of this very episode's luck.

    Deviations from the reference:
        C3 (paper and code: fan-out [2, 4] in github.com/EIT-EAST-Lab/C3) freezes the transcript
        before a Reasoner's or Actor's message, samples sibling messages and scores each by the
        mean reward of the Actor's replies to it, every sibling being a training sample. Here a
        "message" is one agent's turn, the continuation is the tools' answers plus the agent's
        later turns (the reference's continuation is the other agent; its replies are fresh
        samples, not shared), the siblings are replays that only form the taken action's
        baseline, and the continuations are coupled by common random numbers, which keeps every
        replay's distribution (so the expectation) and removes from the comparison the luck the
        alternatives share. The paper's default baseline mixes in a learned Q critic
        ("value-assisted"); "fixed" uses the replayed rewards only (the code's "reward-only"
        variant), "learned" the critic only. The later turns are not replayed open-loop: in the
        paper the continuation (the Actor) reads the intervened message, and one deaf to the
        intervention would give every upstream decision zero credit; here the recorded later
        actions come back wherever the sibling's episode sees what the recorded one saw (the
        same uniform draws the same action from the same observation). Why ToolWorld rather
        than TeamTask's second agent: the luck the course measures is ToolWorld's (its exact
        skill / luck split), and TeamTask's agents act once each with chance integrated exactly,
        leaving no continuation to replay; agent-level leave-one-out there is
        ``labkit.credit.multiagent.leave_one_out_credit``. The survey adds that an LLM may
        estimate the counterfactual instead of replaying it; "learned" is the lab's model-based
        stand-in for that.

    Returns:
        credit at level "turn"; ``info``: ``counterfactual`` (B, N) the baseline, ``returns``
        (B, N) G_k, ``taken`` (B, N) the taken action's replayed mean (G_k under "resample" and
        "learned"), ``siblings`` (n, K) the drawn alternatives of the played turns in row-major
        order ("fixed" only), ``mode``, ``default``.

    Cost:
        "fixed": ``env_resets`` = turns x ((M - 1) + K x M), ``env_steps`` = actions replayed,
        ``policy_forwards`` = the same actions (each needs the policy). "resample": turns x K x
        M resets. "learned": ``aux_calls`` = one critic lookup per turn. "exact": none (an
        oracle).
    """
    check_choice("mode", mode, C3_MODES)
    r, present = turn_rewards(rollouts)
    G = discounted_returns(r.to(torch.float64), present, 1.0)
    obs, act, _ = turn_table(rollouts)
    cost = Cost()
    taken = G
    extra = {}
    if mode == "learned":
        if critic is None or not hasattr(critic, "q"):
            raise ValueError("critic: learned mode needs a fitted TurnQCritic (labkit.learn.critics) to predict "
                             "the counterfactual return")
        table = _policy_table(policy, pi)
        q = critic.q.to(torch.float64)
        if tuple(q.shape) != tuple(table.shape):
            raise ValueError(f"critic: its Q table has shape {tuple(q.shape)} but the policy table {tuple(table.shape)}")
        d = _default_dist(default, table, obs, act)
        cf = (d * q[obs]).sum(-1)
        cost = Cost(aux_calls=int(present.sum()))
    else:
        if env is None:
            raise ValueError(f"env: mode {mode!r} needs the environment the rollouts came from")
        hs, state, o, t, act, present = _turn_states(env, rollouts, hidden_states)
        if mode == "exact":
            table = _exact_truth(truth, env, rollouts, policy, n_obs=int(o.max()) + 1 if o.numel() else 0)
            if pi is not None:
                table = _policy_table(None, pi)
            d = _default_dist(default, table, o, act)
            Qs = truth.hidden_q(t, hs)                                    # (B, N, A)
            cf = (d * Qs).sum(-1)
            taken = Qs.gather(-1, act[..., None]).squeeze(-1)            # E[G_t | s_t, a_t]
        else:
            table, M, seed = _replay_settings(policy, pi, n_continuations, seed)
            K = check_int("n_alternatives", n_alternatives, low=1)
            d = _default_dist(default, table, o, act)
            if mode == "fixed":
                taken, cf, sib, cost = _fixed_replay(env, policy, state, t, act, present, hs, G, d, K=K, M=M,
                                                     seed=seed)
                extra = {"siblings": sib}
            else:
                idx = present.nonzero()
                n = idx.shape[0]
                sel = tuple(idx.T)
                R = K * M
                rep = lambda x: x[sel].repeat_interleave(R)  # noqa: E731
                g = torch.Generator().manual_seed(seed)
                first = torch.multinomial(d[sel], R, replacement=True, generator=g).reshape(-1) if n else \
                    torch.zeros(0, dtype=torch.long)
                ret, steps = _reexecute(env, policy, tuple(rep(x) for x in state), rep(t), first, seed=seed + 1)
                cf = torch.zeros_like(G)
                if n:
                    cf[sel] = ret.view(n, R).mean(1)
                cost = Cost(env_resets=n * R, env_steps=steps, policy_forwards=steps)
    credit = torch.where(present, taken - cf, 0.0)
    cf = torch.where(present, cf, 0.0)
    return Credit.from_level(rollouts, credit, "turn", "c3", cost=cost, counterfactual=cf,
                             returns=torch.where(present, G, 0.0), taken=torch.where(present, taken, 0.0),
                             mode=mode, default=default, **extra)

# --------------------------------------------------------------------------- CCPO
@register("ccpo", level="turn", needs=("states",),
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="adaptation",
          replaces="the counterfactual with one agent of a Thinker -> Solver team removed (the Solver answering "
                   "alone), its gap to the joint outcome normalised by running statistics: every action of one "
                   "agent's turn forced in turn, weighted by the policy (the average treatment effect)",
          paper="2603.21563",
          equation=r"A_{i,k} = \mathbb{E}\left[G_k \mid s_k, \operatorname{do}(a_k)\right] - \sum_a \pi(a \mid o_k) "
                   r"\, \mathbb{E}\left[G_k \mid s_k, \operatorname{do}(a)\right]",
          symbols="k: turn; G_k: return from turn k on; each do(a) estimated by 8 replays from the restored hidden "
                  "state s_k (exact mode: Q - V)")
def ccpo(rollouts: Rollouts, *, mode: str = "reexecute", env=None, policy=None, hidden_states=None,
         n_continuations: int = 8, seed: int = 0, truth=None) -> Credit:
    """CCPO (Li et al. 2026, arXiv:2603.21563): the average treatment effect of a turn's action.

    Inputs:
        rollouts: ``turn_ids``, ``states`` and ``tokens`` (each turn's observation and action).
        ``env`` (env), ``policy`` (policy) and ``hidden_states`` (hidden_states): re-execution
        from the restored state of every turn, as in ``c3``. Mode "exact" reads ``truth`` =
        ``env.truth(policy)`` instead of replaying (one of another world or policy is refused,
        as in ``c3``).

    Formula:
        Counterfactual credit policy optimisation:

        credit_t = E[G_t | s_t, do(a_t)] - sum_a pi(a | o_t) E[G_t | s_t, do(a)]

        the average treatment effect of the turn's action against the policy's own mix of
        actions, both estimated by intervention from the restored state s_t:
        ``mode="reexecute"`` forces every action a in turn (``n_continuations`` replays each; the
        do(a_t) replays are among them) and weights the means by pi exactly; ``mode="exact"``
        uses the DP, where the formula is by definition Q(s_t, a_t) - V(s_t) = A(s_t, a_t), the
        exact advantage. Unlike C3 the first term is itself an interventional mean, not the
        realised return, so the luck of the tool answers after turn t is averaged out of both
        terms.

    Defaults:
        mode = "reexecute", n_continuations = 8, seed = 0.

    Degenerate input:
        as ``c3``: an empty trajectory has no turns (no credit); groups play no role.

    Deviations from the reference:
        the paper and its code (github.com/bhai114/ccpo) intervene on *roles* of a Thinker ->
        Solver team: the Thinker's signal is the joint outcome against the outcome with its
        contribution removed (the Solver answering alone, Delta = R_joint - R_solo), an early
        version splitting it with the two-player Shapley value, and the signals are normalised
        with running (history-aware) means and deviations. labkit keeps the causal core and
        changes the counterfactual: per turn of one agent, every action is forced in turn and
        the baseline is their pi-weighted mean, not the agent's removal (a turn has no "absent"
        action), as the survey (§5.2) describes CCPO's causal view (each action a treatment, the
        outcome the effect); no running normalisation. Its "no unobserved confounders"
        assumption holds here by construction: the intervention restores the full hidden state.
        Agent removal itself is ``labkit.credit.multiagent.leave_one_out_credit`` on TeamTask.

    Returns:
        credit at level "turn"; ``info``: ``do_values`` (B, N, A) E[G | do(a)] estimates,
        ``baseline`` (B, N), ``mode``.

    Cost:
        re-execution: ``env_resets`` = turns x n_actions x n_continuations (every action is an
        intervention), ``env_steps`` = ``policy_forwards`` = actions replayed. Exact: none (an
        oracle).
    """
    check_choice("mode", mode, CCPO_MODES)
    if env is None:
        raise ValueError(f"env: mode {mode!r} needs the environment the rollouts came from")
    hs, state, o, t, act, present = _turn_states(env, rollouts, hidden_states)
    cost = Cost()
    if mode == "exact":
        table = _exact_truth(truth, env, rollouts, policy, n_obs=int(o.max()) + 1 if o.numel() else 0)
        do = truth.hidden_q(t, hs)                                        # (B, N, A)
    else:
        table, M, seed = _replay_settings(policy, None, n_continuations, seed)
        A = table.shape[1]
        idx = present.nonzero()
        n = idx.shape[0]
        sel = tuple(idx.T)
        rep = lambda x: x[sel].repeat_interleave(A * M)  # noqa: E731
        first = torch.arange(A).repeat_interleave(M).repeat(n)
        ret, steps = _reexecute(env, policy, tuple(rep(x) for x in state), rep(t), first, seed=seed)
        do = torch.zeros(*present.shape, A, dtype=torch.float64)
        if n:
            do[sel] = ret.view(n, A, M).mean(-1)
        cost = Cost(env_resets=n * A * M, env_steps=steps, policy_forwards=steps)
    pi_t = table[o]
    baseline = (pi_t * do).sum(-1)
    taken = do.gather(-1, act[..., None]).squeeze(-1)
    credit = torch.where(present, taken - baseline, 0.0)
    return Credit.from_level(rollouts, credit, "turn", "ccpo", cost=cost, do_values=do,
                             baseline=torch.where(present, baseline, 0.0), mode=mode)


# --------------------------------------------------------------------------- InT
INT_ROWS = ("failed", "all")


@register("int_interventions", level="step", inputs={"rewrite_fn": "step_rewriter"}, status="implemented",
          paper="2601.14209",
          equation=r"A_{i,k} = s_i - \frac{1}{m} \sum_{j=1}^{m} s'_{i,k,j}",
          symbols="k: step; s'_j: outcomes of the m <= K = 4 rewrites of step k that differ from it (m = 0: credit "
                  "0); failed responses only by default")
def int_interventions(rollouts: Rollouts, *, rewrite_fn, k: int = 4, rows: str = "failed") -> Credit:
    """InT, self-proposed interventions (Yang et al. 2026, arXiv:2601.14209): blame a step whose rewrite flips the outcome.

    Inputs:
        rollouts: ``rewards`` (the outcome R), ``step_ids``.
        ``rewrite_fn`` (step_rewriter): ``rewrite_fn(rollouts, cells, k) -> (outcomes (n, k),
        changed (n, k) bool, Cost)`` for the list of ``(row, step)`` cells (for the tiny LM:
        ``ArithmeticLM.step_rewrite_fn(seed=...)``).

    Formula:
        For step i of a response with outcome R, the policy rewrites step i k times from the
        prefix before it and writes on to the end; the rewrites that differ from the original
        step are the interventions, with outcomes R'_1..R'_m (m <= k):

            flip_i   = mean_j R'_j                   (the outcome once step i is intervened on)
            credit_i = R - flip_i                    (0 when no rewrite differs: m = 0)

        On a failed response (R = 0) credit_i = -flip_i: the more often replacing step i
        rescues the answer, the more step i is to blame; a step whose replacements never help
        gets 0. On this task a correct step has one correct form, so replacing it breaks it and
        the blame concentrates on the first wrong step. ``rows="all"`` also intervenes on
        successful responses, where credit_i = 1 - flip_i credits a step whose replacement
        breaks the success.

    Defaults:
        k = 4 rewrites per step, rows = "failed" (the paper intervenes on failed traces only;
        successful responses get 0).

    Degenerate input:
        a batch with no failed response (under rows="failed") gets zero credit and costs
        nothing; a row with nothing generated gets 0. A step whose k rewrites all repeat
        the original gets 0 (no intervention found). A one-step failed response is blamed by
        the rate at which a fresh answer succeeds.

    Deviations from the reference:
        InT has the model, given a reference solution, find the first error of a failed trace
        and write one corrective step, then fine-tunes on prefix + intervention (SFT before RL).
        The lab keeps the credit-assignment core: interventions are the policy's own resampled
        steps (no reference solution shown; an identical rewrite is not counted as an
        intervention), every step is intervened on rather than only the located first error,
        and the result is a per-step credit instead of SFT data.

    Returns:
        credit at level "step"; ``info``: ``flip_rate`` (B, S), ``interventions`` (B, S) m,
        ``rewritten`` (B, S) bool (cells that were rewritten), ``k``, ``rows``.

    Cost:
        what ``rewrite_fn`` reports: ``policy_forwards`` = sequences sampled (rewrites and their
        continuations), ``policy_tokens`` = token positions processed.
    """
    k = check_int("k", k, low=1)
    check_choice("rows", rows, INT_ROWS)
    if not callable(rewrite_fn):
        raise TypeError("rewrite_fn: expected a callable (rollouts, cells, k) -> (outcomes, changed, cost)")
    R = rollouts.scores.to(torch.float64)
    present = rollouts.view(rollouts.rewards, "step", "sum")[1]
    chosen = present & ((R <= 0)[:, None] if rows == "failed" else torch.ones_like(present))
    cells = chosen.nonzero().tolist()
    flip = torch.zeros(present.shape, dtype=torch.float64)
    m = torch.zeros(present.shape, dtype=torch.long)
    cost = Cost()
    if cells:
        out = rewrite_fn(rollouts, [tuple(c) for c in cells], k)
        if not isinstance(out, tuple) or len(out) != 3:
            raise ValueError("rewrite_fn: must return (outcomes (n, k), changed (n, k), Cost)")
        outcomes, changed, cost = out
        outcomes = as_tensor("rewrite_fn outcomes", outcomes).to(torch.float64)
        changed = as_tensor("rewrite_fn changed", changed)
        if tuple(outcomes.shape) != (len(cells), k) or tuple(changed.shape) != (len(cells), k):
            raise ValueError(f"rewrite_fn: expected outcomes and changed of shape ({len(cells)}, {k}), got "
                             f"{tuple(outcomes.shape)} and {tuple(changed.shape)}")
        if not isinstance(cost, Cost):
            raise TypeError("rewrite_fn: must return a Cost as its third item")
        changed = changed.bool()
        n_changed = changed.sum(1)
        mean = torch.where(changed, outcomes, 0.0).sum(1) / n_changed.clamp(min=1)
        sel = tuple(torch.tensor(cells).T)
        m[sel] = n_changed
        # no differing rewrite: no intervention, the outcome counts as unchanged
        flip[sel] = torch.where(n_changed > 0, mean, R[sel[0]])
    credit = torch.where(chosen, R[:, None] - flip, 0.0)
    return Credit.from_level(rollouts, credit, "step", "int_interventions", cost=cost,
                             flip_rate=torch.where(chosen, flip, 0.0), interventions=m, rewritten=chosen, k=k, rows=rows)
