"""The extra policy losses of ``policy_loss`` (``labkit.learn.policy_losses``): hand-computed 2 x 3
cases (loss and gradient w.r.t. logp), degenerate input, bad options, the top-entropy rule."""
from __future__ import annotations

import math

import pytest
import torch

from labkit.learn.aggregation import token_weights
from labkit.learn.loop import LOSSES, policy_loss
from labkit.learn.policy_losses import DEFAULT_AGGREGATION, KINDS

# old policy: probability 0.2 everywhere; logp = log(0.2 r), so the ratio of each token is r
MASK = torch.tensor([[True, True, True], [True, True, False]])
ADV = torch.tensor([[1.0, 1.0, -1.0], [-1.0, 2.0, 0.0]], dtype=torch.float64)
R1 = [[1.0, 1.5, 0.5], [4.0, 1.1, 1.0]]


def inputs(ratios):
    old = torch.full((2, 3), math.log(0.2), dtype=torch.float64)
    logp = (old + torch.tensor(ratios, dtype=torch.float64).log()).requires_grad_(True)
    return logp, old


def loss_and_grad(kind, ratios=R1, adv=ADV, mask=MASK, **kw):
    logp, old = inputs(ratios)
    loss, stats = policy_loss(logp, old, adv, mask, kind, **kw)
    loss.backward()
    return float(loss.detach()), logp.grad, stats


def close(grad, expected):
    assert torch.allclose(grad, torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=0)


def test_kinds_are_accepted_by_train():
    assert set(KINDS) <= set(LOSSES)
    assert set(DEFAULT_AGGREGATION) == set(KINDS)


def test_dual_clip_by_hand():
    # terms (token-mean over 5): -1, -1.2 (clipped), 0.8 (clipped), min(4, 3) = 3 (dual clip), -2.2
    loss, grad, stats = loss_and_grad("dual_clip")
    assert loss == pytest.approx((-1 - 1.2 + 0.8 + 3 - 2.2) / 5, abs=1e-12)
    close(grad, [[-1 / 5, 0, 0], [0, -2.2 / 5, 0]])
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    # PPO-clip keeps the 4 (and its gradient); a larger c lets it through too
    ppo, ppo_grad, _ = loss_and_grad("ppo_clip")
    assert ppo == pytest.approx((-1 - 1.2 + 0.8 + 4 - 2.2) / 5, abs=1e-12)
    assert float(ppo_grad[1, 0]) == pytest.approx(4 / 5)
    loose, _, _ = loss_and_grad("dual_clip", clip_ratio_c=5.0)
    assert loose == pytest.approx(ppo, abs=1e-12)


def test_gspo_by_hand():
    # row 0's ratios 2, 0.5, 1 have geometric mean 1; row 1's 4, 1 have 2 (clipped for A = 2)
    loss, grad, stats = loss_and_grad("gspo", ratios=[[2.0, 0.5, 1.0], [4.0, 1.0, 1.0]])
    row0 = (-1 - 1 + 1) / 3
    row1 = (2 - 2.4) / 2
    assert loss == pytest.approx((row0 + row1) / 2, abs=1e-12)
    # d s / d logp_t = s: row 0 gets -A / (3 * 2); row 1 token 0 gets -A s / (2 * 2), token 1 is clipped
    close(grad, [[-1 / 6, -1 / 6, 1 / 6], [2 / 4, 0, 0]])
    assert stats["clip_frac"] == pytest.approx(1 / 5)


def test_cispo_by_hand():
    # weights clip(r) = 1, 1.2, 0.8, 1.2, 1.1 (detached); term -w A logp, token-mean over 5
    loss, grad, stats = loss_and_grad("cispo")
    ln = math.log
    terms = [-1 * ln(0.2), -1.2 * ln(0.3), 0.8 * ln(0.1), 1.2 * ln(0.8), -2.2 * ln(0.22)]
    assert loss == pytest.approx(sum(terms) / 5, abs=1e-12)
    # every token keeps a gradient, the clipped ones with the clipped weight
    close(grad, [[-1 / 5, -1.2 / 5, 0.8 / 5], [1.2 / 5, -2.2 / 5, 0]])
    assert stats["clip_frac"] == pytest.approx(3 / 5)


