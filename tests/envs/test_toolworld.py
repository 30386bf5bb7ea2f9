"""ToolWorld (labkit.envs.toolworld): the exact DP against brute force, sampling against the DP,
the Rollouts it makes, re-execution from a hidden state, its learner, and bad arguments.
"""

import math

import pytest
import torch

from labkit.course.presets import toolworld_setup
from labkit.envs import BifurcationChain
from labkit.envs.toolworld import ToolWorld, success_prob, turn_labels
from labkit.policies.tabular import TabularSoftmaxPolicy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def noisy_env(n_files=3, max_turns=20, **kw):
    kw = {"mislead": 0.3, "noise": 0.2, "flaky": 0.15, **kw}
    return ToolWorld(n_files, max_turns=max_turns, **kw)


# --------------------------------------------------------------------------- brute force
def story_outcomes(N, b, fixed, action, mislead, noise, flaky, step_cost, wrong_submit=0.0):
    """The rules restated from the story, independently of the module's tables.

    Returns a list of (probability, fixed after, observation name or None if the episode ends,
    reward)."""
    r = -step_cost
    if action == "think":
        return [(1.0, fixed, "thought", r)]
    if action == "search":
        return [(1 - mislead, fixed, f"hint: file {b}", r)] + [
            (mislead / (N - 1), fixed, f"hint: file {j}", r) for j in range(N) if j != b]
    if action == "run tests":
        p_pass = 1 - flaky if fixed else flaky
        return [(p_pass, fixed, "tests pass", r), (1 - p_pass, fixed, "tests fail", r)]
    if action == "submit":
        return [(1.0, fixed, None, r + (1.0 if fixed else -wrong_submit))]
    verb, j = action.split()
    j = int(j)
    if verb == "edit":
        return [(1.0, fixed or j == b, f"edited file {j}", r)]
    p_buggy = 1 - noise if (j == b and not fixed) else noise
    return [(p_buggy, fixed, f"file {j} looks buggy", r), (1 - p_buggy, fixed, f"file {j} looks fine", r)]


def enumerate_paths(env, pi, b, fixed, obs_name, t, first_action=None):
    """Every (probability, return) of the episode from turn t in state (b, fixed, obs)."""
    N = env.n_files
    actions = ["think", "search", "run tests", "submit"] + [f"open {j}" for j in range(N)] + [f"edit {j}" for j in range(N)]
    o = env.obs_names.index(obs_name)
    for a, name in enumerate(actions):
        if first_action is not None and a != first_action:
            continue
        p_a = 1.0 if first_action is not None else float(pi[o, a])
        for p, fx, nxt, r in story_outcomes(N, b, fixed, name, env.mislead, env.noise, env.flaky, env.step_cost,
                                             env.wrong_submit):
            if p == 0:
                continue
            if nxt is None or t + 1 == env.max_turns:  # submitted, or out of turns
                yield p_a * p, r
            else:
                for q, g in enumerate_paths(env, pi, b, fx, nxt, t + 1):
                    yield p_a * p * q, r + g


def brute_value(env, pi, b, fixed, obs_name, t, first_action=None):
    return sum(p * g for p, g in enumerate_paths(env, pi, b, fixed, obs_name, t, first_action))


