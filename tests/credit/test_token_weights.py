"""Token reweighting of GRPO's advantage (labkit.credit.token_weights): STARE, PAPO, DelTA, KTAE,
GRAIL, each against a hand-computed batch, on degenerate input and on bad input."""
import math
from types import SimpleNamespace

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit.episode import grpo
from labkit.credit.token_weights import (answer_saliency_fn, delta, entropy_polarity, grail, ktae,
                                         lm_token_gradients, papo, stare, tabular_token_gradients)
from labkit.policies import TabularSoftmaxPolicy

F64 = torch.float64


def _batch(scores, lengths, *, groups=None, tokens=None, logprobs=None, entropies=None, states=None):
    B, T = len(scores), max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    rewards = torch.zeros(B, T, dtype=F64)
    rewards[torch.arange(B), torch.tensor(lengths) - 1] = torch.tensor(scores, dtype=F64)

    def pad(rows, fill, dtype):
        out = torch.full((B, T), fill, dtype=dtype)
        for b, row in enumerate(rows):
            out[b, :len(row)] = torch.tensor(row, dtype=dtype)
        return torch.where(mask, out, torch.zeros((), dtype=dtype) if dtype != torch.long else out)

    kw = {}
    if logprobs is not None:
        kw["logprobs"] = torch.where(mask, pad(logprobs, 0.0, F64), 0.0)
    if entropies is not None:
        kw["entropies"] = torch.where(mask, pad(entropies, 0.0, F64), 0.0)
    if states is not None:
        kw["states"] = torch.where(mask, pad(states, 0, torch.long), 0)
    tok = pad(tokens, 0, torch.long) if tokens is not None else torch.zeros(B, T, dtype=torch.long)
    return Rollouts(tokens=torch.where(mask, tok, 0), mask=mask, rewards=rewards,
                    group_ids=torch.tensor(groups if groups is not None else [0] * B), **kw)


A2 = 0.5 / (math.sqrt(0.5) + 1e-6)      # GRPO's advantage of a 1 / 0 pair


# --------------------------------------------------------------------------- STARE
def _stare_batch(entropy=0.1):
    return _batch([1.0, 0.0], [3, 3], logprobs=[[-0.1, -2.0, -0.5], [-1.0, -0.2, -3.0]],
                  entropies=[[entropy] * 3] * 2)


def test_stare_amplifies_the_most_surprising_token_of_the_good_answer():
    c = stare(_stare_batch())
    want = torch.tensor([[A2, 1.1 * A2, A2], [-A2, -A2, -A2]], dtype=F64)
    assert torch.allclose(c.token, want)
    assert c.info["gate_on"] and c.info["amplified"][0, 1] and int(c.info["amplified"].sum()) == 1


def test_stare_dual_variant_also_attenuates_the_most_surprising_token_of_the_bad_answer():
    c = stare(_stare_batch(), variant="C2")
    want = torch.tensor([[A2, 1.1 * A2, A2], [-A2, -A2, -0.9 * A2]], dtype=F64)
    assert torch.allclose(c.token, want)


def test_stare_gate_off_above_the_target_entropy_is_grpo():
    ro = _stare_batch(entropy=0.5)
    c = stare(ro, variant="C2")
    assert not c.info["gate_on"]
    assert torch.allclose(c.token, grpo(ro).token)
    assert torch.allclose(stare(ro, target_entropy=None).token[0, 1], torch.tensor(1.1 * A2, dtype=F64))


def test_stare_degenerate_input():
    lone = _batch([0.0], [3], logprobs=[[-1.0] * 3], entropies=[[0.1] * 3])
    assert torch.equal(stare(lone).token, torch.zeros(1, 3, dtype=F64))      # failing group of one: no L+
    tied = _batch([1.0, 0.0], [3, 3], logprobs=[[-1.0] * 3] * 2, entropies=[[0.1] * 3] * 2)
    assert bool(stare(tied).info["amplified"][0, 0])                          # ties: the earliest position
    assert torch.allclose(stare(_stare_batch(), top_fraction=0.0).token, grpo(_stare_batch()).token)


def test_stare_bad_input_names_the_argument():
    ro = _stare_batch()
    with pytest.raises(ValueError, match="^variant"):
        stare(ro, variant="X")
    with pytest.raises(ValueError, match="^top_fraction"):
        stare(ro, top_fraction=1.5)
    with pytest.raises(ValueError, match="^rollouts"):
        stare(ro.with_(entropies=None))


