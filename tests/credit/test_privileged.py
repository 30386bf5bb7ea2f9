"""Privileged credit (labkit.credit.privileged): SWEET-RL's preferences and CriticSearch's turn term
from a stand-in judge.
"""

import torch

from labkit.credit import estimate
from labkit.envs import ToolWorld
from labkit.learn.critics import BTCritic
from labkit.learn.judges import stand_in_judge


def test_sweet_rl_preferences_and_degenerate_critic(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
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


def test_stand_in_judge_sign_agreement(noisy_toolworld):
    env, policy, truth, ro = noisy_toolworld
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
