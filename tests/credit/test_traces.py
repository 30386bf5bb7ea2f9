"""Traces and decompositions (labkit.credit.traces): GRPO-lambda, RUDDER, Progress Advantage and
SC-GRPO; hand-computed cases, degenerate input, bad arguments, and the chain's bench inputs.
"""

import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS
from labkit.credit.traces import (fit_return_table, grpo_lambda, progress_advantage, rudder, sc_grpo,
                                  self_conditioned_logprobs, trained_policy)
from labkit.envs import BifurcationChain
from labkit.policies import TabularSoftmaxPolicy

from credit_cases import empty, two_steps

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def pair(lengths=(3, 2), scores=(1.0, 0.0)):
    """One group of two: row i generates lengths[i] tokens (left-aligned), outcome on its last."""
    T = max(lengths)
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    rewards = torch.zeros(len(lengths), T)
    for i, (n, s) in enumerate(zip(lengths, scores)):
        rewards[i, n - 1] = s
    return Rollouts(tokens=torch.zeros(len(lengths), T, dtype=torch.long), mask=mask, rewards=rewards,
                    group_ids=torch.zeros(len(lengths), dtype=torch.long))


# --------------------------------------------------------------------------- GRPO-lambda
def test_grpo_lambda_hand_computed():
    ro = pair()
    # scores 1, 0: mean 0.5, unbiased std sqrt(0.5); A_hat = +-0.5 / sqrt(0.5) = +-0.70711
    a = 0.5 / math.sqrt(0.5)
    c = grpo_lambda(ro, lam=0.5, eps=0.0)
    assert c.token[0].tolist() == pytest.approx([0.25 * a, 0.5 * a, a])
    assert c.token[1].tolist() == pytest.approx([-0.5 * a, -a, 0.0])
    early = grpo_lambda(ro, lam=0.5, eps=0.0, trace="early")
    assert early.token[0].tolist() == pytest.approx([a, 0.5 * a, 0.25 * a])
    both = grpo_lambda(ro, lam=0.5, eps=0.0, trace="both")
    assert both.token[0].tolist() == pytest.approx([0.625 * a, 0.5 * a, 0.625 * a])
    assert both.token[1].tolist() == pytest.approx([-0.75 * a, -0.75 * a, 0.0])
    # gamma multiplies lambda
    g = grpo_lambda(ro, lam=1.0, gamma=0.5, eps=0.0)
    assert torch.allclose(g.token, c.token)


def test_grpo_lambda_degenerate_input():
    ro = pair()
    from labkit.credit.episode import grpo
    flat = grpo_lambda(ro, lam=1.0)
    assert torch.allclose(flat.token, grpo(ro).token)  # lambda = 1: GRPO
    zero = grpo_lambda(ro, lam=0.0)
    assert zero.token[0].tolist() == pytest.approx([0.0, 0.0, float(flat.token[0, 2])])
    assert grpo_lambda(pair(scores=(1.0, 1.0))).token.abs().sum() == 0  # equal scores
    e = grpo_lambda(empty())
    assert e.token.abs().sum() == 0
    one = two_steps(reward=2.0)  # a group of one: raw score / (1 + eps)
    assert float(grpo_lambda(one, lam=1.0, eps=0.0).token[0, 0]) == pytest.approx(2.0)


def test_grpo_lambda_bad_arguments():
    ro = pair()
    with pytest.raises(ValueError, match="^lam"):
        grpo_lambda(ro, lam=1.5)
    with pytest.raises(ValueError, match="^gamma"):
        grpo_lambda(ro, gamma=-0.1)
    with pytest.raises(ValueError, match="^trace"):
        grpo_lambda(ro, trace="middle")
    with pytest.raises(TypeError, match="^lambda_"):
        grpo_lambda(ro, lambda_=0.5)


# --------------------------------------------------------------------------- RUDDER
def test_rudder_hand_computed():
    ro = pair()
    g = torch.tensor([[0.2, 0.6, 0.9], [0.4, 0.1, 7.0]])  # 7.0 sits off the mask
    rew = rudder(ro, scores=g, prompt_scores=torch.tensor([0.5, 0.5]), credit="reward")
    # row 0: 0.2-0.5, 0.6-0.2, 0.9-0.6 + (R=1 - 0.9); row 1: 0.4-0.5, 0.1-0.4 + (0 - 0.1)
    assert rew.token[0].tolist() == pytest.approx([-0.3, 0.4, 0.4])
    assert rew.token[1].tolist() == pytest.approx([-0.1, -0.4, 0.0])
    ret = rudder(ro, scores=g, prompt_scores=torch.tensor([0.5, 0.5]))
    # reward-to-go = R - prediction before the position
    assert ret.token[0].tolist() == pytest.approx([0.5, 0.8, 0.4])
    assert ret.token[1].tolist() == pytest.approx([-0.5, -0.4, 0.0])
    plain = rudder(ro, scores=g, correction=False, credit="reward")
    assert plain.token[0].tolist() == pytest.approx([0.2, 0.4, 0.3])
    # a callable returning (scores, prompt_scores) is called and counted
    called = rudder(ro, scores=lambda r: (g, torch.tensor([0.5, 0.5])))
    assert torch.allclose(called.token, ret.token) and called.cost.aux_calls == 5 + 2