@pytest.mark.parametrize("n_files", [2, 3])
def test_dp_matches_brute_force_enumeration(n_files):
    env = noisy_env(n_files, max_turns=3, step_cost=0.05, wrong_submit=0.5)
    pol = env.make_policy(init_std=1.0, seed=n_files)
    tr = env.truth(pol)
    pi = pol.probs().detach()
    # J and V before the first turn, per bug location
    per_bug = [brute_value(env, pi, b, False, "start", 0) for b in range(n_files)]
    assert tr.J == pytest.approx(sum(per_bug) / n_files, abs=1e-9)
    for b in range(n_files):
        assert float(tr.task_values[b]) == pytest.approx(per_bug[b], abs=1e-9)
        assert float(tr.V[0, b, 0, 0]) == pytest.approx(per_bug[b], abs=1e-9)
    # V, Q and A at some later states (hidden flag, observation and turn all varied)
    o = env.obs_names.index
    for t, b, fixed, obs in [(1, 0, False, "hint: file 1"), (1, 1, True, "tests fail"),
                             (2, 0, True, "edited file 0"), (2, 1, False, "thought")]:
        v = brute_value(env, pi, b, fixed, obs, t)
        assert float(tr.V[t, b, int(fixed), o(obs)]) == pytest.approx(v, abs=1e-9)
        for a in range(env.n_actions):
            q = brute_value(env, pi, b, fixed, obs, t, first_action=a)
            assert float(tr.Q[t, b, int(fixed), a]) == pytest.approx(q, abs=1e-9)
            assert float(tr.A[t, b, int(fixed), o(obs), a]) == pytest.approx(q - v, abs=1e-9)


def test_advantages_average_to_zero_under_the_policy():
    env = noisy_env()
    pol = env.make_policy(init_std=1.0, seed=4)
    tr = env.truth(pol)
    assert torch.allclose((tr.pi * tr.A).sum(-1), torch.zeros(()).double(), atol=1e-12)
    assert float(tr.V[-1].abs().max()) == 0.0


# --------------------------------------------------------------------------- sampling vs truth
def test_monte_carlo_success_rate_converges_to_J():
    env = noisy_env(max_turns=15)
    pol = env.scripted_policy(2.0)
    tr = env.truth(pol)
    r = env.sample(pol, 500, group_size=8, seed=11)
    success = r.truth["success"].double()
    assert torch.equal(success, r.scores)  # no step cost: the return is the success flag
    se = math.sqrt(tr.J * (1 - tr.J) / len(success))
    assert abs(float(success.mean()) - tr.J) < 4 * se
    for b in range(env.n_files):  # and per bug location, against V_0 of that task
        rows = r.truth["bug"] == b
        vb = float(tr.task_values[b])
        se_b = math.sqrt(vb * (1 - vb) / int(rows.sum()))
        assert abs(float(success[rows].mean()) - vb) < 4 * se_b


def test_skill_plus_luck_equals_the_return_exactly():
    env = noisy_env(max_turns=30, step_cost=0.02)
    pol = env.make_policy(init_std=1.0, seed=2)
    tr = env.truth(pol)
    r = env.sample(pol, 64, group_size=8, seed=3)
    skill, luck = tr.skill_luck(r)
    v0 = tr.value(r)[:, 0]
    assert torch.allclose(v0 + (skill + luck).sum(1), r.scores.double(), atol=1e-12, rtol=0)
    assert torch.equal(skill, tr.advantage(r))
    sub = r.select([5, 0])  # truth rides along with the rows
    assert torch.equal(tr.advantage(sub), tr.advantage(r)[[5, 0]])
    assert float(skill[~r.mask].abs().max()) == 0 and float(luck[~r.mask].abs().max()) == 0
    # Luck comes only from the tools' random answers: think, edit and submit are deterministic.
    deterministic = r.mask & ((r.tokens == 0) | (r.tokens == 3) | (r.tokens >= 4 + env.n_files))
    assert float(luck[deterministic].abs().max()) < 1e-12
    assert float(luck[r.mask & (r.tokens == 1)].abs().max()) > 0.01  # search answers do vary
    # Luck has mean zero: its total over an episode averages out (loose check).
    big = env.sample(pol, 400, group_size=8, seed=4)
    total_luck = tr.skill_luck(big)[1].sum(1)
    assert abs(float(total_luck.mean())) < 4 * float(total_luck.std()) / math.sqrt(len(total_luck))


