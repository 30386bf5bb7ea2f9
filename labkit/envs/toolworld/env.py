"""ToolWorld: a multi-turn tool-use POMDP ("find and fix the bug among N files") with exact truth.

The story. A repository has ``n_files`` files and exactly one of them, file b, has a bug. The
agent has ``max_turns`` turns; each turn it calls one tool and reads the tool's answer. It wins
(reward ``success_reward``) if it submits after the bug has been fixed. The tools are unreliable:
search sometimes points at the wrong file, reading a file sometimes misjudges it, the test suite
is flaky. Most turns are routine (searching, reading, thinking); one or two turns decide the
outcome (the edit that fixes the bug, the submit after it) — rare decisive turns among many,
with the reward only at the end.

Hidden state (what the environment knows): the buggy file b (drawn once per task and shared by
every trajectory of that task, i.e. by a GRPO group), whether the bug is fixed, the last
observation o and the turn t. The policy sees only o: it is a memoryless
``TabularSoftmaxPolicy`` over observation ids, shape (n_obs, n_actions). So ``rollouts.states``
holds the observation id at every turn (what the policy conditions on) and the hidden state index
``(2 * b + fixed) * n_obs + o`` is in ``rollouts.truth["hidden_states"]``. One position of the
Rollouts is one turn is one action: ``step_ids = turn_ids = 0, 1, 2, ...``.

Actions (n_actions = 4 + 2N)::

    id         name        effect and observation returned
    0          think       nothing happens; "thought"                          (the echo trap)
    1          search      "hint: file j": j = b w.p. 1 - mislead, else a uniformly random other
                           file (search does not know whether the bug is already fixed)
    2          run tests   "tests pass" if the bug is fixed else "tests fail"; flips w.p. flaky
    3          submit      ends the episode; reward success_reward if fixed, else 0
    4 + j      open j      "file j looks buggy" if j == b and not fixed, else "file j looks fine";
                           the verdict is flipped w.p. noise
    4 + N + j  edit j      fixes the bug iff j == b (editing another file does nothing);
                           "edited file j"

Observations (n_obs = 4 + 4N)::

    0 start | 1 thought | 2 tests pass | 3 tests fail | 4 + j hint: file j |
    4 + N + j file j looks buggy | 4 + 2N + j file j looks fine | 4 + 3N + j edited file j

Rewards: ``-step_cost`` every turn, plus ``success_reward`` on a submit with the bug fixed, or
``-wrong_submit`` on a submit with the bug still there (a broken build; default 0), plus
``find_reward`` on a turn that opens the buggy file while the bug is still there (a checkable
"found it" turn, like a retrieved passage that contains the answer; default 0). An episode
that uses all ``max_turns`` turns without submitting times out with nothing more. With
``wrong_submit > 0`` doing nothing is *safe* (0) while trying is risky (+1 or -wrong_submit):
the setting in which episode-level credit drifts into the echo trap (notebook 05).

Why it is hard for credit assignment. Observations recur across trajectories of a task (every
trajectory starts at "start", searches land on the same few hints), so GiGPO anchor groups form,
but equal observations hide different hidden states (a "tests pass" may be flaky). "think" is
useless, and a policy that answers "thought" with "think" loops until time runs out: the echo
trap. ``mislead``, ``noise`` and ``flaky`` make the same action lucky or unlucky.

What is exact (``env.truth(policy)``). (b, fixed, o) is a Markov state of the underlying process
and the policy depends only on o, so backward induction over the turns t = max_turns-1, ..., 0
gives V_t(b, fixed, o), Q_t(b, fixed, a) (Q does not depend on o: the observation only changes
which action is chosen, not what it does) and A = Q - V, in float64. These are oracle values:
they use the hidden b, which the policy cannot see. They are still the right credit: the
policy-gradient theorem for a memoryless policy reads
grad J = E[sum_t grad log pi(a_t | o_t) A_t(s_t, a_t)] with s_t the full state, because a
baseline that depends on s_t but not on a_t averages to zero. The DP is written in torch, so
autograd gives the exact dJ/dlogits over the observation table. ``ToolTruth.skill_luck`` splits
every turn into skill A_t(s_t, a_t) and luck r_t + V_{t+1}(s_{t+1}) - Q_t(s_t, a_t); per
trajectory V_0(s_0) + sum_t (skill_t + luck_t) equals the realised return exactly.

Why a time-indexed DP rather than ``labkit.envs.tabular.exact_truth`` with t folded into the state:
that needs a dense (S, A, S) tensor over S = max_turns * 2N * n_obs states — at N = 5 and 50
turns 12,000 states, 2.0e9 entries. The DP here touches only the (N, 2, A, n_obs) answer table
per turn (50 turns x 10 files: well under 0.1 s, gradient included).
"""
from __future__ import annotations

