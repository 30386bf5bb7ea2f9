"""labkit's per-token credit inside a real TRL GRPOTrainer run (the tiny LM, CPU, two steps).

Runs in TRL's side environment (``scripts/run_trl.py``); skipped where TRL is not installed. The
parts that need no TRL (building the Rollouts, refusing estimators) run everywhere.
"""
from __future__ import annotations

import tempfile

import pytest
import torch

from labkit.bridges.trl import check_bridgeable, rollouts_from_trl
from labkit.credit import estimate

GENERATIONS, PER_STEP, STEPS = 4, 8, 2


def test_rollouts_from_trl_puts_the_reward_on_the_last_token_and_groups_by_num_generations():
    ids = torch.tensor([[5, 6, 7], [5, 8, 0], [9, 0, 0], [4, 4, 4]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
    ro = rollouts_from_trl(ids, mask, torch.tensor([1.0, 0.5, float("nan"), 2.0]), num_generations=2)
    assert ro.rewards.tolist() == [[0, 0, 1.0], [0, 0.5, 0], [0, 0, 0], [2.0, 0, 0]]
    assert ro.group_ids.tolist() == [0, 0, 1, 1]
    assert ro.mask[3].tolist() == [True, False, False]  # an all-masked row keeps its reward at position 0


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="^estimator:"):
        check_bridgeable("no_such_estimator")
    with pytest.raises(ValueError, match="^estimator:.*anchor_keys"):
        check_bridgeable("gigpo")
    with pytest.raises(ValueError, match="^num_generations:"):
        rollouts_from_trl(torch.zeros(3, 2, dtype=torch.long), torch.ones(3, 2), torch.zeros(3), 2)


def _train(estimator: str, **estimator_kwargs):
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig

    from labkit.bridges.trl import labkit_grpo_trainer
    from labkit.envs.arithmetic import ArithmeticTask, verify
    from labkit.policies.lm import load_lm

    torch.manual_seed(0)
    torch.set_num_threads(1)
    problems = ArithmeticTask(seed=0).sample_prompts(4, n_operands=(2, 3), seed=0, unique=True)
    by_prompt = {p.prompt: p for p in problems}

    def correct_reward(prompts, completions, **kwargs):
        return [verify(by_prompt[p], c).reward for p, c in zip(prompts, completions)]

    def length_reward(prompts, completions, **kwargs):
        # varies inside a group even where every completion is right or every one wrong
        return [-0.01 * len(c) for c in completions]

    model, tokenizer = load_lm()
    before = [p.detach().clone() for p in model.parameters()]
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        # temperature 2: completions differ, so groups have spread and share only short prefixes
        config = GRPOConfig(output_dir=tmp, per_device_train_batch_size=PER_STEP, num_generations=GENERATIONS,
                            max_steps=STEPS, max_completion_length=24, temperature=2.0, learning_rate=5e-4,
                            logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, seed=0,
                            data_seed=0, bf16=False, disable_tqdm=True)
        trainer = labkit_grpo_trainer(estimator=estimator, estimator_kwargs=estimator_kwargs or None, model=model,
                                      processing_class=tokenizer, reward_funcs=[correct_reward, length_reward],
                                      args=config, train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in problems]}))
        generate = trainer._generate_and_score_completions

        def record(inputs):
            out = generate(inputs)
            seen.append((dict(trainer.labkit_last), out["advantages"].detach().clone()))
            return out

        trainer._generate_and_score_completions = record
        trainer.train()
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
    return trainer, seen, moved


@pytest.fixture(scope="module")
def grpo_run():
    return _train("grpo")


def test_training_runs_and_logs(grpo_run):
    trainer, seen, moved = grpo_run
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses)))
    assert trainer.state.global_step == STEPS and len(seen) == STEPS
    assert moved > 0  # the policy was updated
    for last, used in seen:
        assert used.shape == last["mask"].shape  # (B, T): what the loss used
        assert used.shape[0] == PER_STEP
        assert bool((used[~last["mask"]] == 0).all())


def test_labkit_grpo_equals_trls_advantages_broadcast_over_tokens(grpo_run):
    _, seen, _ = grpo_run
    for last, used in seen:
        trl_adv, mask = last["trl_advantages"].double(), last["mask"]
        assert float(trl_adv.abs().max()) > 0.1  # the groups have spread: a real comparison
        broadcast = trl_adv[:, None] * mask
        # labkit's grpo eps is 1e-6, TRL's 1e-4 (both: the unbiased std, eps outside the root),
        # so |A_labkit - A_trl| = |A_trl| * (1e-4 - 1e-6) / (std + 1e-6) at most about 1e-4 * |A| / std
        diff = (used.double() - broadcast).abs().max().item()
        assert diff < 1e-2
        # with TRL's eps the two agree to float32 rounding
        same_eps = estimate("grpo", last["rollouts"], eps=1e-4).token.double() * mask
        assert (same_eps - broadcast).abs().max().item() < 1e-5
        print(f"grpo: max |labkit - TRL| = {diff:.2e} (eps 1e-6 vs 1e-4), "
              f"{(same_eps - broadcast).abs().max().item():.2e} with eps=1e-4")


# reinforce_pp with gamma < 1: each token's discounted reward-to-go, whitened over the batch;
# tempo: GRPO plus a TD term at the tokens where a group's completions branch (the prefix tree of
# the real completion ids)
@pytest.mark.parametrize("estimator, options", [("reinforce_pp", {"gamma": 0.9}), ("tempo", {})])
def test_a_token_level_estimator_varies_within_a_completion_and_trains(estimator, options):
    trainer, seen, moved = _train(estimator, **options)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses))) and moved > 0
    spread = []
    for last, used in seen:
        mask = last["mask"]
        assert bool((used[~mask] == 0).all())
        spread += [float(row[m].max() - row[m].min()) for row, m in zip(used, mask) if m.sum() > 1]
        expected = estimate(estimator, last["rollouts"], **options).token * mask
        assert torch.allclose(used.double(), expected.double(), atol=1e-6)
    assert max(spread) > 0.05  # advantages differ across the tokens of a completion
    print(f"{estimator}: largest spread of advantages within one completion {max(spread):.3f}")


def test_gdpo_gets_each_reward_function_from_trls_batch_and_trains():
    trainer, seen, moved = _train("gdpo")
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses))) and moved > 0
    for last, used in seen:
        parts = last["options"]["reward_parts"]
        assert parts.shape == (PER_STEP, 2)   # correct_reward and length_reward, apart
        assert torch.allclose(parts.sum(1), last["rollouts"].scores.double())   # weights 1: they sum to the reward
        expected = estimate("gdpo", last["rollouts"], reward_parts=parts).token * last["mask"]
        assert torch.allclose(used.double(), expected.double(), atol=1e-6)
