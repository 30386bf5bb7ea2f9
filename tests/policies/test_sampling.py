"""Tests for labkit.policies.sampling: KV-cached sampling, vines, and conversion to Rollouts.

The model is a randomly initialised tiny GPT-2 (the lab's trained model has the same interface),
so these tests check the *machinery* — padding, caching, forking, bookkeeping — against slow
no-cache references computed here, not any arithmetic skill.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from labkit.policies.sampling import Generation, fork, fork_values, sample, to_rollouts
from labkit.core.rollouts import Rollouts

PAD, BOS, EOS = 0, 1, 2
# A 17-symbol char vocabulary shaped like the lab's: <pad> <bos> <eos> 0-9 + = ; #
SYMBOLS = ["<pad>", "<bos>", "<eos>", *"0123456789", "+", "=", ";", "#"]
ID = {s: i for i, s in enumerate(SYMBOLS)}
SEMI = ID[";"]


def encode(text: str) -> list[int]:
    return [ID[c] for c in text]


def decode(i: int) -> str:
    return SYMBOLS[i]


def tiny_gpt2(attn: str = "sdpa", seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(SYMBOLS), n_layer=2, n_embd=32, n_head=2, n_positions=64,
                     bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, attn_implementation=attn)
    return GPT2LMHeadModel(cfg).eval()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    return tiny_gpt2()


class EosBias(torch.nn.Module):
    """Wrap a causal LM and add ``bias`` to the eos logit (to force or forbid stopping)."""

    def __init__(self, inner: torch.nn.Module, bias: float):
        super().__init__()
        self.inner, self.bias, self.config = inner, bias, inner.config

    def forward(self, **kw):
        out = self.inner(**kw)
        logits = out.logits.clone()
        logits[..., EOS] += self.bias
        return SimpleNamespace(logits=logits, past_key_values=out.past_key_values)


PROMPTS = [[BOS] + encode("23+48+19="), [BOS] + encode("5+7="),
           [BOS] + encode("123+4+56+7=12")]
KW = dict(eos_id=EOS, pad_id=PAD)


def full_logits(model, seq: list[int]) -> torch.Tensor:
    """Logits of one unpadded sequence from a single forward without any cache."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([seq])).logits[0].float()


# --------------------------------------------------------------------------- padding and cache
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_prompt_alone_equals_prompt_in_padded_batch(attn):
    model = tiny_gpt2(attn)
    alone = sample(model, [PROMPTS[1]], max_new_tokens=12, temperature=0, **KW)
    batch = sample(model, PROMPTS, max_new_tokens=12, temperature=0, **KW)
    n = int(alone.lengths[0])
    assert torch.equal(alone.tokens[0, :n], batch.tokens[1, :n])
    torch.testing.assert_close(alone.logprobs[0, :n], batch.logprobs[1, :n], atol=1e-5, rtol=0)
    torch.testing.assert_close(alone.entropies[0, :n], batch.entropies[1, :n], atol=1e-5, rtol=0)


def test_greedy_equals_no_cache_argmax_loop(model):
    gen = sample(model, PROMPTS, max_new_tokens=15, temperature=0, **KW)
    for b, prompt in enumerate(PROMPTS):
        seq = list(prompt)
        for _ in range(15):  # the slow reference: re-run the whole sequence for every token
            nxt = int(full_logits(model, seq)[-1].argmax())
            seq.append(nxt)
            if nxt == EOS:
                break
        assert gen.completions()[b] == seq[len(prompt):]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_and_entropies_match_a_full_forward(model, temperature):
    gen = sample(model, PROMPTS * 3, max_new_tokens=20, temperature=temperature, seed=3, **KW)
    for b, (prompt, comp) in enumerate(zip(gen.prompt_ids, gen.completions())):
        logp = torch.log_softmax(full_logits(model, prompt + comp), -1)
        # The distribution over completion token i is read at the position just before it.
        rows = logp[len(prompt) - 1: len(prompt) - 1 + len(comp)]
        want = rows.gather(1, torch.tensor(comp)[:, None]).squeeze(1)
        torch.testing.assert_close(gen.logprobs[b, :len(comp)], want, atol=1e-4, rtol=0)
        ent = -(rows.exp() * rows).sum(-1)
        torch.testing.assert_close(gen.entropies[b, :len(comp)], ent, atol=1e-4, rtol=0)
        assert bool((gen.logprobs[b, len(comp):] == 0).all())


