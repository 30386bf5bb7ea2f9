"""Common random numbers for ToolWorld: the world's randomness written as uniforms, so that two
replays can share it, and so that a recorded episode's own randomness can be recovered.

What is random in a ToolWorld episode, turn by turn, and the uniform that decides it (three per
turn, ``noise[..., t, :]``)::

    noise[..., t, 0]  the policy's draw:   a_t = the first a with cdf_pi(a | o_t) >= u (inverse CDF)
    noise[..., t, 1]  the tool's error:    the answer to a_t is wrong iff u < the tool's error rate
                                           (search: mislead, run tests: flaky, open: noise;
                                           think, edit, submit never err)
    noise[..., t, 2]  the wrong file:      a misleading search names the k-th file other than the
                                           bug, k = floor(u * (n_files - 1))

Written this way the tools are the world's kernel exactly (``tool_answer`` draws each answer with
``env.kernel``'s probabilities), and the error coin belongs to the *turn*, not to the tool: two
replays that share ``noise`` and call different tools at turn t err together as far as their
rates allow (both err when u is below both rates). That is what makes a replay "the same luck".

``abduct_noise`` goes the other way: given a recorded episode it draws uniforms from their
posterior given what was recorded (the action taken, the answer read), the abduction step of a
counterfactual. ``play`` with those uniforms and the recorded first action reproduces the episode
exactly; with another first action it answers "what would this episode have been had turn t been
different", the later turns keeping the episode's luck and the policy's draws wherever the
counterfactual sees what the episode saw.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_int

N_UNIFORMS = 3  # per turn: the policy's draw, the tool's error coin, the misleading search's file


def _ids(env):
    from labkit.envs.toolworld.env import RUN_TESTS, SEARCH, SUBMIT, TESTS_FAIL, TESTS_PASS, THOUGHT
    return SEARCH, RUN_TESTS, SUBMIT, THOUGHT, TESTS_PASS, TESTS_FAIL


def error_rate(env, action: torch.Tensor) -> torch.Tensor:
    """The probability that the answer to ``action`` is wrong, per entry (float64, same shape):
    mislead for search, flaky for run tests, noise for open; 0 for think, edit and submit."""
    search, run_tests, *_ = _ids(env)
    a = action.long()
    N = env.n_files
    rate = torch.zeros(a.shape, dtype=torch.float64)
    rate = torch.where(a == search, env.mislead, rate)
    rate = torch.where(a == run_tests, env.flaky, rate)
    return torch.where((a >= 4) & (a < 4 + N), env.noise, rate)


def tool_answer(env, bug: torch.Tensor, fixed: torch.Tensor, action: torch.Tensor, u_err: torch.Tensor,
                u_pick: torch.Tensor) -> torch.Tensor:
    """The observation ``action`` returns in state (``bug``, ``fixed`` after the action), decided
    by the uniforms ``u_err`` (the tool errs iff u_err < its error rate) and ``u_pick`` (which
    wrong file a misleading search names). Tensors of one shape; returns observation ids (long).
    A submit returns nothing (the episode ends): its entry is "thought" and is never read."""
    search, run_tests, _, thought, tests_pass, tests_fail = _ids(env)
    N = env.n_files
    b, f, a = bug.long(), fixed.long(), action.long()
    err = u_err < error_rate(env, a)
    # the k-th file other than the bug: k in 0..N-2, files at or above the bug shift up by one
    k = (u_pick * (N - 1)).floor().long().clamp(0, N - 2)
    hint = torch.where(err, k + (k >= b).long(), b)
    passed = (f == 1) ^ err
    j = (a - 4).clamp(0, N - 1)
    buggy = ((j == b) & (f == 0)) ^ err
    out = torch.full(a.shape, thought, dtype=torch.long)
    out = torch.where(a == search, env.hint_obs(hint), out)
    out = torch.where(a == run_tests, torch.where(passed, tests_pass, tests_fail), out)
    out = torch.where((a >= 4) & (a < 4 + N), torch.where(buggy, env.buggy_obs(j), env.fine_obs(j)), out)
    return torch.where(a >= 4 + N, env.edited_obs((a - 4 - N).clamp(0, N - 1)), out)


def prior_noise(env, n: int, *, generator: torch.Generator) -> torch.Tensor:
    """Fresh uniforms for ``n`` episodes, (n, max_turns, N_UNIFORMS) float64."""
    n = check_int("n", n, low=0)
    return torch.rand(n, env.max_turns, N_UNIFORMS, generator=generator, dtype=torch.float64)


def _within(lo: torch.Tensor, hi: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A point of (lo, hi) placed by v in [0, 1): kept off the ends, where round-off could move it
    into the neighbouring interval."""
    return lo + v.clamp(1e-9, 1 - 1e-9) * (hi - lo)


