"""Reward redistribution (labkit.credit.redistribution): RED, ACPO's attribution and SPA-RL; hand-computed
cases, degenerate input, bad arguments, and the tiny LM's scorers.
"""

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.credit.redistribution import acpo, red, spa_rl

from credit_cases import empty, two_steps
from turn_batches import S2, outcome_turns

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- RED
def test_red_hand_computed_telescopes():
    ro = two_steps()
    s = torch.tensor([[0.6, 0.7, 0.2, 0.3]])
    c = red(ro, scores=s, prompt_scores=torch.tensor([0.5]))
    assert c.token[0].tolist() == pytest.approx([0.1, 0.1, -0.5, 0.1])
    assert float(c.token.sum()) == pytest.approx(0.3 - 0.5)           # final minus prompt score
    ret = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), credit="return")
    assert ret.token[0].tolist() == pytest.approx([-0.2, -0.3, -0.4, 0.1])
    step = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), level="step")
    assert step.values[0].tolist() == pytest.approx([0.2, -0.4])      # score after step - before it
    mixed = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), outcome_weight=2.0)
    assert mixed.token[0].tolist() == pytest.approx([0.1, 0.1, -0.5, 2.1])
    assert c.cost == Cost()


def test_red_masked_gap_and_callable_scorer():
    # a tool position (masked) in the middle: the next token is measured from the last generated one
    ro = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long), mask=torch.tensor([[True, False, True, True]]),
                  rewards=torch.tensor([[0.0, 0.0, 0.0, 1.0]]))
    s = torch.tensor([[0.4, 99.0, 0.9, 1.0]])
    c = red(ro, scores=lambda r: (s, torch.tensor([0.5])))
    assert c.token[0].tolist() == pytest.approx([-0.1, 0.0, 0.5, 0.1])
    assert c.cost.aux_calls == 3 + 1
    assert red(ro, scores=lambda r: s).cost.aux_calls == 3


def test_red_degenerate_and_bad_arguments():
    c = red(empty(), scores=torch.zeros(2, 3))
    assert c.token.abs().sum() == 0 and float(c.info["final_scores"][0]) == 0
    ro = two_steps()
    const = red(ro, scores=torch.full((1, 4), 0.7), prompt_scores=torch.tensor([0.2]))
    assert const.token[0].tolist() == pytest.approx([0.5, 0, 0, 0])
    with pytest.raises(ValueError, match="^scores"):
        red(ro, scores=None)
    with pytest.raises(ValueError, match="^scores"):
        red(ro, scores=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="^prompt_scores"):
        red(ro, scores=torch.zeros(1, 4), prompt_scores=torch.zeros(3))
    with pytest.raises(ValueError, match="^credit"):
        red(ro, scores=torch.zeros(1, 4), credit="q")


# --------------------------------------------------------------------------- ACPO attribution
def linear_model(w):
    """scores = sum_t w_t * e_t with one-dimensional embeddings e_t = 1, 2, 3, ...: saliency a_t = w_t e_t."""
    def fn(ro):
        B, T = ro.tokens.shape
        e = torch.arange(1.0, T + 1).repeat(B, 1)[..., None].requires_grad_(True)
        return (e.squeeze(-1) * w).sum(1), e
    return fn


def test_acpo_hand_computed():
    ro = two_steps(reward=1.0)
    w = torch.tensor([[1.0, 0.0, -1.0, 0.5]])      # saliency 1, 0, -3, 2 -> steps 1 and -1
    c = acpo(ro, outcome_model=linear_model(w))
    assert c.values[0].tolist() == pytest.approx([0.5, 0.5])               # |1| : |-1|
    assert c.info["saliency"][0].tolist() == pytest.approx([1.0, 0.0, -3.0, 2.0])
    w2 = torch.tensor([[1.0, 2.0, 0.0, 1.0]])      # saliency 1, 4, 0, 4 -> steps 5 and 4
    s = acpo(ro, outcome_model=linear_model(w2), total=torch.tensor([-0.9]), normalize="signed")
    assert s.values[0].tolist() == pytest.approx([-0.5, -0.4])
    assert float(s.values.sum()) == pytest.approx(-0.9)
    assert c.cost.aux_calls == 1


