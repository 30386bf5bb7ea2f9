"""Hindsight (HCA, HCAPO), counterfactual (C3, CCPO) and privileged (SWEET-RL, CriticSearch) credit."""
import pandas as pd
import pytest
import torch

from labkit.credit import estimate, get_estimator
from labkit.envs.toolworld import exact_hindsight
from labkit.learn.critics import BTCritic, LearnedHindsight, TurnQCritic
from labkit.learn.judges import stand_in_judge
from labkit.envs import ToolWorld
from labkit.core.credit import Credit


@pytest.fixture(scope="module")
def world():
    env = ToolWorld(3, max_turns=8, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(1.5)
    truth = env.truth(policy)
    ro = env.sample(policy, 6, group_size=4, seed=0)
    return env, policy, truth, ro


def _turn(rollouts, x):
    return rollouts.view(x, "turn", "first")[0]


# --------------------------------------------------------------------------- shapes, levels, cost
def test_every_estimator_shape_level_cost(world):
    env, policy, truth, ro = world
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
    assert c3.cost.env_resets == 3 * n_turns and c3.cost.env_steps >= c3.cost.env_resets
    cc = estimate("ccpo", ro, env=env, policy=policy, hidden_states=H, n_continuations=2)
    assert cc.cost.env_resets == 2 * env.n_actions * n_turns
    assert estimate("c3", ro, mode="learned", critic=qc, policy=policy).cost.aux_calls == n_turns
    assert estimate("sweet_rl", ro, critic=bt, hidden_states=H).cost.aux_calls == n_turns * env.n_actions
    assert estimate("critic_search", ro, verdicts=torch.zeros(B, N)).cost.aux_calls == B


# --------------------------------------------------------------------------- HCA
def test_exact_hindsight_identity_by_enumeration(world):
    """E[credit | s, a] = P(Z=1 | s, a) (1 - pi / h(a | s, 1)) = Q - V wherever Q(s, a) > 0, for every
    (t, b, f, o, a): with the exact h the expected HCA credit is the advantage of the success
    probability. Where Q = 0 no successful episode carries the action, so its credit is 0 (not -V)."""
    env, policy, truth, _ = world
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


def test_hca_failures_get_zero_and_learned_h_prior_gives_zero(world):
    env, policy, truth, ro = world
    pi = policy.probs().detach()
    c = estimate("hca", ro, hindsight=exact_hindsight(env, policy, ro, ro.truth["hidden_states"]))
    failed = ~ro.truth["success"]
    assert bool((c.token[failed] == 0).all())
    empty = LearnedHindsight(pi)           # nothing fitted: h = pi everywhere -> ratio 1 -> credit 0
    assert torch.allclose(estimate("hca", ro, hindsight=empty).token, torch.zeros(()).double(), atol=1e-12)
    assert torch.allclose(empty.probs(ro), torch.where(ro.view(ro.mask.double(), "turn", "sum")[1],
                                                       _turn(ro, ro.logprobs).exp(), 1.0))


def test_hcapo_terms(world):
    env, policy, truth, ro = world
    h = exact_hindsight(env, policy, ro, ro.truth["hidden_states"])
    c = estimate("hcapo", ro, hindsight=h)
    succ = ro.truth["success"]
    assert bool((c.info["step_term"][succ] >= 0).all())            # do-no-harm
    assert bool((c.info["step_term"][~succ] == 0).all())
    grpo = get_estimator("grpo")(ro).token
    assert torch.allclose(estimate("hcapo", ro, hindsight=h, omega=0.0).token, grpo.double())
    raw = estimate("hcapo", ro, hindsight=h, do_no_harm=False)
    assert bool((raw.info["step_term"][succ] < 0).any())


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


def test_c3_reexecution_converges_to_exact(world):
    env, policy, truth, ro = world
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


def test_rollout_from_matches_q(world):
    env, policy, truth, _ = world
    K = 20000
    ones = torch.ones(K, dtype=torch.long)
    for a in (0, 1, env.open_action(2), env.edit_action(2), 3):
        r, steps = env.rollout_from(policy, 2 * ones, 0 * ones, 0 * ones, 3 * ones, first_action=a * ones, seed=4)
        q = float(truth.Q[3, 2, 0, a])
        assert abs(float(r.mean()) - q) < 4 * (q * (1 - q) / K) ** 0.5 + 1e-9
        assert steps >= K
    b, f, o = env.decode_hidden(torch.tensor([env.hidden_index(2, 1, 7)]))
    assert (int(b), int(f), int(o)) == (2, 1, 7)


def test_ccpo_exact_is_exact_advantage_and_reexecution_converges(world):
    env, policy, truth, ro = world
    H = ro.truth["hidden_states"]
    ex = estimate("ccpo", ro, mode="exact", env=env, hidden_states=H, truth=truth)
    assert torch.allclose(ex.token, truth.advantage(ro), atol=1e-12)
    sub = ro.select([1])
    re = estimate("ccpo", sub, env=env, policy=policy, hidden_states=sub.truth["hidden_states"],
                  n_continuations=1500, seed=2)
    err = (re.token - truth.advantage(sub))[sub.mask].abs()
    assert float(err.max()) < 0.06


def test_c3_learned_uses_the_critic(world):
    env, policy, truth, ro = world
    qc = TurnQCritic(env.n_obs, env.n_actions).fit(ro, pi=policy.probs().detach())
    c = estimate("c3", ro, mode="learned", critic=qc, policy=policy, default="think")
    obs = _turn(ro, ro.states).long()
    G = c.info["returns"]
    assert torch.allclose(c.values[c.present], (G - qc.q[obs, 0])[c.present])


# --------------------------------------------------------------------------- SWEET-RL and CriticSearch
def test_privileged_critic_ranks_better_than_observation_critic():
    from labkit.course.nb08_hindsight_counterfactual import critic_ranking

    env = ToolWorld(4, max_turns=15, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(2.0)
    truth = env.truth(policy)
    hist = env.sample(policy, 96, group_size=8, seed=7)
    priv = BTCritic.for_env(env, privileged=True).fit(hist, hist.truth["hidden_states"])
    obs = BTCritic.for_env(env, privileged=False).fit(hist)
    test = env.sample(policy, 16, group_size=8, seed=8)
    df = critic_ranking(test, truth, {"priv": priv, "obs": obs}).set_index("critic")
    assert df.loc["priv", "pairwise_acc"] > df.loc["obs", "pairwise_acc"] + 0.05
    assert df.loc["priv", "pref_correct"] > df.loc["obs", "pref_correct"]


def test_sweet_rl_preferences_and_degenerate_critic(world):
    env, policy, truth, ro = world
    H = ro.truth["hidden_states"]
    bt = BTCritic.for_env(env, privileged=True).fit(ro, H)
    c = estimate("sweet_rl", ro, critic=bt, hidden_states=H)
    prefs = c.info["preferences"]
    vals = c.info["critic_values"]
    pres = c.present
    assert bool((prefs[~pres] == -1).all())
    chosen = vals.gather(-1, prefs[..., :1].clamp(min=0))[..., 0]
    rejected = vals.gather(-1, prefs[..., 1:].clamp(min=0))[..., 0]
    assert bool((chosen[pres] >= rejected[pres]).all())
    # a critic with nothing to compare (one trajectory per group) stays 0: credit 0
    single = env.sample(policy, 4, group_size=1, seed=1)
    flat = BTCritic.for_env(env, privileged=False).fit(single)
    assert flat.n_pairs == 0 and bool((estimate("sweet_rl", single, critic=flat).token == 0).all())


def test_stand_in_judge_sign_agreement(world):
    env, policy, truth, ro = world
    A = truth.advantage(ro)
    a, present = ro.view(A, "turn", "first")
    nz = present & (a.abs() > 1e-9)
    for err, want in ((0.0, 1.0), (1.0, 0.0)):
        v = stand_in_judge(ro, advantage=A, error_rate=err)
        agree = ((v > 0.5) == (a > 0))[nz].double().mean()
        assert float(agree) == want
    big = ToolWorld(3, max_turns=8).sample(policy, 40, group_size=8, seed=2)
    Ab = truth.advantage(big)
    ab, pb = big.view(Ab, "turn", "first")
    v = stand_in_judge(big, advantage=Ab, error_rate=0.3, seed=1)
    agree = float(((v > 0.5) == (ab > 0))[pb].double().mean())
    assert 0.65 < agree < 0.75
    # zero error: CriticSearch's turn term orders good turns above bad ones within a group
    cs = estimate("critic_search", ro, verdicts=stand_in_judge(ro, advantage=A))
    term = cs.info["turn_term"]
    good = cs.info["turn_rewards"] > 0
    for g in ro.group_ids.unique():
        rows = ro.group_ids == g
        sel_g, sel_b = good[rows] & present[rows], ~good[rows] & present[rows]
        if bool(sel_g.any()) and bool(sel_b.any()):
            assert float(term[rows][sel_g].min()) > float(term[rows][sel_b].max())
    same = estimate("critic_search", ro, verdicts=torch.ones_like(a))
    assert bool((same.info["turn_term"] == 0).all())


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_named_errors(world):
    env, policy, truth, ro = world
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


def test_sampling_unchanged_by_reexecution(world):
    env, policy, _, ro = world
    env.rollout_from(policy, [0, 1], [0, 0], [0, 0], [0, 2], seed=3)
    again = env.sample(policy, 6, group_size=4, seed=0)
    assert torch.equal(again.tokens, ro.tokens) and torch.equal(again.rewards, ro.rewards)
