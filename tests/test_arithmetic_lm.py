"""The tiny LM on the arithmetic task: graded rollouts and vines (small sizes: this runs on CI)."""
import pytest
import torch

from labkit.credit import mc
from labkit.envs.arithmetic_lm import ArithmeticLM


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def env():
    torch.manual_seed(0)
    return ArithmeticLM.load()


@pytest.fixture(scope="module")
def batch(env):
    problems = env.task.sample_prompts(6, n_operands=(3, 4), split="held_out", seed=3)
    return env.rollouts(problems, n_per_prompt=4, seed=0)


def test_rollouts_are_graded_and_stepped(env, batch):
    assert batch.batch_size == 24 and batch.group_ids.tolist() == [i // 4 for i in range(24)]
    for b in range(batch.batch_size):
        text = "".join(t for t, m in zip(batch.text[b], batch.mask[b].tolist()) if m)
        verdict = batch.truth["verdicts"][b]
        assert batch.scores[b].item() == verdict.reward
        # the reward sits on the last generated token, steps end at ';'
        last = int(batch.lengths[b]) - 1
        assert batch.rewards[b, last].item() == verdict.reward
        n_sep = text.count(";")
        assert int(batch.n_steps[b]) == n_sep + 1
        assert batch.prompts[b].endswith("=")
    # the policy is imperfect: some rows are wrong, most are right
    assert 0 < float(batch.scores.mean()) < 1


def test_seeded_rollouts_are_reproducible(env):
    problems = env.task.sample_prompts(3, n_operands=4, split="held_out", seed=1)
    a = env.rollouts(problems, n_per_prompt=2, seed=5)
    b = env.rollouts(problems, n_per_prompt=2, seed=5)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.rewards, b.rewards)


def test_vines_restart_from_each_step_and_value_a_finished_answer(env, batch):
    prefixes, problems, present = env.step_prefixes(batch)
    assert len(prefixes) == int(present.sum())
    # the first prefix of every row is its prompt; later ones extend it with the row's own tokens
    first = batch.info["prompt_ids"][0]
    assert prefixes[0] == first and prefixes[1][:len(first)] == first
    credit = mc.vineppo(batch, value_fn=env.value_fn(seed=0), k=4)
    V = credit.info["step_values"]
    assert bool(((V >= 0) & (V <= 1)).all())
    assert credit.cost.policy_forwards == len(prefixes) * 4 and credit.cost.policy_tokens > 0
    # a prefix whose steps are all right on an easy problem is valued high by its vines
    vals, _ = env.prefix_values([env.prompt_ids(problems[0]) + env.tokenizer(
        problems[0].target, add_special_tokens=False)["input_ids"][:-3]], [problems[0]], 8, seed=1)
    assert float(vals[0]) >= 0.5  # only "#answer" is left to write


def test_bad_inputs(env, batch):
    with pytest.raises(ValueError, match="problems"):
        env.rollouts([])
    with pytest.raises(ValueError, match="n_per_prompt"):
        env.rollouts(env.task.sample_prompts(1, seed=0), n_per_prompt=0)
    with pytest.raises(ValueError, match="rollouts"):
        env.step_prefixes(batch.with_(info={}))
