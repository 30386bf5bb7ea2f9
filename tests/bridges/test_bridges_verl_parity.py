"""Parity of labkit's estimators with verl's own (``verl.trainer.ppo.core_algos``), through the bridge.

Runs where verl is installed: ``make test-verl`` builds that environment (``.venv-verl``,
requirements-verl.txt) and runs this file there; in the lab's environment it is skipped (verl pins
transformers < 5.11, so it cannot live beside the lab). Every batch goes through verl's function and
labkit's on the same tensors; batches have right padding and observation holes in the mask, groups
of one and groups whose scores are all equal. Where the conventions differ the difference itself is
asserted, so a change on either side shows up here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

core_algos = pytest.importorskip(
    "verl.trainer.ppo.core_algos",
    reason="verl is not installed here: `make test-verl` runs these tests in their own environment")

import labkit.bridges.verl as lb  # noqa: E402
from labkit.core.stats import masked_moments  # noqa: E402


def verl_batch(seed: int, *, holes: bool = False, dense: bool = False, binary: bool = False):
    """(rewards, mask, uids) shaped like verl's: groups of 1..6 (some of one, some all-equal),
    right padding, optionally observation holes in the mask and rewards on every response token."""
    g = torch.Generator().manual_seed(seed)
    sizes = [1, 4, 1, 3, 6, 2, 5, 4]
    B, T = sum(sizes), 12
    uids = np.array([f"prompt-{k}" for k, n in enumerate(sizes) for _ in range(n)], dtype=object)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    if holes:  # tool output inside a response: not generated, never the first or last token
        hole = (torch.rand(B, T, generator=g) < 0.25) & (torch.arange(T)[None, :] > 0) \
            & (torch.arange(T)[None, :] < lengths[:, None] - 1)
        mask = mask * (~hole).float()
    last = (mask * torch.arange(1, T + 1)).argmax(1)
    score = (torch.rand(B, generator=g) < 0.5).float() if binary else torch.randn(B, generator=g)
    score[1:5] = 0.7  # group 1 (rows 1..4): every response scores the same
    rewards = torch.zeros(B, T)
    if dense:
        rewards = torch.randn(B, T, generator=g) * mask
    rewards[torch.arange(B), last] += score
    return rewards, mask, uids


SEEDS = [0, 1, 2]


def _singleton_rows(uids):
    _, inverse, counts = np.unique(uids, return_inverse=True, return_counts=True)
    return torch.from_numpy(counts[inverse] == 1)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("binary", [False, True])
def test_grpo_matches_both_of_verls_grpos(seed, binary):
    r, m, uid = verl_batch(seed, binary=binary)
    ours, ours_ret = lb.labkit_grpo(r, m, uid)
    loop, _ = core_algos.compute_grpo_outcome_advantage(r.clone(), m, uid)
    vec, _ = core_algos.compute_grpo_vectorized_outcome_advantage(r.clone(), m, uid)
    assert ours.shape == r.shape and ours.dtype == r.dtype and torch.equal(ours, ours_ret)
    torch.testing.assert_close(ours, loop, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, vec, rtol=1e-5, atol=1e-5)
    # the degenerate groups the batch was built with: all-equal -> 0, a group of one -> raw / (1 + eps)
    assert torch.all(ours[1:5] == 0)
    single = _singleton_rows(uid)
    torch.testing.assert_close(ours[single], r[single].sum(1, keepdim=True) / (1 + 1e-6) * m[single])


@pytest.mark.parametrize("seed", SEEDS)
def test_dr_grpo_is_verls_grpo_without_the_std(seed):
    r, m, uid = verl_batch(seed)
    ours, _ = lb.labkit_dr_grpo(r, m, uid)
    ref, _ = core_algos.compute_grpo_outcome_advantage(r.clone(), m, uid, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    # and labkit_grpo follows verl's config switch to the same thing
    via_config, _ = lb.labkit_grpo(r, m, uid, config={"norm_adv_by_std_in_grpo": False})
    torch.testing.assert_close(via_config, ours)


@pytest.mark.parametrize("seed", SEEDS)
def test_rloo_matches_verls_vectorised_rloo_and_differs_from_the_loop_on_singletons(seed):
    r, m, uid = verl_batch(seed)
    ours, _ = lb.labkit_rloo(r, m, uid)
    vec, _ = core_algos.compute_rloo_vectorized_outcome_advantage(r.clone(), m, uid)
    loop, _ = core_algos.compute_rloo_outcome_advantage(r.clone(), m, uid)
    torch.testing.assert_close(ours, vec, rtol=1e-5, atol=1e-6)
    single = _singleton_rows(uid)
    assert single.any()
    torch.testing.assert_close(ours[~single], loop[~single], rtol=1e-5, atol=1e-6)
    # the convention difference: verl's loop leaves a group of one its raw score, labkit gives 0
    assert torch.all(ours[single] == 0)
    torch.testing.assert_close(loop[single], r[single].sum(1, keepdim=True) * m[single])


def _bessel(x, mask):
    """sqrt(var_unbiased + 1e-8) / sqrt(var_population + 1e-8) over the masked entries: the factor by
    which labkit's whitening (population variance) exceeds verl's masked_whiten (unbiased)."""
    _, var = masked_moments(x.double(), mask.bool())
    n = mask.sum().double()
    return float(torch.sqrt(var * n / (n - 1) + 1e-8) / torch.sqrt(var + 1e-8))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_pp_differs_from_verl_by_the_bessel_factor_only(seed, gamma):
    r, m, uid = verl_batch(seed, holes=True, dense=True)
    ours, ours_ret = lb.labkit_reinforce_pp(r, m, config={"gamma": gamma})
    ref, ref_ret = core_algos.compute_reinforce_plus_plus_outcome_advantage(r, m, config=_Config(gamma=gamma))
    on = m.bool()
    torch.testing.assert_close(ours_ret[on], ref_ret[on], rtol=1e-5, atol=1e-5)
    factor = _bessel(ref_ret, m)
    assert factor > 1 + 1e-4  # a real difference on a small batch ...
    torch.testing.assert_close(ours[on] / factor, ref[on], rtol=1e-4, atol=1e-5)  # ... and the only one
    assert torch.all(ours[~on] == 0)


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_pp_baseline_differs_from_verl_by_the_bessel_factor_only(seed):
    r, m, uid = verl_batch(seed)
    ours, _ = lb.labkit_reinforce_pp(r, m, uid, group_baseline=True)
    ref, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(r.clone(), m, uid)
    centred, _ = core_algos.compute_grpo_outcome_advantage(r.clone(), m, uid, norm_adv_by_std_in_grpo=False)
    factor = _bessel(centred, m)
    torch.testing.assert_close(ours / factor, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.95, 0.9), (1.0, 0.0)])
def test_gae_matches_verl_up_to_the_bessel_factor_of_its_whitening(seed, gamma, lam):
    r, m, uid = verl_batch(seed, holes=True, dense=True)
    values = torch.randn(r.shape, generator=torch.Generator().manual_seed(seed + 100))
    ours, ours_ret = lb.labkit_gae(r, values, m, config={"gamma": gamma, "lam": lam})
    ref, ref_ret = core_algos.compute_gae_advantage_return(r, values, m, gamma, lam)
    on = m.bool()
    torch.testing.assert_close(ours_ret[on], ref_ret[on], rtol=1e-5, atol=1e-5)  # A + V, before whitening
    factor = _bessel(ref_ret - values, m)
    torch.testing.assert_close(ours[on] / factor, ref[on], rtol=1e-4, atol=1e-5)
    # unwhitened, labkit's advantage is verl's returns minus values (labkit's gae default)
    raw, _ = lb.labkit_gae(r, values, m, gamma=gamma, lam=lam, whiten_advantages=False)
    torch.testing.assert_close(raw[on], (ref_ret - values)[on], rtol=1e-5, atol=1e-5)


def test_one_generated_token_verl_refuses_labkit_gives_zero():
    r = torch.tensor([[0.0, 1.0, 0.0]])
    m = torch.tensor([[0.0, 1.0, 0.0]])
    with pytest.raises(ValueError):
        core_algos.compute_reinforce_plus_plus_outcome_advantage(r, m, config=_Config(gamma=1.0))
    ours, _ = lb.labkit_reinforce_pp(r, m)
    assert torch.all(ours == 0)


def test_register_puts_the_wrappers_in_verls_registry():
    names = lb.register()
    assert names == [f"labkit_{n}" for n in lb.BRIDGED]
    assert lb.register(["grpo"]) == ["labkit_grpo"]  # twice is harmless
    for name in names:
        assert core_algos.get_adv_estimator_fn(name) is lb.BRIDGED[name.removeprefix("labkit_")]
    # called the way verl's compute_advantage calls a registered estimator (keywords, AlgoConfig)
    from verl.trainer.config import AlgoConfig
    r, m, uid = verl_batch(0)
    fn = core_algos.get_adv_estimator_fn("labkit_rloo")
    adv, ret = fn(token_level_rewards=r, response_mask=m, config=AlgoConfig(), index=uid)
    torch.testing.assert_close(adv, core_algos.compute_rloo_vectorized_outcome_advantage(r, m, uid)[0])
    adv, _ = core_algos.get_adv_estimator_fn("labkit_grpo")(
        token_level_rewards=r, response_mask=m, config=AlgoConfig(norm_adv_by_std_in_grpo=False), index=uid)
    torch.testing.assert_close(adv, lb.labkit_dr_grpo(r, m, uid)[0])


class _Config(dict):
    """The attribute access verl's estimators use on an AlgoConfig (``config.gamma``)."""

    def __getattr__(self, name):
        return self[name]