def test_rudder_degenerate_input():
    ro = pair()
    const = rudder(ro, scores=torch.full((2, 3), 0.3), credit="reward")
    assert const.token[0].tolist() == pytest.approx([0.3, 0.0, 0.7])
    perfect = rudder(ro, scores=torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), credit="reward")
    assert perfect.token[0].tolist() == pytest.approx([1.0, 0.0, 0.0])
    e = rudder(empty(), scores=torch.zeros(2, 3))
    assert float(e.token[0].abs().sum()) == 0


def test_rudder_bad_arguments():
    ro = pair()
    with pytest.raises(ValueError, match="^scores"):
        rudder(ro, scores=None)
    with pytest.raises(ValueError, match="^scores"):
        rudder(ro, scores=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="^prompt_scores"):
        rudder(ro, scores=torch.zeros(2, 3), prompt_scores=torch.zeros(3))
    with pytest.raises(ValueError, match="^credit"):
        rudder(ro, scores=torch.zeros(2, 3), credit="advantage")


def test_fit_return_table_is_the_mean_return_per_state_action():
    env = BifurcationChain(horizon=4, n_bifurcations=1, seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions)
    hist = env.sample(policy, 64, group_size=8, seed=5)
    predict, mean = fit_return_table(hist, env.n_states, env.n_actions, prior=0.0)
    assert mean == pytest.approx(float(hist.scores.mean()))
    g = predict(hist)
    cell = hist.states[:, 0] * env.n_actions + hist.tokens[:, 0]
    first = int(cell[0])
    assert float(g[0, 0]) == pytest.approx(float(hist.scores[cell == first].mean()))
    with pytest.raises(ValueError, match="^prior"):
        fit_return_table(hist, env.n_states, env.n_actions, prior=-1.0)


# --------------------------------------------------------------------------- Progress Advantage
def test_progress_advantage_hand_computed():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    ref = torch.tensor([[-0.3, -0.5, -0.4, -0.2]])
    step = progress_advantage(ro, logprobs=lp, ref_logprobs=ref, beta=2.0)
    assert step.level == "step" and step.values[0].tolist() == pytest.approx([0.4, -1.2])
    assert step.token[0].tolist() == pytest.approx([0.4, 0.4, -1.2, -1.2])
    assert int(step.info["failure_step"][0]) == 1
    tok = progress_advantage(ro, logprobs=lp, ref_logprobs=ref, level="token")
    assert tok.token[0].tolist() == pytest.approx([0.2, 0.0, -0.6, 0.0])
    own = progress_advantage(ro.with_(logprobs=lp), ref_logprobs=ref, beta=2.0)
    assert torch.allclose(own.token, step.token)


def test_progress_advantage_degenerate_input():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    assert progress_advantage(ro, logprobs=lp, ref_logprobs=lp).token.abs().sum() == 0
    assert progress_advantage(ro, logprobs=lp, ref_logprobs=lp * 2, beta=0.0).token.abs().sum() == 0
    e = progress_advantage(empty(), logprobs=torch.zeros(2, 3), ref_logprobs=torch.zeros(2, 3))
    assert e.token.abs().sum() == 0 and int(e.info["failure_step"][0]) == -1


def test_progress_advantage_bad_arguments():
    ro = two_steps()
    lp = torch.full((1, 4), -0.5)
    with pytest.raises(ValueError, match="^logprobs"):
        progress_advantage(ro, ref_logprobs=lp)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        progress_advantage(ro, logprobs=lp, ref_logprobs=torch.full((1, 4), 0.5))
    with pytest.raises(ValueError, match="^beta"):
        progress_advantage(ro, logprobs=lp, ref_logprobs=lp, beta=-1.0)
    with pytest.raises(ValueError, match="^level"):
        progress_advantage(ro, logprobs=lp, ref_logprobs=lp, level="turn")


def test_trained_policy_moves_towards_the_correct_tokens():
    env = BifurcationChain(horizon=4, n_bifurcations=1, seed=0)
    uniform = TabularSoftmaxPolicy(env.n_states, env.n_actions)
    trained = trained_policy(env, uniform, steps=3, seed=0)
    assert float(uniform.logits.detach().abs().sum()) == 0  # the reference is not changed
    from labkit.envs.tabular import exact_truth
    assert exact_truth(env.mdp(), trained).J > exact_truth(env.mdp(), uniform).J


