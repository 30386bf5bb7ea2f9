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
    for mode in ("fixed", "resample"):
        for default in ("think", "policy", 1):   # ("others" is uniform over 13 actions here: random)
            re = estimate("c3", ro, mode=mode, env=env, policy=policy, hidden_states=H, default=default,
                          n_continuations=2)
            ex = estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth, default=default)
            assert torch.allclose(re.values, ex.values, atol=1e-12), (mode, default)
    re = estimate("ccpo", ro, env=env, policy=policy, hidden_states=H, n_continuations=1)
    ex = estimate("ccpo", ro, mode="exact", env=env, hidden_states=H, truth=truth)
    assert torch.allclose(re.values, ex.values, atol=1e-12)
    think = estimate("c3", ro, env=env, policy=policy, hidden_states=H, default="think")
    assert bool((think.values.abs() > 0.5).any())   # the edit / submit beat "think" by a lot here


@pytest.mark.parametrize("mode", ["fixed", "resample"])
def test_c3_reexecution_converges_to_exact(noisy_toolworld, mode):
    env, policy, truth, ro = noisy_toolworld
    sub = ro.select([0, 5])
    H = sub.truth["hidden_states"]
    ex = estimate("c3", sub, mode="exact", env=env, hidden_states=H, truth=truth)
    present = ex.present
    G = ex.info["returns"]
    if mode == "resample":
        re = estimate("c3", sub, mode="resample", env=env, policy=policy, hidden_states=H, n_continuations=3000,
                      seed=1)
        # the realised return G_t is what re-sampling keeps: credit - counterfactual = G_t exactly
        assert torch.allclose(re.values, (G - re.info["counterfactual"]).where(present, torch.zeros(())))
        err = (re.info["counterfactual"] - ex.info["counterfactual"])[present].abs()
    else:
        # M = 2000 continuations, shared by the taken action and a fixed default: both sides
        # converge, to Q(s_t, a_t) and Q(s_t, think), the episode's own continuation weighing
        # 1 / M. (With K siblings and M = 1 every sibling replays the episode's own luck: their
        # mean is the counterfactual *of this episode*, not sum_a d(a) Q(s_t, a).)
        ex = estimate("c3", sub, mode="exact", env=env, hidden_states=H, truth=truth, default="think")
        re = estimate("c3", sub, env=env, policy=policy, hidden_states=H, default="think", n_continuations=2000,
                      seed=1)
        assert float((re.info["taken"] - ex.info["taken"])[present].abs().max()) < 0.06
        err = (re.values - ex.values)[present].abs()
    assert float(err.max()) < 0.06                  # se of a mean of 2000-3000 returns in [0, 1] <= 0.011


def test_c3_fixed_continuation_replays_the_episode(noisy_toolworld):
    """Continuation 1 is the episode's own randomness: with the taken action it replays the
    episode exactly, so a turn whose sibling is the taken action itself gets credit 0 under M = 1,
    and the credit's first term is the realised return."""
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    c = estimate("c3", ro, env=env, policy=policy, hidden_states=H, n_continuations=1, seed=3)
    present = c.present
    act = first_of_turn(ro, ro.tokens).long()
    sib = c.info["siblings"][:, 0]
    same = act[present] == sib
    assert bool(same.any()) and bool((~same).any())
    assert torch.equal(c.info["taken"][present], c.info["returns"][present])
    assert bool((c.values[present][same] == 0).all())
    # "think" leaves the episode's luck in place: a default that changes nothing changes no outcome
    think = estimate("c3", ro, env=env, policy=policy, hidden_states=H, default="think", n_continuations=1)
    was_think = act[present] == 0
    assert bool(was_think.any()) and bool((think.values[present][was_think] == 0).all())


def test_c3_fixed_is_unbiased_for_the_exact_credit():
    """Given the turn's state and action, the fixed-continuation credit averages to
    Q(s, a) - sum_a' pi(a') Q(s, a') over the episode's continuation, the sibling and the replays:
    every episode of one task starts in the same state, so the mean turn-0 credit of the episodes
    that took action a is that exact value."""
    env = ToolWorld(3, max_turns=8, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(0.5)
    truth = env.truth(policy)
    ro = env.sample(policy, 1, group_size=6000, seed=11, bugs=[1])
    H = ro.truth["hidden_states"]
    c = estimate("c3", ro, env=env, policy=policy, hidden_states=H, n_continuations=2, seed=2)
    ex = estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth)
    a0 = ro.tokens[:, 0]
    checked = 0
    for a in a0.unique():
        rows = a0 == a
        if int(rows.sum()) < 300:
            continue
        checked += 1
        assert abs(float(c.values[rows, 0].mean()) - float(ex.values[rows, 0][0])) < 0.06, int(a)
    assert checked >= 5


