"""Train the lab's tiny language model on the arithmetic chain-of-thought task, from scratch.

    python scripts/train_tiny_lm.py                 # the shipped recipe -> data/tiny_lm
    python scripts/train_tiny_lm.py --out /tmp/lm   # somewhere else

A GPT-2 (4 layers, width 128, 4 heads, context 64, ~0.8 M parameters) learns to write
``23+48=71;71+19=90;#90<eos>`` after ``<bos>23+48+19=``. The recipe is deliberately short: the
result is an *imperfect* policy — nearly always right on two operands, often wrong on four —
so reinforcement learning on it has real reward signal and real mistakes to assign credit for.

What it writes to ``--out``: model.safetensors + config.json (+ generation_config.json), the
tokenizer (tokenizer.json, tokenizer_config.json), train_log.json (recipe, loss curve, timings,
held-out accuracies) and MODEL_CARD.md. Weights are saved as safetensors only, never pickle.

Reproducibility: every random choice is seeded (python, numpy, torch; training problems come from
``ArithmeticTask.sample_prompts`` with a per-step seed) and torch runs in deterministic mode with
a fixed thread count, so a rerun on the same machine and software reproduces the weights bit for
bit (the log records the weights' SHA-256 to check). Across CPUs or library versions
floating-point reduction order can differ, so weights may differ in the last bits; accuracies
should then agree to within sampling noise.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing labkit

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from labkit.core.cache import cli_args, file_sha256, write_meta  # noqa: E402
from labkit.envs.arithmetic import ArithmeticTask, verify  # noqa: E402
from labkit.policies.lm import build_tokenizer  # noqa: E402

N_POSITIONS = 64
MAX_NEW_TOKENS = 40  # the longest completion ("99+99=198;198+99=297;297+99=396;#396") + eos is 39


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "data" / "tiny_lm", help="output folder")
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation, data order and sampling")
    p.add_argument("--task-seed", type=int, default=0, help="ArithmeticTask seed (fixes the held-out split)")
    p.add_argument("--steps", type=int, default=1000, help="AdamW steps")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=50, help="linear warm-up steps")
    p.add_argument("--min-lr-ratio", type=float, default=0.1, help="cosine decays to lr * this")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--operand-weights", type=float, nargs=3, default=(1.0, 1.0, 1.0),
                   metavar=("W2", "W3", "W4"), help="relative frequency of 2/3/4-operand problems")
    p.add_argument("--eval-n", type=int, default=500, help="held-out prompts per operand count")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.eval_n < 1:
        p.error("--steps, --batch-size and --eval-n must be positive")
    if not 0 <= args.warmup < args.steps:
        p.error("--warmup must lie in [0, steps)")
    if min(args.operand_weights) < 0 or sum(args.operand_weights) <= 0:
        p.error("--operand-weights must be non-negative and not all zero")
    return args


def seed_everything(seed: int, threads: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    # Deterministic kernels: together with the fixed thread count this makes reruns bitwise equal.
    torch.use_deterministic_algorithms(True)


def operand_counts(weights, batch_size: int, rng: random.Random) -> list[int]:
    """How many 2-, 3-, 4-operand problems go into one batch (drawn by weight)."""
    return rng.choices((2, 3, 4), weights=weights, k=batch_size)


def make_batch(task: ArithmeticTask, tokenizer, counts: list[int], seed: int):
    """Token ids, attention mask and labels for one batch; loss only on completion + eos."""
    problems = []
    for k in (2, 3, 4):
        m = counts.count(k)
        if m:
            problems += task.sample_prompts(m, k, split="train", seed=seed * 10 + k)
    pad, bos, eos = tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id
    rows, label_rows = [], []
    for pr in problems:
        prompt = tokenizer.encode(pr.prompt, add_special_tokens=False)
        target = tokenizer.encode(pr.target, add_special_tokens=False) + [eos]
        rows.append([bos] + prompt + target)
        # -100 is ignored by the loss: the model is not trained to predict the prompt it is given.
        label_rows.append([-100] * (1 + len(prompt)) + target)
    T = max(len(r) for r in rows)
    assert T <= N_POSITIONS, T
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    labels = torch.full((len(rows), T), -100, dtype=torch.long)
    attn = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (r, lab) in enumerate(zip(rows, label_rows)):
        ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(lab)] = torch.tensor(lab)
        attn[i, : len(r)] = 1
    return ids, attn, labels


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warm-up to 1, then cosine decay to ``min_ratio`` at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup - 1)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def evaluate(model, tokenizer, task: ArithmeticTask, n: int, split: str, seed: int,
             sample: bool = True) -> dict:
    """Greedy (and optionally temperature-1 sampled) accuracy per operand count on ``split``.

    Prompts are distinct (``unique=True``). Per-segment accuracy: for each segment position k of
    the reference (steps, then the #answer), the fraction of greedy completions whose segment k
    is correct (``Verdict.step_correct``; missing segments count as wrong).
    """
    model.eval()
    out = {}
    modes = [("greedy", False)] + ([("sampled", True)] if sample else [])
    for k in (2, 3, 4):
        problems = task.sample_prompts(n, k, split=split, seed=seed + k, unique=True)
        enc = tokenizer([p.prompt for p in problems], return_tensors="pt", padding=True)
        res = {"n": n}
        for mode, do_sample in modes:
            torch.manual_seed(seed + 100 * k + int(do_sample))
            verdicts = []
            for i in range(0, n, 250):
                gen = model.generate(
                    input_ids=enc["input_ids"][i:i + 250], attention_mask=enc["attention_mask"][i:i + 250],
                    do_sample=do_sample, temperature=1.0 if do_sample else None, top_k=0 if do_sample else None,
                    top_p=1.0 if do_sample else None, max_new_tokens=MAX_NEW_TOKENS,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
                verdicts += [verify(p, t) for p, t in zip(problems[i:i + 250], texts)]
            res[f"{mode}_accuracy"] = float(np.mean([v.reward for v in verdicts]))
            res[f"{mode}_all_steps_correct"] = float(np.mean([v.all_correct for v in verdicts]))
            res[f"{mode}_segment_accuracy"] = [
                float(np.mean([len(v.step_correct) > j and v.step_correct[j] for v in verdicts]))
                for j in range(k)]
            res[f"{mode}_well_formed"] = float(np.mean([v.well_formed for v in verdicts]))
        out[str(k)] = res
    return out


def write_model_card(out: Path, log: dict) -> None:
    ev = log["eval"]["held_out"]
    tr = log["eval"].get("train_greedy", {})
    rows = "\n".join(
        f"| {k} | {ev[k]['greedy_accuracy']:.1%} | {ev[k]['sampled_accuracy']:.1%} | "
        f"{tr[k]['greedy_accuracy']:.1%} | "
        + " / ".join(f"{a:.0%}" for a in ev[k]["greedy_segment_accuracy"]) + " | "
        + " / ".join(f"{a:.0%}" for a in ev[k]["sampled_segment_accuracy"]) + " |"
        for k in ("2", "3", "4"))
    r = log["recipe"]
    card = f"""# tiny_lm — the Credit Assignment Lab's arithmetic model

A small causal language model (Hugging Face `GPT2LMHeadModel`) trained from scratch (this run:
{log['wall_time_train_s'] / 60:.1f} minutes of training on {r['threads']} CPU threads) to add two to four two-digit numbers with a written chain
of thought. It exists because the lab must run offline (Binder, CI, laptops without a model hub):
it gives the notebooks *real* rollouts — real token log-probabilities, real mistakes, a verifiable
reward — at a size where exhaustive Monte Carlo ground truth over prefixes is affordable.

It is a teaching artefact, not a calculator: it is deliberately under-trained so that it is
**imperfect** (see the accuracies below). A policy that is always right gives reinforcement
learning and credit assignment nothing to work on.

## Task and data

Prompt `23+48+19=`, target completion `23+48=71;71+19=90;#90` then `<eos>`: one `a+b=c` step per
additional operand, steps separated by `;`, the answer after `#`. Operands are uniform on 10..99;
training draws 2, 3 and 4 operands with relative weights {' : '.join(f'{w:g}' for w in r['operand_weights'])}.
All data is synthetic and generated on the fly by `labkit.envs.arithmetic.ArithmeticTask(seed={r['task_seed']})`, which
assigns every operand tuple to a train or held-out split by a hash ({r['held_out_fraction']:.0%} held out). Training
used only the train split; every number below is measured on the held-out split unless said otherwise.

Tokenizer: one token per character of `0123456789+=;#`, plus `<pad>` `<bos>` `<eos>` `<unk>`
({log['vocab_size']} tokens; `tokenizers` WordLevel model, saved with `save_pretrained`). Encoding prepends
`<bos>`; padding is on the left for batched generation.

## Architecture

GPT-2: {log['config']['n_layer']} layers, width {log['config']['n_embd']}, {log['config']['n_head']} heads, context {log['config']['n_positions']} tokens, no dropout, tied
input/output embeddings. **{log['n_parameters']:,} parameters**; `model.safetensors` is
{log['model_bytes'] / 1e6:.1f} MB (float32).

## Training recipe

{r['steps']} AdamW steps (betas 0.9/0.98, weight decay {r['weight_decay']}), batch {r['batch_size']}, peak learning rate {r['lr']:g} with {r['warmup']}
linear warm-up steps then cosine decay to {r['min_lr_ratio']:g}x, gradient clipping at 1.0. Cross-entropy on the
completion tokens and the final `<eos>` only (the prompt is masked out). Seed {r['seed']} for
initialisation, data and sampling; final training loss {log['loss_curve'][-1]['loss']:.3f} (curve in `train_log.json`).

## Measured accuracy

{r['eval_n']} distinct held-out prompts per operand count. *Greedy*: greedy decoding. *Sampled*: ancestral sampling at
temperature 1 (no top-k / top-p), seeded. Accuracy is the task's outcome reward: the completion is
well formed and its `#` answer is right (`labkit.envs.arithmetic.verify`). Per segment: the
fraction of completions whose k-th segment (the steps in order, then the `#` answer) passes the
task's local step check (a missing segment counts as wrong). Train-split greedy accuracy
({min(r['eval_n'], 200)} distinct train prompts per count, same protocol) is shown for comparison: the gap is
small, so the model computes rather than remembers.

| operands | greedy | sampled (T=1) | greedy, train split | per segment, greedy | per segment, sampled |
|---|---|---|---|---|---|
{rows}

The per-segment columns show where the mistakes are made, which is what credit assignment has to
find from the outcome reward alone. `python scripts/train_tiny_lm.py` retrains and re-measures.

## Limitations

Only what it was trained on: 2-4 operands of exactly two digits, written in this exact format,
prompts starting with `<bos>`, context 64 tokens. Anything else (other lengths, spaces,
subtraction) is out of distribution and it will produce confident nonsense.

## Reproducibility

Everything is seeded and torch runs with `use_deterministic_algorithms(True)` and
{r['threads']} threads: two runs on the same machine and software give bitwise identical weights
(SHA-256 of `model.safetensors`: `{log['model_sha256'][:16]}…`, recorded in `train_log.json`). On a different
CPU or library version floating-point reduction order may differ, so the weights can differ in
the last bits and the accuracies by sampling noise. Trained with torch {log['versions']['torch']},
transformers {log['versions']['transformers']}, Python {log['versions']['python']}.

## Use

```python
from labkit.policies.lm import load_lm
model, tokenizer = load_lm()          # this folder, offline, safetensors only
enc = tokenizer(["23+48+19="], return_tensors="pt")
out = model.generate(**enc, max_new_tokens=40, do_sample=False)
tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
```

## Licence

MIT, like the rest of the Credit Assignment Lab. Trained only on synthetic data generated by the
lab's own code; no third-party weights or data.

## Regenerate

```
python scripts/train_tiny_lm.py
```
"""
    (out / "MODEL_CARD.md").write_text(card)


def main(argv=None) -> None:
    args = parse_args(argv)
    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers

    seed_everything(args.seed, args.threads)
    task = ArithmeticTask(seed=args.task_seed)
    tokenizer = build_tokenizer(model_max_length=N_POSITIONS)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=N_POSITIONS, n_embd=128, n_layer=4, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,  # the data is unlimited: no need for dropout
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    n_params = sum(p.numel() for p in model.parameters())

    # No weight decay on biases and LayerNorm gains (the usual GPT-2 practice).
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, args.warmup, args.steps, args.min_lr_ratio))
    count_rng = random.Random(args.seed)

    curve, window = [], []
    t0 = time.perf_counter()
    model.train()
    bar = tqdm(range(args.steps), desc="train", unit="step")
    for step in bar:
        counts = operand_counts(args.operand_weights, args.batch_size, count_rng)
        ids, attn, labels = make_batch(task, tokenizer, counts, seed=args.seed * 1_000_003 + step)
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        window.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == args.steps:
            curve.append({"step": step + 1, "loss": float(np.mean(window)),
                          "lr": float(sched.get_last_lr()[0])})
            window = []
            bar.set_postfix(loss=f"{curve[-1]['loss']:.3f}")
    train_time = time.perf_counter() - t0

    t1 = time.perf_counter()
    held_out = evaluate(model, tokenizer, task, args.eval_n, "held_out", seed=args.seed + 7)
    train_eval = evaluate(model, tokenizer, task, min(args.eval_n, 200), "train", seed=args.seed + 11,
                          sample=False)
    eval_time = time.perf_counter() - t1

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("pytorch_model.bin", "training_args.bin"):  # never ship pickles
        (out / stale).unlink(missing_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # transformers 5 names the class "TokenizersBackend", which 4.x cannot load; the older name
    # is an alias of it in 5.x, so the saved folder loads across labkit's whole transformers range
    # (tests/policies/test_lm.py loads the shipped folder; the other-end CI step runs it under 4.x).
    config_file = out / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["model_input_names"] = ["input_ids", "attention_mask"]  # 4.x would add token_type_ids
    config_file.write_text(json.dumps(config, indent=2) + "\n")
    log = {
        "recipe": {"seed": args.seed, "task_seed": args.task_seed,
                   "held_out_fraction": task.held_out_fraction, "steps": args.steps,
                   "batch_size": args.batch_size, "lr": args.lr, "warmup": args.warmup,
                   "schedule": "linear warm-up, cosine decay", "min_lr_ratio": args.min_lr_ratio,
                   "weight_decay": args.weight_decay, "betas": [0.9, 0.98], "grad_clip": 1.0,
                   "operand_weights": list(args.operand_weights), "eval_n": args.eval_n,
                   "threads": args.threads},
        "config": {k: getattr(config, k) for k in ("n_layer", "n_embd", "n_head", "n_positions", "vocab_size")},
        "vocab_size": len(tokenizer),
        "n_parameters": n_params,
        "loss_curve": curve,
        "wall_time_train_s": round(train_time, 1),
        "wall_time_eval_s": round(eval_time, 1),
        "eval": {"held_out": held_out, "train_greedy": train_eval},
        "model_sha256": file_sha256(out / "model.safetensors"),
        "model_bytes": (out / "model.safetensors").stat().st_size,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
    }
    # trained from scratch: no input file; the weights' own SHA-256 is in the log (model_sha256)
    write_meta(out / "train_log.json", log, script=__file__, args=cli_args(args), indent=2)
    write_model_card(out, log)
    print(f"trained {n_params:,} parameters in {train_time:.0f} s; eval {eval_time:.0f} s")
    for k, r in held_out.items():
        print(f"  {k} operands (held-out): greedy {r['greedy_accuracy']:.1%}, sampled {r['sampled_accuracy']:.1%}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