# --------------------------------------------------------------------------- SC-GRPO
def test_sc_grpo_hand_computed():
    ro = pair()
    lp = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]))
    lc = torch.log(torch.tensor([[0.5, 0.25, 1.0], [1.0, 0.5, 0.5]]))
    a = 0.5 / math.sqrt(0.5)
    c = sc_grpo(ro, conditioned_logprobs=lc, logprobs=lp, eps=0.0)
    # k3: rho - 1 - log rho with rho = 1, 1/2, 2
    k_half, k_two = 0.5 - 1 + math.log(2), 2 - 1 - math.log(2)
    assert c.info["divergence"][0].tolist() == pytest.approx([0.0, k_half, k_two])
    assert c.token[0].tolist() == pytest.approx([0.0, k_half * a, k_two * a])
    assert c.token[1].tolist() == pytest.approx([-k_two * a, 0.0, 0.0])
    n = sc_grpo(ro, conditioned_logprobs=lc, logprobs=lp, eps=0.0, normalize_weights=True)
    mean0 = (k_half + k_two) / 3
    assert n.token[0].tolist() == pytest.approx([0.0, k_half / mean0 * a, k_two / mean0 * a])
    assert n.token[1].tolist() == pytest.approx([-2 * a, 0.0, 0.0])  # weight k / (k / 2) = 2


def test_sc_grpo_degenerate_input():
    ro = pair()
    lp = torch.full((2, 3), -0.7)
    assert sc_grpo(ro, conditioned_logprobs=lp, logprobs=lp).token.abs().sum() == 0
    # an all-zero divergence with normalize_weights falls back to GRPO
    from labkit.credit.episode import grpo
    assert torch.allclose(sc_grpo(ro, conditioned_logprobs=lp, logprobs=lp, normalize_weights=True).token,
                          grpo(ro).token)
    e = sc_grpo(empty(), conditioned_logprobs=torch.zeros(2, 3), logprobs=torch.zeros(2, 3))
    assert e.token.abs().sum() == 0


def test_sc_grpo_bad_arguments():
    ro = pair()
    lp = torch.full((2, 3), -0.5)
    with pytest.raises(ValueError, match="^conditioned_logprobs"):
        sc_grpo(ro, conditioned_logprobs=torch.full((2, 3), 0.5), logprobs=lp)
    with pytest.raises(ValueError, match="^conditioned_logprobs"):
        sc_grpo(ro, conditioned_logprobs=torch.zeros(2, 2), logprobs=lp)
    with pytest.raises(ValueError, match="^logprobs"):
        sc_grpo(ro, conditioned_logprobs=lp)
    with pytest.raises(TypeError, match="^normalize_weights"):
        sc_grpo(ro, conditioned_logprobs=lp, logprobs=lp, normalize_weights="yes")


def test_self_conditioned_logprobs_mix_the_verified_solution():
    env = BifurcationChain(horizon=4, n_bifurcations=1, seed=0)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions)
    ro = env.sample(policy, 16, group_size=8, seed=0)
    lc = self_conditioned_logprobs(policy, ro, mix=0.5)
    for gid in (0, 1):
        rows = (ro.group_ids == gid).nonzero().flatten()
        if float(ro.scores[rows].max()) <= 0:
            assert torch.allclose(lc[rows], torch.full_like(lc[rows], math.log(0.5)))
            continue
        best = int(rows[ro.scores[rows].argmax()])
        # the solution's own tokens: 0.5 * 0.5 + 0.5 = 0.75
        assert torch.allclose(lc[best], torch.full_like(lc[best], math.log(0.75)))
    assert set(round(math.exp(v), 6) for v in lc[ro.mask].tolist()) <= {0.25, 0.5, 0.75}


# --------------------------------------------------------------------------- registry and bench
def test_registered_with_their_labels():
    want = {"grpo_lambda": "implemented", "rudder": "adaptation", "progress_advantage": "adaptation",
            "sc_grpo": "stand-in"}
    for name, status in want.items():
        assert ESTIMATORS[name].spec.status == status


def test_every_estimator_runs_on_the_chain_task():
    from labkit.bench.suite import chain_task, run_cell
    task = chain_task(6, n=16)
    inst = task.build(0)
    for name in ("grpo_lambda", "rudder", "progress_advantage", "sc_grpo"):
        rec = run_cell("tiny", task, name, 0, instance=inst)
        assert rec.get("metrics") is not None, (name, rec.get("reason"))