@torch.no_grad()
def abduct_noise(env, policy, hidden, actions, present, *, seed: int = 0) -> torch.Tensor:
    """Uniforms drawn from their posterior given recorded episodes, (B, max_turns, N_UNIFORMS).

    ``hidden`` (B, N) the hidden state of every turn (``truth["hidden_states"]`` at turn level),
    ``actions`` (B, N) the action taken, ``present`` (B, N) the turns played (a prefix of each
    row), N <= ``env.max_turns``, one column per turn. The answer to turn k is the observation of
    turn k + 1; the answer to a row's last turn was never read (a submit, or time ran out).

    * the policy's draw at a played turn: uniform on the interval of the recorded action in
      cdf_pi(. | o) (``policy``'s current table: the policy that played the episode);
    * the tool's error coin at an answered turn: uniform below the tool's error rate if the
      answer was wrong, above it if right (a tool that never errs: uniform on [0, 1));
    * the misleading search's file: uniform on the interval of the file it named;
    * everything the record does not constrain (turns after the episode ended, the answer to the
      last turn): fresh uniforms.

    Seeded by ``seed``. Raises a ValueError if an answer is impossible in this world (a record
    from another ToolWorld).
    """
    env._check_policy(policy)
    seed = check_int("seed", seed)
    hidden = as_tensor("hidden", hidden).long()
    actions = as_tensor("actions", actions).long()
    present = as_tensor("present", present).bool()
    if hidden.dim() != 2 or tuple(actions.shape) != tuple(hidden.shape) or tuple(present.shape) != tuple(hidden.shape):
        raise ValueError(f"hidden: expected hidden, actions and present of one shape (B, N), got "
                         f"{tuple(hidden.shape)}, {tuple(actions.shape)} and {tuple(present.shape)}")
    B, N = hidden.shape
    if N > env.max_turns:
        raise ValueError(f"hidden: {N} turns, more than env.max_turns ({env.max_turns})")
    g = torch.Generator().manual_seed(seed)
    noise = prior_noise(env, B, generator=g)
    if N == 0 or not bool(present.any()):
        return noise
    v = torch.rand(B, N, N_UNIFORMS, generator=g, dtype=torch.float64)
    bug, fixed, obs = env.decode_hidden(torch.where(present, hidden, 0))
    a = torch.where(present, actions, 0)
    A = env.n_actions
    if bool(((a < 0) | (a >= A)).any()):
        raise ValueError(f"actions: action ids must lie in [0, {A - 1}]")
    # the policy's draw: sample() and play() pick the first action whose cdf reaches u
    cdf = policy.probs().detach().to(torch.float64).cumsum(-1)[obs]             # (B, N, A)
    lo = torch.where(a > 0, cdf.gather(-1, (a - 1).clamp(min=0)[..., None])[..., 0], 0.0)
    hi = torch.where(a == A - 1, 1.0, cdf.gather(-1, a[..., None])[..., 0])
    u = _within(lo, hi, v[..., 0])
    drawn = (cdf < u[..., None]).sum(-1).clamp(max=A - 1)
    u = torch.where(drawn == a, u, (lo + hi) / 2)
    noise[:, :N, 0] = torch.where(present, u, noise[:, :N, 0])
    if N < 2:
        return noise
    # the tools' answers: the answer to turn k is what turn k + 1 observed
    answered = present[:, :-1] & present[:, 1:]
    b, ak = bug[:, :-1], a[:, :-1]
    f_after = env.fixed_after[b, fixed[:, :-1], ak]
    said = obs[:, 1:]
    ones = torch.ones(said.shape, dtype=torch.float64)
    right = tool_answer(env, b, f_after, ak, ones, torch.zeros_like(ones))
    erred = answered & (said != right)
    rate = error_rate(env, ak)
    u_err = torch.where(erred, _within(torch.zeros_like(rate), rate, v[:, :-1, 1]), _within(rate, ones, v[:, :-1, 1]))
    search = _ids(env)[0]
    named = said - env.hint_obs(0)
    k = (named - (named > b).long()).clamp(0, env.n_files - 2).double()
    u_pick = torch.where(erred & (ak == search), (k + v[:, :-1, 2].clamp(1e-9, 1 - 1e-9)) / (env.n_files - 1),
                         noise[:, :N - 1, 2])
    replayed = tool_answer(env, b, f_after, ak, u_err, u_pick)
    wrong = answered & (replayed != said)
    if bool(wrong.any()):
        row, turn = wrong.nonzero()[0].tolist()
        raise ValueError(f"hidden: the answer recorded after turn {turn} of row {row} ("
                         f"{env.obs_names[int(said[row, turn])]!r} to {env.action_names[int(ak[row, turn])]!r}) "
                         f"is impossible in {env!r}")
    noise[:, :N - 1, 1] = torch.where(answered, u_err, noise[:, :N - 1, 1])
    noise[:, :N - 1, 2] = torch.where(answered, u_pick, noise[:, :N - 1, 2])
    return noise


