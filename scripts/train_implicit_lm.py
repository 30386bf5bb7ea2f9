"""Fine-tune the shipped tiny LM twice, for the implicit-reward estimators of ``labkit.credit.implicit``.

    python scripts/train_implicit_lm.py                 # the shipped recipe -> data/implicit_lm
    python scripts/train_implicit_lm.py --out /tmp/imp  # somewhere else

1. **DPO** (Rafailov et al. 2023): preference pairs are two completions of the same training
   prompt, sampled from the base model, one the verifier accepts (chosen) and one it rejects
   (rejected). The tuned policy's per-token log-ratio against the base model,
   beta * (log pi - log pi_ref), is the implicit token reward of "From r to Q*" (arXiv:2404.12358).
   Saved as ``dpo_model.safetensors``.
2. **Conditioned SFT for T-REG** (arXiv:2412.02685): the tiny LM cannot follow a natural-language
   instruction such as "write a better answer", so it is taught two conditioning tokens instead.
   The prompt's ``<bos>`` is replaced by a conditioning token (so no position moves): ``;``
   ("better": a completion the verifier accepts follows) or ``#`` ("worse": a rejected one follows), and the model is fine-tuned by
   maximum likelihood on the same sampled completions, balanced between the two kinds. The
   contrast log p(y_t | better) - log p(y_t | worse) is then T-REG's self-generated token
   reward. Saved as ``treg_model.safetensors``.

Both start from ``data/tiny_lm/model.safetensors`` (its SHA-256 is in the log's provenance stamp,
``labkit.core.cache``) and keep its config and tokenizer, so only weights are stored: load them with ``ArithmeticLM.tuned("dpo" | "treg")``.
``train_log.json`` records the recipe, loss curves, timings, the data's pair counts and the
success rates of base and tuned models on held-out problems (the T-REG model sampled under each
condition). Seeded; one thread; about 3 minutes.
"""
from __future__ import annotations

import argparse
import copy
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing labkit

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_model  # noqa: E402

