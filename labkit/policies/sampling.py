"""Batched, KV-cached sampling and forking ("vines") for any Hugging Face causal LM.

Three jobs, one decoding loop:

* ``sample``: continue a batch of prompts, recording per position the log-probability and the
  entropy of the policy (what every credit estimator and the training loop need).
* ``fork`` / ``fork_values``: continue each of many *prefixes* (prompt + partial response) k
  times. This is VinePPO's Monte Carlo value estimate V(prefix) = mean reward of k fresh
  continuations. Each distinct prefix runs through the model once; its key/value cache is then
  copied k times along the batch dimension, so the k vines only pay for the tokens they add.
* ``to_rollouts``: turn a ``Generation`` plus outcome rewards into ``labkit.core.rollouts.Rollouts``.

The loop is written by hand over ``model(input_ids, past_key_values=..., use_cache=True)``
rather than calling ``model.generate``: the lab needs the untempered log-probs and entropies at
every position, a cache that can be expanded after the prefix, and an exact count of the token
positions the model processed (for compute-matched comparisons of estimators).

Conventions:

* Prompts are lists of integer token ids (no tokenizer needed). They are *left*-padded so every
  row's next token sits in the last column; the attention mask hides the padding and the
  position ids restart at 0 on each row's first real token, so a prompt gets the same logits
  alone or inside a padded batch (checked in ``tests/policies/test_sampling.py``).
* Tokens are drawn from softmax(logits / temperature); temperature 0 is greedy (argmax).
* ``logprobs`` and ``entropies`` always describe the *untempered* model distribution
  softmax(logits), i.e. the policy pi that a policy gradient differentiates, whatever temperature
  was used to draw the tokens. (At temperature 1, the default, the two coincide.)
* A row stops after emitting ``eos_id``; the eos is kept as its last generated token and the
  rest of the row is ``pad_id`` with ``mask`` False. Decoding stops early once every row is done.

Speed (see ``benchmarks/vine_throughput.py``): a tiny model is dominated by per-call overhead, so
the win is batching everything into one loop. Two further savings: the cache is preallocated
and written in place (transformers' ``DynamicCache`` concatenates the whole cache every step),
and finished rows are dropped from the decode batch once a quarter of it has finished.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from labkit.core.checks import as_tensor, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts

__all__ = ["Generation", "sample", "fork", "fork_values", "to_rollouts"]


# --------------------------------------------------------------------------- result type
@dataclass(eq=False)
class Generation:
    """A batch of B sampled continuations, padded to the T_new decoding steps that were run.

    ``prompt_ids[b]``: the prompt (or prefix) row b continues. ``tokens`` (B, T_new) long, pad_id
    after a row's eos. ``mask`` (B, T_new) bool: generated positions, eos included.
    ``logprobs`` / ``entropies`` (B, T_new) float32: log pi(token) and the entropy of pi at each
    generated position under the untempered model (0 off the mask). ``group_ids`` (B,): index of
    the distinct prompt a row continues, in order of first appearance (rows that share a prompt
    share a group, as GRPO wants). ``finished`` (B,): the row emitted eos (False = cut off by
    max_new_tokens). ``forward_tokens``: real (non-pad) token positions the model processed;
    ``forward_passes``: model calls. ``rewards`` (B,) is filled by ``fork_values``.
    """

    prompt_ids: list[list[int]]
    tokens: torch.Tensor
    mask: torch.Tensor
    logprobs: torch.Tensor
    entropies: torch.Tensor
    group_ids: torch.Tensor
    finished: torch.Tensor
    forward_tokens: int
    forward_passes: int
    temperature: float
    rewards: torch.Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """Generated tokens per row (eos included), (B,)."""
        return self.mask.sum(1)

    def completions(self) -> list[list[int]]:
        """The generated ids of every row, eos included, padding dropped."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths.tolist())]

    def sequences(self) -> list[list[int]]:
        """Prompt followed by completion, per row (what a full forward would re-score)."""
        return [p + c for p, c in zip(self.prompt_ids, self.completions())]