from typing import Sequence

import torch

from labkit.core.checks import as_tensor, check_int, check_integer_tensor, check_number, check_policy
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.envs.toolworld.replay import restored_states
from labkit.envs.toolworld.truth import ToolTruth, backward_induction

# Fixed action and observation ids; the per-file ones follow (see the tables above).
THINK, SEARCH, RUN_TESTS, SUBMIT = 0, 1, 2, 3
START, THOUGHT, TESTS_PASS, TESTS_FAIL = 0, 1, 2, 3


class ToolWorld:
    """See the module docstring. Parameters are the knobs of the story; sampling is seeded."""

    MAX_TURNS = 200
    MAX_FILES = 50

    def __init__(self, n_files: int = 3, *, max_turns: int = 20, mislead: float = 0.2,
                 noise: float = 0.1, flaky: float = 0.1, step_cost: float = 0.0,
                 success_reward: float = 1.0, wrong_submit: float = 0.0, find_reward: float = 0.0):
        self.n_files = check_int("n_files", n_files, low=2, high=self.MAX_FILES)
        self.max_turns = check_int("max_turns", max_turns, low=1, high=self.MAX_TURNS)
        self.mislead = check_number("mislead", mislead, low=0.0, high=1.0)
        self.noise = check_number("noise", noise, low=0.0, high=1.0)
        self.flaky = check_number("flaky", flaky, low=0.0, high=1.0)
        self.step_cost = check_number("step_cost", step_cost, low=0.0)
        self.success_reward = check_number("success_reward", success_reward)
        self.wrong_submit = check_number("wrong_submit", wrong_submit, low=0.0)
        self.find_reward = check_number("find_reward", find_reward)
        N = self.n_files
        self.action_names = (["think", "search", "run tests", "submit"]
                             + [f"open {j}" for j in range(N)] + [f"edit {j}" for j in range(N)])
        self.obs_names = (["start", "thought", "tests pass", "tests fail"]
                          + [f"hint: file {j}" for j in range(N)]
                          + [f"file {j} looks buggy" for j in range(N)]
                          + [f"file {j} looks fine" for j in range(N)]
                          + [f"edited file {j}" for j in range(N)])
        self.kernel, self.fixed_after, self.expected_reward = self._dynamics()

    def __repr__(self) -> str:
        return (f"ToolWorld(n_files={self.n_files}, max_turns={self.max_turns}, mislead={self.mislead}, "
                f"noise={self.noise}, flaky={self.flaky}, step_cost={self.step_cost}, "
                f"success_reward={self.success_reward}, wrong_submit={self.wrong_submit}"
                + (f", find_reward={self.find_reward})" if self.find_reward else ")"))

    # ---- ids
    @property
    def n_actions(self) -> int:
        return 4 + 2 * self.n_files

    @property
    def n_obs(self) -> int:
        """Rows of the policy table: the policy sees only the last observation."""
        return 4 + 4 * self.n_files

    @property
    def n_hidden(self) -> int:
        """Hidden states (b, fixed, o) per turn."""
        return 2 * self.n_files * self.n_obs

    # Ids of the per-file actions and observations (j may be an int or a tensor).
    def open_action(self, j):
        return 4 + j

    def edit_action(self, j):
        return 4 + self.n_files + j

    def hint_obs(self, j):
        return 4 + j

    def buggy_obs(self, j):
        return 4 + self.n_files + j

    def fine_obs(self, j):
        return 4 + 2 * self.n_files + j

    def edited_obs(self, j):
        return 4 + 3 * self.n_files + j

    def hidden_index(self, bug, fixed, obs):
        """The index of hidden state (bug, fixed, obs) stored in ``truth["hidden_states"]``."""
        return (2 * bug + fixed) * self.n_obs + obs

    # ---- the rules, as tables
    def _dynamics(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rules of the story as three tables, used by both the sampler and the exact DP.

        kernel[b, f, a, o']  P(next observation o' | bug b, fixed flag f *after* the action, a);
                             all zero for submit (the episode ends).
        fixed_after[b, f, a] the fixed flag after action a from (b, f).
        expected_reward[b, f, a] the reward of the turn (deterministic given (b, f, a)).
        """
        N, A, O = self.n_files, self.n_actions, self.n_obs
        K = torch.zeros(N, 2, A, O, dtype=torch.float64)
        fixed_after = torch.zeros(N, 2, A, dtype=torch.long)
        R = torch.full((N, 2, A), -self.step_cost, dtype=torch.float64)
        for b in range(N):
            for f in (0, 1):
                fixed_after[b, f] = f
                fixed_after[b, f, self.edit_action(b)] = 1
                R[b, f, SUBMIT] += self.success_reward if f else -self.wrong_submit
                if not f:
                    # the "found it" turn: a function of (b, f, a) like every reward here, so the
                    # DP's expected reward is the realised one and the truth stays exact
                    R[b, f, self.open_action(b)] += self.find_reward
                K[b, f, THINK, THOUGHT] = 1.0
                K[b, f, SEARCH, self.hint_obs(b)] = 1 - self.mislead
                for j in range(N):
                    if j != b:
                        K[b, f, SEARCH, self.hint_obs(j)] = self.mislead / (N - 1)
                K[b, f, RUN_TESTS, TESTS_PASS] = (1 - self.flaky) if f else self.flaky
                K[b, f, RUN_TESTS, TESTS_FAIL] = self.flaky if f else (1 - self.flaky)
                for j in range(N):
                    buggy = j == b and not f
                    K[b, f, self.open_action(j), self.buggy_obs(j)] = (1 - self.noise) if buggy else self.noise
                    K[b, f, self.open_action(j), self.fine_obs(j)] = self.noise if buggy else (1 - self.noise)
                    K[b, f, self.edit_action(j), self.edited_obs(j)] = 1.0
        return K, fixed_after, R

    # ---- policies
    def _check_policy(self, policy) -> None:
        check_policy("policy", policy)
        shape = tuple(getattr(policy, "logits", torch.empty(0)).shape)
        if shape != (self.n_obs, self.n_actions):
            raise ValueError(f"policy: logits have shape {shape}, this ToolWorld needs "
                             f"(n_obs, n_actions) = ({self.n_obs}, {self.n_actions})")

    def make_policy(self, *, init_std: float = 0.0, seed: int = 0):
        """A TabularSoftmaxPolicy over observations (uniform by default)."""
        from labkit.policies import TabularSoftmaxPolicy
        return TabularSoftmaxPolicy(self.n_obs, self.n_actions, init_std=init_std, seed=check_int("seed", seed))

    def scripted_policy(self, strength: float = 2.0, *, think: float = 0.0):
        """A sensible memoryless agent: the sensible action gets logit ``strength``, others 0.

        start, thought, "looks fine", "tests fail" -> search; hint j -> open j;
        "file j looks buggy" -> edit j; "edited file j" -> run tests; "tests pass" -> submit.
        ``think`` adds that logit to "think" after "thought" (raise it to walk into the echo trap;
        a negative value is a valid logit too and makes the loop rarer still).
        """
        strength = check_number("strength", strength)
        think = check_number("think", think)
        policy = self.make_policy()
        best = {START: SEARCH, THOUGHT: SEARCH, TESTS_PASS: SUBMIT, TESTS_FAIL: SEARCH}
        for j in range(self.n_files):
            best[self.hint_obs(j)] = self.open_action(j)
            best[self.buggy_obs(j)] = self.edit_action(j)
            best[self.fine_obs(j)] = SEARCH
            best[self.edited_obs(j)] = RUN_TESTS
        with torch.no_grad():
            for o, a in best.items():
                policy.logits[o, a] = strength
            policy.logits[THOUGHT, THINK] += think
        return policy

    # ---- sampling
    @torch.no_grad()
    def sample(self, policy, n_tasks: int, *, group_size: int = 8, seed: int = 0,
               bugs: Sequence[int] | None = None) -> Rollouts:
        """Roll out ``group_size`` episodes of ``policy`` on each of ``n_tasks`` tasks.

        A task is a bug location b, uniform over the files unless ``bugs`` (one per task) is given;
        the episodes of task i are rows i * group_size ... and share ``group_ids`` = i.
        Rows are padded to ``max_turns``; ``mask`` is True on the turns actually played.

        ``truth`` holds: ``hidden_states`` (B, T) the full state index (-1 off-mask), ``bug`` (B,),
        ``fixed`` (B, T) whether the bug was fixed before the turn, ``decisive`` (B, T) the turns
        the outcome hinged on — the edit that fixed the bug and a submit with the bug fixed —,
        ``success`` (B,) and ``timeout`` (B,).
        """
        n_tasks = check_int("n_tasks", n_tasks, low=1)
        group_size = check_int("group_size", group_size, low=1)
        seed = check_int("seed", seed)
        self._check_policy(policy)
        N, T = self.n_files, self.max_turns
        g = torch.Generator().manual_seed(seed)
        if bugs is None:
            task_bugs = torch.randint(N, (n_tasks,), generator=g)
        else:
            # refuse float bug locations rather than truncating them
            task_bugs = check_integer_tensor("bugs", as_tensor("bugs", bugs)).reshape(-1)
            if task_bugs.numel() != n_tasks:
                raise ValueError(f"bugs: expected one bug location per task ({n_tasks}), got {task_bugs.numel()}")
            if bool(((task_bugs < 0) | (task_bugs >= N)).any()):
                raise ValueError(f"bugs: file indices must lie in [0, {N - 1}], got {task_bugs.tolist()}")
        B = n_tasks * group_size
        bug = task_bugs.repeat_interleave(group_size)
        group_ids = torch.arange(n_tasks).repeat_interleave(group_size)

        table = policy.log_probs().detach()
        tokens = torch.zeros(B, T, dtype=torch.long)
        states = torch.zeros(B, T, dtype=torch.long)
        after = torch.full((B, T), -1, dtype=torch.long)  # observation returned by the turn
        hidden = torch.full((B, T), -1, dtype=torch.long)
        fixed_before = torch.zeros(B, T, dtype=torch.bool)
        mask = torch.zeros(B, T, dtype=torch.bool)
        decisive = torch.zeros(B, T, dtype=torch.bool)
        rewards = torch.zeros(B, T, dtype=torch.float64)
        logprobs = torch.zeros(B, T, dtype=table.dtype)
        entropies = torch.zeros(B, T, dtype=table.dtype)
        obs = torch.full((B,), START, dtype=torch.long)
        fixed = torch.zeros(B, dtype=torch.long)
        alive = torch.ones(B, dtype=torch.bool)
        rows = torch.arange(B)
        for t in range(T):
            a, lp, ent = policy.sample(obs, g, table)
            mask[:, t] = alive
            tokens[:, t] = torch.where(alive, a, 0)
            states[:, t] = torch.where(alive, obs, 0)
            hidden[:, t] = torch.where(alive, self.hidden_index(bug, fixed, obs), -1)
            fixed_before[:, t] = alive & fixed.bool()
            logprobs[:, t] = torch.where(alive, lp, 0)
            entropies[:, t] = torch.where(alive, ent, 0)
            rewards[:, t] = torch.where(alive, self.expected_reward[bug, fixed, a], 0.0)
            new_fixed = self.fixed_after[bug, fixed, a]
            decisive[:, t] = alive & ((new_fixed > fixed) | ((a == SUBMIT) & fixed.bool()))
            fixed = new_fixed
            alive = alive & (a != SUBMIT)
            if not bool(alive.any()):
                break
            # Draw the tool's answer only for rows that go on, so submit's all-zero kernel row
            # never reaches multinomial.
            go = rows[alive]
            nxt = torch.multinomial(self.kernel[bug[go], fixed[go], a[go]], 1, generator=g).squeeze(-1)
            obs[go] = nxt
            after[go, t] = nxt
        success = (tokens == SUBMIT) & mask & fixed_before
        success = success.any(1)
        lengths = mask.sum(1)
        timeout = ~((tokens == SUBMIT) & mask).any(1)

        turn_ids = torch.where(mask, torch.arange(T).expand(B, T), -1)
        text = self._turn_texts(tokens, after, mask, fixed_before)
        names = self.obs_names
        anchor_keys = [[names[o] for o in row[:n]] for row, n in zip(states.tolist(), lengths.tolist())]
        prompts = [self.prompt(int(i)) for i in group_ids]
        return Rollouts(
            tokens=tokens, mask=mask, rewards=rewards, group_ids=group_ids, step_ids=turn_ids,
            turn_ids=turn_ids.clone(), logprobs=logprobs, entropies=entropies, states=states,
            anchor_keys=anchor_keys, text=text, prompts=prompts,
            truth={"hidden_states": hidden, "bug": bug, "fixed": fixed_before, "decisive": decisive,
                   "success": success, "timeout": timeout, "observations_after": after},
            info={"env": repr(self)},
        )

    def prompt(self, task: int) -> str:
        """The task statement of task number ``task`` (an int >= 0: the task's group id in a batch)."""
        task = check_int("task", task, low=0)
        return (f"Task {task}: one of {self.n_files} files (0..{self.n_files - 1}) has a bug. Find it, "
                f"fix it and submit within {self.max_turns} turns. Tools may mislead.")

    def _turn_texts(self, tokens, after, mask, fixed_before) -> list[list[str]]:
        """'action -> observation' per turn, from a precomputed (A, n_obs) table of strings."""
        acts, obs = self.action_names, self.obs_names
        table = [[f"{acts[a]} -> {obs[o]}" for o in range(self.n_obs)] for a in range(self.n_actions)]
        T = tokens.shape[1]
        out = []
        for tok, aft, n, fx in zip(tokens.tolist(), after.tolist(), mask.sum(1).tolist(), fixed_before.tolist()):
            row = []
            for a, o, f in zip(tok[:n], aft[:n], fx[:n]):  # the mask is a prefix: turns 0..n-1
                if a == SUBMIT:
                    row.append("submit -> accepted (bug fixed)" if f else "submit -> rejected (bug still there)")
                elif o < 0:  # ran out of turns: the answer was never read
                    row.append(f"{acts[a]} -> (out of turns)")
                else:
                    row.append(table[a][o])
            out.append(row + [""] * (T - n))
        return out

    def transcript(self, rollouts: Rollouts, row: int) -> str:
        """A readable multi-line transcript of trajectory ``row``."""
        check_rollouts(rollouts, "ToolWorld.sample")
        row = check_int("row", row, low=0, high=rollouts.batch_size - 1)
        if rollouts.text is None:
            raise ValueError("rollouts.text: this Rollouts carries no turn texts")
        lines = []
        if rollouts.prompts is not None:
            lines.append(rollouts.prompts[row])
        if "bug" in rollouts.truth:
            lines.append(f"(hidden: the bug is in file {int(rollouts.truth['bug'][row])})")
        for t in range(rollouts.horizon):
            if rollouts.mask[row, t]:
                lines.append(f"turn {t:>3}: {rollouts.text[row][t]}")
        lines.append(f"return: {float(rollouts.scores[row]):g}")
        return "\n".join(lines)

    # ---- exact truth
    def truth(self, policy, *, gamma: float = 1.0) -> ToolTruth:
        """Exact V, Q, A, J and dJ/dlogits under ``policy`` (``truth.backward_induction``), with
        the return discounted by ``gamma`` per turn (default 1: undiscounted, as everywhere else)."""
        self._check_policy(policy)
        gamma = check_number("gamma", gamma, low=0.0, high=1.0)
        return backward_induction(self, policy, start_obs=START, gamma=gamma)

    # ---- re-execution (restore a hidden state and play on; used by C3 / CCPO)
    def decode_hidden(self, hidden) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Split hidden-state indices (``truth["hidden_states"]``) into (bug, fixed, obs) tensors.

        The inverse of ``hidden_index``; every entry must be a valid index (no -1 padding)."""
        h = as_tensor("hidden", hidden).long()
        if bool(((h < 0) | (h >= self.n_hidden)).any()):
            raise ValueError(f"hidden: indices must lie in [0, {self.n_hidden - 1}] (drop padding first)")
        return h // (2 * self.n_obs), (h // self.n_obs) % 2, h % self.n_obs

    def vine_value_fn(self, policy, *, seed: int = 0):
        """A sampled ``value_fn`` for ``labkit.credit.mc`` (VinePPO's vines on ToolWorld): V before
        every played turn, each the mean return of k episodes replayed from that turn's recorded
        hidden state (``rollout_from`` with a policy-drawn first action), so E[V] is the exact
        V_t(b, fixed, o) under ``policy``. Needs ``truth["hidden_states"]`` (as ``sample`` records).
        Cost: k replays (env resets) per turn and one env step and one policy position per
        replayed action."""
        self._check_policy(policy)
        seed = check_int("seed", seed)

        def value_fn(rollouts: Rollouts, k: int) -> tuple[torch.Tensor, Cost]:
            k = check_int("k", k, low=1)
            hidden = rollouts.truth.get("hidden_states")
            if hidden is None:
                raise ValueError("rollouts: vines restart from truth['hidden_states'] (ToolWorld.sample records them)")
            # one position is one turn (module docstring), so a step's first position is its turn index
            turn_index = torch.arange(rollouts.mask.shape[1]).expand_as(rollouts.mask)
            first_hidden, present = rollouts.view(hidden, "step", "first")
            first_turn = rollouts.view(turn_index, "step", "first")[0]
            bug, fixed, obs = self.decode_hidden(first_hidden.long()[present])
            turn = first_turn.long()[present]
            returns, steps = self.rollout_from(policy, bug.repeat_interleave(k), fixed.repeat_interleave(k),
                                               obs.repeat_interleave(k), turn.repeat_interleave(k), seed=seed)
            values = torch.zeros(present.shape, dtype=torch.float64)
            values[present] = returns.view(-1, k).mean(1) if returns.numel() else returns
            n = int(present.sum()) * k
            return values, Cost(policy_forwards=n, policy_tokens=steps, env_steps=steps, env_resets=n)
        return value_fn

    @torch.no_grad()
    def rollout_from(self, policy, bug, fixed, obs, turn, *, first_action=None,
                     seed: int = 0) -> tuple[torch.Tensor, int]:
        """Restore K hidden states and play each episode on to the end: the re-execution API.

        ``bug``, ``fixed``, ``obs``, ``turn`` (K,) give the state before turn ``turn`` (the same
        (b, fixed, o, t) the DP is indexed by). At that turn row k takes ``first_action[k]``
        (forced: an intervention) or, with ``first_action=None``, an action drawn from
        ``policy``; afterwards ``policy`` acts until a submit or ``max_turns``. Rows run side by
        side (vectorised over K); rows that start later simply join the loop later.

        Returns ``(returns, env_steps)``: the return-to-go from turn ``turn`` of every row (the
        reward of the first action included), float64 (K,), and the number of environment steps
        taken in total (one per action). Sampling uses its own generator seeded with ``seed``,
        so ``sample`` is untouched; E[returns[k]] is exactly Q_t(b, fixed, first_action[k]) (or
        V_t(b, fixed, o) with a policy-drawn first action) under ``policy``.
        """
        self._check_policy(policy)
        seed = check_int("seed", seed)
        b, f, o, t0, forced = restored_states(self, bug, fixed, obs, turn, first_action)
        K = b.numel()
        returns = torch.zeros(K, dtype=torch.float64)
        if K == 0:
            return returns, 0
        g = torch.Generator().manual_seed(seed)
        # inverse-CDF sampling from cumulative tables (one uniform per row and draw)
        pi_cdf = policy.probs().detach().to(torch.float64).cumsum(-1)
        k_cdf = self.kernel.cumsum(-1)
        alive = torch.zeros(K, dtype=torch.bool)
        steps = 0
        for t in range(int(t0.min()), self.max_turns):
            alive = alive | (t0 == t)
            if not bool(alive.any()):
                if bool((t0 > t).any()):
                    continue
                break
            u = torch.rand(K, 1, generator=g, dtype=torch.float64)
            a = (pi_cdf[o] < u).sum(-1).clamp(max=self.n_actions - 1)
            if forced is not None:
                a = torch.where(t0 == t, forced, a)
            returns += torch.where(alive, self.expected_reward[b, f, a], 0.0)
            steps += int(alive.sum())
            f = torch.where(alive, self.fixed_after[b, f, a], f)
            alive = alive & (a != SUBMIT)
            go = alive.nonzero().flatten()
            if go.numel():
                u = torch.rand(go.numel(), 1, generator=g, dtype=torch.float64)
                cdf = k_cdf[b[go], f[go], a[go]]
                o[go] = (cdf < u).sum(-1).clamp(max=self.n_obs - 1)
        return returns, steps

    def replay_noise(self, policy, hidden, actions, present, *, seed: int = 0) -> torch.Tensor:
        """The recorded episodes' own randomness: uniforms (B, max_turns, 3) drawn from their
        posterior given the turn-level record ``hidden`` (hidden state), ``actions`` and
        ``present`` (B, N), for ``rollout_with_noise`` (``labkit.envs.toolworld.replay``)."""
        from labkit.envs.toolworld.replay import abduct_noise
        check_policy("policy", policy)
        return abduct_noise(self, policy, hidden, actions, present, seed=seed)

    def rollout_with_noise(self, policy, bug, fixed, obs, turn, noise, *,
                           first_action=None) -> tuple[torch.Tensor, int]:
        """``rollout_from`` driven by given uniforms ``noise`` (K, max_turns, 3) instead of a seed:
        replays that share them share the tools' luck and the policy's draws
        (``labkit.envs.toolworld.replay``). Returns (return-to-go per row, env steps)."""
        from labkit.envs.toolworld.replay import play
        check_policy("policy", policy)
        return play(self, policy, bug, fixed, obs, turn, noise, first_action=first_action)

    def occupancy(self, pi: torch.Tensor) -> torch.Tensor:
        """P(turn t is played in hidden state (b, f, o)), (T, N, 2, n_obs), b uniform."""
        N, T = self.n_files, self.max_turns
        d = torch.zeros(N, 2, self.n_obs, dtype=torch.float64)
        d[:, 0, START] = 1.0 / N
        out = []
        for _ in range(T):
            out.append(d)
            M = torch.einsum("bfo,oa->bfa", d, pi)                       # mass taking action a
            landed = torch.zeros_like(M).scatter_add_(1, self.fixed_after, M)  # moved to flag f'
            d = torch.einsum("bfa,bfao->bfo", landed, self.kernel)        # submit's rows are 0
        return torch.stack(out)