def restored_states(env, bug, fixed, obs, turn, first_action=None):
    """The K states to restore, checked: (bug, fixed, obs, turn, forced first actions or None),
    each a long tensor (K,), ``fixed`` and ``obs`` copies a caller may update in place. Every
    argument must have K entries inside its range (a ValueError naming it otherwise). Shared by
    ``ToolWorld.rollout_from`` (fresh randomness) and ``play`` (given randomness)."""
    b = as_tensor("bug", bug).long().reshape(-1)
    K = b.numel()
    f = as_tensor("fixed", fixed).long().reshape(-1).clone()
    o = as_tensor("obs", obs).long().reshape(-1).clone()
    t0 = as_tensor("turn", turn).long().reshape(-1)
    for name, x, hi in (("bug", b, env.n_files), ("fixed", f, 2), ("obs", o, env.n_obs), ("turn", t0, env.max_turns)):
        if x.numel() != K:
            raise ValueError(f"{name}: expected {K} entries (one per restored state), got {x.numel()}")
        if bool(((x < 0) | (x >= hi)).any()):
            raise ValueError(f"{name}: values must lie in [0, {hi - 1}]")
    forced = None
    if first_action is not None:
        forced = as_tensor("first_action", first_action).long().reshape(-1)
        if forced.numel() != K:
            raise ValueError(f"first_action: expected {K} entries, got {forced.numel()}")
        if bool(((forced < 0) | (forced >= env.n_actions)).any()):
            raise ValueError(f"first_action: action ids must lie in [0, {env.n_actions - 1}]")
    return b, f, o, t0, forced


@torch.no_grad()
def play(env, policy, bug, fixed, obs, turn, noise, *, first_action=None) -> tuple[torch.Tensor, int]:
    """Restore K states and play each episode on to the end with its own uniforms ``noise``
    (K, max_turns, N_UNIFORMS): ``rollout_from`` with the randomness given instead of drawn.

    ``bug``, ``fixed``, ``obs``, ``turn`` (K,) as in ``rollout_from``; row k uses
    ``noise[k, t]`` at turn t. ``first_action`` (K,) forces the action at the row's first turn
    (otherwise the policy draws it with ``noise[k, turn, 0]``). Returns ``(returns, env_steps)``:
    the return-to-go of every row from its first turn, float64 (K,), and the actions taken. Two
    rows with the same state, first action and uniforms play the same episode.
    """
    env._check_policy(policy)
    b, f, o, t0, forced = restored_states(env, bug, fixed, obs, turn, first_action)
    K = b.numel()
    u = as_tensor("noise", noise).to(torch.float64)
    if tuple(u.shape) != (K, env.max_turns, N_UNIFORMS):
        raise ValueError(f"noise: expected shape ({K}, {env.max_turns}, {N_UNIFORMS}) (rows, max_turns, "
                         f"uniforms per turn), got {tuple(u.shape)}")
    if bool(((u < 0) | (u > 1)).any()) or bool(torch.isnan(u).any()):
        raise ValueError("noise: uniforms must lie in [0, 1]")
    returns = torch.zeros(K, dtype=torch.float64)
    if K == 0:
        return returns, 0
    submit = _ids(env)[2]
    pi_cdf = policy.probs().detach().to(torch.float64).cumsum(-1)
    alive = torch.zeros(K, dtype=torch.bool)
    steps = 0
    for t in range(int(t0.min()), env.max_turns):
        alive = alive | (t0 == t)
        if not bool(alive.any()):
            if bool((t0 > t).any()):
                continue
            break
        a = (pi_cdf[o] < u[:, t, 0:1]).sum(-1).clamp(max=env.n_actions - 1)
        if forced is not None:
            a = torch.where(t0 == t, forced, a)
        returns += torch.where(alive, env.expected_reward[b, f, a], 0.0)
        steps += int(alive.sum())
        f = torch.where(alive, env.fixed_after[b, f, a], f)
        alive = alive & (a != submit)
        o = torch.where(alive, tool_answer(env, b, f, a, u[:, t, 1], u[:, t, 2]), o)
    return returns, steps
