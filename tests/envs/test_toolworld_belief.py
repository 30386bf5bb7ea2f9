"""ToolWorld's values given the agent's information (labkit.envs.toolworld.belief): the belief is
Bayes' rule on what the agent saw (checked against sampled frequencies), the split A = A_info +
information luck holds, and the agent-side skill and luck add up to the return."""
import collections

import pytest
import torch

from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.belief import BeliefTruth, belief_truth


@pytest.fixture(scope="module")
def small():
    env = ToolWorld(3, max_turns=4, mislead=0.3, noise=0.2, flaky=0.2)
    policy = env.make_policy(init_std=0.5, seed=1)
    truth = env.truth(policy)
    rollouts = env.sample(policy, 4000, group_size=1, seed=0)
    return env, truth, rollouts, belief_truth(env, truth, rollouts)


def test_the_belief_matches_how_often_each_file_is_buggy_after_a_history(small):
    env, _, ro, bt = small
    counts, predicted = collections.defaultdict(lambda: torch.zeros(3, dtype=torch.float64)), {}
    for i in range(ro.batch_size):
        for t in range(2):
            if not ro.mask[i, t]:
                break
            key = (t, tuple(ro.states[i, :t + 1].tolist()), tuple(ro.tokens[i, :t].tolist()))
            counts[key][int(ro.truth["bug"][i])] += 1
            predicted[key] = bt.belief[i, t]
    checked = 0
    for key, c in counts.items():
        if c.sum() >= 200:   # histories seen often enough for frequencies to be within ~0.07
            assert torch.allclose(c / c.sum(), predicted[key], atol=0.08), key
            checked += 1
    assert checked >= 5
    # an informative history moves the belief off uniform: a hint points at its file
    informative = [(k, p) for k, p in predicted.items() if k[0] == 1 and k[2] == (1,)]
    assert informative and all(float(p.max()) > 0.5 for _, p in informative)
    assert torch.allclose(bt.belief[ro.mask].sum(-1), torch.ones(int(ro.mask.sum()), dtype=torch.float64))


def test_information_luck_has_mean_zero_and_the_agent_side_split_adds_up(small):
    env, truth, ro, bt = small
    m = ro.mask
    assert isinstance(bt, BeliefTruth)
    assert torch.equal(bt.hidden_advantage, truth.advantage(ro))
    il = bt.information_luck()
    assert abs(float(il[m].mean())) < 0.01 and float(il[m].abs().max()) > 0.05    # real, but zero on average
    # uncorrelated with what the agent could know
    assert abs(float(torch.corrcoef(torch.stack([il[m], bt.advantage[m]]))[0, 1])) < 0.05
    skill, luck = bt.skill_luck()
    returns = ro.rewards.sum(1)
    assert torch.allclose(bt.value[:, 0] + skill.sum(1) + luck.sum(1), returns, atol=1e-12)
    assert float(bt.value[:, 0].mean()) == pytest.approx(truth.J)   # no information yet: the prior's value


def test_with_one_candidate_left_the_belief_is_certain_and_the_advantages_agree():
    # noiseless tools: opening the buggy file says so, and the belief collapses on it
    env = ToolWorld(2, max_turns=3, mislead=0.0, noise=0.0, flaky=0.0)
    policy = env.scripted_policy(3.0)
    truth = env.truth(policy)
    ro = env.sample(policy, 64, group_size=4, seed=2)
    bt = belief_truth(env, truth, ro)
    after_hint = ro.mask[:, 1] & (ro.tokens[:, 0] == 1)        # searched first: a noiseless hint names the file
    assert bool(after_hint.any())
    b = ro.truth["bug"][after_hint]
    assert torch.allclose(bt.belief[after_hint, 1].gather(1, b[:, None]).squeeze(1),
                          torch.ones(len(b), dtype=torch.float64))
    assert torch.allclose(bt.information_luck()[after_hint, 1], torch.zeros(len(b), dtype=torch.float64), atol=1e-12)


def test_bad_arguments_are_named(small):
    env, truth, ro, _ = small
    other = ToolWorld(4, max_turns=4)
    for call, name in ((lambda: belief_truth(object(), truth, ro), "env"),
                       (lambda: belief_truth(env, "truth", ro), "truth"),
                       (lambda: belief_truth(other, other.truth(other.make_policy()), ro), "rollouts")):
        with pytest.raises((TypeError, ValueError)) as err:
            call()
        assert str(err.value).startswith(name)
