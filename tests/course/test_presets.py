"""The worlds the lessons and the scripts share (labkit.course.presets): each set-up builds what its
docstring says, seeded."""
import math

import pytest
import torch

from labkit.course import presets


def test_p_correct_fixes_the_success_rate():
    env, policy, truth = presets.chain_setup(12, n_bifurcations=3, p_correct=0.8)
    assert truth.J == pytest.approx(0.8 ** 3)
    ro = env.sample(policy, 20000, seed=0)
    assert float(ro.scores.mean()) == pytest.approx(0.8 ** 3, abs=0.02)
    with pytest.raises(ValueError, match="p_correct"):
        presets.chain_setup(12, p_correct=1.0)


def test_noisy_world_sets_one_noise_level_on_every_tool():
    env = presets.noisy_world(0.3, 12, n_files=4)
    assert (env.mislead, env.noise, env.flaky, env.max_turns, env.n_files) == (0.3, 0.3, 0.3, 12, 4)
    with pytest.raises(ValueError, match="noise"):
        presets.noisy_world(1.5)


def test_echo_world_is_the_preset_with_overrides():
    env = presets.echo_world()
    assert (env.n_files, env.max_turns, env.wrong_submit, env.step_cost) == (6, 40, 3.0, 0.0)
    assert presets.echo_world(n_files=3, max_turns=8).n_files == 3


def test_toolworld_setup_is_seeded_and_makes_values_success_probabilities():
    env, uniform = presets.toolworld_setup(3, max_turns=8, warmup_iterations=0)
    assert env.step_cost == 0 and env.wrong_submit == 0 and env.success_reward == 1
    assert torch.allclose(uniform.entropy(), torch.full((env.n_obs,), math.log(env.n_actions), dtype=torch.float64))
    _, a = presets.toolworld_setup(3, max_turns=8, warmup_iterations=3, seed=5)
    _, b = presets.toolworld_setup(3, max_turns=8, warmup_iterations=3, seed=5)
    _, c = presets.toolworld_setup(3, max_turns=8, warmup_iterations=3, seed=6)
    assert torch.equal(a.logits, b.logits) and not torch.equal(a.logits, c.logits)
    assert float(a.entropy().detach().std()) > 0  # training broke the uniform policy's ties
    env2, _ = presets.toolworld_setup(3, max_turns=8, warmup_iterations=0, step_cost=0.1)
    assert env2.step_cost == 0.1
    with pytest.raises(ValueError, match="^warmup_iterations"):
        presets.toolworld_setup(3, warmup_iterations=-1)


def test_scripted_agent_setup_is_notebook_08s_world_and_agent():
    env, policy = presets.scripted_agent_setup()
    w = presets.NB08_WORLD
    assert (env.n_files, env.max_turns, env.mislead, env.noise, env.flaky) == (w.n_files, w.max_turns, 0.3, 0.3, 0.3)
    assert torch.equal(policy.logits, env.scripted_policy(presets.NB08_AGENT_STRENGTH).logits)
    with pytest.raises(ValueError, match="^noise"):
        presets.scripted_agent_setup(-0.1)
    with pytest.raises(ValueError, match="^strength"):
        presets.scripted_agent_setup(strength=float("nan"))
