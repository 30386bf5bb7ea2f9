"""POAD (arXiv:2405.15821): backups that discount between actions only, ToolWorld written as
tokens, the exact token advantage, and notebook 05's scoring of it."""
import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns
from labkit.core.turns import action_discounts
from labkit.course import nb05_why_agents_harder as lesson
from labkit.credit import get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.tokens import (exact_token_advantage, exact_token_values, n_token_states, token_luck,
                                          token_vocab, tokenize)
from labkit.learn.critics import TabularCritic


def _three_tokens():
    # one trajectory: action 0 = two tokens (turn 0), action 1 = one token (turn 1) with reward 1
    return Rollouts(tokens=torch.tensor([[5, 7, 2]]), mask=torch.ones(1, 3, dtype=torch.bool),
                    rewards=torch.tensor([[0.0, 0.5, 1.0]], dtype=torch.float64),
                    turn_ids=torch.tensor([[0, 0, 1]]))


def test_action_discounts_hand_case():
    ro = _three_tokens()
    assert action_discounts(ro, 0.9).tolist() == [[1.0, 0.9, 0.9]]
    padded = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long), mask=torch.tensor([[True, True, False, False]]),
                      rewards=torch.zeros(1, 4), turn_ids=torch.tensor([[0, 0, -1, -1]]))
    assert action_discounts(padded, 0.5).tolist() == [[1.0, 0.5, 0.0, 0.0]]
    with pytest.raises(ValueError, match="gamma"):
        action_discounts(ro, 1.5)


def test_discounted_returns_per_position_discounts():
    r = torch.tensor([[0.0, 0.5, 1.0]], dtype=torch.float64)
    m = torch.ones(1, 3, dtype=torch.bool)
    d = torch.tensor([[1.0, 0.9, 0.9]], dtype=torch.float64)
    # G2 = 1; G1 = 0.5 + 0.9 * 1 = 1.4; G0 = 0 + 1.0 * 1.4
    assert torch.allclose(discounted_returns(r, m, d), torch.tensor([[1.4, 1.4, 1.0]], dtype=torch.float64))
    assert torch.equal(discounted_returns(r, m, 0.9), discounted_returns(r, m, torch.full_like(r, 0.9)))
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns(r, m, torch.ones(1, 2))


def test_poad_hand_computed():
    ro = _three_tokens()
    v = torch.tensor([[0.2, 0.6, 0.8]], dtype=torch.float64)
    g, lam = 0.9, 0.5
    # deltas: t0 inside the action: 0 + 1 * 0.6 - 0.2 = 0.4; t1 ends it: 0.5 + 0.9 * 0.8 - 0.6 = 0.62;
    # t2 last: 1 - 0.8 = 0.2. A2 = 0.2; A1 = 0.62 + 0.9 * 0.5 * 0.2 = 0.71; A0 = 0.4 + 1 * 0.5 * 0.71
    c = get_estimator("poad")(ro, values=v, gamma=g, lam=lam)
    assert torch.allclose(c.token, torch.tensor([[0.755, 0.71, 0.2]], dtype=torch.float64))
    assert torch.allclose(c.info["returns"], c.token + v)
    # token-level GAE discounts inside the action too: A0 = (0.9 * 0.6 - 0.2) + 0.45 * 0.71
    gae = get_estimator("gae")(ro, values=v, gamma=g, lam=lam).token
    assert math.isclose(float(gae[0, 0]), 0.34 + 0.45 * 0.71)
    assert torch.allclose(gae[0, 1:], c.token[0, 1:])


