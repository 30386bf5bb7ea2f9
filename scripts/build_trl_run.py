"""A real ``trl.GRPOTrainer`` run on the lab's tiny LM, kept as the files TRL writes.

Run inside TRL's side environment (``scripts/run_trl.py`` builds ``.venv-trl``); seconds on a CPU.
Eight arithmetic prompts (two to four operands), four generations each (up to 48 tokens), four
steps of sixteen completions (four prompts a step, so every prompt comes back at a second step),
two reward functions, completions logged every step. What it keeps in ``--out`` (default ``data/framework_runs/trl_grpo``):

* ``completions/completions_NNNNN.parquet``: TRL's own completions files, as TRL wrote them;
* ``logs.json``: ``trainer._logs`` after the last step (its deques and per-function dict as JSON
  lists), the in-memory shape a user hands to ``read_rollouts`` inside their own script;
* ``log_history.json``: ``trainer.state.log_history`` (TRL's metrics, e.g. its per-step
  ``frac_reward_zero_std``, which labkit's reading of the files is checked against);
* ``meta.json``: the versions and settings of the run.

Usage: .venv-trl/bin/python scripts/build_trl_run.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "framework_runs" / "trl_grpo"
N_PROMPTS, GENERATIONS, STEPS, PER_STEP = 8, 4, 4, 16
SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    import torch
    import transformers
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from labkit.envs.arithmetic import ArithmeticTask, verify
    from labkit.policies.lm import load_lm

    torch.set_num_threads(1)
    task = ArithmeticTask(seed=0)
    problems = task.sample_prompts(N_PROMPTS, n_operands=(2, 3, 4), seed=SEED, unique=True)
    by_prompt = {p.prompt: p for p in problems}
    data = Dataset.from_dict({"prompt": [p.prompt for p in problems]})

    def correct_reward(prompts, completions, **kwargs):
        """1 when the chain of thought ends in the right #answer (the task's outcome reward)."""
        return [verify(by_prompt[p], c).reward for p, c in zip(prompts, completions)]

    def format_reward(prompts, completions, **kwargs):
        """0.5 when the completion has the reference's shape (steps, then '#answer'), right or not."""
        return [0.5 * verify(by_prompt[p], c).well_formed for p, c in zip(prompts, completions)]

    model, tokenizer = load_lm()
    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(output_dir=tmp, per_device_train_batch_size=PER_STEP, num_generations=GENERATIONS,
                            max_steps=STEPS, max_completion_length=48, temperature=1.0, learning_rate=5e-4,
                            logging_steps=1, log_completions=True, report_to="none", save_strategy="no",
                            use_cpu=True, seed=SEED, data_seed=SEED, bf16=False, disable_tqdm=True)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[correct_reward, format_reward],
                              args=config, train_dataset=data)
        trainer.train()
        out = args.out
        shutil.rmtree(out / "completions", ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(Path(tmp) / "completions", out / "completions")
    logs = {k: ({n: list(v) for n, v in trainer._logs[k].items()} if isinstance(trainer._logs[k], dict)
                else list(trainer._logs[k])) for k in trainer._logs}
    (out / "logs.json").write_text(json.dumps(logs, indent=1) + "\n")
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1) + "\n")
    meta = {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "model": "data/tiny_lm", "prompts": N_PROMPTS, "num_generations": GENERATIONS, "max_steps": STEPS,
            "per_device_train_batch_size": PER_STEP, "reward_funcs": ["correct_reward", "format_reward"],
            "seed": SEED, "built_by": "scripts/build_trl_run.py"}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {out}: {sorted(p.name for p in (out / 'completions').iterdir())}")


if __name__ == "__main__":
    main()
