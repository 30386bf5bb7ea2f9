"""Counterfactual credit: what would the outcome have been had this turn's action been different?

Both estimators here answer by *intervention* on a turn: restore the hidden state the turn
started from (``env.rollout_from``, any environment with the ``labkit.core.protocols.Env``
methods, e.g. a ToolWorld), force an action, let the policy play on, and compare outcomes.
They differ in what they compare:

* C3 (arXiv 2603.06859): the realised return against the expected return with the turn
  replaced by a default (by default: a fresh action from the policy at the frozen state, the
  paper's leave-one-out baseline over context-matched alternatives);
* CCPO (arXiv 2603.21563): the average treatment effect E[R | do(a_t)] - E_{a~pi} E[R | do(a)].

Each has an ``"exact"`` mode (the DP expectation of what the re-execution estimates, for tests)
and C3 a ``"learned"`` mode for environments that cannot be reset (a Q model fitted on rollouts).
Re-execution reads the hidden state, a privileged input: it is passed explicitly
(``hidden_states=rollouts.truth["hidden_states"]``), as the simulator's save-state would be.
Returns are returns-to-go from the turn on (the shared prefix cancels in every difference).
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_choice, check_int
from labkit.credit.registry import register
from labkit.core.protocols import Env, HiddenStateTruth, require
from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns
from labkit.core.turns import turn_hidden_states, turn_rewards, turn_table

C3_MODES = ("reexecute", "learned", "exact")
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
    if pi is not None:
        return as_tensor("pi", pi).detach().to(torch.float64)
    if policy is None:
        raise ValueError("policy: needed for its action probabilities (or pass pi=)")
    return policy.probs().detach().to(torch.float64)


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
@register("c3", level="turn", needs=("states",),
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="implemented",
          paper="2603.06859",
          equation=r"A_{i,k} = G_k - \mathbb{E}_{a' \sim d(\cdot \mid o_k)} \mathbb{E}\left[G_k \mid s_k, "
                   r"\operatorname{do}(a')\right],\quad G_k = \sum_{l \ge k} r_l",
          symbols="k: turn; G_k: realised return-to-go; d: default action, pi(.|o_k) by default; expectation by 8 "
                  "replays from the restored hidden state s_k")
def c3(rollouts: Rollouts, *, mode: str = "reexecute", env=None, policy=None, hidden_states=None,
       default="policy", n_continuations: int = 8, seed: int = 0, truth=None, critic=None, pi=None) -> Credit:
    """C3 (Chen et al. 2026, arXiv:2603.06859): realised return minus a counterfactual default's, per turn.

    Inputs:
        rollouts: ``rewards``, ``turn_ids``, ``states`` and ``tokens`` (each turn's observation
        and action).
        ``env`` (env), ``policy`` (policy) and ``hidden_states`` (hidden_states) for the default
        mode, re-execution: the environment restores the hidden state a turn started from
        (``env.rollout_from``; the explicit ``hidden_states`` = ``rollouts.truth["hidden_states"]``,
        as the simulator's save-state would be) and ``policy`` plays on. Mode "exact" reads
        ``truth`` = ``env.truth(policy)`` instead of replaying; mode "learned" a fitted ``critic``
        and the policy table (``pi`` or ``policy``).

    Formula:
        Contextual counterfactual credit assignment:

        credit_t = G_t(tau) - E_{a' ~ d(. | s_t)} E[G_t | s_t, do(a')]

        G_t(tau) is the realised return from turn t on; the expectation is the counterfactual
        with turn t's action replaced by a default drawn from d. ``default``:

        * ``"policy"`` (default): a' ~ pi(. | o_t), a fresh action at the frozen context. This is
          the paper's leave-one-out baseline: the taken action is compared with context-matched
          alternatives sampled from the same policy and replayed from the same state;
        * ``"others"``: pi renormalised over the actions other than a_t (strict leave-one-out in
          action space);
        * ``"think"`` (or any action id): one fixed default, "think" being ToolWorld's no-op.

        ``mode``:

        * ``"reexecute"``: restore s_t, force a' ~ d, let ``policy`` play on; mean over
          ``n_continuations`` replays per turn, all turns of the batch vectorised. Unbiased for
          the exact value below; equal to it when the world and the policy are deterministic.
        * ``"exact"``: E[credit | s_t, a_t] = Q(s_t, a_t) - sum_a' d(a') Q(s_t, a') from the DP.
          For tests; an oracle.
        * ``"learned"``: where the env cannot be reset, a Q model fitted on rollouts predicts the
          counterfactual from what is observable: sum_a' d(a') Q_hat(o_t, a') with ``critic`` a
          fitted ``labkit.learn.critics.TurnQCritic`` (tabular Q(o, a) by TD on a replay).

    Defaults:
        mode = "reexecute", default = "policy", n_continuations = 8, seed = 0.

    Degenerate input:
        an empty trajectory has no turns (no credit); groups play no role. A turn with one
        possible action has credit G_t - Q(s, a_t) in expectation 0 under "policy".

    Deviations from the reference:
        C3 intervenes on messages of a Reasoner -> Actor team and keeps the other agent's
        continuation fixed ("fixed-continuation replay"); here the "decisions" are an agent's
        turns and the continuation is re-sampled from the policy (the tools are random, so
        nothing else could be held fixed). The paper's LOO baseline is over K alternatives
        including the taken one, each of which gets credit; labkit credits the taken action only.

    Returns:
        credit at level "turn"; ``info``: ``counterfactual`` (B, N) the baseline, ``returns``
        (B, N) G_t, ``mode``, ``default``.

    Cost:
        re-execution: ``env_resets`` = restored states (turns x n_continuations), ``env_steps`` =
        actions taken by the replays, ``policy_forwards`` = the same actions (each needs the
        policy). Learned: ``aux_calls`` = one critic lookup per turn. Exact: none (an oracle).
    """
    check_choice("mode", mode, C3_MODES)
    r, present = turn_rewards(rollouts)
    G = discounted_returns(r.to(torch.float64), present, 1.0)
    obs, act, _ = turn_table(rollouts)
    cost = Cost()
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
            require("truth", truth, HiddenStateTruth, "exact mode needs env.truth(policy) (e.g. a ToolTruth)")
            table = truth.pi if pi is None else _policy_table(None, pi)
            d = _default_dist(default, table, o, act)
            Qs = truth.hidden_q(t, hs)                                    # (B, N, A)
            cf = (d * Qs).sum(-1)
            G = Qs.gather(-1, act[..., None]).squeeze(-1)                # E[G_t | s_t, a_t]
        else:
            table, M, seed = _replay_settings(policy, pi, n_continuations, seed)
            d = _default_dist(default, table, o, act)
            idx = present.nonzero()
            n = idx.shape[0]
            sel = tuple(idx.T)
            rep = lambda x: x[sel].repeat_interleave(M)  # noqa: E731
            g = torch.Generator().manual_seed(seed)
            first = torch.multinomial(d[sel], M, replacement=True, generator=g).reshape(-1) if n else \
                torch.zeros(0, dtype=torch.long)
            ret, steps = _reexecute(env, policy, tuple(rep(x) for x in state), rep(t), first, seed=seed + 1)
            cf = torch.zeros_like(G)
            if n:
                cf[sel] = ret.view(n, M).mean(1)
            cost = Cost(env_resets=n * M, env_steps=steps, policy_forwards=steps)
    credit = torch.where(present, G - cf, 0.0)
    cf = torch.where(present, cf, 0.0)
    return Credit.from_level(rollouts, credit, "turn", "c3", cost=cost, counterfactual=cf,
                             returns=torch.where(present, G, 0.0), mode=mode, default=default)


# --------------------------------------------------------------------------- CCPO
@register("ccpo", level="turn", needs=("states",),
          inputs={"env": "env", "policy": "policy", "hidden_states": "hidden_states"}, status="implemented",
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
        ``env.truth(policy)`` instead of replaying.

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
        the reference code (github.com/bhai114/ccpo) applies the intervention to *roles* of a
        multi-agent team (joint outcome vs the outcome with one role's contribution removed, an
        early version splitting it with the two-player Shapley value); labkit applies the same
        intervention logic per turn of one agent, as the survey (§5.2) describes CCPO's causal
        view (each action a treatment, the outcome the effect). Its "no unobserved confounders"
        assumption holds here by construction: the intervention restores the full hidden state.

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
        require("truth", truth, HiddenStateTruth, "exact mode needs env.truth(policy) (e.g. a ToolTruth)")
        table = truth.pi
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