def test_exact_gradient_matches_finite_differences_and_the_pg_theorem():
    env = noisy_env(max_turns=8, step_cost=0.01)
    pol = env.make_policy(init_std=0.8, seed=5)
    tr = env.truth(pol)
    assert torch.allclose(tr.grad, tr.policy_gradient_theorem(), atol=1e-12)
    eps = 1e-6
    for o, a in [(0, 1), (env.hint_obs(1), env.open_action(1)), (2, 3), (1, 0)]:
        def J_at(delta):
            p = TabularSoftmaxPolicy(env.n_obs, env.n_actions)
            with torch.no_grad():
                p.logits.copy_(pol.logits)
                p.logits[o, a] += delta
            return env.truth(p).J
        fd = (J_at(eps) - J_at(-eps)) / (2 * eps)
        assert float(tr.grad[o, a]) == pytest.approx(fd, abs=1e-8)


def test_sampled_policy_gradient_with_exact_advantages_points_at_the_exact_gradient():
    """rollouts.states must be what the policy conditions on, and the oracle A valid credit."""
    env = noisy_env(max_turns=12)
    pol = env.make_policy(init_std=0.5, seed=6)
    tr = env.truth(pol)
    r = env.sample(pol, 1000, group_size=8, seed=7)
    est = pol.gradient_estimate(r, tr.advantage(r))
    cos = torch.nn.functional.cosine_similarity(est.flatten(), tr.grad.flatten(), dim=0)
    assert float(cos) > 0.98