def test_poad_equals_gae_when_every_action_is_one_token():
    env = ToolWorld(3, max_turns=8)
    ro = env.sample(env.scripted_policy(2.0), 4, group_size=4, seed=1)
    v = torch.rand(ro.batch_size, ro.horizon, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for lam in (0.0, 0.7, 1.0):
        a = get_estimator("poad")(ro, values=v, gamma=0.8, lam=lam).token
        b = get_estimator("gae")(ro, values=v, gamma=0.8, lam=lam).token
        assert torch.allclose(a, b)


def test_poad_degenerate_and_bad_input():
    one = Rollouts(tokens=torch.tensor([[1, 0]]), mask=torch.tensor([[True, False]]),
                   rewards=torch.tensor([[1.0, 0.0]]))
    c = get_estimator("poad")(one, values=torch.tensor([[0.25, 0.0]]), gamma=0.5)
    assert c.token.tolist() == [[0.75, 0.0]]
    empty_row = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.tensor([[True, True], [False, False]]),
                         rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    c = get_estimator("poad")(empty_row, values=torch.zeros(2, 2))
    assert c.token[1].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="gamma"):
        get_estimator("poad")(one, values=torch.zeros(1, 2), gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        get_estimator("poad")(one, values=torch.zeros(1, 2), lam=-0.1)
    with pytest.raises(ValueError, match="values"):
        get_estimator("poad")(one, values=torch.zeros(1, 3))
    calls = []
    c = get_estimator("poad")(one, values=lambda r: calls.append(1) or torch.zeros(1, 2))
    assert calls == [1] and c.cost.aux_calls == 1


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


@pytest.mark.parametrize("fmt", [0, 3])
def test_tokenize_and_exact_token_truth(fmt):
    env = ToolWorld(4, max_turns=12, mislead=0.2, noise=0.2, flaky=0.2)
    pol = env.scripted_policy(2.0)
    ro = env.sample(pol, 4, group_size=4, seed=2)
    tok = tokenize(env, ro, pol, format_tokens=fmt)
    calls = ((ro.tokens >= 4) & ro.mask).sum(1)
    assert tok.mask.sum(1).tolist() == (ro.mask.sum(1) + (1 + fmt) * calls).tolist()
    # factorised log-probs sum to the action's log-prob, rewards are kept per turn
    lp_turn = tok.view(tok.logprobs.to(torch.float64), "turn", "sum")[0]
    assert torch.allclose(lp_turn, torch.where(ro.mask, ro.logprobs.to(torch.float64), 0.0)[:, :lp_turn.shape[1]], atol=1e-5)
    assert torch.allclose(tok.scores.to(torch.float64), ro.scores.to(torch.float64))
    for gamma in (1.0, 0.9):
        truth = env.truth(pol, gamma=gamma)
        ex = exact_token_advantage(env, truth, tok)
        per_turn = tok.view(ex, "turn", "sum")[0]
        assert torch.allclose(per_turn, truth.advantage(ro)[:, :per_turn.shape[1]], atol=1e-12)
        fmt_tok = tok.mask & (tok.tokens == len(token_vocab(env)) - 1)
        assert int(fmt_tok.sum()) == fmt * int(calls.sum())
        if fmt:
            assert float(ex[fmt_tok].abs().max()) < 1e-12
        # with the exact token values and lam = 0, POAD's credit is exact on every token but an
        # action's last one (which carries the tool's luck); a turn's tokens sum to the turn's TD error
        v = exact_token_values(env, truth, tok)
        c = get_estimator("poad")(tok, values=v, gamma=gamma, lam=0.0).token
        last = tok.mask & (token_luck(env, truth, tok) != 0)
        inner = tok.mask & torch.cat([tok.turn_ids[:, 1:] == tok.turn_ids[:, :-1],
                                      torch.zeros(tok.batch_size, 1, dtype=torch.bool)], 1)
        assert torch.allclose(c[inner], ex[inner], atol=1e-12)
        assert torch.allclose((c - ex)[last], token_luck(env, truth, tok)[last], atol=1e-12)


def test_tokenize_bad_input():
    env = ToolWorld(3, max_turns=6)
    pol = env.make_policy()
    ro = env.sample(pol, 2, group_size=2, seed=0)
    with pytest.raises(ValueError, match="format_tokens"):
        tokenize(env, ro, pol, format_tokens=-1)
    with pytest.raises(ValueError, match="policy"):
        tokenize(env, ro, ToolWorld(4, max_turns=6).make_policy())
    with pytest.raises(ValueError, match="env"):
        tokenize(object(), ro, pol)
    with pytest.raises(ValueError, match="tokens"):
        exact_token_advantage(env, env.truth(pol), ro)
    tok = tokenize(env, ro, pol)
    with pytest.raises(ValueError, match="targets"):
        TabularCritic(n_token_states(env)).fit(tok, targets=torch.zeros(1, 1))


def test_token_credit_lesson():
    env = lesson.noisy_world(noise=0.2, max_turns=12)
    res = lesson.token_credit(env, env.scripted_policy(3.0), gamma=0.9, format_tokens=4, n_tasks=4, group_size=4)
    st = res["stats"].set_index("method")
    assert list(st.index) == ["exact", "POAD", "token-level GAE", "turn-level GAE", "POAD, exact V",
                              "token-level GAE, exact V"]
    # the backups alone: POAD is exact on verbs and formatting tokens, unbiased per call;
    # discounting inside the call makes token-level GAE pay every call less than it is worth
    assert st.loc["POAD, exact V", "corr_verbs"] == pytest.approx(1.0)
    assert st.loc["POAD, exact V", "format_credit"] == pytest.approx(0.0, abs=1e-12)
    # a call's summed POAD credit is its exact advantage plus the tool's luck (mean ~0), while
    # token-level GAE loses (1 - gamma) V on each of the call's 5 inner tokens
    assert abs(st.loc["POAD, exact V", "call_bias"]) < 0.02
    assert st.loc["token-level GAE, exact V", "call_bias"] < st.loc["POAD, exact V", "call_bias"] - 0.05
    assert st.loc["token-level GAE, exact V", "format_credit"] < 0
    assert res["n_calls"] > 0 and len(lesson.token_labels(res["tokens"])) == 16
    with pytest.raises(ValueError, match="format_tokens"):
        lesson.call_length_sweep(env, env.scripted_policy(3.0), format_tokens=())