# --------------------------------------------------------------------------- PAPO
def test_entropy_polarity_is_the_first_order_entropy_change_of_raising_the_token():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        z = torch.randn(6, generator=g, dtype=F64)
        a = int(torch.randint(6, (1,), generator=g))
        logp = torch.log_softmax(z, 0)
        H = -(logp.exp() * logp).sum()
        bumped = z.clone()
        bumped[a] += 1e-6
        lp2 = torch.log_softmax(bumped, 0)
        dH = (-(lp2.exp() * lp2).sum() - H) / 1e-6
        pol = entropy_polarity(logp[a], H, torch.tensor(1.0, dtype=F64))
        assert torch.allclose(dH, pol, atol=1e-5)


def test_papo_scales_the_two_polarity_branches_asymmetrically():
    ro = _batch([1.0, 0.0], [2, 2], logprobs=[[-0.1, -2.0], [-0.1, -2.0]], entropies=[[0.5, 0.5]] * 2)
    c = papo(ro)    # batch entropy 0.5 >= 0.3: phase -1, contracting updates favoured
    # row 0 (A > 0): surprisal 0.1 < H contracts, 2.0 > H expands; row 1 (A < 0) the other way round
    want = torch.tensor([[1.2 * A2, 0.8 * A2], [-0.8 * A2, -1.2 * A2]], dtype=F64)
    assert c.info["phase"] == -1.0
    assert torch.allclose(c.token, want)
    assert torch.allclose(c.info["polarity"][0, 1], torch.tensor(A2 * math.exp(-2.0) * 1.5, dtype=F64))
    up = papo(ro, target_entropy=1.0)    # below the target: expanding updates favoured
    assert torch.allclose(up.token, torch.tensor([[0.8 * A2, 1.2 * A2], [-1.2 * A2, -0.8 * A2]], dtype=F64))


def test_papo_degenerate_input_is_grpo():
    lg = -math.log(2.0)
    uniform = _batch([1.0, 0.0], [2, 2], logprobs=[[lg, lg]] * 2, entropies=[[-lg, -lg]] * 2)
    assert torch.allclose(papo(uniform).token, grpo(uniform).token)          # polarity 0 at the maximum
    ro = _batch([1.0, 0.0], [2, 2], logprobs=[[-0.1, -2.0]] * 2, entropies=[[0.5, 0.5]] * 2)
    assert torch.allclose(papo(ro, beta=0.0).token, grpo(ro).token)


def test_papo_bad_input_names_the_argument():
    ro = _batch([1.0, 0.0], [2, 2], logprobs=[[-0.1, -2.0]] * 2, entropies=[[0.5, 0.5]] * 2)
    with pytest.raises(ValueError, match="^beta"):
        papo(ro, beta=1.5)
    with pytest.raises(TypeError, match="^target_entropy"):
        papo(ro, target_entropy="x")
    with pytest.raises(ValueError, match="^rollouts"):
        papo(ro.with_(logprobs=None))


