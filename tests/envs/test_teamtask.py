"""TeamTask: the rules, exact coalition values against Monte Carlo, presets against the textbook
games, rewards, and the learner.
"""

import pytest
import torch

from labkit.core.games import exact_shapley, leave_one_out_values
from labkit.envs import TeamTask
from labkit.envs.teamtask import PRESETS, TeamLearner
from labkit.learn.loop import train


# --------------------------------------------------------------------------- construction
@pytest.mark.parametrize("kwargs, match", [
    (dict(roles=("planner", "solver")), "3 to 6"),
    (dict(roles=("planner",) + ("solver",) * 6), "3 to 6"),
    (dict(roles=("planner", "solver", "wizard")), "unknown role"),
    (dict(roles=("planner", "checker", "free_rider")), "at least one solver"),
    (dict(roles=("solver", "planner", "checker")), "must act first"),
    (dict(roles=("planner", "planner", "solver")), "at most one planner"),
    (dict(roles=("solver", "checker", "checker")), "at most one checker"),
    (dict(n_types=5), "n_types"),
    (dict(n_types=0), "n_types"),
    (dict(p_plan=1.5), "p_plan"),
    (dict(sabotage=-0.1), "sabotage"),
    (dict(reward="selfish"), "reward"),
    (dict(reward_profile={"wizard": (1, 0)}), "reward_profile"),
    (dict(reward_profile={"solver": (1,)}), "reward_profile"),
])
def test_bad_configurations_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TeamTask(**kwargs)


def test_roles_must_be_a_sequence_and_presets_are_checked():
    with pytest.raises(TypeError, match="roles"):
        TeamTask("planner")
    with pytest.raises(ValueError, match="name"):
        TeamTask.preset("anarchy")
    env = TeamTask.preset("sabotage", sabotage=0.25)
    assert env.roles == PRESETS["sabotage"]["roles"] and env.sabotage == 0.25


def test_policies_are_checked():
    env = TeamTask()
    pols = env.make_policies()
    with pytest.raises(ValueError, match="policies"):
        env.sample(pols[:-1], 2)
    with pytest.raises(ValueError, match=r"policies\[1\]"):
        env.sample([pols[0], pols[0]] + pols[2:], 2)
    with pytest.raises(TypeError, match="policies"):
        env.truth(pols[0])


# --------------------------------------------------------------------------- sampling
def test_sample_layout_rewards_and_seeding():
    env = TeamTask()
    pols = env.make_policies(init_std=1.0, seed=3)
    ro = env.sample(pols, 5, group_size=4, seed=7)
    n = env.n_agents
    assert ro.tokens.shape == (20, n) and bool(ro.mask.all())
    assert torch.equal(ro.agent_ids[0], torch.arange(n)) and torch.equal(ro.step_ids[3], torch.arange(n))
    assert torch.equal(ro.group_ids, torch.arange(5).repeat_interleave(4))
    assert ro.info["n_agents"] == n and ro.info["roles"] == env.roles
    # every agent's own reward is the team reward in "shared" mode
    per_agent, present = ro.view(ro.rewards, "agent", "sum")
    assert bool(present.all()) and torch.equal(per_agent, ro.truth["team_reward"][:, None].expand(-1, n))
    # log-probs are those of the acting policies, at the observation each agent saw
    for i, pol in enumerate(pols):
        assert torch.allclose(ro.logprobs[:, i], pol.log_prob(ro.states[:, i], ro.tokens[:, i]).detach())
    # the task type is shared by a group; solvers see the plan
    assert bool((ro.truth["task_type"].view(5, 4) == ro.truth["task_type"].view(5, 4)[:, :1]).all())
    assert torch.equal(ro.states[:, 1], ro.tokens[:, 0] + 1)
    # seeded
    again = env.sample(pols, 5, group_size=4, seed=7)
    assert torch.equal(again.tokens, ro.tokens) and torch.equal(again.truth["success"], ro.truth["success"])
    other = env.sample(pols, 5, group_size=4, seed=8)
    assert not torch.equal(other.tokens, ro.tokens)
    assert ro.text[0][0].startswith("planner: plan ") and "draft" in ro.text[0][1]
    assert "team reward" in env.transcript(ro, 0)
    with pytest.raises(ValueError, match="task_types"):
        env.sample(pols, 2, task_types=[0, 2])