# --------------------------------------------------------------------------- randomness
def test_seeded_sampling_is_deterministic_and_seeds_differ(model):
    a = sample(model, PROMPTS, max_new_tokens=20, seed=7, **KW)
    b = sample(model, PROMPTS, max_new_tokens=20, seed=7, **KW)
    c = sample(model, PROMPTS, max_new_tokens=20, seed=8, **KW)
    d = sample(model, PROMPTS, max_new_tokens=20, generator=torch.Generator().manual_seed(7), **KW)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logprobs, b.logprobs)
    assert torch.equal(a.tokens, d.tokens)
    assert not torch.equal(a.tokens, c.tokens)


# --------------------------------------------------------------------------- eos handling
def test_rows_stop_at_eos_and_are_padded_after(model):
    gen = sample(model, PROMPTS * 20, max_new_tokens=40, seed=0, **KW)
    assert 0 < int(gen.finished.sum()) < gen.batch_size  # both kinds of row occur
    for b in range(gen.batch_size):
        row, m = gen.tokens[b], gen.mask[b]
        n = int(m.sum())
        assert bool(m[:n].all()) and not bool(m[n:].any())  # mask is a prefix
        eos_at = (row[:n] == EOS).nonzero().flatten().tolist()
        if gen.finished[b]:
            assert eos_at == [n - 1]  # exactly one eos, and it is the last generated token
        else:
            assert eos_at == [] and n == gen.tokens.shape[1]
        assert bool((row[n:] == PAD).all())


def test_stops_early_when_every_row_is_done(model):
    forced = EosBias(model, bias=1e4)
    gen = sample(forced, PROMPTS, max_new_tokens=30, seed=0, **KW)
    assert gen.tokens.shape == (3, 1) and bool((gen.tokens == EOS).all()) and gen.mask.all()
    assert gen.forward_passes == 1 and bool(gen.finished.all())


def test_eos_equal_to_pad_is_fine(model):
    forced = EosBias(model, bias=1e4)
    gen = sample(forced, PROMPTS, max_new_tokens=5, eos_id=EOS, pad_id=EOS, seed=0)
    assert gen.mask.all() and gen.completions() == [[EOS]] * 3


def test_model_mode_is_restored(model):
    model.train()
    try:
        sample(model, PROMPTS, max_new_tokens=3, seed=0, **KW)
        assert model.training
    finally:
        model.eval()


# --------------------------------------------------------------------------- vines
def test_fork_k1_greedy_equals_greedy_sample(model):
    prefixes = [p + c[:3] for p, c in zip(PROMPTS, sample(model, PROMPTS, max_new_tokens=5,
                                                            temperature=0, **KW).completions())]
    f = fork(model, prefixes, 1, max_new_tokens=12, temperature=0, **KW)
    s = sample(model, prefixes, max_new_tokens=12, temperature=0, **KW)
    assert f.completions() == s.completions()
    torch.testing.assert_close(f.logprobs, s.logprobs, atol=1e-5, rtol=0)


def test_fork_rows_are_prefix_major(model):
    k = 4
    gen = fork(model, PROMPTS, k, max_new_tokens=8, temperature=0, **KW)
    greedy = sample(model, PROMPTS, max_new_tokens=8, temperature=0, **KW).completions()
    assert gen.batch_size == len(PROMPTS) * k
    for i, p in enumerate(PROMPTS):
        for j in range(k):
            assert gen.prompt_ids[i * k + j] == p
            assert gen.completions()[i * k + j] == greedy[i]
    assert gen.group_ids.tolist() == [i for i in range(len(PROMPTS)) for _ in range(k)]