def test_acpo_degenerate_and_bad_arguments():
    ro = two_steps(reward=1.0)
    zero = acpo(ro, outcome_model=linear_model(torch.zeros(1, 4)))
    assert zero.values[0].tolist() == pytest.approx([0.5, 0.5])            # no saliency: equal split
    cancel = acpo(ro, outcome_model=linear_model(torch.tensor([[1.0, 0.0, -1 / 3, 0.0]])), normalize="signed")
    assert cancel.values[0].tolist() == pytest.approx([0.5, 0.5])
    assert acpo(ro, outcome_model=linear_model(torch.ones(1, 4)), total=torch.zeros(1)).token.abs().sum() == 0
    with pytest.raises(ValueError, match="^outcome_model"):
        acpo(ro, outcome_model=lambda r: torch.zeros(1))
    with pytest.raises(ValueError, match="^outcome_model"):
        acpo(ro, outcome_model=lambda r: (torch.zeros(1), torch.zeros(1, 4, 2)))
    with pytest.raises(TypeError, match="^outcome_model"):
        acpo(ro, outcome_model=None)
    with pytest.raises(ValueError, match="^normalize"):
        acpo(ro, outcome_model=linear_model(torch.ones(1, 4)), normalize="l2")


def test_stand_in_outcome_model_adapters_on_the_tiny_lm(lm_ref):
    from labkit.learn.critics import LMCritic

    env, ref = lm_ref
    sub = ref.select(range(3))
    critic = LMCritic.from_policy(env.model, seed=0)
    with torch.no_grad():  # an untrained head is constant (w = 0): give it a direction to attribute to
        critic.head.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(0))
    fn = env.prefix_score_fn(critic)
    c = red(sub, scores=fn)
    full = [p + sub.tokens[b][sub.mask[b]].tolist() for b, p in enumerate(sub.info["prompt_ids"])]
    want = critic.prefix_values(full) - critic.prefix_values(sub.info["prompt_ids"])
    assert torch.allclose(c.token.sum(1), want, atol=1e-5)            # telescoping on a real scorer
    assert c.cost.aux_calls == int(sub.mask.sum()) + 3 == fn.calls
    a = acpo(sub, outcome_model=env.outcome_attribution_fn(critic))
    assert torch.allclose(a.info["model_scores"].double(), critic.prefix_values(full), atol=1e-5)
    assert torch.allclose(a.values.sum(1), sub.scores.double(), atol=1e-9)
    assert a.info["saliency"].abs().sum() > 0
    with pytest.raises(TypeError, match="^scorer"):
        env.outcome_attribution_fn(object())


# --------------------------------------------------------------------------- SPA-RL
def test_spa_rl_hand_computed():
    ro = outcome_turns([2, 1], [1.0, 0.0])
    x = torch.tensor([[0.2, 0.8], [0.5, 0.0]], dtype=torch.float64)
    c = spa_rl(ro, contributions=x)
    assert torch.allclose(c.token, torch.tensor([[0.2, 0.8], [0.5, 0.0]], dtype=torch.float64))
    assert torch.allclose(c.info["progress"], torch.tensor([[0.2, 1.0], [0.5, 0.0]], dtype=torch.float64))
    ret = spa_rl(ro, contributions=x, credit="return")
    assert torch.allclose(ret.token, torch.tensor([[1.0, 0.8], [0.5, 0.0]], dtype=torch.float64))
    mix = spa_rl(ro, contributions=x, outcome_weight=1.0)
    a = 0.5 / S2
    assert torch.allclose(mix.token, torch.tensor([[0.2 + a, 0.8 + a], [0.5 - a, 0.0]], dtype=torch.float64),
                          atol=1e-5)
    assert spa_rl(ro, contributions=lambda _: x).cost.aux_calls == 2


def test_spa_rl_degenerate_and_bad_arguments():
    one = outcome_turns([1], [1.0])
    assert torch.allclose(spa_rl(one, contributions=torch.ones(1, 1)).token, torch.ones(1, 1, dtype=torch.float64))
    gap = outcome_turns([2, 0], [1.0, 0.0], groups=[0, 1])
    assert float(spa_rl(gap, contributions=torch.zeros(2, 2)).token[1].abs().sum()) == 0.0
    ro = outcome_turns([2], [1.0])
    with pytest.raises(ValueError, match="contributions"):
        spa_rl(ro, contributions=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="contributions"):
        spa_rl(ro, contributions=None)
    with pytest.raises(ValueError, match="credit"):
        spa_rl(ro, contributions=torch.zeros(1, 2), credit="gain")
