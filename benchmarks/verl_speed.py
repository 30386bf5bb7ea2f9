"""labkit's estimators against verl's own on one batch: 1024 responses (groups of 8) x 512 tokens, 2 threads.

Runs in `make test-verl`'s environment (.venv-verl, where verl is installed; scripts/run_verl.py
runs it after the tests). For every estimator verl also has, it prints the best of ``--repeat``
timings of

* labkit's estimator on a ready ``Rollouts`` (what labkit's own training loop pays),
* the bridge (``labkit.bridges.verl``: verl's tensors -> Rollouts -> estimator -> verl's shapes,
  what a verl run with ``algorithm.adv_estimator=labkit_<name>`` pays),
* each of verl's variants of it, and the ratios labkit / verl's fastest variant (<= 1: labkit is
  at least as fast as the engine).

Times are in milliseconds. The best of many calls is the figure least disturbed by other work on
the machine (a busy second core can slow a two-thread call tenfold), hence 20 calls by default,
and the candidates of a row take turns (``best_of``), so a busy spell hits them alike.

No assertion: timings depend on the machine; the ratios are read, and reported in the issue.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

B, GROUP, T = 1024, 8, 512


def best_of(fns: dict, repeat: int) -> dict:
    """The fastest of ``repeat`` timed calls of each ``fns[k]()``, in seconds.

    The candidates take turns, one round at a time, so a burst of other work on the machine slows
    all of them alike instead of every call of one of them, and the ratios stay readable. In its
    turn each is called twice and the second call timed: warm, as in a run of calls of it alone.
    """
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            fn()
            start = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def batch(seed: int = 0):
    """verl-shaped (rewards, mask, values, uids): right-padded responses of 64..512 tokens, a 0/1
    outcome on the last token, dense small rewards for the token-level estimators."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(64, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lengths - 1] = (torch.rand(B, generator=g) < 0.5).float()
    values = torch.randn(B, T, generator=g) * mask
    uids = np.array([f"p{i // GROUP}" for i in range(B)], dtype=object)
    return rewards, mask, values, uids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per entry (default 20)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: must be at least 1")
    torch.set_num_threads(args.threads)

    from verl.trainer.ppo import core_algos as ca

    import labkit.bridges.verl as lb
    from labkit.core.rollouts import Rollouts
    from labkit.credit.episode import (dr_grpo, gpg, grpo, grpo_passk, opo, reinforce_pp, reinforce_pp_baseline,
                                       rloo)
    from labkit.credit.episode import gdpo
    from labkit.credit.td import gae
    from labkit.credit.token_baseline import optimal_token_baseline, tir_optimal_token_baseline

    r, m, v, uid = batch()
    # labkit's own loop hands its estimators a fully validated Rollouts (no kept returns)
    ro = Rollouts(tokens=torch.zeros(r.shape, dtype=torch.long), mask=m.bool(), rewards=r,
                  group_ids=lb._group_ids(uid, len(uid)))
    # verl's AlgoConfig stand-in: attribute and .get access (grpo_passk reads norm_adv_by_std_in_grpo)
    cfg = type("Cfg", (dict,), {"__getattr__": lambda self, k: self[k]})(gamma=1.0, lam=1.0,
                                                                        norm_adv_by_std_in_grpo=True)

    # the inputs verl's trainer hands only its own gdpo and optimal token baselines
    g = torch.Generator().manual_seed(1)
    keys = ["accuracy", "format"]
    parts = {k: (torch.rand(B, generator=g) < 0.5).float().numpy() for k in keys}
    lengths = m.sum(1).long()
    batch_gdpo = {"prompts": torch.zeros(B, 1, dtype=torch.long),
                  "attention_mask": torch.cat([torch.ones(B, 1), m], 1).long()}
    cfg_gdpo = type(cfg)(gdpo_reward_keys=keys, norm_adv_by_std_in_grpo=True)
    parts_t = torch.stack([torch.from_numpy(parts[k]) for k in keys], 1)
    probs = (torch.rand(B, T, generator=g) * 0.9 + 0.05) * m
    logp = torch.where(m.bool(), probs.clamp(min=1e-6).log(), torch.zeros(()))
    s2 = (probs ** 2 + (1 - probs) ** 2 * 0.5) * m
    ro_lp = ro.with_(logprobs=logp.double())
    assert int(lengths.min()) > 0

    rows = [  # (estimator, labkit on Rollouts, bridge, {verl variant: fn}); verl never writes to its inputs
        ("grpo", lambda: grpo(ro), lambda: lb.labkit_grpo(r, m, uid),
         {"grpo": lambda: ca.compute_grpo_outcome_advantage(r, m, uid),
          "grpo_vectorized": lambda: ca.compute_grpo_vectorized_outcome_advantage(r, m, uid)}),
        ("dr_grpo", lambda: dr_grpo(ro), lambda: lb.labkit_dr_grpo(r, m, uid),
         {"grpo (no std)": lambda: ca.compute_grpo_outcome_advantage(r, m, uid, norm_adv_by_std_in_grpo=False),
          "grpo_vectorized (no std)": lambda: ca.compute_grpo_vectorized_outcome_advantage(
              r, m, uid, norm_adv_by_std_in_grpo=False)}),
        ("rloo", lambda: rloo(ro), lambda: lb.labkit_rloo(r, m, uid),
         {"rloo": lambda: ca.compute_rloo_outcome_advantage(r, m, uid),
          "rloo_vectorized": lambda: ca.compute_rloo_vectorized_outcome_advantage(r, m, uid)}),
        ("opo", lambda: opo(ro), lambda: lb.labkit_opo(r, m, uid),
         {"opo": lambda: ca.compute_opo_outcome_advantage(r, m, uid)}),
        ("grpo_passk", lambda: grpo_passk(ro), lambda: lb.labkit_grpo_passk(r, m, uid, config=cfg),
         {"grpo_passk": lambda: ca.compute_grpo_passk_outcome_advantage(r, m, uid, config=cfg)}),
        ("gpg", lambda: gpg(ro), lambda: lb.labkit_gpg(r, m, uid),
         {"gpg": lambda: ca.compute_gpg_outcome_advantage(r, m, uid)}),
        ("reinforce_pp", lambda: reinforce_pp(ro), lambda: lb.labkit_reinforce_pp(r, m, config=cfg),
         {"reinforce_plus_plus": lambda: ca.compute_reinforce_plus_plus_outcome_advantage(r, m, config=cfg)}),
        ("reinforce_pp_baseline", lambda: reinforce_pp_baseline(ro), lambda: lb.labkit_reinforce_pp_baseline(r, m, uid),
         {"reinforce_plus_plus_baseline": lambda: ca.compute_reinforce_plus_plus_baseline_outcome_advantage(
             r, m, uid)}),
        ("gae (whitened)", lambda: gae(ro, values=v, whiten_advantages=True), lambda: lb.labkit_gae(r, v, m, config=cfg),
         {"gae": lambda: ca.compute_gae_advantage_return(r, v, m, 1.0, 1.0)}),
        ("gdpo", lambda: gdpo(ro, reward_parts=parts_t),
         lambda: lb.labkit_gdpo(r, m, uid, config=cfg_gdpo, non_tensor_batch=parts),
         {"gdpo": lambda: ca.compute_gdpo_outcome_advantage(r, m, uid, config=cfg_gdpo, non_tensor_batch=parts,
                                                             batch=batch_gdpo)}),
        ("optimal_token_baseline", lambda: optimal_token_baseline(ro_lp, sum_pi_squared=s2),
         lambda: lb.labkit_optimal_token_baseline(r, m, uid, old_log_probs=logp, sum_pi_squared=s2),
         {"optimal_token_baseline": lambda: ca.compute_optimal_token_baseline_advantage(r, m, uid, logp, s2)}),
        ("tir_optimal_token_baseline", lambda: tir_optimal_token_baseline(ro_lp, sum_pi_squared=s2),
         lambda: lb.labkit_tir_optimal_token_baseline(r, m, uid, old_log_probs=logp, sum_pi_squared=s2),
         {"tir_optimal_token_baseline": lambda: ca.compute_multi_turn_optimal_token_baseline_advantage(
             r, m, uid, logp, s2)}),
    ]
    print(f"batch {B} x {T} (groups of {GROUP}), {args.threads} threads, best of {args.repeat}; milliseconds")
    print(f"{'estimator':30s} {'labkit':>8s} {'bridge':>8s} {'verl fastest':>37s} {'labkit/verl':>12s} {'bridge/verl':>12s}")
    t_build = best_of({"build": lambda: lb.rollouts_from_verl(r, m, uid)}, args.repeat)["build"]
    for name, ours, bridged, variants in rows:
        times = best_of({"labkit": ours, "bridge": bridged, **variants}, args.repeat)
        t_ours, t_bridge = times.pop("labkit"), times.pop("bridge")
        fastest = min(times, key=times.get)
        tv = times[fastest]
        print(f"{name:30s} {1e3 * t_ours:8.3f} {1e3 * t_bridge:8.3f} {fastest:>28s} {1e3 * tv:8.3f} "
              f"{t_ours / tv:12.2f} {t_bridge / tv:12.2f}")
        for k, t in times.items():
            if k != fastest:
                print(f"{'':30s} {'':8s} {'':8s} {k:>28s} {1e3 * t:8.3f} {t_ours / t:12.2f} {t_bridge / t:12.2f}")
    print(f"(rollouts_from_verl, the whole batch as a Rollouts, which the bridges of opo, reinforce_pp(_baseline) "
          f"and gae build: {1e3 * t_build:.3f} ms)")


if __name__ == "__main__":
    main()
