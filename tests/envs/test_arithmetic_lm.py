"""The tiny LM on the arithmetic task (labkit.envs.arithmetic.lm): graded rollouts and vines, the
log-probs of a rollout, and the tuned models built from the shipped one (small sizes: this runs on CI).
"""

import pytest
import torch

from labkit.credit import mc
from labkit.envs.arithmetic.lm import ArithmeticLM

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


# --------------------------------------------------------------------------- segment games (SCAR)
@pytest.fixture(scope="module")
def small(env):
    problems = env.task.sample_prompts(3, n_operands=(2, 3), split="held_out", seed=4)
    return env.rollouts(problems, n_per_prompt=2, seed=1)


@pytest.mark.parametrize("game", ["resample", "delete"])
def test_segment_games_pin_the_grand_coalition_and_ignore_absent_segments(env, small, game):
    values, cost = env.segment_coalition_values(small, 4, game=game, seed=0)
    M = int(small.n_steps.max())
    assert values.shape == (small.batch_size, 2 ** M)
    assert bool(((values >= 0) & (values <= 1)).all())
    assert torch.equal(values[:, -1], small.scores.double())  # all segments kept = the rollout itself
    assert cost.policy_forwards > 0 and cost.policy_tokens > 0
    for b in range(small.batch_size):
        m = int(small.n_steps[b])
        for mask in range(2 ** M):  # a bit beyond the row's own segments changes nothing
            assert values[b, mask] == values[b, mask & (2 ** m - 1)]


def test_greedy_games_agree_on_prefix_coalitions_and_differ_off_them(env, small):
    greedy = ArithmeticLM(env.model, env.tokenizer, env.task, temperature=0.0)
    res, _ = greedy.segment_coalition_values(small, 1, game="resample", seed=0)
    dele, _ = greedy.segment_coalition_values(small, 1, game="delete", seed=0)
    for b in range(small.batch_size):
        m = int(small.n_steps[b])
        for j in range(m + 1):  # keep segments 0..j-1: both games let the model write the rest
            prefix = 2 ** j - 1
            assert res[b, prefix] == dele[b, prefix]
    # keeping only the answer: graded as is when deleting (a bare "#n" is not a chain: 0)
    only_answer = torch.tensor([2 ** (int(m) - 1) for m in small.n_steps])
    rows = torch.arange(small.batch_size)
    multi = small.n_steps >= 2
    assert bool(multi.any()) and bool((dele[rows, only_answer][multi] == 0).all())


def test_segment_game_bad_inputs(env, small):
    with pytest.raises(ValueError, match="game"):
        env.segment_coalition_values(small, 2, game="shuffle")
    with pytest.raises(ValueError, match="k"):
        env.segment_coalition_values(small, 0)
    with pytest.raises(ValueError, match="rollouts"):
        env.segment_coalition_values(small.with_(info={}), 2)


def test_stop_ids_end_a_row_at_the_step_separator(env):
    from labkit.policies.sampling import sample
    prompts = [env.prompt_ids(p) for p in env.task.sample_prompts(4, n_operands=3, seed=2)]
    gen = sample(env.model, prompts, max_new_tokens=16, eos_id=env.tokens.eos, pad_id=env.pad_id, seed=0,
                 stop_ids=(env.tokens.step_sep,))
    for row in gen.completions():
        assert row[-1] in (env.tokens.step_sep, env.tokens.eos) or len(row) == 16
        assert env.tokens.step_sep not in row[:-1]
    with pytest.raises(TypeError, match="stop_ids"):
        sample(env.model, prompts, max_new_tokens=4, eos_id=2, pad_id=0, stop_ids=5)


def test_rollout_logprobs_reproduce_the_sampling_logprobs(lm_ref):
    env, ref = lm_ref
    lp = env.rollout_logprobs(ref)
    assert torch.allclose(lp, torch.where(ref.mask, ref.logprobs.double(), 0.0), atol=1e-4)


def test_tuned_weights_were_built_from_the_shipped_model():
    import hashlib
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    log = json.loads((root / "data" / "implicit_lm" / "train_log.json").read_text())
    base = hashlib.sha256((root / "data" / "tiny_lm" / "model.safetensors").read_bytes()).hexdigest()
    assert log["provenance"]["inputs"]["tiny_lm/model.safetensors"] == base, \
        "data/implicit_lm is stale: rerun scripts/train_implicit_lm.py"
    for name, digest in log["sha256"].items():
        assert hashlib.sha256((root / "data" / "implicit_lm" / name).read_bytes()).hexdigest() == digest


def test_the_shipped_tuned_copies_are_refused_once_the_tiny_model_changed(env, monkeypatch):
    from labkit.core import cache
    monkeypatch.setattr(cache, "file_sha256", lambda path: "0" * 64)
    with pytest.raises(ValueError, match=r"^path: .*stale.*python scripts/train_implicit_lm\.py"):
        env.tuned("dpo")
    with pytest.raises(ValueError, match="^name"):
        env.tuned("sft")


def test_credit_inputs_grade_greedy_answers_and_measure_next_token_concentration(env, batch):
    inputs, costs = env.credit_inputs(batch)
    parts = inputs["reward_parts"]
    assert parts.shape == (batch.batch_size, len(env.REWARD_PARTS))
    # the outcome reward is "answer right and well formed"
    assert torch.equal(parts[:, 0] * parts[:, 1], batch.scores.double())
    assert ((parts[:, 2] >= 0) & (parts[:, 2] <= 1)).all()
    # one greedy answer per prompt: rows of the same prompt share it, and it is reproducible
    greedy = inputs["greedy_scores"]
    for g in batch.group_ids.unique():
        assert greedy[batch.group_ids == g].unique().numel() == 1
    assert torch.equal(env.greedy_scores(batch)[0], greedy)
    assert costs["greedy_scores"].policy_forwards == batch.group_ids.unique().numel()
    s2 = inputs["sum_pi_squared"]
    p = env.rollout_logprobs(batch).exp()
    m = batch.mask
    # sum_v pi(v)^2 lies between the sampled token's pi^2 and 1
    assert (s2[m] <= 1 + 1e-6).all() and (s2[m] >= p[m] ** 2 - 1e-6).all() and (s2[~m] == 0).all()


def test_a_file_without_problems_is_graded_from_its_prompt_text(env, batch):
    from labkit.envs.arithmetic import operands_of
    text_only = batch.with_(prompts=[p.prompt for p in batch.info["problems"]])
    text_only.info.pop("problems"), text_only.info.pop("prompt_ids")
    assert torch.equal(env.reward_parts(text_only), env.reward_parts(batch))
    assert operands_of("23+48+19=") == (23, 48, 19)
    with pytest.raises(ValueError, match="^prompt:"):
        operands_of("23+48")
