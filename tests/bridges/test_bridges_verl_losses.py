"""Parity of ``policy_loss``'s extra kinds (``labkit.learn.policy_losses``) with verl's policy losses
of the same names (``verl.trainer.ppo.core_algos``: vanilla with its dual clip, gspo, cispo, sapo,
clip_cov, kl_cov), on random batches with right padding.

Runs where verl is installed (``.venv-verl``); skipped in the lab's environment. verl's
seq-mean-token-mean divides by (length + 1e-8), labkit's by the length, so those kinds agree to
about 1e-9 relative, not bit for bit. clip_cov draws the tokens it drops at random (verl with the
global torch state, labkit with its own generator), so exact parity is tested where the draw is
no choice: no candidate at all, or every candidate dropped (clip_cov_ratio 1); otherwise the number
of dropped tokens is compared (verl's pg_clipfrac).
"""
from __future__ import annotations

import pytest
import torch

core_algos = pytest.importorskip(
    "verl.trainer.ppo.core_algos",
    reason="verl is not installed here: `make test-verl` runs these tests in their own environment")
from verl.workers.config.actor import ActorConfig, PolicyLossConfig  # noqa: E402

from labkit.learn.loop import policy_loss  # noqa: E402
from labkit.learn.policy_losses import DEFAULT_AGGREGATION  # noqa: E402

VERL_NAME = {"dual_clip": "vanilla", "gspo": "gspo", "cispo": "cispo", "sapo": "sapo", "clip_cov": "clip_cov",
             "kl_cov": "kl_cov"}


def config(actor=None, **policy_loss_options):
    """verl's ActorConfig with its defaults (clip_ratio 0.2, clip_ratio_c 3.0, tau_pos 1.0, tau_neg 1.05)
    but for ``actor``'s fields and ``policy_loss_options``."""
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **(actor or {}),
                       policy_loss=PolicyLossConfig(**policy_loss_options))


def batch(seed: int, B: int = 8, T: int = 10, spread: float = 0.4):
    """(logp, old_logp, advantages, mask): right padding, one empty row, ratios e^N(0, spread)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[2] = 0
    mask = torch.arange(T)[None, :] < lengths[:, None]
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 - 0.05
    logp = (old + spread * torch.randn(B, T, generator=g, dtype=torch.float64)).clamp(max=0.0)
    adv = 1.5 * torch.randn(B, T, generator=g, dtype=torch.float64)
    return logp, old, adv, mask


def both(kind, seed, *, cfg=None, agg=None, spread=0.4, **labkit_options):
    logp, old, adv, mask = batch(seed, spread=spread)
    agg = agg or DEFAULT_AGGREGATION[kind]
    verl_loss, metrics = core_algos.get_policy_loss_fn(VERL_NAME[kind])(
        old, logp, adv, mask.to(torch.float64), loss_agg_mode=agg, config=cfg or config())
    ours, stats = policy_loss(logp, old, adv, mask, kind, aggregation=agg, **labkit_options)
    return float(verl_loss), float(ours), metrics, stats


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["dual_clip", "gspo", "cispo", "sapo"])
def test_same_loss_as_verl(kind, seed):
    v, ours, metrics, stats = both(kind, seed)
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)
    if kind != "sapo":
        assert stats["clip_frac"] == pytest.approx(metrics["actor/pg_clipfrac"], rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_clip_with_wide_ratios_and_other_c(seed):
    # large ratios with negative advantages: the dual clip fires
    cfg = config({"clip_ratio_c": 2.0})
    v, ours, _, _ = both("dual_clip", seed, cfg=cfg, spread=1.5, clip_ratio_c=2.0)
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-sum"])
def test_gspo_and_cispo_under_other_aggregations(seed, agg):
    for kind in ("gspo", "cispo"):
        v, ours, _, _ = both(kind, seed, agg=agg)
        assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ratio, coef", [(2e-4, 0.1), (0.1, 0.1), (0.3, 1.0)])
def test_kl_cov_same_loss_as_verl(seed, ratio, coef):
    v, ours, _, _ = both("kl_cov", seed, cfg=config(kl_cov_ratio=ratio, ppo_kl_coef=coef),
                         kl_cov_ratio=ratio, ppo_kl_coef=coef)
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)


def test_sapo_taus_from_the_config():
    cfg = config({"tau_pos": 2.0, "tau_neg": 3.0})
    v, ours, _, _ = both("sapo", 0, cfg=cfg, tau_pos=2.0, tau_neg=3.0)
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)


def test_defaults_are_verls():
    cfg = config()
    assert (cfg.clip_ratio, cfg.clip_ratio_c, cfg.tau_pos, cfg.tau_neg) == (0.2, 3.0, 1.0, 1.05)
    p = cfg.policy_loss
    assert (p.clip_cov_ratio, p.clip_cov_lb, p.clip_cov_ub, p.kl_cov_ratio, p.ppo_kl_coef) == \
        (2e-4, 1.0, 5.0, 2e-4, 0.1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clip_cov_where_the_draw_is_no_choice(seed):
    # bounds no covariance reaches: no candidate, the loss is PPO-clip's on both sides
    v, ours, _, stats = both("clip_cov", seed, cfg=config(clip_cov_lb=1e3, clip_cov_ub=2e3),
                             clip_cov_lb=1e3, clip_cov_ub=2e3)
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12) and stats["clip_frac"] == 0.0
    # ratio 1: k = N >= candidates, so every candidate is dropped on both sides
    opts = dict(clip_cov_ratio=1.0, clip_cov_lb=0.0, clip_cov_ub=5.0)
    v, ours, metrics, stats = both("clip_cov", seed, cfg=config(**opts), **opts)
    assert stats["clip_frac"] > 0
    assert ours == pytest.approx(v, rel=1e-7, abs=1e-12)
    assert stats["clip_frac"] == pytest.approx(metrics["actor/pg_clipfrac"], rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clip_cov_drops_as_many_tokens_as_verl(seed):
    # a random draw: the count of dropped tokens matches, which ones need not
    opts = dict(clip_cov_ratio=0.05, clip_cov_lb=0.0, clip_cov_ub=5.0)
    torch.manual_seed(seed)
    _, _, metrics, stats = both("clip_cov", seed, cfg=config(**opts), generator=torch.Generator().manual_seed(seed),
                                **opts)
    assert stats["clip_frac"] == pytest.approx(metrics["actor/pg_clipfrac"], rel=1e-7, abs=1e-12)
