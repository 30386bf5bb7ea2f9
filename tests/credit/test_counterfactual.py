"""Counterfactual credit (labkit.credit.counterfactual): C3 and CCPO by re-execution against the exact
values, and InT's step rewrites (hand-computed, and on the tiny LM).
"""

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit import estimate
from labkit.credit.counterfactual import int_interventions
from labkit.envs import ToolWorld
from labkit.envs.toolworld import exact_hindsight
from labkit.learn.critics import BTCritic, TurnQCritic
from labkit.learn.judges import stand_in_judge

from credit_cases import empty, first_of_turn, two_steps

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- C3 and CCPO
def test_c3_reexecution_equals_exact_in_deterministic_world():
    env = ToolWorld(3, max_turns=10, mislead=0.0, noise=0.0, flaky=0.0)
    policy = env.scripted_policy(80.0)            # deterministic to machine precision
    truth = env.truth(policy)
    ro = env.sample(policy, 3, group_size=2, seed=0)
    H = ro.truth["hidden_states"]
    for default in ("think", "policy", 1):   # ("others" is uniform over 13 actions here: random)
        re = estimate("c3", ro, env=env, policy=policy, hidden_states=H, default=default, n_continuations=2)
        ex = estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth, default=default)
        assert torch.allclose(re.values, ex.values, atol=1e-12), default
    re = estimate("ccpo", ro, env=env, policy=policy, hidden_states=H, n_continuations=1)
    ex = estimate("ccpo", ro, mode="exact", env=env, hidden_states=H, truth=truth)
    assert torch.allclose(re.values, ex.values, atol=1e-12)
    think = estimate("c3", ro, env=env, policy=policy, hidden_states=H, default="think")
    assert bool((think.values.abs() > 0.5).any())   # the edit / submit beat "think" by a lot here