# --------------------------------------------------------------------------- input checks
def _check_model(model: Any) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module (a Hugging Face causal LM), "
                        f"got {type(model).__name__}")
    return model


def check_token_rows(name: str, prompts: Any, vocab_size: int | None) -> list[list[int]]:
    """A non-empty list of non-empty lists of token ids inside the vocabulary."""
    if isinstance(prompts, torch.Tensor) or not isinstance(prompts, Sequence) or isinstance(prompts, str):
        raise TypeError(f"{name}: expected a list of token-id lists, got {type(prompts).__name__}")
    if len(prompts) == 0:
        raise ValueError(f"{name}: need at least one")
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, torch.Tensor):
            p = p.tolist()
        if isinstance(p, str) or not isinstance(p, Sequence):
            raise TypeError(f"{name}: entry {i} is not a list of token ids ({type(p).__name__})")
        if len(p) == 0:
            raise ValueError(f"{name}: entry {i} is empty; a prompt needs at least one token (e.g. <bos>)")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            raise TypeError(f"{name}: entry {i} holds something other than integer token ids")
        if min(p) < 0 or (vocab_size is not None and max(p) >= vocab_size):
            raise ValueError(f"{name}: entry {i} has a token id outside [0, {vocab_size})")
        out.append(list(p))
    return out


def _make_generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator | None:
    if generator is not None and seed is not None:
        raise ValueError("seed: pass either a generator or a seed, not both")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    if seed is not None:
        return torch.Generator().manual_seed(check_int("seed", seed))
    return generator  # None: torch's global RNG (reproducible only under torch.manual_seed)


def _context_size(model: torch.nn.Module) -> int | None:
    config = getattr(model, "config", None)
    return getattr(config, "max_position_embeddings", None) if config is not None else None


def _vocab_size(model: torch.nn.Module) -> int | None:
    config = getattr(model, "config", None)
    return getattr(config, "vocab_size", None) if config is not None else None


def _model_device(model: torch.nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


# --------------------------------------------------------------------------- the KV cache
def _select_cache_rows(cache: Any, index: torch.Tensor) -> Any:
    """Row b of the returned cache is row ``index[b]`` of ``cache`` (rows may repeat).

    transformers >= 4.56 returns ``Cache`` objects (``DynamicCache`` by default) whose layers
    expose ``batch_select_indices``: it rebinds each layer's key/value tensors to
    ``keys[index]`` (a copy), so k repeats of a row become k independent rows that later
    diverge. Older models return a tuple of (key, value) tuples, handled by indexing each tensor.
    """
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index.to(_cache_device(cache)))
        return cache
    if isinstance(cache, (tuple, list)):
        return tuple(tuple(t.index_select(0, index.to(t.device)) for t in layer) for layer in cache)
    raise TypeError(f"model: returned a past_key_values of unsupported type {type(cache).__name__}")


def _cache_device(cache: Any) -> torch.device:
    for layer in getattr(cache, "layers", []):
        keys = getattr(layer, "keys", None)
        if isinstance(keys, torch.Tensor):
            return keys.device
    return torch.device("cpu")


try:  # transformers >= 4.56; older versions keep the (slower) default cache
    from transformers.cache_utils import DynamicLayer as _DynamicLayer
except ImportError:  # pragma: no cover
    _DynamicLayer = None

