"""ToolWorld's common random numbers (labkit.envs.toolworld.replay): the uniforms draw the tools'
answers with the kernel's probabilities, a recorded episode's recovered uniforms replay it exactly,
replays that share uniforms share the luck, and bad arguments raise named errors.
"""

import pytest
import torch

from labkit.core.stats import discounted_returns
from labkit.core.turns import turn_hidden_states, turn_rewards, turn_table
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.replay import N_UNIFORMS, error_rate, prior_noise, tool_answer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def world(**kw):
    return ToolWorld(4, max_turns=12, **{"mislead": 0.3, "noise": 0.2, "flaky": 0.15, **kw})


def record(env, policy, n_tasks=16, seed=0):
    ro = env.sample(policy, n_tasks, group_size=4, seed=seed)
    hs, present = turn_hidden_states(ro, ro.truth["hidden_states"], env.n_hidden, "the record")
    _, act, _ = turn_table(ro)
    return ro, hs, act, present


def test_tool_answers_follow_the_kernel():
    env = world()
    n = 200_000
    g = torch.Generator().manual_seed(0)
    for b in range(env.n_files):
        for f in (0, 1):
            for a in range(env.n_actions):
                if a == 3:   # submit: no answer
                    continue
                u = torch.rand(n, 2, generator=g, dtype=torch.float64)
                full = lambda x: torch.full((n,), x)  # noqa: E731
                ans = tool_answer(env, full(b), full(int(env.fixed_after[b, f, a])), full(a), u[:, 0], u[:, 1])
                freq = torch.bincount(ans, minlength=env.n_obs).double() / n
                assert float((freq - env.kernel[b, int(env.fixed_after[b, f, a]), a]).abs().max()) < 0.006, (b, f, a)
    rates = error_rate(env, torch.arange(env.n_actions))
    assert rates.tolist() == [0.0, 0.3, 0.15, 0.0] + [0.2] * 4 + [0.0] * 4


def test_recovered_uniforms_replay_every_episode_exactly():
    env = world()
    policy = env.scripted_policy(1.5)
    ro, hs, act, present = record(env, policy)
    noise = env.replay_noise(policy, hs, act, present, seed=5)
    assert noise.shape == (ro.batch_size, env.max_turns, N_UNIFORMS)
    assert bool(((noise > 0) & (noise < 1)).all())
    b, f, o = env.decode_hidden(torch.where(present, hs, 0))
    r, pr = turn_rewards(ro)
    G = discounted_returns(r.to(torch.float64), pr, 1.0)
    # from the start, the policy drawing every action: the recorded return, step for step
    B = ro.batch_size
    ret, steps = env.rollout_with_noise(policy, b[:, 0], f[:, 0], o[:, 0], torch.zeros(B, dtype=torch.long), noise)
    assert torch.equal(ret, ro.scores.to(torch.float64)) and steps == int(ro.mask.sum())
    # from every played turn with its recorded action: the realised return-to-go
    idx = present.nonzero()
    sel = tuple(idx.T)
    ret, _ = env.rollout_with_noise(policy, b[sel], f[sel], o[sel], idx[:, 1], noise[idx[:, 0]], first_action=act[sel])
    assert torch.equal(ret, G[sel])
    # another seed draws other uniforms for the same record, which replay it just as well
    other = env.replay_noise(policy, hs, act, present, seed=6)
    assert not torch.equal(other, noise)
    ret, _ = env.rollout_with_noise(policy, b[sel], f[sel], o[sel], idx[:, 1], other[idx[:, 0]], first_action=act[sel])
    assert torch.equal(ret, G[sel])


def test_recovered_uniforms_are_distributed_as_fresh_ones():
    """Averaged over episodes, the posterior of the error coin is the prior: uniform on [0, 1)."""
    env = world(mislead=0.5, noise=0.5, flaky=0.5)
    policy = env.scripted_policy(1.0)
    ro, hs, act, present = record(env, policy, n_tasks=256, seed=1)
    noise = env.replay_noise(policy, hs, act, present, seed=0)
    answered = present[:, :-1] & present[:, 1:]
    u = noise[:, :present.shape[1] - 1, 1][answered & (error_rate(env, act[:, :-1]) > 0)]
    assert u.numel() > 2000
    hist = torch.histc(u, bins=4, min=0, max=1) / u.numel()
    assert float((hist - 0.25).abs().max()) < 0.03


def test_the_uniforms_decide_the_episode():
    """A replay is a function of its uniforms: rows with the same state, first action and
    uniforms play the same episode; error coins above every rate make every answer truthful,
    so the noisy world then plays exactly as the noiseless one with the same policy draws."""
    env = world()
    policy = env.scripted_policy(1.5)
    g = torch.Generator().manual_seed(0)
    n = 64
    noise = prior_noise(env, n, generator=g)
    z = torch.zeros(n, dtype=torch.long)
    bug = torch.arange(n) % env.n_files
    twice = torch.cat([noise, noise])
    r, s = env.rollout_with_noise(policy, bug.repeat(2), z.repeat(2), z.repeat(2), z.repeat(2), twice)
    assert torch.equal(r[:n], r[n:])
    _, s_fresh = env.rollout_with_noise(policy, bug, z, z, z, prior_noise(env, n, generator=g))
    _, s_same = env.rollout_with_noise(policy, bug, z, z, z, noise)
    assert s_fresh != s_same                         # other uniforms, other episodes
    lucky = noise.clone()
    lucky[..., 1] = 1.0                              # no tool ever errs
    clean = world(mislead=0.0, noise=0.0, flaky=0.0)
    r1, s1 = env.rollout_with_noise(policy, bug, z, z, z, lucky)
    r0, s0 = clean.rollout_with_noise(policy, bug, z, z, z, noise)
    assert torch.equal(r1, r0) and s1 == s0


def test_bad_arguments_raise_named_errors():
    env = world()
    policy = env.scripted_policy(1.5)
    ro, hs, act, present = record(env, policy, n_tasks=2)
    z = torch.zeros(2, dtype=torch.long)
    u = torch.full((2, env.max_turns, N_UNIFORMS), 0.5, dtype=torch.float64)
    # a record from a world whose search never misleads cannot be explained by a noiseless one
    strict = world(mislead=0.0, noise=0.0, flaky=0.0)
    noisy = world(mislead=0.9)
    ro2, hs2, act2, present2 = record(noisy, noisy.scripted_policy(1.5), n_tasks=8)
    cases = [
        ("noise", lambda: env.rollout_with_noise(policy, z, z, z, z, u[:, :3])),
        ("noise", lambda: env.rollout_with_noise(policy, z, z, z, z, u + 1)),
        ("first_action", lambda: env.rollout_with_noise(policy, z, z, z, z, u, first_action=[99, 0])),
        ("bug", lambda: env.rollout_with_noise(policy, z + 9, z, z, z, u)),
        ("hidden", lambda: env.replay_noise(policy, hs, act[:, :-1], present)),
        ("hidden", lambda: strict.replay_noise(strict.scripted_policy(1.5), hs2, act2, present2)),
        ("policy", lambda: env.replay_noise(ToolWorld(3).make_policy(), hs, act, present)),
    ]
    for name, fn in cases:
        with pytest.raises(ValueError, match=f"^{name}"):
            fn()
