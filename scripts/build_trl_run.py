"""A real ``trl.GRPOTrainer`` run on the lab's tiny LM, kept as the files TRL writes; and small runs
made with other settings, whose advantages labkit's check of the framework's credit
(``labkit.diagnose.framework_credit``) must trace back to the setting that made them.

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

``--variant NAME`` runs two steps of the same set-up with one setting changed instead, into
``<out's parent>/trl_<NAME>`` (``--all``: the default run and every variant, one process):

* ``scale_none``: ``scale_rewards="none"`` (Dr. GRPO: no std scaling);
* ``scale_batch``: ``scale_rewards="batch"`` (the std of the whole generation batch);
* ``reward_weights``: ``reward_weights=[1.0, 0.5]`` (the files keep the unweighted columns),
  sampled at temperature 2 so that some completions are malformed and the format reward varies
  inside a group (at 1 it never does, and no weight on it could show);
* ``normalize_then_sum``: ``multi_objective_aggregation="normalize_then_sum"`` (each reward
  function normalised in its group, the weighted sum then whitened over the batch);
* ``duplicate_prompts``: the default settings on a dataset that holds one prompt twice, so one
  step's batch holds two of TRL's groups with the same prompt text (labkit's (step, prompt)
  group has eight rows where TRL's groups have four);
* ``rloo``: ``trl.RLOOTrainer`` (leave-one-out baseline, ``beta=0``: no KL term in the reward).
  RLOOTrainer logs its completions table to wandb/trackio only, never to a file, so this script
  writes that same table (built from ``trainer._logs`` at every logging step, the columns
  GRPOTrainer's files have) as ``completions_NNNNN.parquet``; ``meta.json`` says so.

Usage: .venv-trl/bin/python scripts/build_trl_run.py [--out DIR] [--variant NAME | --all]
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
#: The variants: the setting each changes (GRPOConfig / RLOOConfig keywords), and how many steps.
VARIANT_STEPS = 2
VARIANTS = {
    "scale_none": {"scale_rewards": "none"},
    "scale_batch": {"scale_rewards": "batch"},
    "reward_weights": {"reward_weights": [1.0, 0.5]},
    "normalize_then_sum": {"multi_objective_aggregation": "normalize_then_sum"},
    "duplicate_prompts": {},
    "rloo": {"beta": 0.0},
}
#: Sampling temperatures other than 1.0: at 1.0 the tiny LM's completions are all well formed, so
#: the format reward is the same inside every group and no weight on it could change an advantage.
TEMPERATURE = {"reward_weights": 2.0}
#: The variant whose dataset holds its first prompt twice (the other prompts once).
DUPLICATED = "duplicate_prompts"


def _jsonable_logs(logs) -> dict:
    return {k: ({n: list(v) for n, v in logs[k].items()} if isinstance(logs[k], dict) else list(logs[k]))
            for k in logs}


def run(out: Path, variant: str | None) -> None:
    """One training run, its files written into ``out``."""
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    from labkit.envs.arithmetic import ArithmeticTask, verify
    from labkit.policies.lm import load_lm

    torch.set_num_threads(1)
    task = ArithmeticTask(seed=0)
    problems = task.sample_prompts(N_PROMPTS, n_operands=(2, 3, 4), seed=SEED, unique=True)
    by_prompt = {p.prompt: p for p in problems}
    prompts = [p.prompt for p in problems]
    steps = STEPS if variant is None else VARIANT_STEPS
    if variant == DUPLICATED:
        # four dataset rows a step, all drawn every step: the first prompt twice, two others once
        prompts = [prompts[0], prompts[0], prompts[1], prompts[2]]
    data = Dataset.from_dict({"prompt": prompts})

    def correct_reward(prompts, completions, **kwargs):
        """1 when the chain of thought ends in the right #answer (the task's outcome reward)."""
        return [verify(by_prompt[p], c).reward for p, c in zip(prompts, completions)]

    def format_reward(prompts, completions, **kwargs):
        """0.5 when the completion has the reference's shape (steps, then '#answer'), right or not."""
        return [0.5 * verify(by_prompt[p], c).well_formed for p, c in zip(prompts, completions)]

    settings = dict(VARIANTS.get(variant, {}))
    rloo = variant == "rloo"
    model, tokenizer = load_lm()
    with tempfile.TemporaryDirectory() as tmp:
        Config, Trainer = (RLOOConfig, RLOOTrainer) if rloo else (GRPOConfig, GRPOTrainer)
        config = Config(output_dir=tmp, per_device_train_batch_size=PER_STEP, num_generations=GENERATIONS,
                        max_steps=steps, max_completion_length=48, temperature=TEMPERATURE.get(variant, 1.0),
                        learning_rate=5e-4,
                        logging_steps=1, log_completions=True, report_to="none", save_strategy="no",
                        use_cpu=True, seed=SEED, data_seed=SEED, bf16=False, disable_tqdm=True, **settings)
        trainer = Trainer(model=model, processing_class=tokenizer, reward_funcs=[correct_reward, format_reward],
                          args=config, train_dataset=data)
        if rloo:
            trainer.add_callback(_CompletionsTable(trainer, Path(tmp) / "completions", TrainerCallback))
        trainer.train()
        shutil.rmtree(out / "completions", ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(Path(tmp) / "completions", out / "completions")
    (out / "logs.json").write_text(json.dumps(_jsonable_logs(trainer._logs), indent=1) + "\n")
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1) + "\n")
    meta = {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "model": "data/tiny_lm", "prompts": N_PROMPTS, "num_generations": GENERATIONS, "max_steps": steps,
            "per_device_train_batch_size": PER_STEP, "reward_funcs": ["correct_reward", "format_reward"],
            "seed": SEED, "built_by": "scripts/build_trl_run.py"}
    if variant is not None:
        meta.update(variant=variant, trainer=Trainer.__name__, settings=settings,
                    temperature=TEMPERATURE.get(variant, 1.0), built_by=f"scripts/build_trl_run.py --variant {variant}")
    if variant == DUPLICATED:
        meta.update(prompts=len(set(prompts)), dataset_rows=len(prompts),
                    note="the dataset holds its first prompt twice; with four dataset rows and four prompts a "
                         "step, every step's batch holds two of TRL's groups (four rows each) with that prompt "
                         "text, which labkit's (step, prompt) grouping reads as one group of eight")
    if rloo:
        meta["note"] = ("RLOOTrainer writes no completions file (it logs its completions table to wandb/trackio "
                        "only); this script writes that same table, built from trainer._logs at every logging "
                        "step, as GRPOTrainer's completions_NNNNN.parquet. The advantages are RLOOTrainer's own.")
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {out}: {sorted(p.name for p in (out / 'completions').iterdir())}")


