"""QVal (arXiv:2606.32034): Monte Carlo Q labels, the Q-alignment statistic, the ranking comparison."""
import pandas as pd
import pytest
import torch

from labkit.bench.qval import (chain_q_estimate, compare_rankings, estimator_credit, load_qval, qval_cells,
                               qval_score, ranking_agreement, toolworld_q_estimate)
from labkit.bench.suite import chain_task, toolworld_task
from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.envs.toolworld import ToolWorld
from labkit.policies import TabularSoftmaxPolicy


def _chain():
    env = BifurcationChain(horizon=4, bifurcations=[1], seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0)
    return env, policy, env.sample(policy, 8, group_size=4, seed=0)


def test_chain_q_hand_case():
    # uniform policy, one bifurcation at position 1, no slip: Q = 1/2 before it on track (the
    # bifurcation still ahead), 1 or 0 at it (right or wrong token), ok after it, 0 off track
    env, policy, ro = _chain()
    q, cost = chain_q_estimate(env, policy, ro, 1, seed=0)
    ok = ro.states % 2
    right = ro.tokens[:, 1] == env.correct[1]
    assert torch.equal(q[:, 1], right.double())
    assert torch.equal(q[:, 2:], ok[:, 2:].double())
    assert cost.env_resets == 32 and cost.env_steps == int((4 - torch.arange(4)).sum()) * 8
    big, _ = chain_q_estimate(env, policy, ro, 4000, seed=1)
    assert torch.allclose(big[:, 0], torch.full((8,), 0.5, dtype=torch.float64), atol=0.03)
    assert torch.allclose(big, exact_truth(env.mdp(), policy).q_value(ro), atol=0.03)


def test_toolworld_q_converges_to_exact():
    env = ToolWorld(3, max_turns=6, mislead=0.2, noise=0.2, flaky=0.2)
    policy = env.scripted_policy(2.0)
    ro = env.sample(policy, 2, group_size=2, seed=0)
    q, cost = toolworld_q_estimate(env, policy, ro, 3000, seed=0)
    assert torch.allclose(q, env.truth(policy).q_value(ro), atol=0.05)
    assert cost.env_resets == int(ro.mask.sum()) * 3000


def test_qval_score_hand_case():
    mask = torch.ones(1, 4, dtype=torch.bool)
    q = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    assert qval_score(torch.tensor([[10.0, 20.0, 30.0, 40.0]]), q, mask) == pytest.approx(1.0)
    assert qval_score(torch.tensor([[4.0, 3.0, 2.0, 1.0]]), q, mask) == pytest.approx(-1.0)
    # ties: ranks (1.5, 1.5, 3.5, 3.5) against (1, 2, 3, 4): rho = 4 / sqrt(4 * 5) = 0.8944
    assert qval_score(torch.tensor([[0.0, 0.0, 1.0, 1.0]]), q, mask) == pytest.approx(0.894427, abs=1e-6)
    assert qval_score(torch.zeros(1, 4), q, mask) == 0.0       # a constant score orders nothing


def test_bad_input_names_argument():
    env, policy, ro = _chain()
    with pytest.raises(ValueError, match="^k:"):
        chain_q_estimate(env, policy, ro, 0)
    with pytest.raises(ValueError, match="^pairs:"):
        chain_q_estimate(env, policy, ro, 1, pairs=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="^rollouts:"):
        chain_q_estimate(env, policy, ro.with_(states=None), 1)
    with pytest.raises(ValueError, match="^b:"):
        ranking_agreement([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="^n_boot:"):
        compare_rankings(pd.DataFrame(), columns=["x"], n_boot=0)


def test_pairs_select_and_empty():
    env, policy, ro = _chain()
    none = torch.zeros_like(ro.mask)
    q, cost = chain_q_estimate(env, policy, ro, 2, pairs=none)
    assert not q.any() and cost.env_steps == 0


def test_estimator_credit_matches_bench_and_skips():
    task = chain_task(6, n=16)
    inst = task.build(0)
    assert estimator_credit(inst, "grpo") is not None
    assert estimator_credit(inst, "llm_mca") is None            # needs a judge the chain does not give


def test_cells_and_rankings():
    task = chain_task(6, n=16)
    env = BifurcationChain(horizon=6, n_bifurcations=2, seed=0)
    exact = {"exact_q": lambda inst, seed: exact_truth(env.mdp(), inst.inputs["policy"]).q_value(inst.rollouts)}
    cells = pd.DataFrame([r for s in (0, 1) for r in qval_cells(task, s, ["grpo", "gae", "vineppo"], exact)])
    assert set(cells.estimator) == {"grpo", "gae", "vineppo"} and len(cells) == 6
    table = compare_rankings(cells, columns=["qval_exact_q"], n_boot=20)
    assert list(table.task) == [task.name, "all"]
    row = table.iloc[0]
    assert row.lo <= row.agreement + 1e-12 and row.agreement <= row.hi + 1e-12 and row.n_estimators == 3


def test_perfect_agreement_when_qval_equals_truth():
    cells = pd.DataFrame([{"task": "t", "seed": s, "estimator": e, "truth": v + 0.01 * s, "q": v}
                          for s in range(3) for e, v in (("a", 0.1), ("b", 0.5), ("c", 0.9))])
    row = compare_rankings(cells, columns=["q"], n_boot=50).iloc[0]
    assert row.agreement == pytest.approx(1.0) and row.lo == pytest.approx(1.0) and row.same_top


def test_loader_reads_shipped_cache(tmp_path):
    cells, agreement, meta = load_qval()
    assert {"truth", "qval_mc1", "qval_exact_q"} <= set(cells.columns)
    assert {"agreement", "lo", "hi"} <= set(agreement.columns) and meta["mc_k"]
    with pytest.raises(FileNotFoundError, match="^path:"):
        load_qval(tmp_path)


def test_toolworld_task_runs():
    task = toolworld_task(8, n_tasks=2, group_size=4)
    p = task.params
    env = ToolWorld(p["n_files"], max_turns=p["max_turns"], mislead=p["noise"], noise=p["noise"], flaky=p["noise"])
    lab = {"mc1": lambda inst, seed: toolworld_q_estimate(env, inst.inputs["policy"], inst.rollouts, 1, seed=seed)[0]}
    rows = qval_cells(task, 0, ["grpo", "gigpo"], lab)
    assert len(rows) == 2 and all(-1 <= r["qval_mc1"] <= 1 for r in rows)
