"""Hindsight credit (labkit.credit.hindsight): HCA and HCAPO on a small noisy ToolWorld, with the
exact hindsight distribution and a learned one; and the shape, level and cost of every hindsight,
counterfactual and privileged estimator.
"""

import pandas as pd
import torch

from labkit.core.credit import Credit
from labkit.credit import estimate, get_estimator
from labkit.envs import ToolWorld
from labkit.envs.toolworld import exact_hindsight
from labkit.learn.critics import BTCritic, LearnedHindsight, TurnQCritic
from labkit.learn.judges import stand_in_judge

from credit_cases import first_of_turn


# --------------------------------------------------------------------------- shapes, levels, cost
def test_every_estimator_shape_level_cost(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    pi = policy.probs().detach()
    lh = LearnedHindsight(pi).fit(env.sample(policy, 8, group_size=4, seed=5))
    qc = TurnQCritic(env.n_obs, env.n_actions).fit(ro, pi=pi)
    bt = BTCritic.for_env(env, privileged=True).fit(ro, H)
    B, N = ro.batch_size, int(ro.n_turns.max())
    n_turns = int(ro.mask.sum())
    runs = {
        "hca": dict(hindsight=exact_hindsight(env, policy, ro, H)),
        "hcapo": dict(hindsight=lh),
        "c3": dict(env=env, policy=policy, hidden_states=H, n_continuations=3),
        "ccpo": dict(env=env, policy=policy, hidden_states=H, n_continuations=2),
        "sweet_rl": dict(critic=bt, hidden_states=H, pi=pi),
        "critic_search": dict(verdicts=stand_in_judge(ro, advantage=truth.advantage(ro))),
    }
    for name, kw in runs.items():
        c = estimate(name, ro, **kw)
        assert isinstance(c, Credit) and c.method == name and c.level == "turn"
        assert c.values.shape == (B, N) and c.token.shape == ro.mask.shape
        assert torch.equal(c.present, ro.view(ro.mask.double(), "turn", "sum")[1])
        assert bool((c.token[~ro.mask] == 0).all())
    assert estimate("hca", ro, hindsight=lh).cost.aux_calls == B  # a callable h: one call per trajectory
    c3 = estimate("c3", ro, env=env, policy=policy, hidden_states=H, n_continuations=3)
    # fixed-continuation replay: M - 1 = 2 more replays of the taken action, K x M = 3 of the sibling
    assert c3.cost.env_resets == 5 * n_turns and c3.cost.env_steps >= c3.cost.env_resets
    c3 = estimate("c3", ro, mode="resample", env=env, policy=policy, hidden_states=H, n_continuations=3)
    assert c3.cost.env_resets == 3 * n_turns and c3.cost.env_steps >= c3.cost.env_resets
    cc = estimate("ccpo", ro, env=env, policy=policy, hidden_states=H, n_continuations=2)
    assert cc.cost.env_resets == 2 * env.n_actions * n_turns
    assert estimate("c3", ro, mode="learned", critic=qc, policy=policy).cost.aux_calls == n_turns
    assert estimate("sweet_rl", ro, critic=bt, hidden_states=H).cost.aux_calls == n_turns * env.n_actions
    assert estimate("critic_search", ro, verdicts=torch.zeros(B, N)).cost.aux_calls == B


# --------------------------------------------------------------------------- HCA
def test_exact_hindsight_identity_by_enumeration(noisy_toolworld):
    """E[credit | s, a] = P(Z=1 | s, a) (1 - pi / h(a | s, 1)) = Q - V wherever Q(s, a) > 0, for every
    (t, b, f, o, a): with the exact h the expected HCA credit is the advantage of the success
    probability. Where Q = 0 no successful episode carries the action, so its credit is 0 (not -V)."""
    env, policy, truth, _ = noisy_toolworld
    p = truth.pi[None, None, None]                                 # (1, 1, 1, O, A)
    q = truth.Q[:, :, :, None, :]                                  # (T, N, 2, 1, A)
    v = truth.V[:-1][..., None]                                    # (T, N, 2, O, 1)
    q, v, p = torch.broadcast_tensors(q, v, p)
    h1 = p * q / v.clamp(min=1e-300)
    ok = (q > 0) & (v > 0)
    expected = q[ok] * (1 - p[ok] / h1[ok])
    assert torch.allclose(expected, (q - v)[ok], atol=1e-12)
    # h(. | s, z) is a distribution over actions for z = 0 and 1
    h0 = p * (1 - q) / (1 - v).clamp(min=1e-300)
    keep = ((v > 1e-9) & (v < 1 - 1e-9))[..., 0]
    assert torch.allclose(h1.sum(-1)[keep], torch.ones(()).double(), atol=1e-9)
    assert torch.allclose(h0.sum(-1)[keep], torch.ones(()).double(), atol=1e-9)


def test_hca_exact_h_is_unbiased_by_large_sample():
    env = ToolWorld(3, max_turns=5, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(1.0)
    truth = env.truth(policy)
    ro = env.sample(policy, 1500, group_size=8, seed=3)
    c = estimate("hca", ro, hindsight=exact_hindsight(env, policy, ro, ro.truth["hidden_states"])).token
    A = truth.advantage(ro)
    A = torch.where(truth.q_value(ro) > 0, A, 0.0)   # support: an action with Q = 0 gets credit 0
    m = ro.mask
    cell = (torch.arange(ro.horizon).expand_as(m) * env.n_hidden + ro.truth["hidden_states"].clamp(min=0)) \
        * env.n_actions + ro.tokens
    df = pd.DataFrame({"cell": cell[m].numpy(), "c": c[m].double().numpy(), "A": A[m].numpy()})
    g = df.groupby("cell").agg(n=("c", "size"), c=("c", "mean"), sd=("c", "std"), A=("A", "mean"))
    g = g[g.n >= 150]
    assert len(g) >= 10
    z = (g.c - g.A).abs() / (g.sd / g.n ** 0.5 + 1e-9)
    assert (z < 4.5).all(), g[z >= 4.5]
    # over all turns: mean credit - mean A within a few standard errors
    d = (c[m].double() - A[m])
    assert abs(float(d.mean())) < 4 * float(d.std()) / d.numel() ** 0.5


def test_hca_failures_get_zero_and_learned_h_prior_gives_zero(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    pi = policy.probs().detach()
    c = estimate("hca", ro, hindsight=exact_hindsight(env, policy, ro, ro.truth["hidden_states"]))
    failed = ~ro.truth["success"]
    assert bool((c.token[failed] == 0).all())
    empty = LearnedHindsight(pi)           # nothing fitted: h = pi everywhere -> ratio 1 -> credit 0
    assert torch.allclose(estimate("hca", ro, hindsight=empty).token, torch.zeros(()).double(), atol=1e-12)
    assert torch.allclose(empty.probs(ro), torch.where(ro.view(ro.mask.double(), "turn", "sum")[1],
                                                       first_of_turn(ro, ro.logprobs).exp(), 1.0))


def test_hcapo_terms(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    h = exact_hindsight(env, policy, ro, ro.truth["hidden_states"])
    c = estimate("hcapo", ro, hindsight=h)
    succ = ro.truth["success"]
    assert bool((c.info["step_term"][succ] >= 0).all())            # do-no-harm
    assert bool((c.info["step_term"][~succ] == 0).all())
    grpo = get_estimator("grpo")(ro).token
    assert torch.allclose(estimate("hcapo", ro, hindsight=h, omega=0.0).token, grpo.double())
    raw = estimate("hcapo", ro, hindsight=h, do_no_harm=False)
    assert bool((raw.info["step_term"][succ] < 0).any())


def test_pi_must_be_a_probability_table(noisy_toolworld):
    import pytest
    from labkit.credit.hindsight import turn_policy_probs
    env, policy, truth, ro = noisy_toolworld
    h = exact_hindsight(env, policy, ro, ro.truth["hidden_states"])
    good = policy.probs().detach().double()
    nan = good.clone()
    nan[0, 0] = float("nan")
    for bad, match in ((good * 2, "summing to 1"), (good - 0.5, "lie in"), (nan, "non-finite"), (good[0], "2-D"),
                       (good.to(torch.complex128), "real")):
        for name in ("hca", "hcapo"):
            with pytest.raises((ValueError, TypeError), match=rf"^pi: .*{match}"):
                estimate(name, ro, hindsight=h, pi=bad)
        with pytest.raises((ValueError, TypeError), match="^pi: "):
            turn_policy_probs(ro, bad)
    # a valid table gives what the sampling probabilities give
    assert torch.allclose(turn_policy_probs(ro, good), turn_policy_probs(ro), atol=1e-6)


def test_exact_hindsight_refuses_an_env_of_another_horizon(noisy_toolworld):
    import pytest
    env, policy, truth, ro = noisy_toolworld
    longer = ToolWorld(env.n_files, max_turns=env.max_turns + 2, mislead=0.3, noise=0.3, flaky=0.3)
    with pytest.raises(ValueError, match=r"^rollouts: .*max_turns"):
        exact_hindsight(longer, policy, ro, ro.truth["hidden_states"])
    shorter = ToolWorld(env.n_files, max_turns=2, mislead=0.3, noise=0.3, flaky=0.3)
    with pytest.raises(ValueError, match=r"^rollouts: "):
        exact_hindsight(shorter, policy, ro, ro.truth["hidden_states"])