if _DynamicLayer is not None:
    class _PreallocatedLayer(_DynamicLayer):
        """A ``DynamicLayer`` whose keys/values live in a buffer with room for ``capacity`` positions.

        ``DynamicLayer.update`` concatenates the whole cache with each new token, copying
        O(B * T) memory per step (quadratic in T overall). Here a step writes one column in place
        and ``keys`` / ``values`` are views of the filled part, so every other ``DynamicLayer``
        method (sequence length, mask sizes) keeps working as is. Measured on the lab's tiny
        model at 256 vines x 30 tokens: ~5-10 % of fork's wall time; more for longer outputs.
        """

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int):
            super().__init__()
            n = keys.shape[-2]
            self._k = keys.new_empty(*keys.shape[:-2], capacity, keys.shape[-1])
            self._v = values.new_empty(*values.shape[:-2], capacity, values.shape[-1])
            self._k[..., :n, :] = keys
            self._v[..., :n, :] = values
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._rebind(n)

        def _rebind(self, n: int) -> None:
            self._n = n
            self.keys, self.values = self._k[..., :n, :], self._v[..., :n, :]

        def update(self, key_states, value_states, *args, **kwargs):
            n, m = self._n, key_states.shape[-2]
            if n + m > self._k.shape[-2]:  # out of room: grow like a plain DynamicLayer
                self._k = torch.cat([self.keys, key_states], dim=-2)
                self._v = torch.cat([self.values, value_states], dim=-2)
            else:
                self._k[..., n:n + m, :] = key_states
                self._v[..., n:n + m, :] = value_states
            self._rebind(n + m)
            return self.keys, self.values

        # Row and length edits act on the buffers, so the views never go stale.
        def batch_select_indices(self, indices: torch.Tensor) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._rebind(self._n)

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            self.batch_select_indices(beam_idx.to(self._k.device))

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._k = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._v.repeat_interleave(repeats, dim=0)
            self._rebind(self._n)

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)  # validates the argument, shortens the views
            self._n = self.keys.shape[-2]

        def reset(self) -> None:
            self._rebind(0)


def _preallocate(cache: Any, capacity: int) -> Any:
    """Swap every plain ``DynamicLayer`` of ``cache`` for a ``_PreallocatedLayer`` (same content).

    Other layer types (sliding-window, linear-attention, ...) and legacy tuple caches are left as
    they are: still correct, only without the speed-up.
    """
    layers = getattr(cache, "layers", None)
    if _DynamicLayer is None or layers is None:
        return cache
    for i, layer in enumerate(layers):
        # A filled layer holds a non-empty keys tensor (transformers 4.56 has no is_initialized)
        keys = getattr(layer, "keys", None)
        if type(layer) is _DynamicLayer and isinstance(keys, torch.Tensor) and keys.numel() > 0:
            layers[i] = _PreallocatedLayer(layer.keys, layer.values, capacity)
    return cache


# --------------------------------------------------------------------------- the decoding loop
_COMPACT_AT = 0.75  # shrink the decode batch once at most this fraction of its rows is live


