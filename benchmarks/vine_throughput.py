"""Throughput of VinePPO-style forking: 32 prefixes x K = 8 continuations = 256 vines.

Prints figures (no assertions). Compares
  (a) ``labkit.policies.sampling.fork``: every prefix prefilled once, its KV cache copied K times,
      all 256 vines decoded together in one batch;
  (b) the naive baseline: for each prefix separately, ``model.generate`` on the prefix repeated
      K times (each copy re-runs the prefix; 32 small batches one after the other);
  (c) the speed-up (a) vs (b). Targets on 2 cores: (a) <= 2 s, (c) >= 5x.
A fourth line times ``fork`` called once per prefix, to separate the gain from batching all
prefixes together from the gain of the hand-written loop itself.

Uses the trained model in data/tiny_lm when present, otherwise a random GPT-2 of the same shape
(random weights rarely emit eos, so every vine runs the full max_new_tokens: a worst case).
Timings are the best of ``--repeat`` runs after one warm-up; how busy the CPUs were just before
is printed because other processes sharing the cores change the figures a lot.

    python benchmarks/vine_throughput.py [--model data/tiny_lm] [--threads 2] [--repeat 3] [--k 8] [--prefixes 32]
"""
from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import torch

from labkit.policies.sampling import fork

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "data" / "tiny_lm"
# Fallback vocabulary, the same layout as labkit.policies.lm's tokenizer: specials then chars.
FALLBACK_VOCAB = ["<pad>", "<bos>", "<eos>", "<unk>", *"0123456789+=;#"]


def load_model(model_dir: Path = MODEL_DIR):
    """(model, encode, eos_id, pad_id, description)."""
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    try:  # the lab's tokenizer, if that module is importable; else the same layout by hand
        from labkit.policies.lm import build_tokenizer
        tok = build_tokenizer()
        encode = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
        bos, eos, pad, vocab = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, len(tok)
    except Exception:  # noqa: BLE001 - any failure just means "use the fallback"
        ids = {s: i for i, s in enumerate(FALLBACK_VOCAB)}
        encode = lambda s: [ids[c] for c in s]  # noqa: E731
        bos, eos, pad, vocab = ids["<bos>"], ids["<eos>"], ids["<pad>"], len(FALLBACK_VOCAB)
    if (model_dir / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(model_dir, use_safetensors=True,
                                                     local_files_only=True)
        what = f"trained model from {model_dir}"
    else:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab, n_layer=4, n_embd=128, n_head=4, n_positions=64,
            bos_token_id=bos, eos_token_id=eos, pad_token_id=pad))
        what = f"RANDOM GPT-2 ({model_dir} not found): 4 layers, 128 dims, 4 heads, 64 positions"
    n_params = sum(p.numel() for p in model.parameters())
    return model.eval(), (lambda s: [bos] + encode(s)), eos, pad, f"{what}; {n_params / 1e6:.2f} M params"


def make_prefixes(encode, n: int, seed: int = 0) -> list[list[int]]:
    """4-operand prompts plus a partial chain of thought, 10-25 tokens in all."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        ops = [rng.randint(1, 99) for _ in range(4)]
        prompt = "+".join(map(str, ops)) + "="
        chain, total = [], ops[0]
        for x in ops[1:]:
            chain.append(f"{total}+{x}={total + x};")
            total += x
        full = encode(prompt + "".join(chain) + f"#{total}")
        lo = len(encode(prompt))  # cut somewhere after the prompt
        cut = rng.randint(max(lo, 10), min(len(full) - 1, 25))
        out.append(full[:cut])
    return out


def busy_fraction(seconds: float = 1.0) -> float | None:
    """Share of all CPUs busy (by anyone) over ``seconds``, from /proc/stat; None off Linux."""
    def snapshot():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    try:
        total0, idle0 = snapshot()
        time.sleep(seconds)
        total1, idle1 = snapshot()
    except (OSError, ValueError, IndexError):
        return None
    return 1 - (idle1 - idle0) / max(total1 - total0, 1)


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up (allocator, lazy imports)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=MODEL_DIR, help="a save_pretrained folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--prefixes", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    model, encode, eos, pad, what = load_model(args.model)
    prefixes = make_prefixes(encode, args.prefixes)
    k, T = args.k, args.max_new_tokens
    kw = dict(max_new_tokens=T, eos_id=eos, pad_id=pad)
    print(f"model: {what}")
    busy = busy_fraction()
    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, "
          f"{'unknown' if busy is None else f'{busy:.0%}'} busy just before the run")
    if busy is not None and busy > 0.1:
        # With the cores shared, torch's worker threads wait on each other at every op and a
        # big batch can get slower than many small ones; --threads 1 is far more robust then.
        print("WARNING: other processes are using the CPU; figures are pessimistic and noisy")
    lengths = [len(p) for p in prefixes]
    print(f"{len(prefixes)} prefixes of {min(lengths)}-{max(lengths)} tokens, K = {k} -> "
          f"{len(prefixes) * k} vines, up to {T} new tokens each\n")

    gen = fork(model, prefixes, k, seed=0, **kw)
    t_fork = best_of(lambda: fork(model, prefixes, k, seed=0, **kw), args.repeat)
    t_fork_each = best_of(lambda: [fork(model, [p], k, seed=i, **kw)
                                   for i, p in enumerate(prefixes)], args.repeat)

    def naive() -> None:
        with torch.no_grad():
            for p in prefixes:
                ids = torch.tensor([p] * k)
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                               max_new_tokens=T, eos_token_id=eos, pad_token_id=pad)
    t_naive = best_of(naive, args.repeat)

    n_new = int(gen.mask.sum())
    print(f"{'what':62s} {'seconds':>8s}")
    print(f"{'(a) fork: 256 vines in one batch, prefixes prefilled once':62s} {t_fork:8.3f}")
    print(f"{'(b) naive: model.generate per prefix, prefix repeated K times':62s} {t_naive:8.3f}")
    print(f"{'    fork called once per prefix (no cross-prefix batching)':62s} {t_fork_each:8.3f}")
    print(f"\n(c) speed-up of fork over the naive baseline: {t_naive / t_fork:.1f}x "
          f"(target >= 5x); fork target <= 2 s: {'met' if t_fork <= 2 else 'MISSED'}")
    print(f"fork: {n_new} tokens generated ({n_new / t_fork:,.0f} tokens/s), "
          f"{int(gen.finished.sum())}/{gen.batch_size} vines reached eos, "
          f"{gen.forward_passes} forward passes, {gen.forward_tokens} real token positions "
          f"processed (prefixes once: {sum(lengths)} tokens; repeating them K times would be "
          f"{sum(lengths) * k})")


if __name__ == "__main__":
    main()