class LegacyCache(torch.nn.Module):
    """Wrap a causal LM so it speaks the pre-Cache format: a tuple of (keys, values) per layer."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner, self.config = inner, inner.config

    def forward(self, past_key_values=None, **kw):
        from transformers import DynamicCache
        if past_key_values is not None:
            past_key_values = DynamicCache(ddp_cache_data=past_key_values)
        out = self.inner(past_key_values=past_key_values, **kw)
        legacy = tuple((layer.keys, layer.values) for layer in out.past_key_values.layers)
        return SimpleNamespace(logits=out.logits, past_key_values=legacy)


def test_fork_with_a_legacy_tuple_cache(model):
    new = fork(model, PROMPTS, 3, max_new_tokens=10, seed=4, **KW)
    old = fork(LegacyCache(model), PROMPTS, 3, max_new_tokens=10, seed=4, **KW)
    assert torch.equal(new.tokens, old.tokens)
    torch.testing.assert_close(new.logprobs, old.logprobs, atol=1e-5, rtol=0)


def test_fork_runs_each_prefix_once(model):
    k = 5
    gen = fork(model, PROMPTS, k, max_new_tokens=10, seed=1, **KW)
    # Prefix tokens are paid once per distinct prefix; each vine pays for the tokens it feeds
    # back (all it generated except the last one).
    want = sum(len(p) for p in PROMPTS) + int((gen.lengths - 1).sum())
    assert gen.forward_tokens == want
    dup = fork(model, [PROMPTS[0], PROMPTS[0]], 2, max_new_tokens=3, seed=1, **KW)
    assert dup.group_ids.tolist() == [0, 0, 0, 0]  # identical prefixes share a group


def test_fork_matches_separate_samples_in_distribution(model):
    prefix, n = PROMPTS[0], 150
    vines = fork(model, [prefix], n, max_new_tokens=4, seed=0, **KW)
    singles = [sample(model, [prefix], max_new_tokens=4, seed=1000 + i, **KW) for i in range(n)]
    stat_vines = vines.logprobs.sum(1)  # log-probability of the sampled 4-token continuation
    stat_single = torch.cat([g.logprobs.sum(1) for g in singles])
    se = math.sqrt(stat_vines.var() / n + stat_single.var() / n)
    assert abs(float(stat_vines.mean() - stat_single.mean())) < 4 * se
    # And the first token follows the model's next-token distribution (chi-square, 1e-3 level).
    p = torch.softmax(full_logits(model, prefix)[-1], -1).double()
    counts = torch.bincount(vines.tokens[:, 0], minlength=p.numel()).double()
    chi2 = float(((counts - n * p) ** 2 / (n * p)).sum())
    assert chi2 < 45.3  # 99.9 % quantile of chi-square with 16 degrees of freedom


def test_fork_values_is_the_empirical_frequency(model):
    prefixes, k = PROMPTS[:2], 200
    x = int(full_logits(model, prefixes[0])[-1].argmax())  # a token that is reasonably likely
    values, gen = fork_values(model, prefixes, k, lambda pre, cont: float(cont[0] == x),
                              max_new_tokens=2, seed=0, **KW)
    assert values.shape == (2,) and gen.rewards.shape == (2 * k,)
    first = gen.tokens[:, 0].view(2, k)
    torch.testing.assert_close(values, (first == x).double().mean(1))
    for i, pre in enumerate(prefixes):  # and it estimates the true probability
        p = float(torch.softmax(full_logits(model, pre)[-1], -1)[x])
        assert abs(float(values[i]) - p) < 4 * math.sqrt(p * (1 - p) / k) + 1e-9


# --------------------------------------------------------------------------- to_rollouts
def hand_made_generation() -> Generation:
    """Two rows: a full 3-step chain that ends in eos, and a row cut off mid-step."""
    rows = [encode("1+2=3;3+4=7;#7") + [EOS], encode("1+2=3;3")]
    T = max(map(len, rows))
    tokens = torch.full((2, T), PAD)
    mask = torch.zeros(2, T, dtype=torch.bool)
    for b, r in enumerate(rows):
        tokens[b, :len(r)], mask[b, :len(r)] = torch.tensor(r), True
    lp = torch.where(mask, -0.5, 0.0)
    prompt = [BOS] + encode("1+2+4=")
    return Generation(prompt_ids=[prompt, prompt], tokens=tokens, mask=mask, logprobs=lp,
                      entropies=lp.abs(), group_ids=torch.tensor([0, 0]),
                      finished=torch.tensor([True, False]), forward_tokens=0, forward_passes=0,
                      temperature=1.0)


def test_to_rollouts_conventions():
    gen = hand_made_generation()
    ro = to_rollouts(gen, rewards=torch.tensor([1.0, 0.0]), step_boundary_ids={SEMI},
                     decode=decode)
    assert isinstance(ro, Rollouts)
    # '1+2=3;' is step 0 (the ';' closes it), '3+4=7;' step 1, '#7<eos>' step 2.
    assert ro.step_ids[0].tolist() == [0] * 6 + [1] * 6 + [2] * 3
    assert ro.step_ids[1].tolist() == [0] * 6 + [1] + [-1] * 8
    assert ro.rewards[0, 14] == 1.0 and ro.rewards.sum() == 1.0  # on the last generated position
    assert torch.equal(ro.mask, gen.mask) and torch.equal(ro.logprobs, gen.logprobs)
    assert ro.text[0][-1] == "<eos>" and ro.text[1][7] == "" and ro.text[0][5] == ";"
    assert ro.prompts[0] == "<bos>1+2+4=" and ro.group_ids.tolist() == [0, 0]
    assert ro.n_steps.tolist() == [3, 2]


def test_to_rollouts_from_sampling(model):
    gen = sample(model, PROMPTS * 2, max_new_tokens=25, seed=2, **KW)
    rewards = torch.arange(6, dtype=torch.float32)
    ro = to_rollouts(gen, rewards=rewards, step_boundary_ids={SEMI}, group_ids=[0, 1, 2, 0, 1, 2],
                     prompts_text=["p"] * 6)
    torch.testing.assert_close(ro.scores, rewards)
    assert ro.group_ids.tolist() == [0, 1, 2, 0, 1, 2] and ro.text is None
    plain = to_rollouts(gen, rewards=rewards)  # no boundaries: every token its own step
    assert torch.equal(plain.n_steps, gen.lengths)


def test_to_rollouts_rejects_wrong_reward_count():
    with pytest.raises(ValueError, match="^rewards"):
        to_rollouts(hand_made_generation(), rewards=torch.ones(3))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, name", [
    (lambda m: fork(m, PROMPTS, 0, max_new_tokens=3, **KW), "k"),
    (lambda m: sample(m, [], max_new_tokens=3, **KW), "prompts"),
    (lambda m: sample(m, [PROMPTS[0], []], max_new_tokens=3, **KW), "prompts"),
    (lambda m: fork(m, [[]], 2, max_new_tokens=3, **KW), "prefixes"),
    (lambda m: sample(m, PROMPTS, max_new_tokens=0, **KW), "max_new_tokens"),
    (lambda m: sample(m, PROMPTS, max_new_tokens=60, **KW), "max_new_tokens"),  # > context
    (lambda m: sample(m, PROMPTS, max_new_tokens=3, temperature=-0.1, **KW), "temperature"),
    (lambda m: sample(m, [[1, 99]], max_new_tokens=3, **KW), "prompts"),
    (lambda m: sample(m, PROMPTS, max_new_tokens=3, eos_id=17, pad_id=0), "eos_id"),
    (lambda m: sample(m, PROMPTS, max_new_tokens=3, seed=1,
                      generator=torch.Generator(), **KW), "seed"),
])
def test_bad_input_names_the_argument(model, call, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        call(model)


def test_bad_types_raise_type_error(model):
    with pytest.raises(TypeError, match="^model:"):
        sample("gpt2", PROMPTS, max_new_tokens=3, **KW)
    with pytest.raises(TypeError, match="^prompts:"):
        sample(model, "1+2=", max_new_tokens=3, **KW)
    with pytest.raises(TypeError, match="^reward_fn:"):
        fork_values(model, PROMPTS, 2, None, max_new_tokens=3, **KW)
