"""Learned critics: every model the lab fits on rollouts for an estimator to consume.

* ``TabularCritic``, ``LMCritic``: V(s_t) before every generated position (``value(rollouts) ->
  (B, T)``), the thing TD credit bootstraps from;
* ``TurnQCritic``: tabular turn-level Q(o, a) by TD (ARCHER; C3's learned mode);
* ``BTCritic``: a Bradley-Terry turn-advantage table (SWEET-RL's privileged critic);
* ``LearnedHindsight``: counted outcome-conditioned action probabilities h(a | o, Z) (HCA, HCAPO).

Learned critics are imperfect by construction (finite data, limited capacity), and that
imperfection is what the estimators' dials trade against variance. Estimators take a critic as an
explicit argument and only call its methods (duck typing), so ``labkit.credit`` never imports
this module.
"""
from __future__ import annotations

import copy
import time

import pandas as pd
import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.turns import binary_outcome, turn_hidden_states, turn_table
from labkit.policies.sampling import check_token_rows


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

    def fit(self, rollouts: Rollouts, *, gamma: float = 1.0, targets=None) -> "TabularCritic":
        """Accumulate returns from ``rollouts`` (can be called repeatedly with more data).

        The regression target of each position is its return discounted by ``gamma`` per
        position, or ``targets`` (B, T) where given: e.g. returns discounted per action rather
        than per token, ``discounted_returns(r, mask, action_discounts(rollouts, gamma))``, the
        critic POAD's backups need."""
        if rollouts.states is None:
            raise ValueError("rollouts.states: a tabular critic needs the state of every position")
        if int(rollouts.states[rollouts.mask].max()) >= self.n_states:
            raise ValueError(f"rollouts.states: index beyond this critic's {self.n_states} states")
        if targets is None:
            G = rollouts.returns(gamma).to(torch.float64)
        else:
            G = as_tensor("targets", targets).to(torch.float64)
            check_shape("targets", G, tuple(rollouts.mask.shape))
            check_finite("targets", torch.where(rollouts.mask, G, 0.0))
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


# --------------------------------------------------------------------------- a value head on an LM
_INFERENCE_ROWS = 256  # sequences per no-grad forward: bounds memory, costs nothing in speed


def _hidden_size(config) -> int:
    size = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not isinstance(size, int):
        raise ValueError("model: its config names no hidden size (hidden_size / n_embd)")
    return size


