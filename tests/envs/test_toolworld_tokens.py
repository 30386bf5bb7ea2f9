"""ToolWorld written as tokens (labkit.envs.toolworld.tokens) and the exact token advantage."""

import pytest
import torch

from labkit.credit import get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.tokens import (exact_token_advantage, exact_token_values, n_token_states,
                                          token_luck, token_vocab, tokenize)
from labkit.learn.critics import TabularCritic


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