from labkit.core.cache import cli_args, file_sha256, write_meta  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.policies.lm import sequence_logprobs  # noqa: E402
from labkit.policies.sampling import sample  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "data" / "implicit_lm", help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-prompts", type=int, default=1024, help="training prompts sampled from the base model")
    p.add_argument("--samples", type=int, default=8, help="completions per prompt")
    p.add_argument("--pairs-per-prompt", type=int, default=2)
    p.add_argument("--beta", type=float, default=0.1, help="DPO temperature (the implicit reward's scale)")
    p.add_argument("--dpo-steps", type=int, default=150)
    p.add_argument("--dpo-lr", type=float, default=2e-5)
    p.add_argument("--nll-weight", type=float, default=0.0,
                   help="add this times the chosen completion's per-token NLL to the DPO loss (0 = pure DPO)")
    p.add_argument("--sft-steps", type=int, default=250)
    p.add_argument("--sft-lr", type=float, default=3e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-n", type=int, default=256, help="held-out 4-operand prompts for the success rates")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def completions(ro, b: int) -> list[int]:
    return ro.tokens[b][ro.mask[b]].tolist()


def batch_logprob_sums(model, prompts, comps, pad_id: int) -> torch.Tensor:
    """Sum of log pi(completion | prompt) per row (differentiable)."""
    T = max(len(c) for c in comps)
    tokens = torch.full((len(comps), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(comps), T, dtype=torch.bool)
    for i, c in enumerate(comps):
        tokens[i, :len(c)] = torch.tensor(c)
        mask[i, :len(c)] = True
    return sequence_logprobs(model, prompts, tokens, mask, pad_id=pad_id).sum(1)


def success_rate(env: ArithmeticLM, problems, seed: int) -> float:
    return float(env.rollouts(problems, seed=seed).scores.mean())


def main(argv=None) -> None:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    base = ArithmeticLM.load()
    pad = base.pad_id
    out = args.out.resolve()
    log: dict = {"recipe": vars(args) | {"out": str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)},
                 "python": platform.python_version(), "torch": torch.__version__}

    # ---- data: completions of training prompts sampled from the base model, graded
    problems = base.task.sample_prompts(args.n_prompts, n_operands=(3, 4), split="train", seed=args.seed + 11,
                                        unique=True)
    ro = base.rollouts(problems, n_per_prompt=args.samples, seed=args.seed + 12)
    prompts = ro.info["prompt_ids"]
    good, bad, pairs = [], [], []
    for g in range(len(problems)):
        rows = range(g * args.samples, (g + 1) * args.samples)
        ok = [b for b in rows if ro.scores[b] > 0]
        ko = [b for b in rows if ro.scores[b] == 0]
        good += ok
        bad += ko
        # distinct texts only: a pair of identical completions carries no preference
        ok_u = list({tuple(completions(ro, b)): b for b in ok}.values())
        ko_u = list({tuple(completions(ro, b)): b for b in ko}.values())
        pairs += list(zip(ok_u, ko_u))[:args.pairs_per_prompt]
    log["data"] = {"prompts": len(problems), "completions": ro.batch_size, "base_success": float(ro.scores.mean()),
                   "pairs": len(pairs), "accepted": len(good), "rejected": len(bad),
                   "sampling_seconds": round(time.time() - t0, 2)}
    print(log["data"], flush=True)
    if not pairs:
        raise SystemExit("no preference pairs: every prompt's completions were all right or all wrong")

    # ---- 1. DPO
    t1 = time.time()
    chosen_p = [prompts[w] for w, _ in pairs]
    rejected_p = [prompts[l] for _, l in pairs]
    chosen = [completions(ro, w) for w, _ in pairs]
    rejected = [completions(ro, l) for _, l in pairs]
    with torch.no_grad():
        ref_w = batch_logprob_sums(base.model, chosen_p, chosen, pad)
        ref_l = batch_logprob_sums(base.model, rejected_p, rejected, pad)
    policy = copy.deepcopy(base.model)
    policy.train()
    opt = torch.optim.AdamW(policy.parameters(), lr=args.dpo_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed + 13)
    curve = []
    for step in range(args.dpo_steps):
        idx = torch.randint(len(pairs), (min(args.batch_size, len(pairs)),), generator=gen).tolist()
        lw = batch_logprob_sums(policy, [chosen_p[i] for i in idx], [chosen[i] for i in idx], pad)
        ll = batch_logprob_sums(policy, [rejected_p[i] for i in idx], [rejected[i] for i in idx], pad)
        margin = args.beta * ((lw - ref_w[idx]) - (ll - ref_l[idx]))
        loss = -torch.nn.functional.logsigmoid(margin).mean()
        if args.nll_weight:  # keeps the chosen completions likely (DPO alone can lower both sides)
            loss = loss - args.nll_weight * lw.sum() / sum(len(chosen[i]) for i in idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append({"step": step, "loss": round(float(loss.detach()), 5), "margin": round(float(margin.detach().mean()), 5),
                      "pair_accuracy": round(float((margin > 0).float().mean()), 4)})
        if step % 50 == 0 or step == args.dpo_steps - 1:
            print("dpo", curve[-1], flush=True)
    policy.eval()
    log["dpo"] = {"curve": curve, "seconds": round(time.time() - t1, 2)}

    # ---- 2. conditioned SFT for T-REG: ";" = better, "#" = worse, in place of <bos>
    t2 = time.time()
    cond = {name: base.tokenizer.encode(ch, add_special_tokens=False)[0]
            for name, ch in ArithmeticLM.TREG_CONDITIONS.items()}
    sft = copy.deepcopy(base.model)
    sft.train()
    opt = torch.optim.AdamW(sft.parameters(), lr=args.sft_lr, weight_decay=0.0)
    sft_curve = []
    half = max(args.batch_size // 2, 1)
    for step in range(args.sft_steps):
        # balanced: half accepted (conditioned "better"), half rejected (conditioned "worse")
        rows = ([(good[i], "better") for i in torch.randint(len(good), (half,), generator=gen).tolist()]
                + [(bad[i], "worse") for i in torch.randint(len(bad), (half,), generator=gen).tolist()])
        ps = [[cond[c]] + prompts[b][1:] for b, c in rows]
        cs = [completions(ro, b) for b, _ in rows]
        n_tok = sum(len(c) for c in cs)
        loss = -batch_logprob_sums(sft, ps, cs, pad).sum() / n_tok
        opt.zero_grad()
        loss.backward()
        opt.step()
        sft_curve.append({"step": step, "loss": round(float(loss.detach()), 5)})
        if step % 50 == 0 or step == args.sft_steps - 1:
            print("sft", sft_curve[-1], flush=True)
    sft.eval()
    log["treg_sft"] = {"curve": sft_curve, "seconds": round(time.time() - t2, 2),
                       "conditions": dict(ArithmeticLM.TREG_CONDITIONS)}

    # ---- save (weights only; safetensors handles GPT-2's tied embedding / head)
    args.out.mkdir(parents=True, exist_ok=True)
    save_model(policy, str(args.out / "dpo_model.safetensors"))
    save_model(sft, str(args.out / "treg_model.safetensors"))

    # ---- evaluation: success on held-out 4-operand prompts, same sampling seed for every model
    held = base.task.sample_prompts(args.eval_n, n_operands=4, split="held_out", seed=args.seed + 21, unique=True)
    dpo_env = ArithmeticLM(policy, base.tokenizer, base.task)
    log["eval"] = {"held_out_4op_prompts": len(held),
                   "base_success": success_rate(base, held, args.seed + 22),
                   "dpo_success": success_rate(dpo_env, held, args.seed + 22)}
    # the conditioned model sampled under each condition: does the token steer it?
    treg_env = ArithmeticLM(sft, base.tokenizer, base.task)
    for name in ArithmeticLM.TREG_CONDITIONS:
        rows = treg_env.condition_prompts([base.prompt_ids(p) for p in held], name)
        gen = sample(sft, rows, max_new_tokens=treg_env._budget(rows), eos_id=base.tokens.eos, pad_id=pad,
                     seed=args.seed + 23)
        log["eval"][f"treg_{name}_success"] = float(np.mean([base.grade(p, c).reward
                                                             for p, c in zip(held, gen.completions())]))
    log["sha256"] = {name: file_sha256(args.out / name) for name in ("dpo_model.safetensors", "treg_model.safetensors")}
    log["seconds"] = round(time.time() - t0, 2)
    write_meta(args.out / "train_log.json", log, script=__file__, args=cli_args(args),
               inputs=["tiny_lm/model.safetensors"], indent=1)
    print(log["eval"], "seconds", log["seconds"])


if __name__ == "__main__":
    main()