def test_sapo_by_hand():
    s = 1 / (1 + math.exp(-1.05))  # the gate's sigmoid for r = 2, tau_neg = 1.05
    loss, grad, _ = loss_and_grad("sapo", ratios=[[1.0, 1.0, 1.0], [2.0, 1.0, 1.0]])
    row0 = (-2 - 2 + 2 / 1.05) / 3  # f(1) = 2 / tau
    row1 = (s * 4 / 1.05 - 4) / 2
    assert loss == pytest.approx((row0 + row1) / 2, abs=1e-12)
    # d/dlogp of -A sigmoid(tau (r - 1)) 4 / tau = -4 A sigma (1 - sigma) r; at r = 1 that is -A
    close(grad, [[-1 / 6, -1 / 6, 1 / 6], [8 * s * (1 - s) / 4, -2 / 4, 0]])
    # tau changes the gate: a steeper negative tau shrinks the (r = 2, A < 0) term's loss share
    other, _, _ = loss_and_grad("sapo", ratios=[[1.0, 1.0, 1.0], [2.0, 1.0, 1.0]], tau_neg=2.0)
    assert other != pytest.approx(loss)


def test_clip_cov_by_hand():
    # covariances (A - 0.4)(logp - mean logp): (0,0) -0.143, (1,0) -1.61, (1,1) -0.230; (0,1) and
    # (0,2) are clipped by PPO already and never candidates
    plain, _, stats = loss_and_grad("clip_cov")  # default bounds (1, 5): no candidate
    assert plain == pytest.approx((-1 - 1.2 + 0.8 + 4 - 2.2) / 5, abs=1e-12)
    assert stats["clip_frac"] == 0.0
    # bounds (-1, -0.2): only (1,1) is a candidate; ratio 1 drops every candidate
    loss, grad, stats = loss_and_grad("clip_cov", clip_cov_lb=-1.0, clip_cov_ub=-0.2, clip_cov_ratio=1.0)
    assert loss == pytest.approx((-1 - 1.2 + 0.8 + 4) / 5, abs=1e-12)
    close(grad, [[-1 / 5, 0, 0], [4 / 5, 0, 0]])
    assert stats["clip_frac"] == pytest.approx(1 / 5)
    # bounds (-0.5, 0): (0,0) and (1,1) are candidates; k = max(1, floor(1e-4 * 5)) = 1 drawn at random
    picks = set()
    for seed in range(12):
        a, _, st = loss_and_grad("clip_cov", clip_cov_lb=-0.5, clip_cov_ub=0.0, clip_cov_ratio=1e-4,
                                 generator=torch.Generator().manual_seed(seed))
        b, _, _ = loss_and_grad("clip_cov", clip_cov_lb=-0.5, clip_cov_ub=0.0, clip_cov_ratio=1e-4,
                                generator=torch.Generator().manual_seed(seed))
        assert a == b  # seeded: reproducible
        assert st["clip_frac"] == pytest.approx(1 / 5)
        picks.add(round(a, 9))
    assert picks <= {round((-1.2 + 0.8 + 4 - 2.2) / 5, 9), round((-1 - 1.2 + 0.8 + 4) / 5, 9)}
    # no generator: seeded 0, the same every call
    assert loss_and_grad("clip_cov", clip_cov_lb=-0.5, clip_cov_ub=0.0)[0] == \
        loss_and_grad("clip_cov", clip_cov_lb=-0.5, clip_cov_ub=0.0)[0]