@pytest.mark.parametrize("policy, found", [("auto", True), ("none", False)])
def test_import_verl_registers_labkits_estimators_through_the_plugin_entry_point(policy, found):
    # A fresh interpreter that only imports verl: labkit's `verl.plugins` entry point
    # (pyproject.toml, labkit.bridges.verl_plugin) registers the estimators; with verl's plugin
    # discovery off, nothing does, so it is the entry point that did it.
    import os
    import subprocess
    import sys
    import tempfile
    code = ("import verl\nfrom verl.trainer.ppo import core_algos\n"
            "try:\n    print(core_algos.get_adv_estimator_fn('labkit_grpo').__module__)\n"
            "except ValueError:\n    print('not registered')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tempfile.gettempdir(), env=dict(os.environ, VERL_USE_EXTERNAL_PLUGINS=policy))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == ("labkit.bridges.verl" if found else "not registered")


# ---- verl's other outcome estimators, through their bridge wrappers
@pytest.mark.parametrize("seed", SEEDS)
def test_opo_matches_verl(seed):
    r, m, uid = verl_batch(seed, holes=True)
    theirs, _ = core_algos.compute_opo_outcome_advantage(r.clone(), m, uid)
    assert torch.allclose(lb.labkit_opo(r, m, uid)[0], theirs, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_gpg_matches_verl(seed):
    r, m, uid = verl_batch(seed, binary=True)
    theirs, _ = core_algos.compute_gpg_outcome_advantage(r.clone(), m, uid)
    assert torch.allclose(lb.labkit_gpg(r, m, uid)[0], theirs, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("norm", [True, False])
def test_grpo_passk_matches_verl_on_groups_of_two_or_more(seed, norm):
    r, m, uid = verl_batch(seed)
    keep = ~_singleton_rows(uid)  # verl refuses a group of one; labkit gives it 0
    r, m, uid = r[keep], m[keep], uid[keep.numpy()]
    config = {"norm_adv_by_std_in_grpo": norm}
    theirs, _ = core_algos.compute_grpo_passk_outcome_advantage(r.clone(), m, uid, config=config)
    assert torch.allclose(lb.labkit_grpo_passk(r, m, uid, config=config)[0], theirs, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_pp_baseline_under_its_name_is_the_group_baseline_variant(seed):
    r, m, uid = verl_batch(seed)
    assert torch.equal(lb.labkit_reinforce_pp_baseline(r, m, uid)[0],
                       lb.labkit_reinforce_pp(r, m, uid, group_baseline=True)[0])


# ---- the estimators whose inputs verl's trainer hands only to its own names: labkit's function on
# the Rollouts of verl's tensors against verl's function on those tensors
def _rollouts(r, m, uid, **fields):
    ro = lb.rollouts_from_verl(r, m, uid)
    return ro.with_(**fields) if fields else ro


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("norm", [True, False])
def test_gdpo_matches_verl_with_several_reward_functions(seed, norm):
    from labkit.credit.episode import gdpo
    r, m, uid = verl_batch(seed, holes=True)
    g = torch.Generator().manual_seed(seed + 10)
    parts = torch.stack([(torch.rand(len(uid), generator=g) < 0.5).float(),
                         torch.randn(len(uid), generator=g) * 5.0, torch.rand(len(uid), generator=g)], 1)
    parts[1:5] = parts[1]  # an all-equal group in every reward function
    keys, weights = ["accuracy", "length", "format"], [1.0, 0.5, 2.0]
    prompts = torch.zeros(len(uid), 3, dtype=torch.long)
    # verl puts each part on the last token of the response: attention_mask covers prompt + response
    last = (m * torch.arange(1, m.shape[1] + 1)).argmax(1)
    attention = torch.cat([torch.ones(len(uid), 3), (torch.arange(m.shape[1]) <= last[:, None]).float()], 1).long()
    config = {"gdpo_reward_keys": keys, "gdpo_reward_weights": weights, "norm_adv_by_std_in_grpo": norm}
    theirs, _ = core_algos.compute_gdpo_outcome_advantage(
        r.clone(), m, uid, norm_adv_by_std_in_grpo=norm, config=config,
        non_tensor_batch={k: parts[:, i].numpy() for i, k in enumerate(keys)},
        batch={"prompts": prompts, "attention_mask": attention})
    ours = gdpo(_rollouts(r, m, uid), reward_parts=parts, weights=weights, normalize_std=norm).token.float()
    assert torch.allclose(ours, theirs, atol=1e-5)
    bridged, _ = lb.labkit_gdpo(r, m, uid, norm_adv_by_std_in_grpo=norm, config=config,
                                non_tensor_batch={k: parts[:, i].numpy() for i, k in enumerate(keys)})
    assert torch.allclose(bridged, theirs, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_remax_matches_verl(seed):
    from labkit.credit.episode import remax
    r, m, uid = verl_batch(seed, holes=True, dense=True)
    greedy = torch.randn(len(uid), generator=torch.Generator().manual_seed(seed))
    theirs, _ = core_algos.compute_remax_outcome_advantage(r.clone(), greedy, m)
    ours = remax(_rollouts(r, m, uid), greedy_scores=greedy).token.float()
    # equal on every generated token; verl leaves the return-to-go on tool-output positions
    # (the loss masks them), labkit puts 0 there as on every position off the mask
    assert torch.allclose(ours, theirs * m, atol=1e-5)
    assert not torch.allclose(ours, theirs, atol=1e-3)


def _policy_stats(seed, m):
    g = torch.Generator().manual_seed(seed + 20)
    probs = torch.rand(m.shape, generator=g) * 0.9 + 0.05
    sum_sq = probs ** 2 + (1 - probs) ** 2 * torch.rand(m.shape, generator=g)  # >= pi^2, <= 1
    return probs.log() * m, sum_sq * m


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tail", [True, False])
@pytest.mark.parametrize("is_weights", [False, True])
def test_optimal_token_baseline_matches_verl(seed, tail, is_weights):
    from labkit.credit.token_baseline import optimal_token_baseline
    r, m, uid = verl_batch(seed, dense=True)
    logp, s2 = _policy_stats(seed, m)
    rho = (torch.rand(m.shape, generator=torch.Generator().manual_seed(seed)) + 0.5) * m if is_weights else None
    theirs, _ = core_algos.compute_optimal_token_baseline_advantage(
        r.clone(), m, uid, logp, s2, rollout_is_weights=rho, handle_zero_tail=tail)
    ours = optimal_token_baseline(_rollouts(r, m, uid, logprobs=logp), sum_pi_squared=s2, rollout_is_weights=rho,
                                  handle_zero_tail=tail).token.float()
    assert torch.allclose(ours, theirs, atol=1e-5)
    bridged, _ = lb.labkit_optimal_token_baseline(r, m, uid, old_log_probs=logp, sum_pi_squared=s2,
                                                  rollout_is_weights=rho, handle_zero_tail=tail)
    assert torch.allclose(bridged, theirs, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tail", [True, False])
def test_tir_optimal_token_baseline_matches_verl_with_tool_outputs_in_the_mask(seed, tail):
    from labkit.credit.token_baseline import optimal_token_baseline, tir_optimal_token_baseline
    r, m, uid = verl_batch(seed, holes=True, dense=True)
    logp, s2 = _policy_stats(seed, m)
    theirs, _ = core_algos.compute_multi_turn_optimal_token_baseline_advantage(
        r.clone(), m, uid, logp, s2, handle_zero_tail=tail)
    ro = _rollouts(r, m, uid, logprobs=logp)
    ours = tir_optimal_token_baseline(ro, sum_pi_squared=s2, handle_zero_tail=tail).token.float()
    assert torch.allclose(ours, theirs, atol=1e-5)
    bridged, _ = lb.labkit_tir_optimal_token_baseline(r, m, uid, old_log_probs=logp, sum_pi_squared=s2,
                                                      handle_zero_tail=tail)
    assert torch.allclose(bridged, theirs, atol=1e-5)
    # with holes the column-aligned baseline compares different tokens: the two differ
    plain = optimal_token_baseline(ro, sum_pi_squared=s2, handle_zero_tail=tail).token.float()
    assert not torch.allclose(plain, theirs, atol=1e-3)


def test_the_wrappers_name_the_input_verl_hands_only_to_its_own_estimator():
    r, m, uid = verl_batch(0)
    with pytest.raises(ValueError, match="^config: "):
        lb.labkit_gdpo(r, m, uid)
    with pytest.raises(ValueError, match="^non_tensor_batch: .*'gdpo'"):
        lb.labkit_gdpo(r, m, uid, config={"gdpo_reward_keys": ["accuracy"]})
    with pytest.raises(ValueError, match="^non_tensor_batch: no reward key 'accuracy'"):
        lb.labkit_gdpo(r, m, uid, config={"gdpo_reward_keys": ["accuracy"]}, non_tensor_batch={"format": [0.0]})
    with pytest.raises(ValueError, match="^sum_pi_squared: .*'optimal_token_baseline'"):
        lb.labkit_optimal_token_baseline(r, m, uid, old_log_probs=torch.zeros_like(r))


@pytest.mark.parametrize("mode", ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean",
                                  "seq-mean-token-sum-norm"])
def test_loss_aggregation_matches_verls_agg_loss(mode):
    from labkit.learn.aggregation import aggregate
    _, m, _ = verl_batch(0, holes=True)
    m[3] = 0  # a response with nothing to train on
    loss_mat = torch.randn(m.shape, generator=torch.Generator().manual_seed(5))
    theirs = core_algos.agg_loss(loss_mat, m, mode)
    assert torch.allclose(aggregate(loss_mat, m, mode), theirs, atol=1e-6)
