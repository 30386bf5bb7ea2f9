"""Credit and Cost (labkit.core.credit): credit from a coarser level, and the cost record."""

import pytest
import torch

from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.core.segments import segment_broadcast, segment_reduce

from core_cases import small_rollouts


def test_credit_from_level_and_cost():
    r = small_rollouts()
    c = Credit.from_level(r, torch.tensor([1.0, 2.0, 3.0]), "episode", "demo", cost=Cost(env_steps=3))
    assert c.token[1].tolist() == [2.0, 2.0, 2.0, 0.0, 0.0]
    assert c.values.shape == (3, 1)
    assert (c.cost + Cost(env_steps=1, aux_calls=2)).as_dict()["env_steps"] == 4
    with pytest.raises(ValueError, match="credit"):
        Credit.from_level(r, torch.tensor([1.0, float("nan"), 3.0]), "episode", "demo")
    with pytest.raises(ValueError, match="level"):
        Credit.from_level(r, torch.tensor([1.0, 2.0, 3.0]), "sentence", "demo")


def test_credit_from_level_equals_segment_reduce_and_broadcast_at_every_level():
    # from_level skips the scatter where labels allow it; it must give what the general path gives
    g = torch.Generator().manual_seed(5)
    B, T = 7, 11
    mask = torch.rand(B, T, generator=g) < 0.6
    mask[0] = False
    mask[1, 3] = True
    new_step = torch.rand(B, T, generator=g) < 0.4
    steps = torch.full((B, T), -1)
    for b in range(B):
        k = -1
        for t in range(T):
            if mask[b, t]:
                k = k + 1 if (k < 0 or new_step[b, t]) else k
                steps[b, t] = k
    agents = torch.where(mask, torch.randint(0, 3, (B, T), generator=g), -1)
    ro = Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=torch.zeros(B, T),
                  step_ids=steps, turn_ids=steps, agent_ids=agents)
    for level in ("token", "step", "turn", "agent", "episode"):
        ids = ro.ids_for(level)
        for extra, dtype in ((0, torch.float32), (2, torch.float64)):
            n = int(ids.max()) + 1 + extra
            values = torch.randn(B, n, generator=g).to(dtype)
            credit = Credit.from_level(ro, values, level, "x")
            present = segment_reduce(ids, torch.ones_like(ids, dtype=torch.float64), "sum", n_segments=n)[1]
            assert torch.equal(credit.present, present), level
            want = segment_broadcast(ids, values)
            assert torch.equal(credit.token, want) and credit.token.dtype == want.dtype, level
            # bit for bit, signs of zeros included (off the mask a negative value times 0 is -0.0)
            bits = torch.int32 if dtype == torch.float32 else torch.int64
            assert torch.equal(credit.token.view(bits), want.view(bits)), level


def test_credit_refuses_complex_token_and_values():
    r = small_rollouts()
    z = torch.zeros(3, 5, dtype=torch.complex64)
    with pytest.raises(TypeError, match=r"^token: expected real numbers"):
        Credit.from_tokens(r, z, "m")
    with pytest.raises(TypeError, match=r"^values: expected real numbers"):
        Credit.from_level(r, z, "step", "m")
    with pytest.raises(TypeError, match=r"^token: expected real numbers"):
        Credit(z, "token", torch.zeros(3, 5), r.mask, "m")


@pytest.mark.parametrize("level", ["token", "step", "turn", "agent", "episode"])
def test_credit_refuses_fields_that_disagree_in_shape(level):
    r = small_rollouts()
    c = Credit.from_level(r, torch.ones(3, 5), level, "m")
    # the fields as from_level made them are accepted as they are
    again = Credit(c.token, c.level, c.values, c.present, "m")
    assert torch.equal(again.token, c.token) and torch.equal(again.values, c.values)
    with pytest.raises(ValueError, match=r"^values: expected shape \(3, "):
        Credit(c.token, level, torch.cat([c.values, c.values[:1]]), torch.cat([c.present, c.present[:1]]), "m")
    with pytest.raises(ValueError, match=r"^values: expected shape"):
        Credit(c.token, level, c.values[:, 0], c.present[:, 0], "m")
    with pytest.raises(ValueError, match=r"^token: expected shape \(B, T\)"):
        Credit(c.token.reshape(-1), level, c.values, c.present, "m")
    with pytest.raises(ValueError, match=r"^present: expected the shape of values"):
        Credit(c.token, level, c.values, c.present[:, :0], "m")


def test_token_credit_values_narrower_than_token_are_refused():
    r = small_rollouts()
    with pytest.raises(ValueError, match=r"^values: expected shape \(3, >= 5\)"):
        Credit(torch.zeros(3, 5), "token", torch.zeros(3, 4), r.mask[:, :4], "m")