def test_c3_reexecution_converges_to_exact(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    sub = ro.select([0, 5])
    H = sub.truth["hidden_states"]
    re = estimate("c3", sub, env=env, policy=policy, hidden_states=H, n_continuations=3000, seed=1)
    ex = estimate("c3", sub, mode="exact", env=env, hidden_states=H, truth=truth)
    present = re.present
    err = (re.info["counterfactual"] - ex.info["counterfactual"])[present].abs()
    assert float(err.max()) < 0.04                  # se of a mean of 3000 returns in [0, 1] <= 0.009
    # the realised return G_t is what C3 keeps: credit - counterfactual = G_t exactly
    G = re.info["returns"]
    assert torch.allclose(re.values, (G - re.info["counterfactual"]).where(present, torch.zeros(())))


def test_ccpo_exact_is_exact_advantage_and_reexecution_converges(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    ex = estimate("ccpo", ro, mode="exact", env=env, hidden_states=H, truth=truth)
    assert torch.allclose(ex.token, truth.advantage(ro), atol=1e-12)
    sub = ro.select([1])
    re = estimate("ccpo", sub, env=env, policy=policy, hidden_states=sub.truth["hidden_states"],
                  n_continuations=1500, seed=2)
    err = (re.token - truth.advantage(sub))[sub.mask].abs()
    assert float(err.max()) < 0.06


def test_c3_learned_uses_the_critic(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    qc = TurnQCritic(env.n_obs, env.n_actions).fit(ro, pi=policy.probs().detach())
    c = estimate("c3", ro, mode="learned", critic=qc, policy=policy, default="think")
    obs = first_of_turn(ro, ro.states).long()
    G = c.info["returns"]
    assert torch.allclose(c.values[c.present], (G - qc.q[obs, 0])[c.present])


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_named_errors(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    B, N = ro.batch_size, int(ro.n_turns.max())
    h = exact_hindsight(env, policy, ro, H)
    cases = [
        ("outcome", lambda: estimate("hca", ro, hindsight=h, outcome=torch.full((B,), 0.5))),
        ("hindsight", lambda: estimate("hca", ro, hindsight=torch.ones(B, N + 1))),
        ("hindsight", lambda: estimate("hca", ro, hindsight=torch.full((B, N), 2.0))),
        ("rho_max", lambda: estimate("hcapo", ro, hindsight=h, rho_max=0.5)),
        ("env", lambda: estimate("c3", ro, policy=policy, hidden_states=H)),
        ("hidden_states", lambda: estimate("c3", ro, env=env, policy=policy)),
        ("mode", lambda: estimate("c3", ro, mode="imagine", env=env)),
        ("default", lambda: estimate("c3", ro, env=env, policy=policy, hidden_states=H, default="nothing")),
        ("critic", lambda: estimate("c3", ro, mode="learned", policy=policy)),
        ("truth", lambda: estimate("ccpo", ro, mode="exact", env=env, hidden_states=H)),
        ("n_continuations", lambda: estimate("ccpo", ro, env=env, policy=policy, hidden_states=H, n_continuations=0)),
        ("hidden_states", lambda: estimate("sweet_rl", ro, critic=BTCritic.for_env(env, privileged=True))),
        ("critic", lambda: estimate("sweet_rl", ro, critic="a critic")),
        ("verdicts", lambda: estimate("critic_search", ro, verdicts=torch.ones(B, N + 2))),
        ("error_rate", lambda: stand_in_judge(ro, advantage=truth.advantage(ro), error_rate=1.5)),
        ("bug", lambda: env.rollout_from(policy, [9], [0], [0], [0])),
        ("first_action", lambda: env.rollout_from(policy, [0], [0], [0], [0], first_action=[99])),
    ]
    for name, fn in cases:
        with pytest.raises((ValueError, TypeError), match=name):
            fn()


# --------------------------------------------------------------------------- InT
def fake_rewrites(outcomes, changed):
    calls = []

    def fn(ro, cells, k):
        calls.append(list(cells))
        return torch.tensor(outcomes[:len(cells)], dtype=torch.float64), torch.tensor(changed[:len(cells)]), \
            Cost(policy_forwards=len(cells) * k)
    fn.calls = calls
    return fn


def test_int_hand_computed():
    ro = two_steps(reward=0.0)
    fn = fake_rewrites([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], [[True, True, False], [False, False, False]])
    c = int_interventions(ro, rewrite_fn=fn, k=3)
    # step 0: differing rewrites score 1, 0 -> flip 0.5, credit -0.5; step 1: no intervention -> 0
    assert c.values[0].tolist() == pytest.approx([-0.5, 0.0])
    assert c.info["interventions"][0].tolist() == [2, 0]
    assert fn.calls == [[(0, 0), (0, 1)]] and c.cost.policy_forwards == 6
    # a successful response is skipped by default and credited 1 - flip with rows="all"
    win = two_steps(reward=1.0)
    skip = fake_rewrites([], [])
    assert int_interventions(win, rewrite_fn=skip, k=3).token.abs().sum() == 0 and skip.calls == []
    allrows = int_interventions(win, rewrite_fn=fake_rewrites([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]],
                                                              [[True] * 3, [True] * 3]), k=3, rows="all")
    assert allrows.values[0].tolist() == pytest.approx([2 / 3, 0.0])


def test_int_degenerate_and_bad_arguments():
    # nothing failed (one success and a row with nothing generated): no intervention, no cost
    solved = empty().with_(rewards=torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    c = int_interventions(solved, rewrite_fn=fake_rewrites([], []))
    assert c.token.abs().sum() == 0 and c.cost == Cost()
    ro = two_steps(reward=0.0)
    with pytest.raises(ValueError, match="^rewrite_fn"):
        int_interventions(ro, rewrite_fn=lambda r, cells, k: (torch.zeros(1, k), torch.zeros(1, k), Cost()), k=2)
    with pytest.raises(TypeError, match="^rewrite_fn"):
        int_interventions(ro, rewrite_fn=None)
    with pytest.raises(ValueError, match="^k"):
        int_interventions(ro, rewrite_fn=fake_rewrites([], []), k=0)
    with pytest.raises(ValueError, match="^rows"):
        int_interventions(ro, rewrite_fn=fake_rewrites([], []), rows="some")


def test_step_rewrites_on_a_failed_reference_rollout(lm_ref):
    env, ref = lm_ref
    failed = (ref.scores == 0).nonzero().flatten()[:2]
    sub = ref.select(failed)
    c = int_interventions(sub, rewrite_fn=env.step_rewrite_fn(seed=0), k=2)
    assert c.cost.policy_forwards >= 2 * int(sub.n_steps.sum())
    assert (c.values <= 0).all() and (c.info["interventions"] <= 2).all()