class LMCritic:
    """The value model PPO trains next to a language-model policy: V(prefix) = P(success | prefix).

    It is a copy of the policy's transformer trunk (everything but the LM head) with a linear
    scalar "value head" on top: V(prefix) = w . h_last + b, where h_last is the trunk's final
    hidden state at the prefix's last token. Because the model is causal, one forward pass over
    prompt + completion gives V before *every* generated token at once: V(s_t) is read at the
    position of the token preceding generated token t.

    The trunk is deep-copied, so training the critic never moves the policy, and it starts from
    the policy's features (the usual PPO recipe; verl and OpenRLHF initialise the critic from the
    policy or its SFT model). The head starts at w = 0, b = ``init_value`` (default 0.5), so an
    untrained critic says "0.5" everywhere: advantages from it carry no information beyond the
    outcome. Dropout stays off (the trunk is kept in eval mode; gradients flow regardless).

    How good can it get? The VinePPO paper (Kazemnejad et al. 2024, arXiv:2410.01679) found
    that PPO's value network, asked to pick the better of alternative next reasoning steps,
    barely beats a random pick, while Monte Carlo values from a few vines rank them well: a
    critic that fits the *average* return can still be nearly blind to the step-level
    differences credit assignment needs. ``labkit.scoring.ranking_accuracy`` on
    ``load_step_alternatives()`` measures exactly this for the lab's tiny model.

    Cost accounting: ``forward_tokens`` counts every real (non-pad) token position the critic's
    trunk has processed, inference and training alike; ``train_steps`` counts optimizer steps.
    """

    def __init__(self, trunk: torch.nn.Module, *, init_value: float = 0.5, seed: int = 0):
        if not isinstance(trunk, torch.nn.Module) or getattr(trunk, "config", None) is None:
            raise TypeError(f"trunk: expected a Hugging Face transformer trunk (an nn.Module with a "
                            f"config), got {type(trunk).__name__}")
        self.init_value = check_number("init_value", init_value)
        self.seed = check_int("seed", seed)
        config = trunk.config
        self.trunk = trunk.eval()
        for p in self.trunk.parameters():
            p.requires_grad_(True)
        self.head = torch.nn.Linear(_hidden_size(config), 1)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.fill_(self.init_value)
        self.head.to(next(trunk.parameters()).device)
        self.context = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
        pad = getattr(config, "pad_token_id", None)
        self.pad_id = 0 if pad is None else int(pad)  # any id works: pads sit after the real tokens
        self.vocab_size = getattr(config, "vocab_size", None)
        self.generator = torch.Generator().manual_seed(self.seed)  # minibatch order in ``update``
        self.optimizer: torch.optim.Optimizer | None = None  # created at the first update
        self.forward_tokens = 0
        self.train_steps = 0

    # ---- construction
    @classmethod
    def from_policy(cls, model: torch.nn.Module, *, init_value: float = 0.5, seed: int = 0) -> "LMCritic":
        """A critic whose trunk is a deep copy of ``model``'s (a Hugging Face causal LM).

        The trunk is ``model.base_model`` (``model.transformer`` for GPT-2), so the copy works for
        any causal LM; ``seed`` seeds the critic's own minibatch order in ``update``.
        """
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a Hugging Face causal LM, got {type(model).__name__}")
        trunk = getattr(model, "base_model", None)
        if not isinstance(trunk, torch.nn.Module) or trunk is model:
            raise ValueError("model: has no separate transformer trunk (base_model) to copy")
        return cls(copy.deepcopy(trunk), init_value=init_value, seed=seed)

    @classmethod
    def from_config(cls, config, *, init_value: float = 0.5, seed: int = 0) -> "LMCritic":
        """A critic with a freshly initialised trunk of the architecture in ``config`` (a
        transformers config, e.g. ``policy.config``): what a critic learns without the policy's
        features. ``seed`` fixes the random initialisation (torch's global RNG is left alone)."""
        from transformers import AutoModel

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(check_int("seed", seed))
            trunk = AutoModel.from_config(config)
        return cls(trunk, init_value=init_value, seed=seed)

    def parameters(self) -> list[torch.nn.Parameter]:
        return [*self.trunk.parameters(), *self.head.parameters()]

    # ---- forward
    def _check_rows(self, name: str, rows) -> list[list[int]]:
        rows = check_token_rows(name, rows, self.vocab_size)  # the sampler's own check of id lists
        longest = max(len(r) for r in rows)
        if self.context is not None and longest > self.context:
            raise ValueError(f"{name}: a sequence of {longest} tokens exceeds the critic's context of {self.context}")
        return rows

    def _hidden(self, rows: list[list[int]]) -> torch.Tensor:
        """Final hidden states (N, L, H) of right-padded ``rows``; pads never reach real tokens."""
        device = next(self.trunk.parameters()).device
        lengths = [len(r) for r in rows]
        N, L = len(rows), max(lengths)
        ids = torch.full((N, L), self.pad_id, dtype=torch.long)
        seen = torch.zeros(N, L, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            seen[i, :len(r)] = 1
        # With right padding every row's real tokens sit at positions 0, 1, ... as when alone.
        pos = torch.arange(L).expand(N, L)
        out = self.trunk(input_ids=ids.to(device), attention_mask=seen.to(device),
                         position_ids=pos.to(device), use_cache=False)
        self.forward_tokens += sum(lengths)
        return out[0]

    def prefix_values(self, prefixes: list[list[int]]) -> torch.Tensor:
        """V(prefix) for each prefix (a list of token ids, prompt included), (N,) float64, no grad."""
        rows = self._check_rows("prefixes", prefixes)
        out = torch.empty(len(rows), dtype=torch.float64)
        with torch.no_grad():
            for start in range(0, len(rows), _INFERENCE_ROWS):
                chunk = rows[start:start + _INFERENCE_ROWS]
                h = self._hidden(chunk)
                last = torch.tensor([len(r) - 1 for r in chunk], device=h.device)
                v = self.head(h[torch.arange(len(chunk), device=h.device), last]).squeeze(-1)
                out[start:start + len(chunk)] = v.double().cpu()
        return out

    def _sequences(self, rollouts: Rollouts, *, through_last: bool = False) -> tuple[list[list[int]], list[int]]:
        """Per row: prompt + generated tokens up to (not including) the last generated one, or
        through it with ``through_last`` (a reward model reads the finished text), and the prompt
        length. Tokens after the last generated position (padding) are dropped."""
        check_rollouts(rollouts)
        prompts = rollouts.info.get("prompt_ids")
        if prompts is None:
            raise ValueError(f"rollouts: {type(self).__name__} needs info['prompt_ids'] (the prompt each row "
                             "continues; ArithmeticLM.rollouts and load_reference record it)")
        if len(prompts) != rollouts.batch_size:
            raise ValueError(f"rollouts: info['prompt_ids'] has {len(prompts)} prompts for {rollouts.batch_size} rows")
        T = rollouts.horizon
        last = torch.where(rollouts.mask, torch.arange(T), -1).max(1).values.tolist()
        stop = [last_b + 1 if through_last else max(last_b, 0) for last_b in last]
        seqs = [list(p) + rollouts.tokens[b, :stop[b]].tolist() for b, p in enumerate(prompts)]
        return self._check_rows("rollouts", seqs), [len(p) for p in prompts]

    def _values(self, mask: torch.Tensor, seqs: list[list[int]], prompt_lens: list[int]) -> torch.Tensor:
        """(B, T) float32 values of the given rows, with grad if grad is enabled; 0 off ``mask``."""
        h = self._hidden(seqs)
        B, T = mask.shape
        # V before generated token t is read where the token preceding it sits: prompt_len - 1 + t.
        where = (torch.tensor(prompt_lens)[:, None] - 1 + torch.arange(T)).clamp(max=h.shape[1] - 1)
        picked = h.gather(1, where.to(h.device)[..., None].expand(B, T, h.shape[-1]))
        v = self.head(picked).squeeze(-1).cpu()
        return torch.where(mask, v, torch.zeros((), dtype=v.dtype))

    def value(self, rollouts: Rollouts) -> torch.Tensor:
        """Estimated V(s_t) before every generated token, (B, T) float64; 0 off-mask.

        Reads ``rollouts.info["prompt_ids"]``; one forward pass per batch of rows (no grad).
        """
        seqs, plens = self._sequences(rollouts)
        out = torch.zeros(rollouts.mask.shape, dtype=torch.float64)
        with torch.no_grad():
            for start in range(0, len(seqs), _INFERENCE_ROWS):
                rows = slice(start, start + _INFERENCE_ROWS)
                out[rows] = self._values(rollouts.mask[rows], seqs[rows], plens[rows]).double()
        return out

    __call__ = value

    # ---- training
    def _optimizer_for(self, lr: float) -> torch.optim.Optimizer:
        if self.optimizer is None:
            # No weight decay: the head's bias is the critic's baseline value, not something to shrink.
            self.optimizer = torch.optim.AdamW(self.parameters(), lr=lr, weight_decay=0.0, foreach=True)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return self.optimizer

    def _step(self, mask: torch.Tensor, seqs, plens, targets: torch.Tensor, lr: float) -> float:
        """One AdamW step on the masked MSE between V and ``targets`` over these rows."""
        if not bool(mask.any()):
            return 0.0  # rows with no generated token give no loss: skip rather than step on NaN
        opt = self._optimizer_for(lr)
        v = self._values(mask, seqs, plens)
        loss = ((v - targets.to(v.dtype)) ** 2)[mask].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        self.train_steps += 1
        return float(loss.detach())

    def _check_targets(self, rollouts: Rollouts, targets) -> torch.Tensor:
        targets = as_tensor("targets", targets)
        check_shape("targets", targets, tuple(rollouts.mask.shape))
        check_finite("targets", torch.where(rollouts.mask, targets, torch.zeros((), dtype=targets.dtype)))
        return targets

    def update(self, rollouts: Rollouts, targets, *, lr: float = 5e-4, epochs: int = 1,
               minibatch_size: int | None = None) -> float:
        """Regress V on ``targets`` (B, T) — in PPO, the GAE returns A + V
        (``gae(...).info["returns"]``) — with ``epochs`` passes of AdamW over shuffled
        minibatches of ``minibatch_size`` rows (default: the whole batch, one step per epoch).

        Loss = mean over generated positions of (V(s_t) - target_t)^2. The optimizer (and its
        moment estimates) persists across calls, as in a PPO loop. Returns the mean loss over
        the steps taken (each measured before its step).
        """
        seqs, plens = self._sequences(rollouts)
        targets = self._check_targets(rollouts, targets)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        epochs = check_int("epochs", epochs, low=1)
        B = rollouts.batch_size
        size = B if minibatch_size is None else check_int("minibatch_size", minibatch_size, low=1)
        losses = []
        for _ in range(epochs):
            order = torch.randperm(B, generator=self.generator).tolist()
            for start in range(0, B, size):
                idx = order[start:start + size]
                if not bool(rollouts.mask[idx].any()):
                    continue  # nothing generated in these rows: no loss to take a step on
                losses.append(self._step(rollouts.mask[idx], [seqs[i] for i in idx],
                                         [plens[i] for i in idx], targets[idx], lr))
        return sum(losses) / len(losses) if losses else 0.0

    def fit(self, rollouts: Rollouts, *, steps: int, batch_size: int = 16, lr: float = 5e-4,
            seed: int = 0, progress: bool = True) -> pd.DataFrame:
        """Fit V to Monte Carlo returns: the outcome reward-to-go ``rollouts.returns()`` at every
        generated position (for a 0/1 outcome, V then estimates P(success | prefix)).

        ``steps`` AdamW steps on minibatches of ``batch_size`` rows, drawn by walking through
        seeded random permutations of the rows (every row once per epoch). Returns a DataFrame
        with one row per step: ``step``, ``loss`` (the minibatch's masked MSE before the step)
        and ``tokens`` (cumulative token positions the critic processed in this fit, the compute
        it cost). ``attrs["seconds"]`` holds the wall time.

        Defaults (batch 16 rows, lr 5e-4) were tuned on the shipped model: 120 steps on 512
        rollouts of mixed 2-4-operand problems (about 65k token positions, 10-15 s on one CPU
        thread) cut the held-out squared error about 15 % below the best constant; larger
        learning rates were less stable with these 0/1 targets.
        """
        seqs, plens = self._sequences(rollouts)
        steps = check_int("steps", steps, low=1)
        batch_size = check_int("batch_size", batch_size, low=1)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        gen = torch.Generator().manual_seed(check_int("seed", seed))
        targets = rollouts.returns()
        B = rollouts.batch_size
        start_tokens, start_time = self.forward_tokens, time.perf_counter()
        order: list[int] = []
        records = []
        for step in progress_bar(range(steps), desc="critic fit", enabled=progress):
            if len(order) < min(batch_size, B):
                order += torch.randperm(B, generator=gen).tolist()
            idx, order = order[:batch_size], order[batch_size:]
            loss = self._step(rollouts.mask[idx], [seqs[i] for i in idx], [plens[i] for i in idx],
                              targets[idx], lr)
            records.append({"step": step, "loss": loss, "tokens": self.forward_tokens - start_tokens})
        df = pd.DataFrame(records)
        df.attrs["seconds"] = time.perf_counter() - start_time
        return df


# --------------------------------------------------------------------------- turn-level Q (ARCHER)
class TurnQCritic:
    """Tabular Q(o, a) over turns, fitted off-policy by TD(0) on a replay of Rollouts (ARCHER's
    high-level critic, Zhou et al. 2024, arXiv:2402.19446, in tabular form).

    A turn's observation o is ``rollouts.states`` at the turn's first position and its action a is
    the token there, so this fits tabular environments where a turn is one position. Each
    ``fit`` adds the rollouts to the replay and re-fits on all of it by fitted TD(0) sweeps:

        target(o, a, r, o') = r + gamma * sum_a' pi(a' | o') Q(o', a')   (0 after the last turn)
        Q(o, a) <- mean of the targets of the replayed transitions from (o, a)

    until Q stops changing (or ``sweeps`` runs out). ``pi`` (n_obs, n_actions) is the policy being
    evaluated (the current one, so old replay data is reused off-policy); ``pi=None`` uses the
    next action actually taken (SARSA, on-policy for the data's policy). V(o) = sum_a pi(a|o) Q(o, a).
    Deliberate differences: ARCHER trains a separate V network and target networks with soft
    updates; in a table the expectation over pi is exact, so V is derived from Q. Unseen pairs
    keep ``prior`` (default 0).
    """

    def __init__(self, n_obs: int, n_actions: int, *, prior: float = 0.0):
        self.n_obs = check_int("n_obs", n_obs, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        self.prior = check_number("prior", prior)
        self.q = torch.full((self.n_obs, self.n_actions), self.prior, dtype=torch.float64)
        self.pi: torch.Tensor | None = None
        self._replay: list[tuple[torch.Tensor, ...]] = []

    def _turns(self, rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Observation and action of every turn and the presence mask, (B, N)."""
        if rollouts.states is None:
            raise ValueError("rollouts.states: a tabular Q critic needs the observation of every turn")
        obs, present = rollouts.view(rollouts.states, "turn", "first")
        act, _ = rollouts.view(rollouts.tokens, "turn", "first")
        obs, act = obs.long(), act.long()
        if bool((obs[present] >= self.n_obs).any() or (obs[present] < 0).any()):
            raise ValueError(f"rollouts.states: observation outside this critic's {self.n_obs} observations")
        if bool((act[present] >= self.n_actions).any() or (act[present] < 0).any()):
            raise ValueError(f"rollouts.tokens: action outside this critic's {self.n_actions} actions")
        return obs, act, present

    def _check_pi(self, pi) -> torch.Tensor:
        pi = as_tensor("pi", pi).to(torch.float64)
        check_shape("pi", pi, (self.n_obs, self.n_actions))
        check_finite("pi", pi)
        if bool((pi < 0).any()) or not torch.allclose(pi.sum(1), torch.ones(self.n_obs, dtype=torch.float64)):
            raise ValueError("pi: every row must be a probability distribution over actions")
        return pi

    def fit(self, rollouts: Rollouts, *, pi=None, gamma: float = 1.0, sweeps: int = 200) -> "TurnQCritic":
        gamma = check_number("gamma", gamma, low=0.0, high=1.0)
        sweeps = check_int("sweeps", sweeps, low=1)
        self.pi = None if pi is None else self._check_pi(pi)
        obs, act, present = self._turns(rollouts)
        r, _ = rollouts.view(rollouts.rewards, "turn", "sum")
        nxt = torch.zeros_like(present)
        nxt[:, :-1] = present[:, 1:]
        nobs = torch.cat([obs[:, 1:], torch.zeros_like(obs[:, :1])], 1)
        nact = torch.cat([act[:, 1:], torch.zeros_like(act[:, :1])], 1)
        self._replay.append(tuple(x[present] for x in (obs, act, r.to(torch.float64), nxt, nobs, nact)))
        o, a, rr, has_next, no, na = (torch.cat(parts) for parts in zip(*self._replay))
        cell = o * self.n_actions + a
        count = torch.bincount(cell, minlength=self.n_obs * self.n_actions).to(torch.float64)
        seen = count > 0
        for _ in range(sweeps):
            if self.pi is None:
                boot = self.q[no, na]
            else:
                boot = (self.pi[no] * self.q[no]).sum(1)
            target = rr + gamma * torch.where(has_next, boot, 0.0)
            total = torch.zeros(self.n_obs * self.n_actions, dtype=torch.float64).index_add_(0, cell, target)
            new = torch.where(seen, total / count.clamp(min=1), self.q.flatten()).view_as(self.q)
            done = torch.allclose(new, self.q, rtol=0, atol=1e-12)
            self.q = new
            if done:
                break
        return self

    def q_values(self, rollouts: Rollouts) -> torch.Tensor:
        """Q(o_k, a_k) of every turn taken, (B, N); 0 where there is no turn."""
        obs, act, present = self._turns(rollouts)
        return torch.where(present, self.q[obs, act], 0.0)

    def v_values(self, rollouts: Rollouts, pi=None) -> torch.Tensor:
        """V(o_k) = sum_a pi(a | o_k) Q(o_k, a), (B, N); pi defaults to the one given to ``fit``."""
        pi = self.pi if pi is None else self._check_pi(pi)
        if pi is None:
            raise ValueError("pi: V needs the policy's action probabilities (none was given to fit)")
        obs, _, present = self._turns(rollouts)
        return torch.where(present, (pi[obs] * self.q[obs]).sum(-1), 0.0)


# --------------------------------------------------------------------------- SWEET-RL critic
class BTCritic:
    """A tabular turn-advantage critic A(k, a) fitted by Bradley-Terry on trajectory pairs.

    k is the critic's key of a turn: the hidden state index (``privileged=True``: bug, fixed
    flag and observation, i.e. ``truth["hidden_states"]``) or the observation alone
    (``privileged=False``: what the actor sees). For every pair (i, j) of trajectories of the
    same task group with s_i > s_j (outcome scores)

        loss_ij = -log sigmoid(beta * (sum_t A(k_it, a_it) - sum_t A(k_jt, a_jt)))

    averaged over pairs, plus ``l2`` * mean(A^2) (pulls unseen or uninformative entries to 0),
    minimised by Adam (closed-form gradient) for ``steps`` steps (lr ``lr``) from A = 0 (deterministic). This is SWEET-RL's objective (its critic
    is the LLM's log-probability ratio beta * log pi_c / pi_ref summed over a turn's tokens; a
    table replaces it here). Defaults: beta = 1, l2 = 1e-2, steps = 300, lr = 0.1. A critic with no pair to compare (every group's outcomes equal) stays 0.
    Cost of scoring: one critic call per (turn, candidate) scored (``aux_calls``).
    """

    def __init__(self, n_keys: int, n_actions: int, *, privileged: bool, beta: float = 1.0, l2: float = 1e-2):
        self.n_keys = check_int("n_keys", n_keys, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        self.privileged = bool(privileged)
        self.beta = check_number("beta", beta, low=0.0, low_open=True)
        self.l2 = check_number("l2", l2, low=0.0)
        self.table = torch.zeros(self.n_keys, self.n_actions, dtype=torch.float64)
        self.n_pairs = 0
        self.losses: list[float] = []

    @classmethod
    def for_env(cls, env, *, privileged: bool, **kw) -> "BTCritic":
        """A critic sized for a ToolWorld: keys are hidden states or observations."""
        return cls(env.n_hidden if privileged else env.n_obs, env.n_actions, privileged=privileged, **kw)

    def keys(self, rollouts: Rollouts, hidden_states=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The key and action of every turn and the presence mask, each (B, N)."""
        obs, act, present = turn_table(rollouts)
        if self.privileged:
            keys, _ = turn_hidden_states(rollouts, hidden_states, self.n_keys,
                                         "a privileged critic keys turns by the hidden state (training-time only)")
        else:
            keys = obs
        if bool(((keys < 0) | (keys >= self.n_keys))[present].any()):
            raise ValueError(f"rollouts: turn keys outside this critic's {self.n_keys} keys")
        if bool((act[present] >= self.n_actions).any()):
            raise ValueError(f"rollouts: actions outside this critic's {self.n_actions} actions")
        return keys.clamp(0, self.n_keys - 1), act, present

    def fit(self, rollouts: Rollouts, hidden_states=None, *, steps: int = 300, lr: float = 0.1) -> "BTCritic":
        steps = check_int("steps", steps, low=1)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        keys, act, present = self.keys(rollouts, hidden_states)
        s = rollouts.scores.to(torch.float64)
        g = rollouts.group_ids
        better = (g[:, None] == g[None, :]) & (s[:, None] > s[None, :])
        pairs = better.nonzero()
        self.n_pairs = int(pairs.shape[0])
        if self.n_pairs == 0:
            return self  # nothing to compare: every group has equal outcomes (or one member)
        cell = torch.where(present, keys * self.n_actions + act, 0)
        pres = present.to(torch.float64)
        flat_cells = cell[present]
        B, n_par = rollouts.batch_size, self.n_keys * self.n_actions
        win, lose = pairs[:, 0], pairs[:, 1]
        theta = self.table.clone().flatten()
        # Adam by hand on the closed-form gradient: the trajectory score S_b is a sum of table
        # entries, so dL/dtheta is a scatter of dL/dS_b onto the cells each trajectory visited
        m1, m2 = torch.zeros_like(theta), torch.zeros_like(theta)
        b1, b2 = 0.9, 0.999
        for step in range(1, steps + 1):
            S = (theta[cell] * pres).sum(1)
            w = self.beta * torch.sigmoid(-self.beta * (S[win] - S[lose])) / self.n_pairs
            dS = torch.zeros(B, dtype=torch.float64).index_add_(0, win, -w).index_add_(0, lose, w)
            grad = torch.zeros(n_par, dtype=torch.float64).index_add_(
                0, flat_cells, dS[:, None].expand_as(cell)[present]) + 2 * self.l2 * theta / n_par
            m1.mul_(b1).add_(grad, alpha=1 - b1)
            m2.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            theta -= lr * (m1 / (1 - b1 ** step)) / ((m2 / (1 - b2 ** step)).sqrt() + 1e-8)
        S = (theta[cell] * pres).sum(1)
        loss = torch.nn.functional.softplus(-self.beta * (S[win] - S[lose])).mean() + self.l2 * (theta ** 2).mean()
        self.losses.append(float(loss))
        self.table = theta.view(self.n_keys, self.n_actions).clone()
        return self

    def scores(self, rollouts: Rollouts, hidden_states=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Critic values of every candidate action at every turn, (B, N, A), plus actions and presence."""
        keys, act, present = self.keys(rollouts, hidden_states)
        return self.table[keys], act, present


# --------------------------------------------------------------------------- hindsight model (HCA / HCAPO)
class LearnedHindsight:
    """h(a | o, [t,] Z) counted on rollouts, from what the agent sees: the realistic hindsight model.

        h(a | k, z) = (n(k, z, a) + prior * pi(a | o)) / (n(k, z) + prior)

    with k = the observation o (``by_turn=False``, default) or (o, turn index), n the counts of
    turns in trajectories with outcome z. The Dirichlet prior pulls rare keys towards the
    policy itself (h = pi: ratio 1, credit 0), so an unseen key credits nothing. ``fit`` adds
    rollouts (a replay, like ``TurnQCritic``); fit on earlier batches of the same policy to
    avoid scoring a batch with counts that include its own turns (in-sample bias).
    ``pi`` (n_obs, n_actions) is the policy table the prior and the ratios use.
    """

    def __init__(self, pi, *, by_turn: bool = False, prior: float = 1.0, max_turns: int = 200):
        self.pi = as_tensor("pi", pi).detach().to(torch.float64)
        if self.pi.dim() != 2:
            raise ValueError(f"pi: expected an (n_obs, n_actions) table, got shape {tuple(self.pi.shape)}")
        self.by_turn = bool(by_turn)
        self.prior = check_number("prior", prior, low=0.0, low_open=True)
        self.max_turns = int(max_turns)
        n_keys = self.pi.shape[0] * (self.max_turns if self.by_turn else 1)
        self.counts = torch.zeros(2, n_keys, self.pi.shape[1], dtype=torch.float64)
        self.n_fitted = 0

    def _keys(self, rollouts: Rollouts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        obs, act, present = turn_table(rollouts)
        if bool((obs[present] >= self.pi.shape[0]).any()) or bool((act[present] >= self.pi.shape[1]).any()):
            raise ValueError("rollouts: observations / actions outside the policy table pi")
        if self.by_turn:
            if present.shape[1] > self.max_turns:
                raise ValueError(f"rollouts: more turns ({present.shape[1]}) than max_turns={self.max_turns}")
            t = torch.arange(present.shape[1]).expand_as(obs)
            keys = t * self.pi.shape[0] + obs
        else:
            keys = obs
        return keys, obs, act, present

    def fit(self, rollouts: Rollouts, outcome=None) -> "LearnedHindsight":
        z = binary_outcome(rollouts, outcome).long()
        keys, _, act, present = self._keys(rollouts)
        zz = z[:, None].expand_as(keys)
        flat = (zz * self.counts.shape[1] + keys) * self.counts.shape[2] + act
        self.counts.view(-1).index_add_(0, flat[present], torch.ones(int(present.sum()), dtype=torch.float64))
        self.n_fitted += rollouts.batch_size
        return self

    def table(self, z: int) -> torch.Tensor:
        """h(. | key, z) for every key, (n_keys, n_actions)."""
        c = self.counts[int(z)]
        prior = self.pi.repeat(self.counts.shape[1] // self.pi.shape[0], 1)
        return (c + self.prior * prior) / (c.sum(-1, keepdim=True) + self.prior)

    def probs(self, rollouts: Rollouts, outcome=None) -> torch.Tensor:
        """h(a_t | k_t, Z) of every turn's action, (B, N); 1 where there is no turn."""
        z = binary_outcome(rollouts, outcome).long()
        keys, _, act, present = self._keys(rollouts)
        tables = torch.stack([self.table(0), self.table(1)])
        h = tables[z[:, None].expand_as(keys), keys, act]
        return torch.where(present, h, 1.0)

    __call__ = probs
