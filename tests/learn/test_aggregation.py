"""How a loss weighs tokens (labkit.learn.aggregation): hand-computed weights for every rule,
equality with the lab's own losses, and bad input."""
import pytest
import torch

from labkit.learn.aggregation import AGGREGATIONS, TRL_LOSS_TYPES, aggregate, effective_credit, token_weights
from labkit.learn.loop import policy_loss

# two responses of 1 and 3 tokens in a batch 4 wide, and a row with nothing generated
MASK = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize("mode, short, long", [
    ("token-mean", 1 / 4, 1 / 4),                  # 4 tokens in the batch
    ("token-sum", 1.0, 1.0),
    ("seq-mean-token-sum", 1 / 2, 1 / 2),          # 2 responses with a token
    ("seq-mean-token-mean", 1 / 2, 1 / 6),         # each response counts 1/2, split over its tokens
    ("seq-mean-token-sum-norm", 1 / 8, 1 / 8),     # 1 / (2 responses x width 4)
])
def test_each_rule_weighs_tokens_as_computed_by_hand(mode, short, long):
    w = token_weights(MASK, mode)
    assert w[0, 0] == pytest.approx(short) and torch.allclose(w[1, :3], torch.full((3,), long, dtype=torch.float64))
    assert float(w[~MASK].abs().sum()) == 0.0
    per_token = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    assert float(aggregate(per_token, MASK, mode)) == pytest.approx(float((per_token * w).sum()))


def test_trl_loss_types_and_the_constant_of_the_norm_rule():
    for loss_type, mode in TRL_LOSS_TYPES.items():
        assert torch.equal(token_weights(MASK, loss_type), token_weights(MASK, mode))
    # TRL's dr_grpo divides by max_completion_length, here 10
    assert token_weights(MASK, "dr_grpo", scale_factor=10)[0, 0] == pytest.approx(1 / 20)
    assert set(AGGREGATIONS) >= set(TRL_LOSS_TYPES.values())


def test_trl_loss_types_normalise_as_trl_writes_them():
    # TRL 1.16's GRPOTrainer normalisers, written out for a batch without an empty completion
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    x = torch.arange(1.0, 13.0).reshape(3, 4)
    m = mask.double()
    per_seq_mean = ((x * m).sum(-1) / m.sum(-1)).mean()
    by_tokens = (x * m).sum() / m.sum()
    expected = {"grpo": per_seq_mean, "sapo": per_seq_mean, "bnpo": by_tokens, "dapo": by_tokens,
                "cispo": by_tokens, "vespo": by_tokens, "luspo": (x * m).sum(-1).mean(),
                "dr_grpo": (x * m).sum() / (3 * 10)}
    assert set(expected) == set(TRL_LOSS_TYPES)
    for loss_type, value in expected.items():
        scale = 10 if loss_type == "dr_grpo" else None
        assert float(aggregate(x, mask, loss_type, scale_factor=scale)) == pytest.approx(float(value)), loss_type


def test_effective_credit_is_the_advantage_times_the_weight():
    adv = torch.tensor([[1.0, 0, 0, 0], [1.0, 1.0, 1.0, 0], [0, 0, 0, 0]])
    # same advantage per token: under seq-mean-token-mean the short response's token gets 3x the push
    eff = effective_credit(adv, MASK, "seq-mean-token-mean")
    assert eff[0, 0] == pytest.approx(3 * eff[1, 0])
    assert torch.equal(effective_credit(adv, MASK, "token-mean")[0, 0], effective_credit(adv, MASK, "token-mean")[1, 2])


def test_the_losses_default_aggregations_are_these_rules():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 4, generator=g, dtype=torch.float64)
    old = logp + 0.1 * torch.randn(3, 4, generator=g, dtype=torch.float64)
    old = old.clamp(max=0)
    adv = torch.randn(3, 4, generator=g, dtype=torch.float64)
    for kind, mode in (("ppo_clip", "token-mean"), ("grpo", "seq-mean-token-mean")):
        own, _ = policy_loss(logp, old, adv, MASK, kind)
        chosen, _ = policy_loss(logp, old, adv, MASK, kind, aggregation=mode)
        assert torch.allclose(own, chosen)
    # reinforce's own divides by every row (3); seq-mean-token-sum by the rows with a token (2)
    own, _ = policy_loss(logp, old, adv, MASK, "reinforce")
    chosen, _ = policy_loss(logp, old, adv, MASK, "reinforce", aggregation="seq-mean-token-sum")
    assert torch.allclose(own * 3, chosen * 2)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="^mode:"):
        token_weights(MASK, "token-median")
    with pytest.raises(ValueError, match="^scale_factor:"):
        token_weights(MASK, "token-mean", scale_factor=4)
    with pytest.raises(ValueError, match="^scale_factor:"):
        token_weights(MASK, "seq-mean-token-sum-norm", scale_factor=0)
    with pytest.raises(ValueError, match="^mask:"):
        token_weights(MASK.double() * 0.5, "token-mean")
    with pytest.raises(ValueError, match="^mask:"):
        aggregate(torch.zeros(3, 4), MASK[:2], "token-mean")
    with pytest.raises(ValueError, match="^aggregation:"):
        policy_loss(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), MASK, aggregation="mean")
    # an empty batch: all weights 0, loss 0
    assert float(aggregate(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool), "seq-mean-token-mean")) == 0.0