def test_kl_cov_by_hand():
    # covariances: (0,2) 1.30 and (0,1) 0.100 are the top k = floor(5 * 0.4) = 2; they get 0.1 |log r|
    loss, grad, stats = loss_and_grad("kl_cov", kl_cov_ratio=0.4)
    assert loss == pytest.approx((-1 - 1.5 + 0.5 + 4 - 2.2 + 0.1 * math.log(3)) / 5, abs=1e-12)
    close(grad, [[-1 / 5, (-1.5 + 0.1) / 5, (0.5 - 0.1) / 5], [4 / 5, -2.2 / 5, 0]])
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    # the default ratio penalises one token (k = max(1, 0)): the top one, (0,2)
    one, _, _ = loss_and_grad("kl_cov")
    assert one == pytest.approx((-1 - 1.5 + 0.5 + 4 - 2.2 + 0.1 * math.log(2)) / 5, abs=1e-12)
    coef, _, _ = loss_and_grad("kl_cov", ppo_kl_coef=1.0)
    assert coef == pytest.approx((-1 - 1.5 + 0.5 + 4 - 2.2 + math.log(2)) / 5, abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_at_ratio_one_every_kind_has_the_policy_gradient(kind):
    # on-policy (r = 1) every rule's gradient is -A times its aggregation weight
    g = torch.Generator().manual_seed(3)
    adv = torch.randn(2, 3, generator=g, dtype=torch.float64)
    _, grad, _ = loss_and_grad(kind, ratios=[[1.0] * 3] * 2, adv=adv)
    expected = -adv * token_weights(MASK, DEFAULT_AGGREGATION[kind])
    assert torch.allclose(grad, expected, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_degenerate_input(kind):
    # no generated token: loss 0, zero gradient, no NaN
    loss, grad, stats = loss_and_grad(kind, mask=torch.zeros(2, 3, dtype=torch.bool))
    assert loss == 0.0 and torch.equal(grad, torch.zeros(2, 3, dtype=torch.float64))
    assert stats["clip_frac"] == 0.0
    # all-zero advantages: loss 0 (kl_cov: its penalty at r = 1 is 0 too)
    loss, grad, _ = loss_and_grad(kind, ratios=[[1.0] * 3] * 2, adv=torch.zeros(2, 3, dtype=torch.float64))
    assert loss == 0.0
    # aggregation override is honoured
    a, _, _ = loss_and_grad(kind, aggregation="token-sum")
    assert math.isfinite(a)


@pytest.mark.parametrize("kwargs, name", [
    ({"clip_ratio_c": 1.0}, "clip_ratio_c"), ({"tau_pos": 0.0}, "tau_pos"), ({"tau_neg": -1.0}, "tau_neg"),
    ({"clip_cov_ratio": 0.0}, "clip_cov_ratio"), ({"clip_cov_ratio": 1.5}, "clip_cov_ratio"),
    ({"clip_cov_lb": 2.0, "clip_cov_ub": 2.0}, "clip_cov_ub"), ({"clip_cov_lb": float("nan")}, "clip_cov_lb"),
    ({"kl_cov_ratio": 0.0}, "kl_cov_ratio"), ({"ppo_kl_coef": -0.1}, "ppo_kl_coef"),
    ({"top_entropy_quantile": 1.5}, "top_entropy_quantile"), ({"top_entropy_quantile": 0.5}, "entropies"),
    ({"top_entropy_quantile": 0.5, "entropies": torch.ones(3, 2)}, "entropies"),
    ({"renorm": "sorl"}, "renorm"), ({"ratio_level": "turn", "turn_ids": torch.zeros(2, 3)}, "ratio_level"),
])
def test_bad_options_name_the_argument(kwargs, name):
    logp, old = inputs(R1)
    with pytest.raises(ValueError, match=f"^{name}:"):
        policy_loss(logp, old, ADV, MASK, "gspo", **kwargs)


def test_bad_generator_and_kind():
    logp, old = inputs(R1)
    with pytest.raises(TypeError, match="^generator:"):
        policy_loss(logp, old, ADV, MASK, "clip_cov", generator=0)
    with pytest.raises(TypeError, match="^tau_pos:"):
        policy_loss(logp, old, ADV, MASK, "sapo", tau_pos="1")
    with pytest.raises(ValueError, match="^kind:"):
        policy_loss(logp, old, ADV, MASK, "gspo_clip")


ENT = torch.tensor([[0.1, 0.5, 0.9], [0.3, 0.7, 99.0]], dtype=torch.float64)  # 99: off the mask


def test_top_entropy_quantile_by_hand():
    # generated entropies .1 .3 .5 .7 .9; the 0.6 quantile is 0.58: (0,2) and (1,1) keep their terms,
    # the others become 0 but still count in token-mean's 5
    loss, grad, stats = loss_and_grad("ppo_clip", entropies=ENT, top_entropy_quantile=0.4)
    assert loss == pytest.approx((0.8 - 2.2) / 5, abs=1e-12)
    close(grad, [[0, 0, 0], [0, -2.2 / 5, 0]])
    assert stats["entropy_keep_frac"] == pytest.approx(2 / 5)
    # 0.0 keeps only the highest-entropy token; 1.0 keeps all, bit-identical to no rule
    only, _, _ = loss_and_grad("reinforce", entropies=ENT, top_entropy_quantile=0.0)
    assert only == pytest.approx(-(-1.0) * math.log(0.1) / 2, abs=1e-12)  # reinforce: sum over rows / B
    for kind in LOSSES:
        a, ga, _ = loss_and_grad(kind, entropies=ENT, top_entropy_quantile=1.0)
        b, gb, _ = loss_and_grad(kind)
        assert a == b and torch.equal(ga, gb)
    # works for the extra kinds too
    d, gd, _ = loss_and_grad("dual_clip", entropies=ENT, top_entropy_quantile=0.4)
    assert d == pytest.approx((0.8 - 2.2) / 5, abs=1e-12)
    # no generated token: nothing kept, loss 0
    z, _, _ = loss_and_grad("grpo", mask=torch.zeros(2, 3, dtype=torch.bool), entropies=ENT,
                            top_entropy_quantile=0.2)
    assert z == 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_train_runs_every_kind(kind):
    from labkit.course.presets import chain_setup
    from labkit.envs.chain import ChainLearner
    from labkit.learn.loop import train
    env, policy, _ = chain_setup(horizon=6, n_bifurcations=2, env_seed=0, policy_seed=0)
    curve = train(ChainLearner(env, policy, batch_size=16, group_size=8), "grpo", kind=kind, iterations=3, epochs=2,
                  eval_every=3, progress=False)
    assert (curve["kind"] == kind).all() and curve["loss"].iloc[1:].notna().all()


def test_loss_credit_by_hand():
    from labkit.learn.loop import loss_credit
    logp, old = inputs(R1)
    # PPO-clip, token-mean over 5 tokens: the coefficient of grad log pi is r A / 5 where the
    # unclipped branch is active, 0 where the clip is (r 1.5 with A > 0, r 0.5 with A < 0)
    close(loss_credit(logp, old, ADV, MASK, "ppo_clip"), [[1 / 5, 0, 0], [-4 / 5, 2.2 / 5, 0]])
    # CISPO keeps every token, with the weight clipped to [0.8, 1.2]
    close(loss_credit(logp, old, ADV, MASK, "cispo"), [[1 / 5, 1.2 / 5, -0.8 / 5], [-1.2 / 5, 2.2 / 5, 0]])
    # SAPO (tau 1 for A > 0, 1.05 for A < 0): 4 s (1 - s) r A with s = sigmoid(tau (r - 1)), seq-mean-token-mean
    def sapo(r, a, n):
        tau = 1.0 if a > 0 else 1.05
        s = 1 / (1 + math.exp(-tau * (r - 1)))
        return 4 * s * (1 - s) * r * a / n / 2
    close(loss_credit(logp, old, ADV, MASK, "sapo"),
          [[sapo(1.0, 1, 3), sapo(1.5, 1, 3), sapo(0.5, -1, 3)], [sapo(4.0, -1, 2), sapo(1.1, 2, 2), 0]])


@pytest.mark.parametrize("kind", LOSSES)
def test_loss_credit_is_minus_the_gradient_and_at_ratio_one_the_aggregated_advantage(kind):
    from labkit.learn.aggregation import effective_credit
    from labkit.learn.loop import loss_credit
    _, grad, _ = loss_and_grad(kind)
    logp, old = inputs(R1)
    assert torch.allclose(loss_credit(logp, old, ADV, MASK, kind), -grad, atol=1e-15, rtol=0)
    same, old = inputs([[1.0] * 3] * 2)
    if kind not in ("clip_cov", "kl_cov", "reinforce"):  # clip_cov / kl_cov act at ratio 1 too
        agg = DEFAULT_AGGREGATION.get(kind, {"ppo_clip": "token-mean", "grpo": "seq-mean-token-mean"}.get(kind))
        assert torch.allclose(loss_credit(same, old, ADV, MASK, kind), effective_credit(ADV, MASK, agg), atol=1e-15)
    # the top-entropy rule zeroes the credit of the tokens it leaves out
    kept = loss_credit(logp, old, ADV, MASK, kind, entropies=ENT, top_entropy_quantile=0.4)
    assert (kept[0, :2] == 0).all() and (kept[1, 0] == 0) and (kept[1, 2] == 0)


def test_train_takes_loss_options():
    from labkit.course.presets import chain_setup
    from labkit.envs.chain import ChainLearner
    from labkit.learn.loop import train
    env, policy, _ = chain_setup(horizon=6, n_bifurcations=2, env_seed=0, policy_seed=0)

    def run(kind, **options):
        return train(ChainLearner(env, policy.clone() if hasattr(policy, "clone") else policy, batch_size=16,
                                  group_size=8), "grpo", kind=kind, iterations=2, epochs=2, eval_every=2,
                     progress=False, loss_options=options)
    a = run("sapo", tau_pos=2.0, top_entropy_quantile=0.5)
    assert a["loss"].iloc[1:].notna().all()
    with pytest.raises(ValueError, match="^loss_options"):
        run("ppo_clip", clip_ratio=3.0)
    with pytest.raises(ValueError, match="^tau_pos"):
        run("sapo", tau_pos=-1.0)