# --------------------------------------------------------------------------- rollouts structure
def test_rollouts_structure():
    env = noisy_env(max_turns=10)
    pol = env.make_policy(init_std=0.5, seed=1)
    r = env.sample(pol, 6, group_size=4, seed=0)
    B, T = r.tokens.shape
    assert (B, T) == (24, 10)
    lengths = r.lengths
    assert torch.equal(r.mask, torch.arange(T)[None] < lengths[:, None])  # a prefix of turns
    expected_ids = torch.where(r.mask, torch.arange(T).expand(B, T), -1)
    assert torch.equal(r.step_ids, expected_ids) and torch.equal(r.turn_ids, expected_ids)
    assert torch.equal(r.group_ids, torch.arange(6).repeat_interleave(4))
    bug = r.truth["bug"]
    assert torch.equal(bug.view(6, 4), bug.view(6, 4)[:, :1].expand(6, 4))  # a group shares its bug
    # an episode ends by submitting or by running out of turns
    last = r.tokens.gather(1, (lengths - 1)[:, None]).squeeze(1)
    assert bool(((last == 3) | (lengths == T)).all())
    assert torch.equal(r.truth["timeout"], last != 3)
    submits = ((r.tokens == 3) & r.mask).sum(1)
    assert bool((submits <= 1).all())
    # rewards: only at the final turn (no step cost), 1 iff submitted with the bug fixed
    assert float(r.rewards[r.mask & (torch.arange(T)[None] < (lengths - 1)[:, None])].abs().max()) == 0
    assert torch.equal(r.scores, r.truth["success"].double())
    # states are observation ids, hidden states carry (bug, fixed, observation)
    hidden = r.truth["hidden_states"]
    assert bool((hidden[~r.mask] == -1).all()) and bool((r.states[~r.mask] == 0).all())
    assert torch.equal(r.states[r.mask], hidden[r.mask] % env.n_obs)
    assert torch.equal((hidden // (2 * env.n_obs))[r.mask], bug[:, None].expand(B, T)[r.mask])
    assert torch.equal(((hidden // env.n_obs) % 2 == 1)[r.mask], r.truth["fixed"][r.mask])
    assert bool((r.states[:, 0] == 0).all())
    # decisive turns: the fixing edit (at most one per episode) and a successful submit
    fixed_ever = r.truth["fixed"].any(1) | r.truth["decisive"].any(1)
    fix_turns = r.truth["decisive"] & (r.tokens != 3)
    assert bool((fix_turns.sum(1) <= 1).all())
    assert bool((r.tokens[fix_turns] == 4 + env.n_files + bug[:, None].expand(B, T)[fix_turns]).all())
    assert torch.equal(r.truth["decisive"].sum(1), fix_turns.sum(1) + r.truth["success"].long())
    assert bool((fixed_ever | ~r.truth["success"]).all())
    # text, anchors, prompts, transcript
    for b in range(B):
        n = int(lengths[b])
        assert r.anchor_keys[b] == [env.obs_names[int(o)] for o in r.states[b, :n]]
        assert all(s for s in r.text[b][:n]) and all(s == "" for s in r.text[b][n:])
        assert r.text[b][0].startswith(env.action_names[int(r.tokens[b, 0])] + " -> ")
    assert r.prompts[0].startswith("Task 0") and r.prompts[5].startswith("Task 1")
    script = env.transcript(r, 0)
    assert script.count("\nturn ") == int(lengths[0]) and f"file {int(bug[0])}" in script
    assert r.logprobs is not None and bool((r.logprobs[r.mask] < 0).all())
    assert torch.allclose(r.logprobs[r.mask], pol.log_prob(r.states, r.tokens).detach()[r.mask])


def test_observations_recur_within_a_group():
    env = noisy_env()
    pol = env.scripted_policy(1.0)
    r = env.sample(pol, 8, group_size=8, seed=2)
    shared = total = 0
    for g in range(8):
        rows = range(8 * g, 8 * g + 8)
        owners = {}
        for b in rows:
            for key in set(r.anchor_keys[b]):
                owners[key] = owners.get(key, 0) + 1
        for b in rows:
            for key in r.anchor_keys[b]:
                total += 1
                shared += owners[key] >= 2
    assert shared / total > 0.5  # most steps fall in an anchor group of two or more trajectories


def test_long_horizon_and_the_echo_trap():
    env = noisy_env(n_files=4, max_turns=50)
    trapped = env.scripted_policy(2.0, think=6.0)
    tr = env.truth(trapped)
    r = env.sample(trapped, 64, group_size=8, seed=0)
    assert r.horizon == 50 and int(r.lengths.max()) == 50
    skill, luck = tr.skill_luck(r)
    assert torch.allclose(tr.value(r)[:, 0] + (skill + luck).sum(1), r.scores.double(), atol=1e-12, rtol=0)
    # thinking after "thought" is the echo: before the last turn (where only a fixed submit
    # matters) it has negative exact advantage in every unfixed state, and it costs success
    assert float(tr.A[:-1, :, 0, 1, 0].max()) < 0
    assert tr.J < env.truth(env.scripted_policy(2.0)).J


def test_step_value_fn_gives_exact_turn_values():
    env = noisy_env(max_turns=6)
    pol = env.make_policy()
    tr = env.truth(pol)
    r = env.sample(pol, 4, group_size=2, seed=0)
    values, cost = tr.step_value_fn()(r, 3)
    assert values.shape == (8, int(r.n_steps.max()))
    assert torch.allclose(values[r.mask[:, : values.shape[1]]], tr.value(r)[r.mask])
    assert cost.policy_forwards == 0


# --------------------------------------------------------------------------- seeds and arguments
def test_seeded_sampling_is_deterministic():
    env = noisy_env()
    pol = env.make_policy(init_std=0.5)
    a, b = env.sample(pol, 5, seed=9), env.sample(pol, 5, seed=9)
    for name in ("tokens", "mask", "rewards", "states", "logprobs"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert a.text == b.text
    c = env.sample(pol, 5, seed=10)
    assert not torch.equal(a.tokens, c.tokens)
    d = env.sample(pol, 3, group_size=2, bugs=[2, 0, 1])
    assert d.truth["bug"].tolist() == [2, 2, 0, 0, 1, 1]


@pytest.mark.parametrize("kwargs, name, error", [
    ({"n_files": 1}, "n_files", ValueError),
    ({"n_files": 2.5}, "n_files", TypeError),
    ({"max_turns": 0}, "max_turns", ValueError),
    ({"max_turns": 201}, "max_turns", ValueError),
    ({"mislead": 1.5}, "mislead", ValueError),
    ({"noise": -0.1}, "noise", ValueError),
    ({"flaky": "often"}, "flaky", TypeError),
    ({"step_cost": -1.0}, "step_cost", ValueError),
    ({"wrong_submit": -0.5}, "wrong_submit", ValueError),
    ({"find_reward": "lots"}, "find_reward", TypeError),
])
def test_bad_constructor_arguments_name_the_argument(kwargs, name, error):
    with pytest.raises(error, match=name):
        ToolWorld(**kwargs)


def test_bad_sample_and_truth_arguments_name_the_argument():
    env = ToolWorld(3)
    pol = env.make_policy()
    with pytest.raises(ValueError, match="n_tasks"):
        env.sample(pol, 0)
    with pytest.raises(ValueError, match="group_size"):
        env.sample(pol, 2, group_size=0)
    with pytest.raises(ValueError, match="bugs"):
        env.sample(pol, 2, bugs=[0, 3])
    with pytest.raises(ValueError, match="bugs"):
        env.sample(pol, 2, bugs=[0])
    wrong = TabularSoftmaxPolicy(5, env.n_actions)
    with pytest.raises(ValueError, match="policy"):
        env.sample(wrong, 2)
    with pytest.raises(ValueError, match="policy"):
        env.truth(wrong)
    chain = BifurcationChain(horizon=4)
    other = chain.sample(TabularSoftmaxPolicy(chain.n_states, chain.n_actions), 2)
    with pytest.raises(ValueError, match="hidden_states"):
        env.truth(pol).advantage(other)
    with pytest.raises(ValueError, match="row"):
        env.transcript(env.sample(pol, 1, group_size=2), 2)
    assert repr(env).startswith("ToolWorld(n_files=3, max_turns=20")


def test_discounted_truth_skill_luck_identity():
    env = ToolWorld(3, max_turns=10, mislead=0.2, noise=0.2, flaky=0.2)
    pol = env.scripted_policy(2.0)
    gamma = 0.8
    truth = env.truth(pol, gamma=gamma)
    assert truth.gamma == gamma and truth.J < env.truth(pol).J
    ro = env.sample(pol, 8, group_size=4, seed=3)
    skill, luck = truth.skill_luck(ro)
    w = gamma ** torch.arange(ro.horizon, dtype=torch.float64)
    lhs = truth.value(ro)[:, 0] + ((skill + luck) * w).sum(1)
    assert torch.allclose(lhs, ro.returns(gamma)[:, 0].to(torch.float64), atol=1e-12)
    # the discounted policy-gradient theorem matches autograd's dJ/dlogits
    assert torch.allclose(truth.policy_gradient_theorem(), truth.grad, atol=1e-10)
    with pytest.raises(ValueError, match="gamma"):
        env.truth(pol, gamma=2.0)


def test_rollout_from_matches_q(noisy_toolworld):
    env, policy, truth, _ = noisy_toolworld
    K = 20000
    ones = torch.ones(K, dtype=torch.long)
    for a in (0, 1, env.open_action(2), env.edit_action(2), 3):
        r, steps = env.rollout_from(policy, 2 * ones, 0 * ones, 0 * ones, 3 * ones, first_action=a * ones, seed=4)
        q = float(truth.Q[3, 2, 0, a])
        assert abs(float(r.mean()) - q) < 4 * (q * (1 - q) / K) ** 0.5 + 1e-9
        assert steps >= K
    b, f, o = env.decode_hidden(torch.tensor([env.hidden_index(2, 1, 7)]))
    assert (int(b), int(f), int(o)) == (2, 1, 7)


def test_sampling_unchanged_by_reexecution(noisy_toolworld):
    env, policy, _, ro = noisy_toolworld
    env.rollout_from(policy, [0, 1], [0, 0], [0, 0], [0, 2], seed=3)
    again = env.sample(policy, 6, group_size=4, seed=0)
    assert torch.equal(again.tokens, ro.tokens) and torch.equal(again.rewards, ro.rewards)


@pytest.fixture(scope="module")
def tool():
    env = ToolWorld()
    pol = env.scripted_policy()
    return env, pol, env.sample(pol, 2, group_size=2, seed=0), env.truth(pol)


# --------------------------------------------------------------------------- bad input names the argument
def test_toolworld_arguments(tool):
    env, pol, ro, _ = tool
    with pytest.raises(TypeError, match=r"^bugs: expected integers"):
        env.sample(pol, 1, group_size=2, bugs=[0.5])
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        env.make_policy(seed="x")
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        env.transcript(None, 0)
    with pytest.raises(ValueError, match=r"^task: must be >= 0"):
        env.prompt(-1)
    with pytest.raises(TypeError, match=r"^task: expected an integer"):
        env.prompt("x")
    assert env.prompt(99).startswith("Task 99")   # task numbers have no upper bound
    assert env.sample(pol, 1, group_size=2, bugs=[1]).truth["bug"].tolist() == [1, 1]


@pytest.mark.parametrize("meth", ["advantage", "value", "q_value", "next_value", "skill_luck"])
def test_tooltruth_refuses_foreign_rollouts(tool, team, meth):
    env, pol, ro, tr = tool
    f = getattr(tr, meth)
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        f(None)
    other = ToolWorld(n_files=env.n_files + 2)
    ro_other = other.sample(other.scripted_policy(), 2, group_size=2, seed=1)
    with pytest.raises(ValueError, match=r"^rollouts: "):
        f(ro_other)
    far = ro.with_(states=torch.where(ro.mask, ro.states + 1000, ro.states))
    with pytest.raises(ValueError, match=r"^rollouts: states disagree"):
        f(far)
    with pytest.raises(ValueError, match=r"^rollouts"):
        f(team[2])
    out = f(ro)   # the rollouts the truth belongs to still score
    assert all(torch.isfinite(x).all() for x in (out if isinstance(out, tuple) else (out,)))


def test_tooltruth_values_unchanged_on_valid_rollouts(tool):
    env, pol, ro, tr = tool
    skill, luck = tr.skill_luck(ro)
    v0 = tr.value(ro)[:, 0]
    ret = ro.rewards.to(torch.float64).sum(1)
    assert torch.allclose(v0 + (skill + luck).sum(1), ret)   # the decomposition still holds


def test_tool_learner_rejects_a_policy_of_the_wrong_shape_and_a_bad_filter():
    from labkit.envs import ToolWorld
    from labkit.policies import TabularSoftmaxPolicy
    from labkit.envs.toolworld import ToolLearner
    env = ToolWorld(3)
    with pytest.raises(ValueError, match="policy"):
        ToolLearner(env, TabularSoftmaxPolicy(4, 4))
    with pytest.raises(TypeError, match="batch_filter"):
        ToolLearner(env, env.make_policy(), batch_filter=0.25)


def test_success_prob_starts_at_v0_and_ends_at_the_outcome():
    env = ToolWorld(3, max_turns=8)
    policy = env.scripted_policy(3.0)
    ro = env.sample(policy, 4, group_size=4, seed=3)
    truth = env.truth(policy)
    p = success_prob(env, truth, ro)
    n = ro.mask.sum(1)
    assert p.shape == (ro.batch_size, int(n.max()) + 1)
    assert torch.allclose(p[:, 0], truth.value(ro)[:, 0])
    outcome = ro.truth["success"].double()
    assert torch.equal(p[torch.arange(ro.batch_size), n], outcome)
    assert bool(((p >= -1e-12) & (p <= 1 + 1e-12)).all())
    with pytest.raises(ValueError, match="^env: "):
        costly = ToolWorld(3, max_turns=8, step_cost=0.1)
        success_prob(costly, costly.truth(policy), ro)
    with pytest.raises(ValueError, match="^rollouts: "):
        success_prob(env, truth, ro.with_(truth={k: v for k, v in ro.truth.items() if k != "success"}))


def test_toolworld_vines_average_to_the_exact_value_and_charge_every_replay():
    env = ToolWorld(3, max_turns=6, mislead=0.2, noise=0.2, flaky=0.2)
    policy = env.scripted_policy(2.0)
    ro = env.sample(policy, 2, group_size=4, seed=0)
    k = 400
    values, cost = env.vine_value_fn(policy, seed=1)(ro, k)
    exact = env.truth(policy).step_value_fn()(ro, 1)[0]
    present = ro.view(ro.rewards, "step", "sum")[1]
    # each V is a mean of k returns in [0, 1]: standard error <= 0.5 / sqrt(k) = 0.025
    assert float((values - exact)[present].abs().max()) < 0.1
    turns = int(present.sum())
    assert cost.env_resets == cost.policy_forwards == turns * k
    assert cost.env_steps == cost.policy_tokens >= turns * k


def test_turn_labels_name_the_action_of_every_played_turn():
    env, policy = toolworld_setup(3, max_turns=12, warmup_iterations=6, seed=1)
    ro = env.sample(policy, 12, group_size=8, seed=2)
    labels = turn_labels(env, ro)
    for b in (0, 5, 40):
        n = int(ro.mask[b].sum())
        assert labels[b][n:] == [""] * (ro.horizon - n)
        for t in range(n):
            full = env.action_names[int(ro.tokens[b, t])]
            assert ro.text[b][t].startswith(full)  # the turn text starts with the action
            assert labels[b][t] == {"run tests": "tests"}.get(full, full.replace(" ", ""))


def test_find_reward_pays_the_first_look_at_the_buggy_file_and_stays_exact():
    env = noisy_env(max_turns=12, step_cost=0.03, find_reward=0.4)
    assert "find_reward=0.4" in repr(env) and "find_reward" not in repr(noisy_env())
    # opening the buggy file pays only while the bug is still there
    for b in range(env.n_files):
        assert float(env.expected_reward[b, 0, env.open_action(b)]) == pytest.approx(0.4 - 0.03)
        assert float(env.expected_reward[b, 1, env.open_action(b)]) == pytest.approx(-0.03)
    pol = env.scripted_policy(1.0)
    tr = env.truth(pol)
    assert torch.allclose(tr.grad, tr.policy_gradient_theorem(), atol=1e-12)
    r = env.sample(pol, 400, group_size=8, seed=5)
    skill, luck = tr.skill_luck(r)  # the realised return, rewards included, is the DP's identity
    assert torch.allclose(tr.value(r)[:, 0] + (skill + luck).sum(1), r.scores.double(), atol=1e-12, rtol=0)
    returns = r.scores.double()
    assert abs(float(returns.mean()) - tr.J) < 4 * float(returns.std()) / math.sqrt(len(returns))


def test_a_missing_policy_is_refused_by_name_at_every_entry():
    from labkit.envs.toolworld.learner import ToolLearner
    env = ToolWorld()
    msg = r"^policy: expected a policy with probs\(\) \(e.g. TabularSoftmaxPolicy\), got None"
    one = torch.tensor([0])
    for call in (lambda: env.sample(None, 1), lambda: env.truth(None), lambda: env.vine_value_fn(None),
                 lambda: env.rollout_from(None, one, torch.zeros(1, env.n_files, dtype=torch.bool), one, one),
                 lambda: env.replay_noise(None, None, None, None),
                 lambda: env.rollout_with_noise(None, one, None, one, one, None),
                 lambda: ToolLearner(env, None)):
        with pytest.raises(TypeError, match=msg):
            call()
    with pytest.raises(TypeError, match="^env: expected a ToolWorld, got None"):
        ToolLearner(None, env.make_policy())
