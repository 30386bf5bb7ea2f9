"""verl's rollout dump and ``DataProto``, written by verl itself from the lab's tiny LM.

Run inside verl's side environment (``scripts/run_verl.py`` builds ``.venv-verl``); seconds on a
CPU. Two training steps of four arithmetic prompts with four sampled responses each (two prompts
come back at the second step), scored by the task's verifier. The batch of each step is a real
``verl.DataProto`` (prompts, responses, masks, token-level scores and rewards, ``uid``, the
ground truth under ``reward_model``), its GRPO advantages computed by verl's own
``compute_grpo_outcome_advantage``, and it is written by verl's own trainer method
(``RayPPOTrainer._log_rollout_data``, what ``trainer.rollout_data_dir`` switches on). In ``--out``
(default ``data/framework_runs/verl_dump``):

* ``<step>.jsonl``: the dump, as verl wrote it (the folder is the run's ``rollout_data_dir``);
* ``batches/step_<step>.pkl`` with ``--pickle`` only: the DataProto saved by its own
  ``save_to_disk`` (a pickle: not committed; the side environment's tests read it);
* ``meta.json``: the versions and settings.

Usage: .venv-verl/bin/python scripts/build_verl_dump.py [--out DIR] [--pickle]
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "framework_runs" / "verl_dump"
STEPS = {1: [0, 1, 2, 3], 2: [2, 3, 4, 5]}  # prompt indices drawn at each step
N, MAX_NEW, SEED = 4, 48, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--pickle", action="store_true", help="also save each step's DataProto (a pickle)")
    args = parser.parse_args()

    import numpy as np
    import torch
    import verl
    from verl import DataProto
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from labkit.envs.arithmetic import ArithmeticTask, verify
    from labkit.policies.lm import load_lm
    from labkit.policies.sampling import sample

    torch.set_num_threads(1)
    model, tok = load_lm()
    problems = ArithmeticTask(seed=0).sample_prompts(6, n_operands=(2, 3, 4), seed=SEED, unique=True)
    out = args.out
    for old in out.glob("*.jsonl"):
        old.unlink()
    shutil.rmtree(out / "batches", ignore_errors=True)
    trainer = RayPPOTrainer.__new__(RayPPOTrainer)  # only its dump writer is used: no workers, no Ray
    trainer.tokenizer = tok
    trainer._init_dump_executor()
    for step, picks in STEPS.items():
        chosen = [problems[i] for i in picks for _ in range(N)]  # verl repeats each prompt n times, interleaved
        prompt_ids = [tok.encode(p.prompt) for p in chosen]
        gen = sample(model, prompt_ids, max_new_tokens=MAX_NEW, temperature=1.0, eos_id=tok.eos_token_id,
                     pad_id=tok.pad_token_id, seed=SEED + step)
        B, T = gen.tokens.shape
        P = max(len(p) for p in prompt_ids)
        prompts = torch.full((B, P), tok.pad_token_id, dtype=torch.long)
        for b, p in enumerate(prompt_ids):  # verl left-pads prompts
            prompts[b, P - len(p):] = torch.tensor(p)
        mask = gen.mask.long()
        texts = [tok.decode(row, skip_special_tokens=True) for row in gen.completions()]
        verdicts = [verify(p, t) for p, t in zip(chosen, texts)]
        scores = torch.zeros(B, T)
        last = mask.sum(1) - 1
        scores[torch.arange(B), last] = torch.tensor([v.reward for v in verdicts])
        uid = np.array([f"prompt-{i}-step-{step}" for i in picks for _ in range(N)], dtype=object)
        advantages, returns = compute_grpo_outcome_advantage(scores, mask, uid)
        batch = DataProto.from_dict(
            tensors={"prompts": prompts, "responses": gen.tokens, "response_mask": mask,
                     "attention_mask": torch.cat([(prompts != tok.pad_token_id).long(), mask], 1),
                     "token_level_scores": scores, "token_level_rewards": scores.clone(),
                     "old_log_probs": gen.logprobs, "advantages": advantages, "returns": returns},
            non_tensors={"uid": uid, "data_source": np.array(["labkit/arithmetic"] * B, dtype=object),
                         "reward_model": np.array([{"ground_truth": str(p.answer), "style": "rule"} for p in chosen],
                                                  dtype=object)})
        trainer.global_steps = step
        extra = {"acc": [float(v.answer_correct) for v in verdicts], "well_formed": [float(v.well_formed) for v in verdicts]}
        trainer._log_rollout_data(batch, extra, {}, str(out))
        if args.pickle:
            (out / "batches").mkdir(parents=True, exist_ok=True)
            batch.save_to_disk(str(out / "batches" / f"step_{step}.pkl"))
    trainer._shutdown_dump_executor()
    meta = {"verl": verl.__version__, "torch": torch.__version__, "model": "data/tiny_lm", "steps": STEPS,
            "responses_per_prompt": N, "max_new_tokens": MAX_NEW, "seed": SEED,
            "writer": "verl.trainer.ppo.ray_trainer.RayPPOTrainer._log_rollout_data",
            "built_by": "scripts/build_verl_dump.py"}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {out}: {sorted(p.name for p in out.glob('*.jsonl'))}")


if __name__ == "__main__":
    main()