def test_heterogeneous_rewards_follow_the_role_profile():
    env = TeamTask(reward="heterogeneous")
    ro = env.sample(env.make_policies(), 64, group_size=4, seed=0)
    team, proc = ro.truth["team_reward"], ro.truth["process"]
    for i, role in enumerate(env.roles):
        scale, offset = env.reward_profile[role]
        assert torch.allclose(ro.rewards[:, i], offset + scale * (team + proc[:, i]) / 2)
    # planner's process score is "plan names the type"; a solver's is its own draft
    assert torch.equal(proc[:, 0], (ro.tokens[:, 0] == ro.truth["task_type"]).double())
    assert torch.equal(proc[:, 1], ro.truth["draft_correct"][:, 1].double())
    solver_r, planner_r = ro.rewards[:, 1], ro.rewards[:, 0]
    assert float(solver_r.min()) >= 5 and float(planner_r.max()) <= 1   # different scales and offsets


def test_sampling_512_episodes_is_seeded():
    # speed: benchmarks/core_speed.py times this batch
    env = TeamTask()
    pols = env.make_policies()
    a, b = env.sample(pols, 64, group_size=8, seed=3), env.sample(pols, 64, group_size=8, seed=3)
    assert len(a) == 512 and torch.equal(a.tokens, b.tokens) and torch.equal(a.scores, b.scores)


# --------------------------------------------------------------------------- exact values
def test_coalition_values_match_monte_carlo_for_every_coalition():
    env = TeamTask(p_plan=0.8, p_alone=0.3, unchecked_pass=0.6, sabotage=0.7, catch=0.6)
    ro = env.sample(env.scripted_policies(1.0), 6, group_size=1, seed=2)
    v = env.coalition_values(ro)
    assert torch.allclose(v, ro.truth["coalition_values"])
    assert bool((v[:, 0] == 0).all())
    reps = 4000
    task = ro.truth["task_type"].repeat_interleave(reps)
    actions = ro.tokens.repeat_interleave(reps, 0)
    masks = env.coalition_masks()
    worst = 0.0
    for c in range(env.n_coalitions):
        hits = env.play(task, actions, present=masks[c], seed=c).double().view(-1, reps).mean(1)
        worst = max(worst, float((hits - v[:, c]).abs().max()))
    assert worst < 0.035, worst   # 4000 draws: standard error <= 0.008


def test_full_team_value_is_the_success_rate_given_the_actions():
    env = TeamTask()
    ro = env.sample(env.scripted_policies(1.5), 4000, group_size=1, seed=0)
    vN, success = ro.truth["coalition_values"][:, -1], ro.truth["success"].double()
    for level in torch.unique(vN):
        sel = vN == level
        if int(sel.sum()) >= 300:
            assert abs(float(success[sel].mean()) - float(level)) < 0.08


def test_global_states_name_what_every_agent_saw_and_did_and_the_outcome():
    env = TeamTask()
    ro = env.sample(env.scripted_policies(2.0), 4, group_size=2, seed=0)
    states = env.global_states(ro)
    assert len(states) == 8
    for b, st in enumerate(states):
        assert st["task"] == env.types[int(ro.truth["task_type"][b])]
        assert st["roles"] == dict(zip(env.agent_names, env.roles))
        assert st["observations"]["planner"] == f"task {st['task']}"
        assert st["actions"] == {n: env.action_names[i][int(ro.tokens[b, i])] for i, n in enumerate(env.agent_names)}
        assert st["team_reward"] == float(ro.truth["team_reward"][b])
        # the transcript says the same thing
        assert all(st["actions"][n] in ro.text[b][i] for i, n in enumerate(env.agent_names))
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        env.global_states(None)


def test_policy_values_J_and_gradient_are_exact():
    env = TeamTask()
    pols = env.make_policies(init_std=0.7, seed=1)
    tr = env.truth(pols)
    ro = env.sample(pols, 20000, group_size=1, seed=5)
    # per-policy values are the expectation of the per-trajectory ones
    assert float((tr.values - ro.truth["coalition_values"].mean(0)).abs().max()) < 0.01
    assert abs(float(ro.truth["team_reward"].mean()) - tr.J) < 0.015
    assert abs(tr.values[-1] - tr.J) < 1e-12 and float(tr.values[0]) == 0.0
    # gradient: central finite differences on a few logits
    eps = 1e-5
    for i, (s, a) in [(0, (1, 0)), (3, (0, 1)), (5, (0, 0)), (1, (2, 1))]:
        with torch.no_grad():
            pols[i].logits[s, a] += eps
        up = env.truth(pols).J
        with torch.no_grad():
            pols[i].logits[s, a] -= 2 * eps
        down = env.truth(pols).J
        with torch.no_grad():
            pols[i].logits[s, a] += eps
        assert abs((up - down) / (2 * eps) - float(tr.grads[i][s, a])) < 1e-7
    # the free rider's action never matters: zero gradient
    assert float(tr.grads[4].abs().max()) < 1e-12


