"""Monte Carlo truth for ranking alternative next steps: the test VinePPO sets a value estimate.

From each state (a step-boundary prefix of the reference rollouts, ``load_reference()``, whose
next step is a reasoning step, i.e. not the final ``#answer`` step) sample M continuations from
the policy and cut each after its first ``;`` (or at its eos, if the model answers right away):
those are the candidate next steps. Identical candidates are merged; the ``--max-candidates``
most frequent distinct ones are kept, and states with fewer than two are dropped (nothing to
rank). Each candidate's value is V(prefix + candidate) from K vines (``env.prefix_values``);
a candidate that ends the episode is worth its own verifier reward.

Why M = 32 and not 4: the tiny model is confident, so with M = 4 only 17 of the 88 states showed
a second distinct step (measured); with 32 samples most states do, and the rare alternatives that
appear are exactly the slips a value estimate should notice.

The result is cached in data/lm_truth/alternatives.safetensors + alternatives.json (with the
provenance stamp of ``labkit.core.cache``): ``labkit.envs.arithmetic.truth.load_step_alternatives()``.

Usage: python scripts/build_step_alternatives.py [--m 32] [--k 128] [--max-candidates 4]
       [--max-states N] [--threads 1]
About a minute on one thread. Rerun whenever data/tiny_lm or data/lm_truth/reference.* change.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.envs.arithmetic.truth import REFERENCE_DIR, load_reference  # noqa: E402
from labkit.policies.sampling import fork  # noqa: E402


def first_step(continuation: list[int], sep: int, eos: int) -> tuple[list[int], bool]:
    """The continuation up to and including its first step separator: (candidate, ends_episode).

    Without a separator the candidate is the whole continuation (it ends at eos, or was cut off
    by the context): either way the episode ends with it.
    """
    if sep in continuation:
        return continuation[:continuation.index(sep) + 1], False
    return continuation, True


def candidate_steps(env: ArithmeticLM, prefixes: list[list[int]], m: int, max_candidates: int,
                    seed: int) -> list[list[tuple[tuple[int, ...], int, bool]]]:
    """Per prefix: up to ``max_candidates`` distinct next steps (ids, times sampled out of m,
    ends_episode), most frequent first (ties: first sampled first)."""
    budget = env.context - max(len(p) for p in prefixes)
    gen = fork(env.model, prefixes, m, max_new_tokens=budget, temperature=env.temperature,
               eos_id=env.tokens.eos, pad_id=env.pad_id, seed=seed)
    conts = gen.completions()  # prefix-major: rows i*m .. i*m+m-1 continue prefixes[i]
    out = []
    for i in range(len(prefixes)):
        steps = [first_step(c, env.tokens.step_sep, env.tokens.eos) for c in conts[i * m:(i + 1) * m]]
        counts = Counter(tuple(s) for s, _ in steps)  # insertion-ordered: first sampled first
        ends = {tuple(s): e for s, e in steps}
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:max_candidates]  # stable sort
        out.append([(ids, n, ends[ids]) for ids, n in ranked])
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=32, help="continuations sampled per state")
    ap.add_argument("--k", type=int, default=128, help="vines per candidate (its Monte Carlo value)")
    ap.add_argument("--max-candidates", type=int, default=4, help="distinct candidates kept per state")
    ap.add_argument("--max-states", type=int, default=None, help="seeded subset of states (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    env = ArithmeticLM.load()
    ref, ref_meta = load_reference(env)

    # States: step starts whose step is not the row's last (the answer) step.
    prefixes, problems, present = env.step_prefixes(ref)
    grid = present.nonzero().tolist()  # (row, step) of every prefix, in the same order
    n_steps = ref.n_steps.tolist()
    eligible = [j for j, (b, i) in enumerate(grid) if i < n_steps[b] - 1]
    cands = candidate_steps(env, [prefixes[j] for j in eligible], args.m, args.max_candidates, args.seed)
    kept = [(j, c) for j, c in zip(eligible, cands) if len(c) >= 2]
    print(f"{len(eligible)} states, {len(kept)} with >= 2 distinct next steps out of {args.m} samples "
          f"({time.perf_counter() - start:.0f} s so far)")
    if args.max_states is not None and len(kept) > args.max_states:
        pick = torch.randperm(len(kept), generator=torch.Generator().manual_seed(args.seed))[:args.max_states]
        kept = [kept[i] for i in sorted(pick.tolist())]

    # Values: K vines from prefix + candidate, or the verifier's reward if the candidate ends it.
    state_of, cand_ids, counts, ends = [], [], [], []
    for s, (_, cs) in enumerate(kept):
        for ids, n, end in cs:
            state_of.append(s)
            cand_ids.append(list(ids))
            counts.append(n)
            ends.append(end)
    values = torch.zeros(len(cand_ids), dtype=torch.float64)
    open_rows = [c for c in range(len(cand_ids)) if not ends[c]]
    full = [prefixes[kept[state_of[c]][0]] + cand_ids[c] for c in open_rows]
    owners = [problems[kept[state_of[c]][0]] for c in open_rows]
    vals, vine_tokens = env.prefix_values(full, owners, args.k, seed=args.seed + 1)
    values[open_rows] = vals
    for c in range(len(cand_ids)):
        if ends[c]:
            j = kept[state_of[c]][0]
            prompt_len = len(env.prompt_ids(problems[j]))
            values[c] = env.grade(problems[j], prefixes[j][prompt_len:] + cand_ids[c]).reward
    print(f"{len(cand_ids)} candidates, {len(open_rows) * args.k} vines "
          f"({time.perf_counter() - start:.0f} s so far)")

    def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        out = torch.full((len(rows), width), env.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, :len(r)] = torch.tensor(r)  # right-padded; the lengths say where each ends
        return out, torch.tensor([len(r) for r in rows])

    state_prefix, state_len = padded([prefixes[j] for j, _ in kept])
    cand, cand_len = padded(cand_ids)
    tensors = {
        "state_prefix": state_prefix, "state_len": state_len,
        "state_row": torch.tensor([grid[j][0] for j, _ in kept]),
        "state_step": torch.tensor([grid[j][1] for j, _ in kept]),
        "state_value": ref.truth["step_values"][present][[j for j, _ in kept]].float(),
        "candidate": cand, "candidate_len": cand_len, "group": torch.tensor(state_of),
        "mc_value": values.float(), "count": torch.tensor(counts), "ends_episode": torch.tensor(ends),
    }
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(REFERENCE_DIR / "alternatives.safetensors"))
    meta = {
        "m": args.m, "k": args.k, "max_candidates": args.max_candidates, "max_states": args.max_states,
        "seed": args.seed, "threads": args.threads, "temperature": env.temperature,
        "n_states_eligible": len(eligible), "n_states": len(kept), "n_candidates": len(cand_ids),
        "operands": [list(problems[j].operands) for j, _ in kept],
        "reference_k": ref_meta["k"],
        "vines": len(open_rows) * args.k, "vine_tokens": vine_tokens,
        "seconds": round(time.perf_counter() - start, 1),
        "how": "states: step starts (before the answer step) of the reference rollouts; candidates: the "
               "most frequent distinct first steps of m policy continuations; value: mean outcome reward "
               "of k continuations of prefix + candidate (standard error <= 0.5 / sqrt(k)), or the "
               "verifier reward when the candidate ends the episode",
    }
    write_meta(REFERENCE_DIR / "alternatives.json", meta, script=__file__, args=cli_args(args),
               inputs=["tiny_lm/model.safetensors", "lm_truth/reference.safetensors"], indent=1)
    print(f"wrote {REFERENCE_DIR}/alternatives.* in {meta['seconds']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