def _CompletionsTable(trainer, folder: Path, base):
    """A callback writing ``trainer._logs`` at every log as GRPOTrainer's completions file (the
    table RLOOTrainer builds for wandb/trackio, column for column)."""
    import pandas as pd

    class CompletionsTable(base):
        def on_log(self, args, state, control, logs=None, **kwargs):
            logs_ = trainer._logs
            if not logs_["prompt"]:
                return
            table = {"step": [state.global_step] * len(logs_["prompt"]), "prompt": list(logs_["prompt"]),
                     "completion": list(logs_["completion"]), **{k: list(v) for k, v in logs_["rewards"].items()},
                     **{k: list(v) for k, v in logs_["extra"].items()}, "advantage": list(logs_["advantages"])}
            folder.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(table).to_parquet(folder / f"completions_{state.global_step:05d}.parquet")

    return CompletionsTable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT,
                        help="the default run's folder; a variant goes beside it, into trl_<variant>")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--variant", choices=sorted(VARIANTS), help="run this variant only")
    which.add_argument("--all", action="store_true", help="the default run and every variant")
    args = parser.parse_args()
    if args.variant:
        run(args.out.parent / f"trl_{args.variant}", args.variant)
        return
    run(args.out, None)
    if args.all:
        for name in VARIANTS:
            run(args.out.parent / f"trl_{name}", name)


if __name__ == "__main__":
    main()
