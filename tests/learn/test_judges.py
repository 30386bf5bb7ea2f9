"""The judge stand-ins (labkit.learn.judges): CAPO's step verifier, the turn grades and latent-reward
regressor, the noisy oracle; each errs as often as it says.
"""

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.learn.judges import (LatentRewardRegressor, corrupt_features, noisy_oracle,
                                 stand_in_step_verifier, stand_in_turn_grades)

from step_batches import close_to, two_rows
from turn_batches import scored_turns

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_stand_in_verifier_error_rate_is_what_it_says():
    ro = two_rows()
    assert close_to(stand_in_step_verifier(ro, error_rate=1.0), [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    big = Rollouts(tokens=torch.zeros(400, 10, dtype=torch.long), mask=torch.ones(400, 10, dtype=torch.bool),
                   rewards=torch.zeros(400, 10), truth={"step_correct": torch.ones(400, 10, dtype=torch.bool)})
    v = stand_in_step_verifier(big, error_rate=0.2, seed=3)
    assert 0.17 < float((v == 0).double().mean()) < 0.23
    assert torch.equal(v, stand_in_step_verifier(big, error_rate=0.2, seed=3))
    with pytest.raises(ValueError, match="^error_rate"):
        stand_in_step_verifier(ro, error_rate=1.5)
    with pytest.raises(ValueError, match="^step_correct"):
        stand_in_step_verifier(ro.with_(truth={}))


def test_stand_in_turn_grades_error_rate():
    ro = scored_turns([200] * 4, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1])
    adv = torch.linspace(-1, 1, 800).reshape(4, 200).double()
    exact = stand_in_turn_grades(ro, advantage=adv, error_rate=0.0, tolerance=0.1)
    want = torch.where(adv > 0.1, 1.0, torch.where(adv < -0.1, -1.0, 0.0))
    assert torch.equal(exact, want)
    noisy = stand_in_turn_grades(ro, advantage=adv, error_rate=0.3, tolerance=0.1, seed=3)
    wrong = float((noisy != exact).double().mean())
    assert abs(wrong - 0.3) < 0.05 and set(noisy.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert torch.equal(noisy, stand_in_turn_grades(ro, advantage=adv, error_rate=0.3, tolerance=0.1, seed=3))
    with pytest.raises(ValueError, match="^error_rate"):
        stand_in_turn_grades(ro, advantage=adv, error_rate=1.5)
    with pytest.raises(ValueError, match="^advantage"):
        stand_in_turn_grades(ro, advantage=adv[:, :3])


def test_latent_reward_regressor_recovers_a_decomposable_return():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(40, 6, 3, generator=g) < 0.4).double()
    present = torch.ones(40, 6, dtype=torch.bool)
    present[:10, 4:] = False
    x = torch.where(present[..., None], x, 0.0)
    w = torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)
    R = (x @ w).sum(1)
    reg = LatentRewardRegressor(ridge=0.0, feature_names=("a", "b", "c")).fit(x, R, present)
    assert torch.allclose(reg.weights, w, atol=1e-8) and reg.r2 > 1 - 1e-9
    assert torch.allclose(reg.step_rewards(x, present).sum(1), R)
    assert set(reg.table()) == {"a", "b", "c"}
    with pytest.raises(ValueError, match="^returns"):
        reg.fit(x, R[:5])
    with pytest.raises(ValueError, match="^features"):
        reg.fit(x[0], R)
    with pytest.raises(ValueError, match="fit"):
        LatentRewardRegressor().step_rewards(x)
    flipped = corrupt_features(x, error_rate=1.0, present=present)
    assert torch.equal(flipped[present], 1 - x[present]) and bool((flipped[~present] == 0).all())


# --------------------------------------------------------------------------- judge stand-ins
def test_noisy_oracle():
    ref = torch.tensor([[0.0, 2.5, 9.7], [4.0, 11.0, -1.0]])
    assert torch.equal(noisy_oracle(ref, noise=0.0, seed=1), ref.double())
    a = noisy_oracle(ref, noise=1.0, seed=3)
    assert torch.equal(a, noisy_oracle(ref, noise=1.0, seed=3))
    assert not torch.equal(a, noisy_oracle(ref, noise=1.0, seed=4))
    graded = noisy_oracle(ref, noise=0.0, low=0, high=10, levels=11)
    assert graded.tolist() == [[0, 2, 10], [4, 10, 0]] or graded.tolist() == [[0, 3, 10], [4, 10, 0]]
    big = noisy_oracle(torch.zeros(20000), noise=2.0, seed=0)
    assert abs(float(big.std()) - 2.0) < 0.05 and abs(float(big.mean())) < 0.05
    with pytest.raises(ValueError, match="noise"):
        noisy_oracle(ref, noise=-1.0)
    with pytest.raises(ValueError, match="low"):
        noisy_oracle(ref, noise=0.1, low=0)
    with pytest.raises(ValueError, match="reference"):
        noisy_oracle(torch.tensor([float("nan")]), noise=0.1)