def _generate(model: torch.nn.Module, rows: list[list[int]], *, max_new_tokens: int,
              temperature: float, eos_id: int, pad_id: int,
              generator: torch.Generator | None, stop_ids: tuple[int, ...] = ()) -> Generation:
    """Continue every row of ``rows`` (validated). Distinct rows are prefilled once."""
    device = _model_device(model)
    # Distinct prompts, in order of first appearance; ``which[b]`` = the distinct prompt of row b.
    distinct: dict[tuple[int, ...], int] = {}
    which = [distinct.setdefault(tuple(r), len(distinct)) for r in rows]
    uniq = [list(p) for p in distinct]
    B, U, T = len(rows), len(uniq), max_new_tokens
    L = max(len(p) for p in uniq)

    # Left padding: every row's next token goes in the same column, so one decode step serves all.
    ids = torch.full((U, L), pad_id, dtype=torch.long)
    seen = torch.zeros(U, L + T, dtype=torch.long)  # attention mask over prompt + generated slots
    for u, p in enumerate(uniq):
        ids[u, L - len(p):] = torch.tensor(p)
        seen[u, L - len(p):] = 1
    # Positions count real tokens only (0 at a row's first real token); pads get 0, unseen anyway.
    pos = (seen[:, :L].cumsum(1) - 1).clamp(min=0)
    lengths = torch.tensor([len(p) for p in uniq])

    out = model(input_ids=ids.to(device), attention_mask=seen[:, :L].to(device),
                position_ids=pos.to(device), use_cache=True)
    logits = out.logits[:, -1].float()
    cache = out.past_key_values
    forward_tokens, forward_passes = int(lengths.sum()), 1

    index = torch.tensor(which)
    if U != B or not bool((index == torch.arange(B)).all()):
        cache = _select_cache_rows(cache, index)
        logits, lengths, seen = logits[index.to(logits.device)], lengths[index], seen[index]
    cache = _preallocate(cache, L + T)
    seen = seen.to(device)
    # Generated slots are all visible: rows never see each other, and the slots a finished row
    # keeps filling (with pad) are read only by that row, whose outputs are discarded.
    seen[:, L:] = 1
    next_pos = lengths.to(device)

    tokens = torch.full((B, T), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros(B, T, dtype=torch.bool, device=device)
    logprobs = torch.zeros(B, T, device=device)
    entropies = torch.zeros(B, T, device=device)
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    # The decode batch shrinks as rows finish: ``slot_row[i]`` is the output row that batch slot i
    # is decoding, ``done[i]`` whether that row has finished (it is dropped at the next compaction).
    slot_row = torch.arange(B, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    stops = torch.tensor(stop_ids, dtype=torch.long, device=device)
    steps = 0
    for t in range(T):
        logp = torch.log_softmax(logits, dim=-1)
        if temperature == 0:
            tok = logits.argmax(-1)
        else:
            # Subtract the max first so a tiny temperature gives -inf, never inf - inf = NaN.
            scaled = (logits - logits.max(-1, keepdim=True).values) / temperature
            probs = torch.softmax(scaled, dim=-1)
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        live = ~done
        tokens[slot_row, t] = torch.where(live, tok, pad_id)
        mask[slot_row, t] = live
        logprobs[slot_row, t] = torch.where(live, logp.gather(1, tok[:, None]).squeeze(1), 0.0)
        # entr(p) = -p log p with entr(0) = 0, so tokens a model masks to -inf do not give NaN.
        entropies[slot_row, t] = torch.where(live, torch.special.entr(logp.exp()).sum(-1), 0.0)
        done = done | (tok == eos_id)
        if stop_ids:  # e.g. the step separator, to generate one reasoning step at a time
            done = done | torch.isin(tok, stops)
        finished[slot_row] |= done
        steps = t + 1
        n_live = int((~done).sum())
        if t == T - 1 or n_live == 0:
            break
        if n_live <= _COMPACT_AT * done.numel():
            # Compute scales with batch rows, and finished rows only burn it: drop them. Waiting
            # until a quarter has finished keeps the number of cache copies small.
            keep = (~done).nonzero().squeeze(1)
            cache = _select_cache_rows(cache, keep)
            slot_row, done, tok = slot_row[keep], done[keep], tok[keep]
            seen, next_pos = seen[keep], next_pos[keep]
        forward_tokens += n_live
        forward_passes += 1
        # A finished row still in the batch is fed pad; nothing live attends to it.
        out = model(input_ids=torch.where(done, pad_id, tok)[:, None],
                    attention_mask=seen[:, :L + t + 1], position_ids=(next_pos + t)[:, None],
                    past_key_values=cache, use_cache=True)
        logits = out.logits[:, -1].float()
        cache = out.past_key_values

    return Generation(
        prompt_ids=[list(r) for r in rows], tokens=tokens[:, :steps].cpu(),
        mask=mask[:, :steps].cpu(), logprobs=logprobs[:, :steps].cpu(),
        entropies=entropies[:, :steps].cpu(), group_ids=index, finished=finished.cpu(),
        forward_tokens=forward_tokens, forward_passes=forward_passes, temperature=temperature)


def _run(model: Any, rows_name: str, rows: Any, *, max_new_tokens: Any, temperature: Any,
         eos_id: Any, pad_id: Any, generator: Any, seed: Any,
         repeat: int = 1, stop_ids: Any = ()) -> Generation:
    """Validate the shared sampling arguments, then decode with the model in eval mode."""
    model = _check_model(model)
    vocab = _vocab_size(model)
    rows = check_token_rows(rows_name, rows, vocab)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=1)
    temperature = check_number("temperature", temperature, low=0.0)
    eos_id = check_int("eos_id", eos_id, low=0, high=None if vocab is None else vocab - 1)
    pad_id = check_int("pad_id", pad_id, low=0, high=None if vocab is None else vocab - 1)
    if isinstance(stop_ids, (str, bytes)) or not hasattr(stop_ids, "__iter__"):
        raise TypeError("stop_ids: expected a collection of token ids")
    stop_ids = tuple(check_int("stop_ids", i, low=0, high=None if vocab is None else vocab - 1)
                     for i in stop_ids)
    generator = _make_generator(generator, seed)
    context = _context_size(model)
    longest = max(len(r) for r in rows)
    # Prompt + completion must fit the context in one piece, so a training step can re-score
    # every sampled sequence with a single full forward pass.
    if context is not None and longest + max_new_tokens > context:
        raise ValueError(f"max_new_tokens: {longest} prompt tokens + {max_new_tokens} new tokens "
                         f"exceed the model's context of {context} positions")
    rows = [r for r in rows for _ in range(repeat)]  # prefix-major: row i*k + j is vine j of i

    was_training = model.training
    model.eval()  # no dropout: sampling and log-probs must describe the deterministic policy
    try:
        with torch.no_grad():
            return _generate(model, rows, max_new_tokens=max_new_tokens, temperature=temperature,
                             eos_id=eos_id, pad_id=pad_id, generator=generator, stop_ids=stop_ids)
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------- public API
def sample(model: torch.nn.Module, prompts: list[list[int]], *, max_new_tokens: int,
           temperature: float = 1.0, eos_id: int, pad_id: int,
           generator: torch.Generator | None = None, seed: int | None = None,
           stop_ids: tuple[int, ...] = ()) -> Generation:
    """Sample one continuation of every prompt (a list of token ids) in one batch.

    Tokens are drawn from softmax(logits / temperature) (0 = greedy); ``logprobs`` and
    ``entropies`` describe the untempered policy. Identical prompts are prefilled once and share
    a ``group_id``. Reproducible given ``generator`` or ``seed`` (pass at most one; with neither,
    torch's global RNG is used). Raises ValueError when a prompt plus ``max_new_tokens`` does not
    fit the model's context. ``stop_ids``: further tokens that end a row like eos does (kept as
    its last token), e.g. the step separator to sample one reasoning step; the row's ``finished``
    flag then means "stopped", not "emitted eos".
    """
    return _run(model, "prompts", prompts, max_new_tokens=max_new_tokens,
                temperature=temperature, eos_id=eos_id, pad_id=pad_id,
                generator=generator, seed=seed, stop_ids=stop_ids)


def fork(model: torch.nn.Module, prefixes: list[list[int]], k: int, *, max_new_tokens: int,
         temperature: float = 1.0, eos_id: int, pad_id: int,
         generator: torch.Generator | None = None, seed: int | None = None) -> Generation:
    """k independent continuations ("vines") of every prefix, all sampled in one batch.

    A prefix is a prompt plus a partial response. Each distinct prefix runs through the model
    once and its KV cache is copied k times, so forking costs the prefix once plus the new
    tokens. Rows are prefix-major: row ``i * k + j`` is continuation j of ``prefixes[i]``.
    Other arguments as in ``sample``.
    """
    k = check_int("k", k, low=1)
    return _run(model, "prefixes", prefixes, max_new_tokens=max_new_tokens,
                temperature=temperature, eos_id=eos_id, pad_id=pad_id,
                generator=generator, seed=seed, repeat=k)


def fork_values(model: torch.nn.Module, prefixes: list[list[int]], k: int,
                reward_fn: Callable[[list[int], list[int]], float], *, max_new_tokens: int,
                temperature: float = 1.0, eos_id: int, pad_id: int,
                generator: torch.Generator | None = None,
                seed: int | None = None) -> tuple[torch.Tensor, Generation]:
    """Monte Carlo value of every prefix: the mean reward of k continuations (VinePPO's V).

    ``reward_fn(prefix, continuation)`` scores one vine; ``continuation`` is the generated ids,
    eos included (a vine cut off by ``max_new_tokens`` has no eos, which a grader may treat as
    wrong). Returns ``values`` (n_prefixes,) float64 and the ``Generation`` of all vines with
    its per-vine ``rewards`` filled in. The estimate is unbiased for V under the sampling
    temperature; its standard error is std(rewards) / sqrt(k).
    """
    if not callable(reward_fn):
        raise TypeError(f"reward_fn: expected a callable (prefix, continuation) -> float, "
                        f"got {type(reward_fn).__name__}")
    gen = fork(model, prefixes, k, max_new_tokens=max_new_tokens, temperature=temperature,
               eos_id=eos_id, pad_id=pad_id, generator=generator, seed=seed)
    k = int(k)
    rewards = torch.tensor([check_number("reward_fn", reward_fn(p, c))
                            for p, c in zip(gen.prompt_ids, gen.completions())],
                           dtype=torch.float64)
    gen.rewards = rewards
    return rewards.view(-1, k).mean(1), gen


def to_rollouts(gen: Generation, *, rewards: Any, step_boundary_ids: set[int] | None = None,
                group_ids: Any = None, decode: Callable[[int], str] | None = None,
                prompts_text: list[str] | None = None) -> Rollouts:
    """Package a ``Generation`` and one outcome reward per row as ``Rollouts``.

    Positions are the generated tokens only (the prompt is context, shown via ``prompts``).
    The outcome ``rewards[b]`` is placed on row b's last generated position. With
    ``step_boundary_ids`` (e.g. the id of ';'), a step ends *at* a boundary token: the boundary
    belongs to the step it closes and the next step starts after it, so ``12+3=15;`` is step 0
    and the final ``#15<eos>`` is the last step. Without it, every token is its own step.
    ``group_ids`` defaults to ``gen.group_ids`` (rows that continue the same prompt).
    ``decode(id) -> str`` fills the per-position ``text`` ("" on padding) and, unless
    ``prompts_text`` is given, the prompt strings.
    """
    if not isinstance(gen, Generation):
        raise TypeError(f"gen: expected a Generation, got {type(gen).__name__}")
    B, T = gen.tokens.shape
    rewards = as_tensor("rewards", rewards)
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.float32)
    check_shape("rewards", rewards, (B,))
    per_position = torch.zeros(B, T, dtype=rewards.dtype)
    per_position[torch.arange(B), gen.lengths - 1] = rewards  # every row has >= 1 token

    step_ids = None
    if step_boundary_ids is not None:
        if isinstance(step_boundary_ids, (str, bytes)) or not hasattr(step_boundary_ids, "__iter__"):
            raise TypeError("step_boundary_ids: expected a set of token ids")
        bounds = torch.tensor(sorted(int(i) for i in step_boundary_ids), dtype=torch.long)
        is_bound = (torch.isin(gen.tokens, bounds) & gen.mask).long()
        # Boundaries strictly before t: the step of a boundary token is the one it closes.
        step_ids = torch.where(gen.mask, is_bound.cumsum(1) - is_bound, -1)

    if group_ids is None:
        group_ids = gen.group_ids

    text = prompts = None
    if decode is not None:
        if not callable(decode):
            raise TypeError(f"decode: expected a callable id -> str, got {type(decode).__name__}")
        text = [[decode(int(tok)) if m else "" for tok, m in zip(row.tolist(), mrow.tolist())]
                for row, mrow in zip(gen.tokens, gen.mask)]
        prompts = ["".join(decode(i) for i in p) for p in gen.prompt_ids]
    if prompts_text is not None:
        if isinstance(prompts_text, str) or len(prompts_text) != B:
            raise ValueError(f"prompts_text: expected a list of {B} strings")
        prompts = list(prompts_text)

    return Rollouts(tokens=gen.tokens, mask=gen.mask, rewards=per_position, group_ids=group_ids,
                    step_ids=step_ids, logprobs=gen.logprobs, entropies=gen.entropies,
                    text=text, prompts=prompts,
                    info={"temperature": gen.temperature, "finished": gen.finished,
                          "forward_tokens": gen.forward_tokens})
