"""The arithmetic task played by a causal language model: graded Rollouts and Monte Carlo vines.

This is where the tiny transformer meets the data path: prompts go through
``labkit.policies.sampling`` (batched, KV-cached), completions are graded by the task's
verifier, and the result is a ``Rollouts`` whose steps are the ``;``-separated reasoning steps.
``value_fn`` forks continuations from every step boundary, which is what VinePPO and
Math-Shepherd (``labkit.credit.mc``) and the Monte Carlo truth script need.
"""
from __future__ import annotations

from typing import Sequence

import torch

from labkit.core.paths import data_path
from labkit.core.cache import read_meta, require
from labkit.core.checks import check_int, check_number
from labkit.envs.arithmetic.env import ArithmeticTask, Problem, Verdict, operands_of, verify
from labkit.policies.lm import load_lm, task_tokens
from labkit.policies.sampling import fork, sample, to_rollouts
from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts


class ArithmeticLM:
    """A causal LM (``model``, ``tokenizer``) answering ``ArithmeticTask`` problems.

    ``temperature`` is the sampling temperature of rollouts and vines (1 = the policy itself).
    The outcome reward is the verifier's: 1 for a well-formed chain with the right answer.
    """

    BUCKET_WIDTH = 12  # max length spread of prefixes forked in one batch (see prefix_values)

    def __init__(self, model, tokenizer, task: ArithmeticTask | None = None, *, temperature: float = 1.0):
        self.model, self.tokenizer = model, tokenizer
        self.task = task if task is not None else ArithmeticTask(seed=0)
        self.temperature = check_number("temperature", temperature, low=0.0)
        self.tokens = task_tokens(tokenizer)
        self.pad_id = tokenizer.pad_token_id
        config = model.config
        self.context = int(getattr(config, "n_positions", None) or config.max_position_embeddings)

    @classmethod
    def load(cls, name_or_path=None, *, task_seed: int = 0, temperature: float = 1.0) -> "ArithmeticLM":
        """The shipped tiny model (default) or any local/HF causal LM with a compatible tokenizer."""
        model, tokenizer = load_lm(name_or_path)
        return cls(model, tokenizer, ArithmeticTask(seed=task_seed), temperature=temperature)

    # ---- text <-> ids
    def prompt_ids(self, problem: Problem) -> list[int]:
        return self.tokenizer(problem.prompt)["input_ids"]

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.convert_ids_to_tokens(int(token_id))

    def completion_text(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def grade(self, problem: Problem, completion_ids: Sequence[int]) -> Verdict:
        return verify(problem, self.completion_text(completion_ids))

    def _budget(self, rows: list[list[int]]) -> int:
        """New tokens that fit the context after the longest row (the sampler insists)."""
        room = self.context - max(len(r) for r in rows)
        if room < 1:
            raise ValueError(f"rows: a prompt or prefix already fills the model's {self.context}-token context")
        return room

    # ---- rollouts
    def rollouts(self, problems: Sequence[Problem], *, n_per_prompt: int = 1, seed: int = 0) -> Rollouts:
        """Sample ``n_per_prompt`` completions of each problem (one GRPO group per problem).

        Steps are ``;``-separated (the ``;`` closes its step; ``#answer<eos>`` is the last step).
        ``truth`` carries the verifier's verdict per row: ``step_correct`` (B, S) bool aligned with
        the step ids, ``first_error_step`` (B,) (-1 when no step is wrong), ``verdicts``.
        ``info`` keeps ``problems`` and ``prompt_ids`` so vines can restart from any prefix.
        """
        problems = list(problems)
        if not problems:
            raise ValueError("problems: need at least one problem")
        n = check_int("n_per_prompt", n_per_prompt, low=1)
        rows = [p for p in problems for _ in range(n)]
        prompts = [self.prompt_ids(p) for p in rows]
        gen = sample(self.model, prompts, max_new_tokens=self._budget(prompts), temperature=self.temperature,
                     eos_id=self.tokens.eos, pad_id=self.pad_id, seed=seed)
        verdicts = [self.grade(p, c) for p, c in zip(rows, gen.completions())]
        ro = to_rollouts(gen, rewards=torch.tensor([v.reward for v in verdicts]),
                         step_boundary_ids={self.tokens.step_sep},
                         group_ids=torch.arange(len(problems)).repeat_interleave(n),
                         decode=self.token_text, prompts_text=[p.prompt for p in rows])
        S = max(int(ro.n_steps.max()), 1)
        step_correct = torch.zeros(len(rows), S, dtype=torch.bool)
        for b, v in enumerate(verdicts):
            k = min(len(v.step_correct), S)
            step_correct[b, :k] = torch.tensor(v.step_correct[:k], dtype=torch.bool)
        ro.truth.update(step_correct=step_correct, verdicts=verdicts,
                        first_error_step=torch.tensor([-1 if v.first_error is None else v.first_error
                                                       for v in verdicts]))
        ro.info.update(problems=rows, prompt_ids=prompts, generation_cost=gen.forward_tokens)
        return ro

    # ---- vines
    def step_prefixes(self, rollouts: Rollouts) -> tuple[list[list[int]], list[Problem], torch.Tensor]:
        """Prompt + response up to the start of every step: (prefixes, their problems, present mask).

        Prefixes are listed row-major over the (B, S) step grid where ``present`` is True.
        """
        prompts, problems = rollouts.info.get("prompt_ids"), rollouts.info.get("problems")
        if prompts is None or problems is None:
            raise ValueError("rollouts: vines need info['prompt_ids'] and info['problems'] (use ArithmeticLM.rollouts)")
        first_pos, present = rollouts.view(torch.arange(rollouts.horizon).expand_as(rollouts.mask).double(),
                                           "step", "first")
        prefixes, owners = [], []
        for b, i in present.nonzero().tolist():
            start = int(first_pos[b, i])
            prefixes.append(prompts[b] + rollouts.tokens[b, :start].tolist())
            owners.append(problems[b])
        return prefixes, owners, present

    def prefix_values(self, prefixes: list[list[int]], problems: Sequence[Problem], k: int, *,
                      seed: int = 0) -> tuple[torch.Tensor, int]:
        """Mean outcome reward of ``k`` continuations of each prefix (its Monte Carlo value), and
        the number of token positions the model processed to get them (for cost accounting)."""
        _, rewards, forward_tokens = self.fork_completions(prefixes, problems, k, seed=seed)
        return rewards.mean(1), forward_tokens

    def value_fn(self, *, seed: int = 0):
        """A ``value_fn`` for ``labkit.credit.mc``: V before every step from k forked vines."""
        def value_fn(rollouts: Rollouts, k: int) -> tuple[torch.Tensor, Cost]:
            prefixes, problems, present = self.step_prefixes(rollouts)
            values = torch.zeros(present.shape, dtype=torch.float64)
            vals, tokens = self.prefix_values(prefixes, problems, k, seed=seed)
            values[present] = vals
            return values, Cost(policy_forwards=len(prefixes) * k, policy_tokens=tokens)
        return value_fn


    # ---- segment and tree Monte Carlo (SPO, TEMPO)
    def fork_completions(self, prefixes: list[list[int]], problems: Sequence[Problem], k: int, *,
                         seed: int = 0) -> tuple[list[list[list[int]]], torch.Tensor, int]:
        """``k`` sampled continuations of every prefix, kept (not only their mean reward).

        Returns ``(completions, rewards, forward_tokens)``: ``completions[i][j]`` is continuation j
        of prefix i (new token ids, eos included), ``rewards`` (n, k) float64 the verifier's
        reward of prefix-response + continuation, and the token positions the model processed.
        Prefixes are bucketed by length so none is cut short. ``prefix_values`` is the row mean of
        these rewards; TEMPO's tree sampler needs the continuations themselves, to place them in
        the prefix tree.
        """
        k = check_int("k", k, low=1)
        if len(prefixes) != len(problems):
            raise ValueError(f"problems: expected one per prefix ({len(prefixes)}), got {len(problems)}")
        completions: list[list[list[int]]] = [[] for _ in prefixes]
        rewards = torch.zeros(len(prefixes), k, dtype=torch.float64)
        if not prefixes:
            return completions, rewards, 0
        # The sampler gives every row of a batch the same token budget (context - longest row), so
        # prefixes of very different lengths go in separate batches: within a bucket the lengths
        # differ by at most BUCKET_WIDTH, and a short prefix is never cut off for lack of room.
        order = sorted(range(len(prefixes)), key=lambda i: len(prefixes[i]))
        buckets, current = [], [order[0]]
        for i in order[1:]:
            if len(prefixes[i]) - len(prefixes[current[0]]) > self.BUCKET_WIDTH:
                buckets.append(current)
                current = []
            current.append(i)
        buckets.append(current)
        prompt_lens = [len(self.prompt_ids(p)) for p in problems]
        forward_tokens = 0
        for j, bucket in enumerate(buckets):
            rows = [prefixes[i] for i in bucket]
            gen = fork(self.model, rows, k, max_new_tokens=self._budget(rows), temperature=self.temperature,
                       eos_id=self.tokens.eos, pad_id=self.pad_id, seed=seed + 7919 * j)
            forward_tokens += gen.forward_tokens
            for row, cont in enumerate(gen.completions()):  # prefix-major rows
                i = bucket[row // k]
                completions[i].append(cont)
                rewards[i, row % k] = self.grade(problems[i], prefixes[i][prompt_lens[i]:] + cont).reward
        return completions, rewards, forward_tokens

    def _response_ids(self, rollouts: Rollouts) -> tuple[list[list[int]], list[list[int]], list[Problem]]:
        """Per row: the generated token ids (in order), the prompt ids and the problem."""
        prompts, problems = rollouts.info.get("prompt_ids"), rollouts.info.get("problems")
        if prompts is None or problems is None:
            raise ValueError("rollouts: forking needs info['prompt_ids'] and info['problems'] "
                             "(use ArithmeticLM.rollouts or load_reference)")
        responses = [rollouts.tokens[b][rollouts.mask[b]].tolist() for b in range(rollouts.batch_size)]
        return responses, prompts, problems

    def cut_value_fn(self, *, seed: int = 0):
        """A value sampler for ``labkit.credit.mc.spo``: ``fn(rollouts, cuts, k) -> (values, cost)``.

        ``cuts`` (B, T) bool marks generated positions where a segment begins; ``values[b, t]``
        is the Monte Carlo value of the prefix that ends just BEFORE position t (prompt + the
        response up to, not including, token t): the mean reward of ``k`` forked continuations.
        0 where ``cuts`` is False. Identical prefixes (the same prompt and response start, e.g.
        the response start of a GRPO group) are sampled once and share their value and cost.
        Cost: ``policy_forwards`` = distinct prefixes x k, ``policy_tokens`` = positions processed.
        """
        def cut_value_fn(rollouts: Rollouts, cuts: torch.Tensor, k: int) -> tuple[torch.Tensor, Cost]:
            k_ = check_int("k", k, low=1)
            responses, prompts, problems = self._response_ids(rollouts)
            if tuple(cuts.shape) != tuple(rollouts.mask.shape):
                raise ValueError(f"cuts: expected shape {tuple(rollouts.mask.shape)}, got {tuple(cuts.shape)}")
            # column -> index among the row's generated tokens (the prefix length in response tokens)
            rank = rollouts.mask.long().cumsum(1) - 1
            where = (cuts.bool() & rollouts.mask).nonzero().tolist()
            index: dict[tuple[int, ...], int] = {}
            owner: list[Problem] = []
            cells = []
            for b, t in where:
                key = tuple(prompts[b] + responses[b][:int(rank[b, t])])
                if key not in index:
                    index[key] = len(index)
                    owner.append(problems[b])
                cells.append((b, t, index[key]))
            vals, tokens = self.prefix_values([list(key) for key in index], owner, k_, seed=seed)
            values = torch.zeros(rollouts.mask.shape, dtype=torch.float64)
            for b, t, i in cells:
                values[b, t] = vals[i]
            return values, Cost(policy_forwards=len(index) * k_, policy_tokens=tokens)
        return cut_value_fn

    def tree_fn(self, *, seed: int = 0, depth: int | None = None):
        """A tree sampler for ``labkit.credit.mc.tempo``: ``fn(rollouts, branching) -> (leaves, cost)``.

        Every rollout is turned into a tree: at the start of each of its reasoning steps (the
        response start included) ``branching`` continuations are forked from the prompt + the
        response so far. The rollout is one leaf of the tree; the forks are the others.
        ``depth`` (default None = every step start) limits the fork points to that many step
        starts, spread evenly from the first step on (the response start is always one).

        ``leaves`` is a list of ``(row, fork_len, response_ids, reward)``: the rollout row the
        fork belongs to, how many response tokens it shares with that rollout by construction
        (the fork point), the full response (shared part + continuation) and its reward. Cost:
        ``policy_forwards`` = forked sequences, ``policy_tokens`` = positions processed.
        """
        if depth is not None:
            depth = check_int("depth", depth, low=1)

        def tree_fn(rollouts: Rollouts, branching: int) -> tuple[list[tuple[int, int, list[int], float]], Cost]:
            m = check_int("branching", branching, low=1)
            responses, prompts, problems = self._response_ids(rollouts)
            rank = rollouts.mask.long().cumsum(1) - 1
            first_pos, present = rollouts.view(rank.double(), "step", "first")
            points, prefixes, owners = [], [], []
            for b in range(rollouts.batch_size):
                starts = [int(first_pos[b, i]) for i in present[b].nonzero().flatten().tolist()]
                if depth is not None and len(starts) > depth:
                    pick = torch.linspace(0, len(starts) - 1, depth).round().long().unique().tolist()
                    starts = [starts[i] for i in pick]
                for n in starts:
                    points.append((b, n))
                    prefixes.append(prompts[b] + responses[b][:n])
                    owners.append(problems[b])
            conts, rewards, tokens = self.fork_completions(prefixes, owners, m, seed=seed)
            leaves = [(b, n, responses[b][:n] + c, float(r))
                      for (b, n), row, rs in zip(points, conts, rewards.tolist()) for c, r in zip(row, rs)]
            return leaves, Cost(policy_forwards=len(prefixes) * m, policy_tokens=tokens)
        return tree_fn


    # ---- segments as players (SCAR)
    MAX_SEGMENTS = 10  # 2**10 coalitions per rollout; more is a sign of a malformed completion
    SEGMENT_GAMES = ("resample", "delete")
    STEP_BUDGET = 16   # new tokens allowed for one regenerated step (a step is <= 12 characters)
    GAME_CHUNK = 512   # rows sampled per batch in the resampling game (bounds the KV-cache memory)

    def segment_coalition_values(self, rollouts: Rollouts, k: int, *, game: str = "resample",
                                 seed: int = 0) -> tuple[torch.Tensor, Cost]:
        """v(S) for every coalition S of every rollout's reasoning segments (its ``;`` steps).

        The game SCAR plays on a completion: segment i is a player, the verifier's reward is
        the payoff, and coalition S keeps its segments. What a *missing* segment means is the
        modelling choice, and Shapley values depend on it:

        * ``game="resample"`` (default): a missing segment is rewritten by the model. Walking the
          segments in order, a kept one is copied, a missing one is sampled (one step, up to
          ``;`` or eos) from the model given everything so far; after the last segment, an
          unfinished text is continued to eos. v(S) = mean reward of ``k`` such completions.
          "What if only these steps had been fixed and the model had written the rest?"
        * ``game="delete"``: missing segments are cut out. If S keeps the final segment (the
          ``#answer``, where the completion ended), the kept text is graded as is; otherwise the
          model continues the prompt + kept text k times. Deleted text leaves chains no policy
          would write (a later step that uses a result no earlier step produced), so this game
          measures the verifier's format more than the reasoning — shown in notebook 09 as the
          pitfall.

        In both, v(all segments) is the rollout's own reward (no sampling) and v(empty) is a
        Monte Carlo value of the prompt, so Shapley values split ``reward - V(prompt)``, the same
        total the step advantages of VinePPO telescope to; coalitions that keep a prefix of
        segments {0..j} get the Monte Carlo value of that prefix in both games.

        Returns ``(values, cost)``: values (B, 2**M) float64, M = the batch's largest number of
        segments, column = bitmask of kept segments (bit i = segment i); for a row with m < M
        segments, bits >= m do not change the value (absent players). Cost: one policy forward
        per sampled sequence and the token positions processed.
        """
        k = check_int("k", k, low=1)
        if game not in self.SEGMENT_GAMES:
            raise ValueError(f"game: expected one of {self.SEGMENT_GAMES}, got {game!r}")
        prompts, problems = rollouts.info.get("prompt_ids"), rollouts.info.get("problems")
        if prompts is None or problems is None:
            raise ValueError("rollouts: segment games need info['prompt_ids'] and info['problems'] "
                             "(use ArithmeticLM.rollouts or load_reference)")
        n_seg = rollouts.n_steps
        M = int(n_seg.max())
        if M > self.MAX_SEGMENTS:
            raise ValueError(f"rollouts: a completion has {M} segments; exact segment Shapley is limited to "
                             f"{self.MAX_SEGMENTS} (2**{self.MAX_SEGMENTS} coalitions each)")
        B = rollouts.batch_size
        segments = [[rollouts.tokens[b][rollouts.step_ids[b] == i].tolist() for i in range(int(n_seg[b]))]
                    for b in range(B)]
        values = torch.zeros(B, 2 ** M, dtype=torch.float64)
        play = self._resample_game if game == "resample" else self._delete_game
        own, cost = play(segments, prompts, problems, k, seed)  # own[b]: (2**m_b,) over its own segments
        for b in range(B):
            m = len(segments[b])
            cols = torch.arange(2 ** M) & (2 ** m - 1)  # bits beyond the row's segments are ignored
            values[b] = own[b][cols]
            values[b, 2 ** M - 1] = values[b, 2 ** m - 1] = float(rollouts.scores[b])
        return values, cost

    def _delete_game(self, segments, prompts, problems, k, seed):
        own = [torch.zeros(2 ** len(segs), dtype=torch.float64) for segs in segments]
        to_sample: dict[tuple, list[tuple[int, int]]] = {}  # prefix ids -> cells (same prompt = same problem)
        for b, segs in enumerate(segments):
            m = len(segs)
            for mask in range(2 ** m):
                kept = [tok for i in range(m) if mask >> i & 1 for tok in segs[i]]
                if m and mask >> (m - 1) & 1:  # the answer is kept: grade the kept text as is
                    own[b][mask] = float(self.grade(problems[b], kept).reward)
                else:
                    to_sample.setdefault(tuple(prompts[b] + kept), []).append((b, mask))
        keys = list(to_sample)
        vals, tokens = self.prefix_values([list(key) for key in keys],
                                          [problems[to_sample[key][0][0]] for key in keys], k, seed=seed)
        for key, v in zip(keys, vals.tolist()):
            for b, mask in to_sample[key]:
                own[b][mask] = v
        return own, Cost(policy_forwards=len(keys) * k, policy_tokens=tokens)

    def _resample_game(self, segments, prompts, problems, k, seed):
        eos = self.tokens.eos
        # One "copy" per (row, coalition, vine): its text so far and whether it has ended.
        copies = [(b, mask) for b, segs in enumerate(segments) for mask in range(2 ** len(segs)) for _ in range(k)]
        texts = [[] for _ in copies]
        ended = [False] * len(copies)
        n_seqs, n_tokens = 0, 0
        longest = max(len(s) for s in segments)

        def generate(todo, *, stop_at_step, round_seed):
            nonlocal n_seqs, n_tokens
            # In chunks: one batch of thousands of rows would hold all their KV caches at once.
            for j in range(0, len(todo), self.GAME_CHUNK):
                chunk = todo[j:j + self.GAME_CHUNK]
                rows = [prompts[copies[c][0]] + texts[c] for c in chunk]
                budget = min(self.STEP_BUDGET, self._budget(rows)) if stop_at_step else self._budget(rows)
                gen = sample(self.model, rows, max_new_tokens=budget, temperature=self.temperature, eos_id=eos,
                             pad_id=self.pad_id, seed=round_seed + j,
                             stop_ids=(self.tokens.step_sep,) if stop_at_step else ())
                n_seqs, n_tokens = n_seqs + len(rows), n_tokens + gen.forward_tokens
                for c, new in zip(chunk, gen.completions()):
                    texts[c] += new
                    # eos ends the completion; so does running out of budget mid-step (graded as is)
                    if not new or new[-1] == eos or (stop_at_step and new[-1] != self.tokens.step_sep):
                        ended[c] = True

        for i in range(longest):
            todo = []
            for c, (b, mask) in enumerate(copies):
                if ended[c] or i >= len(segments[b]):
                    continue
                if mask >> i & 1:
                    texts[c] += segments[b][i]
                    ended[c] = bool(segments[b][i]) and segments[b][i][-1] == eos
                else:
                    todo.append(c)
            if todo:
                generate(todo, stop_at_step=True, round_seed=seed + 7919 * i)
        rest = [c for c in range(len(copies)) if not ended[c] and (not texts[c] or texts[c][-1] != eos)]
        if rest:  # the last segment was not an answer: let the model finish
            generate(rest, stop_at_step=False, round_seed=seed + 7919 * longest)
        own = [torch.zeros(2 ** len(segs), dtype=torch.float64) for segs in segments]
        for c, (b, mask) in enumerate(copies):
            own[b][mask] += float(self.grade(problems[b], texts[c]).reward) / k
        return own, Cost(policy_forwards=n_seqs, policy_tokens=n_tokens)

    # ---- other models' log-probs, tuned models, interventions (implicit and counterfactual credit)
    TREG_CONDITIONS = {"better": ";", "worse": "#"}  # conditioning token that replaces <bos> (T-REG)
    TUNED_MODELS = {"dpo": "dpo_model.safetensors", "treg": "treg_model.safetensors"}
    LOGPROB_ROWS = 256  # rows per no-grad forward in rollout_logprobs (bounds memory)

    def tuned(self, name: str = "dpo", path=None) -> "ArithmeticLM":
        """A copy of this model with fine-tuned weights from ``data/implicit_lm`` (or ``path``),
        built by ``scripts/train_implicit_lm.py``: ``"dpo"`` (DPO on verifier preference pairs) or
        ``"treg"`` (taught the T-REG conditioning tokens). Same config, tokenizer and task; the
        weights are read from safetensors only."""
        import copy
        from pathlib import Path

        from safetensors.torch import load_model

        if name not in self.TUNED_MODELS:
            raise ValueError(f"name: expected one of {sorted(self.TUNED_MODELS)}, got {name!r}")
        if path is None:
            # the shipped copies were tuned from the shipped tiny model: refused, with the command
            # that retrains them, once that model changed (their training log carries the stamp)
            read_meta(data_path("implicit_lm", "train_log.json"), script="train_implicit_lm.py",
                      what="training log of the tuned copies")
        folder = Path(path) if path is not None else data_path("implicit_lm")
        file = require(folder / self.TUNED_MODELS[name], script="train_implicit_lm.py", what="tuned model")
        model = copy.deepcopy(self.model)
        load_model(model, str(file))
        model.eval()
        return ArithmeticLM(model, self.tokenizer, self.task, temperature=self.temperature)

    def condition_prompts(self, prompts: list[list[int]], condition: str | None) -> list[list[int]]:
        """Prompts with <bos> replaced by the T-REG conditioning token (``TREG_CONDITIONS``), so
        every other token keeps its position."""
        if condition is None:
            return [list(p) for p in prompts]
        if condition not in self.TREG_CONDITIONS:
            raise ValueError(f"condition: expected one of {sorted(self.TREG_CONDITIONS)} or None, got {condition!r}")
        tok = self.tokenizer.encode(self.TREG_CONDITIONS[condition], add_special_tokens=False)[0]
        return [[tok] + list(p[1:]) for p in prompts]

    def _prompt_rows(self, rollouts: Rollouts) -> list[list[int]]:
        """Every row's prompt ids: ``info['prompt_ids']`` (this class's rollouts) or the tokenised
        ``prompts`` text (a file read by ``labkit.io``)."""
        prompts = rollouts.info.get("prompt_ids")
        if prompts is None and rollouts.prompts is not None:
            prompts = [self.tokenizer(p)["input_ids"] for p in rollouts.prompts]
        if prompts is None:
            raise ValueError("rollouts: need info['prompt_ids'] or prompts (use ArithmeticLM.rollouts, "
                             "load_reference or a file with a prompt per row)")
        return prompts

    def _per_position(self, fn, rollouts: Rollouts, model, condition: str | None) -> torch.Tensor:
        """``fn(model, prompts, tokens, mask, pad_id=...)`` over the batch in chunks, float64, no grad."""
        prompts = self.condition_prompts(self._prompt_rows(rollouts), condition)
        model = self.model if model is None else model
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a causal LM (torch module), got {type(model).__name__}")
        out = torch.zeros(rollouts.mask.shape, dtype=torch.float64)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for s in range(0, rollouts.batch_size, self.LOGPROB_ROWS):
                    rows = slice(s, s + self.LOGPROB_ROWS)
                    out[rows] = fn(model, prompts[rows], rollouts.tokens[rows], rollouts.mask[rows],
                                   pad_id=self.pad_id).double()
        finally:
            model.train(was_training)
        return out

    def rollout_logprobs(self, rollouts: Rollouts, *, model=None, condition: str | None = None) -> torch.Tensor:
        """log p(token_t | prompt, tokens before t) of every generated token under ``model``
        (default: this model), (B, T) float64, 0 off the mask, no grad. ``condition`` puts a
        T-REG conditioning token in place of <bos> ("better" / "worse"; see ``TREG_CONDITIONS``).
        The reference log-probs of implicit-reward credit are ``rollout_logprobs(ro)`` of the
        base model; the tuned policy's are ``tuned("dpo").rollout_logprobs(ro)``."""
        from labkit.policies.lm import sequence_logprobs

        return self._per_position(sequence_logprobs, rollouts, model, condition)

    def rollout_sum_pi_squared(self, rollouts: Rollouts, *, model=None) -> torch.Tensor:
        """sum_v p(v | prompt, tokens before t)^2 at every generated position under ``model``
        (default: this model), (B, T) float64, 0 off the mask: the optimal token baseline's
        ``sum_pi_squared`` (labkit.credit.token_baseline)."""
        from labkit.policies.lm import sequence_sum_pi_squared

        return self._per_position(sequence_sum_pi_squared, rollouts, model, None)

    def greedy_scores(self, rollouts: Rollouts, *, seed: int = 0) -> tuple[torch.Tensor, int]:
        """ReMax's baseline (labkit.credit.episode.remax): the verifier's reward of this model's
        greedy (argmax) answer to every row's prompt, (B,) float64, and the tokens the greedy
        generation ran through the model. Each distinct prompt is answered once."""
        seed = check_int("seed", seed)
        prompts = self._prompt_rows(rollouts)
        problems = self._problems(rollouts)
        distinct = {}
        for row, ids in enumerate(prompts):
            distinct.setdefault(tuple(ids), row)
        rows = list(distinct.values())
        gen = sample(self.model, [prompts[r] for r in rows], max_new_tokens=self._budget([prompts[r] for r in rows]),
                     temperature=0.0, eos_id=self.tokens.eos, pad_id=self.pad_id, seed=seed)
        reward = {key: self.grade(problems[r], c).reward for key, r, c in zip(distinct, rows, gen.completions())}
        return torch.tensor([float(reward[tuple(ids)]) for ids in prompts], dtype=torch.float64), gen.forward_tokens

    #: The verifier's three signals as separate reward functions, TRL-style (``reward_parts``).
    REWARD_PARTS = ("answer", "format", "steps")

    def reward_parts(self, rollouts: Rollouts) -> torch.Tensor:
        """Each row's answer graded by the verifier's three signals as separate reward functions,
        (B, 3) float64 in the order of ``REWARD_PARTS``: the answer is right, the chain has the
        reference's shape, and the share of its segments that are correct. (The outcome reward is
        1 when the first two are.) GDPO's ``reward_parts`` (labkit.credit.episode.gdpo)."""
        problems = self._problems(rollouts)
        rows = []
        for b, problem in enumerate(problems):
            v = self.grade(problem, rollouts.tokens[b][rollouts.mask[b]].tolist())
            share = sum(v.step_correct) / len(v.step_correct) if v.step_correct else 0.0
            rows.append([float(v.answer_correct), float(v.well_formed), share])
        return torch.tensor(rows, dtype=torch.float64)

    def _problems(self, rollouts: Rollouts) -> list[Problem]:
        problems = rollouts.info.get("problems")
        if problems is None:
            if rollouts.prompts is None:
                raise ValueError("rollouts: need info['problems'] or prompts to grade the answers")
            problems = [self.task.problem(operands_of(p)) for p in rollouts.prompts]
        return list(problems)

    def credit_inputs(self, rollouts: Rollouts, *, seed: int = 0) -> tuple[dict, dict]:
        """``(inputs, costs)``: what the estimators that need more than the rollouts get from this
        model and its verifier, by option name: ``reward_parts`` (GDPO), ``greedy_scores``
        (ReMax) and ``sum_pi_squared`` (the optimal token baseline); ``costs`` the model work
        each took beyond the sampled batch, as a ``Cost`` by option name."""
        greedy, greedy_tokens = self.greedy_scores(rollouts, seed=seed)
        n_prompts = len({tuple(p) for p in self._prompt_rows(rollouts)})
        inputs = {"reward_parts": self.reward_parts(rollouts), "greedy_scores": greedy,
                  "sum_pi_squared": self.rollout_sum_pi_squared(rollouts)}
        costs = {"greedy_scores": Cost(policy_forwards=n_prompts, policy_tokens=int(greedy_tokens))}
        return inputs, costs

    def step_rewrite_fn(self, *, seed: int = 0):
        """A ``rewrite_fn`` for InT (``labkit.credit.counterfactual.int_interventions``).

        ``rewrite_fn(rollouts, cells, k) -> (outcomes, changed, cost)``: for every ``(b, i)`` in
        ``cells``, the model rewrites step i of rollout b ``k`` times from the prefix before it
        (one step: up to ``;`` or eos) and then writes on to eos; each new completion is graded
        by the verifier. ``outcomes`` (n, k) float64 are the rewards, ``changed`` (n, k) bool says
        whether the rewritten step differs from the original one (an intervention; an identical
        rewrite is a replay). Cost: one policy forward per sampled sequence (rewrites and
        continuations) and the token positions processed.
        """
        seed = check_int("seed", seed)

        def rewrite_fn(rollouts: Rollouts, cells, k: int):
            k = check_int("k", k, low=1)
            prompts, problems = rollouts.info.get("prompt_ids"), rollouts.info.get("problems")
            if prompts is None or problems is None:
                raise ValueError("rollouts: rewrites need info['prompt_ids'] and info['problems'] "
                                 "(use ArithmeticLM.rollouts or load_reference)")
            cells = [(int(b), int(i)) for b, i in cells]
            n = len(cells)
            outcomes = torch.zeros(n, k, dtype=torch.float64)
            changed = torch.zeros(n, k, dtype=torch.bool)
            if n == 0:
                return outcomes, changed, Cost()
            eos, sep = self.tokens.eos, self.tokens.step_sep
            heads, originals = [], []
            for b, i in cells:
                where = (rollouts.step_ids[b] == i).nonzero().flatten()
                if where.numel() == 0:
                    raise ValueError(f"cells: rollout {b} has no step {i}")
                start, stop = int(where[0]), int(where[-1]) + 1
                heads.append(rollouts.tokens[b, :start].tolist())
                originals.append(rollouts.tokens[b, start:stop].tolist())
            rows = [prompts[b] + heads[c] for c, (b, _) in enumerate(cells) for _ in range(k)]
            budget = min(self.STEP_BUDGET, self._budget(rows))
            gen = sample(self.model, rows, max_new_tokens=budget, temperature=self.temperature, eos_id=eos,
                         pad_id=self.pad_id, seed=seed, stop_ids=(sep,))
            n_seqs, n_tokens = len(rows), gen.forward_tokens
            new_steps = gen.completions()
            texts = [heads[r // k] + new for r, new in enumerate(new_steps)]
            go_on = [r for r, new in enumerate(new_steps) if new and new[-1] == sep]
            if go_on:  # the rewritten step closed with ';': let the model write the rest
                more = [prompts[cells[r // k][0]] + texts[r] for r in go_on]
                cont = sample(self.model, more, max_new_tokens=self._budget(more), temperature=self.temperature,
                              eos_id=eos, pad_id=self.pad_id, seed=seed + 1)
                n_seqs, n_tokens = n_seqs + len(more), n_tokens + cont.forward_tokens
                for r, new in zip(go_on, cont.completions()):
                    texts[r] = texts[r] + new
            for r, new in enumerate(new_steps):
                c = r // k
                b = cells[c][0]
                outcomes[c, r % k] = self.grade(problems[b], texts[r]).reward
                changed[c, r % k] = new != originals[c]
            return outcomes, changed, Cost(policy_forwards=n_seqs, policy_tokens=n_tokens)

        return rewrite_fn

    def outcome_attribution_fn(self, scorer):
        """An ``outcome_model`` for ACPO-style attribution (``labkit.credit.redistribution``).

        ``scorer`` is a value model with a transformer ``trunk`` and a scalar ``head`` (e.g. a
        fitted ``labkit.learn.critics.LMCritic``, duck-typed): its value of the whole
        prompt + completion is the outcome score. Returns ``fn(rollouts) -> (scores, embeds)``:
        ``scores`` (B,) the scorer's outcome prediction, differentiable with respect to
        ``embeds`` (B, T, D), the input embeddings of the generated tokens (a leaf tensor that
        requires grad; the prompt's embeddings are held fixed).
        """
        trunk, head = getattr(scorer, "trunk", None), getattr(scorer, "head", None)
        if not isinstance(trunk, torch.nn.Module) or not isinstance(head, torch.nn.Module):
            raise TypeError("scorer: expected a value model with a transformer `trunk` and a scalar `head` "
                            "(e.g. labkit.learn.critics.LMCritic)")

        def fn(rollouts: Rollouts):
            prompts = rollouts.info.get("prompt_ids")
            if prompts is None:
                raise ValueError("rollouts: need info['prompt_ids'] (use ArithmeticLM.rollouts or load_reference)")
            table = trunk.get_input_embeddings()
            lengths = rollouts.mask.sum(1).tolist()
            gen_emb = table(rollouts.tokens.clamp(min=0)).detach().requires_grad_(True)  # (B, T, D)
            seqs = [torch.cat([table(torch.tensor(p)).detach(), gen_emb[b, :n]]) for b, (p, n) in
                    enumerate(zip(prompts, lengths))]
            L = max(len(s) for s in seqs)
            x = torch.zeros(len(seqs), L, gen_emb.shape[-1])
            attention = torch.zeros(len(seqs), L, dtype=torch.long)
            x = torch.stack([torch.cat([s, x[0, :L - len(s)]]) for s in seqs])
            for b, s in enumerate(seqs):
                attention[b, :len(s)] = 1
            h = trunk(inputs_embeds=x, attention_mask=attention).last_hidden_state
            last = torch.tensor([len(s) - 1 for s in seqs])
            scores = head(h[torch.arange(len(seqs)), last]).squeeze(-1)
            return scores, gen_emb

        return fn

    def prefix_score_fn(self, scorer):
        """Prefix scores for RED (``labkit.credit.redistribution.red``) from any model with
        ``prefix_values(list of token-id prefixes) -> (N,)`` (e.g. a fitted ``LMCritic``, used as
        a stand-in outcome reward model). Returns ``fn(rollouts) -> (scores, prompt_scores)``:
        ``scores`` (B, T) the value after every generated token (0 off the mask) and
        ``prompt_scores`` (B,) the value of the prompt alone; ``fn.calls`` counts scored prefixes."""
        if not callable(getattr(scorer, "prefix_values", None)):
            raise TypeError("scorer: expected a model with prefix_values(prefixes) (e.g. labkit.learn.critics.LMCritic)")

        def fn(rollouts: Rollouts):
            prompts = rollouts.info.get("prompt_ids")
            if prompts is None:
                raise ValueError("rollouts: need info['prompt_ids'] (use ArithmeticLM.rollouts or load_reference)")
            cells = rollouts.mask.nonzero().tolist()
            prefixes = [prompts[b] + rollouts.tokens[b, :t + 1].tolist() for b, t in cells]
            vals = scorer.prefix_values(prefixes + [list(p) for p in prompts])
            scores = torch.zeros(rollouts.mask.shape, dtype=torch.float64)
            scores[rollouts.mask] = vals[:len(cells)].double()
            fn.calls += len(prefixes) + len(prompts)
            return scores, vals[len(cells):].double()

        fn.calls = 0
        return fn
