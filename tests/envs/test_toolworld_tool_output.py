"""ToolWorld episodes as one response with the tool's answers inside it
(labkit.envs.toolworld.tool_output): the layout, and the exact per-position truth."""
from __future__ import annotations

import pytest
import torch

from labkit.credit.tool_spans import run_under, tool_spans
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.tool_output import tool_output_truth, with_tool_output


@pytest.fixture(scope="module")
def world():
    env = ToolWorld(3, max_turns=12, noise=0.2)
    policy = env.scripted_policy(2.0)
    turns = env.sample(policy, 4, group_size=4, seed=3)
    return env, policy, turns


@pytest.mark.parametrize("answer_tokens", [1, 3, "words"])
def test_actions_keep_their_order_and_answers_sit_between_them(world, answer_tokens):
    env, _, turns = world
    resp = with_tool_output(env, turns, answer_tokens=answer_tokens)
    assert torch.equal(resp.tokens[resp.mask], turns.tokens[turns.mask])
    assert torch.equal(resp.rewards[resp.mask], turns.rewards[turns.mask])
    assert torch.equal(resp.turn_ids[resp.mask], turns.turn_ids[turns.mask])
    spans = tool_spans(resp)
    # every position off the mask before the row's end is a tool answer, one after every action but the last
    assert torch.equal(spans, ~resp.mask & (resp.tokens >= env.n_actions))
    after = turns.truth["observations_after"]
    for b in range(turns.batch_size):
        n = int(turns.mask[b].sum())
        answers = [int(o) for o in after[b, :n - 1]]
        words = [len(env.obs_names[o].split()) if answer_tokens == "words" else answer_tokens for o in answers]
        assert int(spans[b].sum()) == sum(words)
        assert resp.text[b][1].startswith("->") or n == 1


def test_one_answer_position_is_the_shipped_layout(world):
    env, _, turns = world
    resp = with_tool_output(env, turns)
    assert int((~resp.mask & (resp.tokens >= env.n_actions)).sum()) == int(turns.mask.sum()) - turns.batch_size


def test_the_exact_truth_is_the_turns_truth_on_the_generated_positions(world):
    env, policy, turns = world
    truth = env.truth(policy, gamma=0.9)
    resp = with_tool_output(env, turns, answer_tokens="words")
    exact = tool_output_truth(truth, turns, resp)
    m = resp.mask
    assert torch.equal(exact["advantage"][m], truth.advantage(turns)[turns.mask])
    assert torch.equal(exact["values"][m], truth.value(turns)[turns.mask])
    assert bool((exact["advantage"][~m] == 0).all())
    # with the exact values, TD(0) under carry is the advantage plus the tool's luck, and with
    # the value before the answer (through) it is the advantage itself
    luck = truth.skill_luck(turns)[1]
    td = run_under("carry", "td0", resp, values=exact["values"], gamma=0.9).token
    assert torch.allclose(td[m], (truth.advantage(turns) + luck)[turns.mask], atol=1e-12)
    td = run_under("through", "td0", resp, values=exact["values"], gamma=0.9).token
    assert torch.allclose(td[m], exact["advantage"][m], atol=1e-12)


def test_bad_arguments_are_named(world):
    env, policy, turns = world
    with pytest.raises(ValueError, match="^answer_tokens"):
        with_tool_output(env, turns, answer_tokens="letters")
    with pytest.raises(ValueError, match="^answer_tokens"):
        with_tool_output(env, turns, answer_tokens=0)
    with pytest.raises(ValueError, match="^turns"):
        with_tool_output(env, turns.with_(truth={}))
    with pytest.raises(ValueError, match="^truth"):
        tool_output_truth(env.truth(policy, gamma=0.0), turns, with_tool_output(env, turns))