# --------------------------------------------------------------------------- DelTA
class _ToyLM(torch.nn.Module):
    """A causal toy: the logits at t read the running sum of the embeddings up to t."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(6, 3)
        self.out = torch.nn.Linear(3, 6)

    def get_input_embeddings(self):
        return self.emb

    def forward(self, inputs_embeds=None, input_ids=None, attention_mask=None, output_hidden_states=False):
        x = self.emb(input_ids) if inputs_embeds is None else inputs_embeds
        h = x.cumsum(1)
        return SimpleNamespace(logits=self.out(h), hidden_states=(x, h))


def _delta_batch():
    # both answers take action 0 in state 0 (shared); in state 1 the good one takes 0, the bad one 1
    return _batch([1.0, 0.0], [2, 2], tokens=[[0, 0], [0, 1]], states=[[0, 1], [0, 1]])


def test_delta_downweights_the_shared_token_and_amplifies_the_discriminative_one():
    ro = _delta_batch()
    grads = tabular_token_gradients(TabularSoftmaxPolicy(2, 2, init_std=0.0))
    c = delta(ro, token_gradients=grads)
    # the shared gradient is orthogonal to mu+ - mu- (d = 0, c = 1); the state-1 tokens align
    # with their own side (cosine 1, c = 2 sigmoid(1 / 0.25)); each side rescaled to mean 1
    c1 = 2.0 / (1.0 + math.exp(-4.0))
    w = torch.tensor([2.0 / (1.0 + c1), 2.0 * c1 / (1.0 + c1)], dtype=F64)
    assert torch.allclose(c.token, torch.stack([A2 * w, -A2 * w]))
    assert torch.allclose(c.info["alignment"], torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=F64))
    assert torch.allclose(delta(ro, token_gradients=grads, rounds=1).token, c.token)   # the direction holds
    assert torch.allclose(delta(ro, token_gradients=grads(ro)).token, c.token)         # a tensor works too


def test_tabular_token_gradients_are_one_hot_minus_pi_on_the_state_row():
    pol = TabularSoftmaxPolicy(2, 2, init_std=0.0)
    with torch.no_grad():
        pol.logits.copy_(torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]]))
    g = tabular_token_gradients(pol)(_delta_batch())
    assert torch.allclose(g[1, 1], torch.tensor([0.0, 0.0, -0.75, 0.75], dtype=F64))   # state 1, action 1
    assert torch.allclose(g[0, 0], torch.tensor([0.5, -0.5, 0.0, 0.0], dtype=F64))


def test_lm_token_gradients_are_the_output_layers_gradient():
    lm = _ToyLM()
    ro = _batch([1.0, 0.0], [2, 1], tokens=[[1, 2], [4]]).with_(info={"prompt_ids": [[0], [0, 3]]})
    g = lm_token_gradients(lm)(ro)
    seq = torch.tensor([0, 1, 2])
    lm.zero_grad()
    out = lm(lm.emb(seq)[None], output_hidden_states=True)
    torch.log_softmax(out.logits[0, 1], -1)[2].backward()        # token 2, scored at position 1
    assert torch.allclose(g[0, 1].float(), lm.out.weight.grad.reshape(-1), atol=1e-5)
    assert torch.equal(g[1, 1], torch.zeros_like(g[1, 1]))       # padding


def test_delta_degenerate_input():
    grads = tabular_token_gradients(TabularSoftmaxPolicy(2, 2, init_std=0.0))
    same = _batch([1.0, 0.0], [2, 2], tokens=[[0, 1], [0, 1]], states=[[0, 1], [0, 1]])
    assert torch.allclose(delta(same, token_gradients=grads).token, grpo(same).token)   # nothing separates
    flat = _batch([1.0, 1.0], [2, 2], tokens=[[0, 0], [0, 1]], states=[[0, 1], [0, 1]])
    assert torch.equal(delta(flat, token_gradients=grads).token, torch.zeros(2, 2, dtype=F64))


def test_delta_bad_input_names_the_argument():
    ro = _delta_batch()
    grads = tabular_token_gradients(TabularSoftmaxPolicy(2, 2, init_std=0.0))
    with pytest.raises(TypeError, match="^policy"):
        tabular_token_gradients("x")
    with pytest.raises(ValueError, match="^policy"):
        delta(ro, token_gradients=tabular_token_gradients(TabularSoftmaxPolicy(1, 2)))
    with pytest.raises(ValueError, match="^rollouts"):
        delta(ro.with_(states=None), token_gradients=grads)
    with pytest.raises(ValueError, match="^token_gradients"):
        delta(ro, token_gradients=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="^tau"):
        delta(ro, token_gradients=grads, tau=0.0)


# --------------------------------------------------------------------------- KTAE
def _ktae_batch(**kw):
    return _batch([1.0, 1.0, 0.0, 0.0], [2] * 4, tokens=[[5, 7], [5, 7], [5, 8], [5, 8]], **kw)


def test_ktae_adds_the_key_weight_of_tokens_that_go_with_correct_answers():
    ro = _ktae_batch()
    c = ktae(ro, use_tf=False)
    A = 0.5 / (math.sqrt(1.0 / 3.0) + 1e-6)
    # token 7: in both correct answers only: Fisher p = 1/6 + 1/6, IG = 1 bit, asin(1) - asin(0)
    k = (math.exp(-2.0 / 3.0) + 1.0) * (math.pi / 2) / 2.0
    w = 2.0 / (1.0 + math.exp(-k)) - 1.0
    # token 5 is in every answer: p = 1, IG = 0, weight 0; token 8 is token 7's mirror
    want = torch.tensor([[A, A + w], [A, A + w], [-A, -A - w], [-A, -A - w]], dtype=F64)
    assert torch.allclose(c.token, want)
    assert c.info["key"] == "token"
    # the term-frequency ratio of a token only one side uses is huge: its weight saturates at top
    tf = ktae(ro, top=0.5)
    assert torch.allclose(tf.info["key_weight"][0, 1], torch.tensor(0.5, dtype=F64))
    assert torch.allclose(tf.info["key_weight"][:, 0], torch.zeros(4, dtype=F64))


def test_ktae_keys_on_state_and_action_when_the_batch_has_states():
    # the same action ids, taken in different states by the correct and the wrong answers
    ro = _batch([1.0, 1.0, 0.0, 0.0], [2] * 4, tokens=[[0, 1]] * 4, states=[[0, 1], [0, 1], [0, 2], [0, 2]])
    assert torch.allclose(ktae(ro, key="token").token, grpo(ro).token)
    c = ktae(ro, use_tf=False)
    assert c.info["key"] == "state_action"
    assert torch.allclose(c.token, ktae(_ktae_batch(), use_tf=False).token)


def test_ktae_degenerate_input_is_grpo():
    lone = _batch([1.0, 0.0], [2, 2], groups=[0, 1], tokens=[[5, 7], [5, 8]])
    assert torch.allclose(ktae(lone).token, grpo(lone).token)
    agree = _batch([1.0, 1.0], [2, 2], tokens=[[5, 7], [5, 8]])
    assert torch.equal(ktae(agree).token, torch.zeros(2, 2, dtype=F64))


def test_ktae_bad_input_names_the_argument():
    ro = _ktae_batch()
    with pytest.raises(ValueError, match="^key"):
        ktae(ro, key="word")
    with pytest.raises(ValueError, match="^key"):
        ktae(ro, key="state_action")
    with pytest.raises(TypeError, match="^use_tf"):
        ktae(ro, use_tf="no")
    with pytest.raises(ValueError, match="^alpha"):
        ktae(ro, alpha=0.0, beta_ig=0.0)


# --------------------------------------------------------------------------- GRAIL
def _grail_batch():
    return _batch([1.0, 0.0], [2, 2], logprobs=[[math.log(0.5), math.log(0.9)], [0.0, 0.0]])


def test_grail_hands_the_advantage_out_by_logit_gradient_norm():
    ro = _grail_batch()
    s2 = torch.tensor([[0.5, 0.82], [1.0, 1.0]], dtype=F64)
    c = grail(ro, sum_pi_squared=s2)
    S = torch.tensor([0.5, 0.02], dtype=F64)       # 1 - 2 pi + sum pi^2
    assert torch.allclose(c.token[0], A2 * 2 * S / S.sum())
    assert torch.allclose(c.token[1], torch.full((2,), -A2, dtype=F64))   # certain tokens: weight 1
    assert c.info["source"] == "logit_gradient" and c.cost.aux_calls == 0


def test_grail_with_an_outcome_model_uses_gradient_times_input():
    ro = _batch([1.0, 0.0], [2, 2], logprobs=[[-0.1, -0.1]] * 2, tokens=[[1, 2], [3, 1]])

    def model(r):
        x = r.tokens.to(F64)[..., None].clone().requires_grad_(True)
        return (x[..., 0] ** 2 * torch.tensor([1.0, 3.0], dtype=F64)).sum(1), x

    c = grail(ro, sum_pi_squared=torch.full((2, 2), 0.5, dtype=F64), outcome_model=model)
    S = torch.tensor([[2.0, 24.0], [18.0, 6.0]], dtype=F64)      # 2 c_t x_t^2
    assert torch.allclose(c.info["saliency"], S)
    assert torch.allclose(c.token, torch.tensor([[A2], [-A2]], dtype=F64) * 2 * S / S.sum(1, keepdim=True))
    assert c.cost.aux_calls == 2


def test_answer_saliency_scores_the_final_steps_log_probability():
    lm = _ToyLM()
    ro = _batch([1.0, 0.0], [3, 2], tokens=[[1, 2, 3], [4, 5]], logprobs=[[-0.1] * 3, [-0.1] * 2])
    ro = ro.with_(step_ids=torch.tensor([[0, 0, 1], [0, 1, -1]]), info={"prompt_ids": [[0], [0, 1]]})
    scores, emb = answer_saliency_fn(lm)(ro)
    with torch.no_grad():
        seq = torch.tensor([0, 1, 2, 3])
        want = torch.log_softmax(lm(lm.emb(seq)[None]).logits[0].double(), -1)[2, 3]
    assert torch.allclose(scores[0].detach(), want)
    c = grail(ro, sum_pi_squared=torch.full((2, 3), 0.5, dtype=F64), outcome_model=answer_saliency_fn(lm))
    assert torch.allclose(c.info["weights"].sum(1), torch.tensor([3.0, 2.0], dtype=F64))


def test_grail_bad_input_names_the_argument():
    ro = _grail_batch()
    with pytest.raises(ValueError, match="^sum_pi_squared"):
        grail(ro, sum_pi_squared=torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="^sum_pi_squared"):
        grail(ro, sum_pi_squared=torch.full((2, 2), 1.5))
    with pytest.raises(TypeError, match="^outcome_model"):
        grail(ro, sum_pi_squared=torch.full((2, 2), 0.5), outcome_model=3)
    with pytest.raises(TypeError, match="^model"):
        answer_saliency_fn("gpt")


# --------------------------------------------------------------------------- bench
def test_every_method_runs_on_the_chain_task():
    from labkit.bench.suite import chain_task, run_cell
    task = chain_task(6, n=16)
    inst = task.build(0)
    for name in ("stare", "papo", "delta", "ktae", "grail"):
        rec = run_cell("test", task, name, 0, inst)
        assert rec.get("metrics") and rec["metrics"]["sign_agreement"] is not None, (name, rec.get("reason"))