def test_c3_fixed_removes_the_luck_resample_keeps():
    """On a noisy world the fixed-continuation credit follows skill, not the luck that came after
    the turn; the re-sampling ablation pays for that luck about one for one (as GRPO does)."""
    from labkit.scoring import luck_regression
    env = ToolWorld(4, max_turns=12, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(2.0)
    truth = env.truth(policy)
    ro = env.sample(policy, 24, group_size=8, seed=4)
    H = ro.truth["hidden_states"]
    credits = {"GRPO": estimate("grpo", ro),
               "fixed": estimate("c3", ro, env=env, policy=policy, hidden_states=H, n_continuations=8),
               "resample": estimate("c3", ro, mode="resample", env=env, policy=policy, hidden_states=H,
                                    n_continuations=8)}
    df = luck_regression(ro, truth, credits).set_index("method")
    assert df.loc["fixed", "luck_removed"] > 0.8 and df.loc["resample", "luck_removed"] < 0.3
    assert df.loc["fixed", "corr_exact"] > df.loc["resample", "corr_exact"] + 0.1


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
class _NoNoise:
    """An env that can restore a state and play on but cannot share random numbers."""

    def __init__(self, env):
        self.n_hidden, self.max_turns = env.n_hidden, env.max_turns
        self.decode_hidden, self.rollout_from = env.decode_hidden, env.rollout_from


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
        ("mode", lambda: estimate("c3", ro, mode="reexecute", env=env)),
        ("n_alternatives", lambda: estimate("c3", ro, env=env, policy=policy, hidden_states=H, n_alternatives=0)),
        ("env", lambda: estimate("c3", ro, env=_NoNoise(env), policy=policy, hidden_states=H)),
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


def test_exact_modes_refuse_a_truth_of_another_world_or_policy(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    wider = ToolWorld(env.n_files + 1, max_turns=env.max_turns, mislead=0.3, noise=0.3, flaky=0.3)
    longer = ToolWorld(env.n_files, max_turns=env.max_turns + 2, mislead=0.3, noise=0.3, flaky=0.3)
    other_policy = env.truth(env.make_policy(seed=5))
    for name in ("c3", "ccpo"):
        ok = estimate(name, ro, mode="exact", env=env, hidden_states=H, truth=truth, policy=policy)
        assert torch.equal(ok.token, estimate(name, ro, mode="exact", env=env, hidden_states=H, truth=truth).token)
        for bad, pol, what in ((wider.truth(wider.scripted_policy(1.5)), None, "n_files"),
                               (longer.truth(longer.scripted_policy(1.5)), None, "max_turns"),
                               (other_policy, policy, "policy table"),
                               (other_policy, None, "probabilities of the taken actions")):
            with pytest.raises(ValueError, match=rf"^truth: .*{what}"):
                estimate(name, ro, mode="exact", env=env, hidden_states=H, truth=bad, policy=pol)
        # an env of another horizon than the rollouts' columns is refused too
        with pytest.raises(ValueError, match=r"^rollouts: .*max_turns"):
            estimate(name, ro, mode="exact", env=longer, hidden_states=H, truth=longer.truth(policy))


def test_c3_refuses_a_pi_that_is_not_a_probability_table(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
    H = ro.truth["hidden_states"]
    good = policy.probs().detach().double()
    neg = good.clone()
    neg[0, 0], neg[0, 1] = neg[0, 0] + 0.5, neg[0, 1] - 0.5
    for bad, match in ((good * 2, "summing to 1"), (good * 0.999, "summing to 1"), (-good, "lie in"), (neg, "lie in")):
        with pytest.raises(ValueError, match=rf"^pi: .*{match}"):
            estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth, pi=bad)
        with pytest.raises(ValueError, match="^pi: "):
            estimate("c3", ro, mode="resample", env=env, policy=policy, hidden_states=H, pi=bad, n_continuations=1)
    within = good * (1 + 5e-7)                           # inside the documented 1e-6 tolerance
    a = estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth, pi=within).token
    assert torch.allclose(a, estimate("c3", ro, mode="exact", env=env, hidden_states=H, truth=truth).token, atol=1e-5)