def test_play_checks_its_inputs():
    env = TeamTask()
    with pytest.raises(ValueError, match="actions"):
        env.play([0], [[0, 0, 0, 0, 0, 5]])
    with pytest.raises(ValueError, match="task_type"):
        env.play([3], [[0, 0, 0, 0, 0, 0]])
    with pytest.raises(ValueError, match="present"):
        env.play([0], [[0, 0, 0, 0, 0, 0]], present=[True, False])


# --------------------------------------------------------------------------- presets: the designed games
def preset_credit(name, **kw):
    env = TeamTask.preset(name, **kw)
    values = env.truth(env.scripted_policies(12.0)).values
    return values, exact_shapley(values), leave_one_out_values(values)


def test_redundant_solvers_get_no_leave_one_out_credit_but_share_shapley():
    v, phi, loo = preset_credit("redundancy")        # the glove game: planner + either solver
    assert torch.allclose(phi, torch.tensor([2 / 3, 1 / 6, 1 / 6], dtype=torch.float64), atol=1e-3)
    assert torch.allclose(loo, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), atol=1e-3)


def test_complementary_agents_each_get_the_whole_value_under_leave_one_out():
    v, phi, loo = preset_credit("complementarity")
    assert torch.allclose(phi, torch.full((3,), float(v[-1]) / 3, dtype=torch.float64), atol=1e-9)
    assert float(loo.sum()) > 2.9 * float(v[-1]) and float(v[-1]) > 0.99


def test_free_rider_gets_zero_and_saboteur_negative_credit():
    v, phi, loo = preset_credit("free_riding")
    assert abs(float(phi[2])) < 1e-12 and abs(float(loo[2])) < 1e-12
    v, phi, loo = preset_credit("sabotage", sabotage=0.5)
    assert float(phi[2]) < -0.16 and float(loo[2]) < -0.49
    assert torch.allclose(phi.sum(), v[-1] - v[0])           # efficiency still holds
    v, phi, loo = preset_credit("mixed")
    assert abs(float(phi[4])) < 1e-12 and float(phi[5]) < 0 and float(loo[5]) < 0


def test_a_cooperating_saboteur_and_absent_threat_are_harmless():
    env = TeamTask.preset("sabotage", sabotage=1.0)
    values = env.truth(env.scripted_policies(12.0, saboteur=-12.0)).values
    assert abs(float(exact_shapley(values)[2])) < 1e-4


# --------------------------------------------------------------------------- learner
def test_team_learner_trains_and_records_per_agent_gradient_norms():
    env = TeamTask()
    learner = TeamLearner(env, env.make_policies(), n_tasks=8, group_size=8)
    ro = learner.collect(1, seed=0)
    lp = learner.logprobs(ro, torch.arange(4))
    assert lp.shape == (4, env.n_agents) and lp.requires_grad
    assert torch.allclose(lp.detach(), ro.logprobs[:4])
    J0 = learner.evaluate()
    curve = train(learner, "grpo", iterations=15, kind="reinforce", optimizer="sgd", lr=2.0, progress=False,
                  max_grad_norm=None)
    assert curve.success.iloc[-1] > J0 + 0.05, (J0, curve.success.iloc[-1])
    log = learner.grad_log()
    assert len(log) == 15 * env.n_agents and set(log.agent) == set(env.agent_names)
    assert float(log[log.role == "free_rider"].grad_norm.max()) > 0   # GRPO credit reaches it too


# --------------------------------------------------------------------------- bad input names the argument
def test_teamtask_arguments(team):
    t, pols, rt = team
    with pytest.raises(TypeError, match=r"^reward_profile: expected a dict"):
        TeamTask(reward_profile="x")
    with pytest.raises(TypeError, match=r"^overrides: unknown TeamTask argument\(s\) \['colour'\]"):
        TeamTask.preset("mixed", colour=1)
    assert TeamTask.preset("mixed", n_types=3).n_types == 3
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        t.coalition_values(None)
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        t.transcript(None, 0)
    for bad, exc in ((-1, ValueError), (99, ValueError), ("x", TypeError)):
        with pytest.raises(exc, match=r"^task_type: "):
            t.prompt(bad)
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        t.make_policies(seed="x")
    assert "type" in t.prompt(1, 3)


def test_missing_policies_are_refused_by_name():
    env = TeamTask()
    with pytest.raises(TypeError, match=r"^policies\[0\]: expected a policy with probs\(\)"):
        env.sample([None] * env.n_agents, 1)
    with pytest.raises(TypeError, match="^policies: expected a list"):
        env.truth(None)
    with pytest.raises(TypeError, match="^env: expected a TeamTask, got None"):
        TeamLearner(None, env.make_policies())
