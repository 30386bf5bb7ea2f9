"""The PURE padding exploit, measured statically with the shipped PRM: does padding a response with
harmless extra steps raise its credit under sum-form and not under min-form?

For every reference rollout (data/lm_truth) build padded versions of its completion and score
original and padded with the PRM (data/reward_models/prm.safetensors):

* "repeat": the last ``a+b=c;`` step written again (k extra copies) before the ``#answer``;
* "zero":   k extra steps ``c+0=c;`` (adding zero to the running result) before the ``#answer``.

Both leave the arithmetic right but break the verifier's format, so the verifiable reward of a
padded response is 0. For each form (min, T = 0.1 / sum) and each verifiable weight (1: PURE's
mix; 0: PRM reward only, where PURE saw sum-form training collapse) it reports the mean
first-step return G_0 of originals and padded versions and the share of responses whose padded
version earns more. Groups of one, so the RLOO baseline is 0 and credit = return.

Then (``--rl``) a short RL run per form (3 seeds each): the shipped model trained with PURE credit
(PRM step scores, by default without the verifiable reward, PPO-clip, the notebook-03 setup on 4-operand problems); every
batch records the share of over-long responses (more ``;`` steps than the problem needs) and of
responses the verifier calls malformed. Does sum-form learn to pad and min-form not?

Usage: python scripts/build_pure_padding.py [--rl] [--iterations 24] [--seeds 0 1 2]
(static part: seconds -> data/pure_padding/static.json; --rl: minutes ->
data/pure_padding/rl_it<iterations>_lr<lr>_vw<weight>.csv / .json). Each JSON carries the
provenance stamp of ``labkit.core.cache`` (the model and the PRM it read).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import cli_args, write_meta  # noqa: E402
from labkit.core.rollouts import Rollouts  # noqa: E402
from labkit.credit.process import pure  # noqa: E402
from labkit.envs.arithmetic.env import parse_steps  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.envs.arithmetic.truth import load_reference  # noqa: E402
from labkit.learn.reward_models import ProcessRewardModel  # noqa: E402

OUT = ROOT / "data" / "pure_padding"
MODEL, PRM, REFERENCE = "tiny_lm/model.safetensors", "reward_models/prm.safetensors", "lm_truth/reference.safetensors"


def build(env: ArithmeticLM, problems, texts: list[str]) -> Rollouts:
    """Rollouts of given completions (text without eos): verifier rewards, ';'-closed steps."""
    rows = [env.tokenizer(t, add_special_tokens=False)["input_ids"] + [env.tokens.eos] for t in texts]
    T = max(len(r) for r in rows)
    tokens = torch.full((len(rows), T), env.pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.bool)
    rewards = torch.zeros(len(rows), T)
    step_ids = torch.full((len(rows), T), -1, dtype=torch.long)
    for b, (r, p, text) in enumerate(zip(rows, problems, texts)):
        tokens[b, :len(r)] = torch.tensor(r)
        mask[b, :len(r)] = True
        rewards[b, len(r) - 1] = env.grade(p, r).reward
        step, ids = 0, []
        for tok in r:
            ids.append(step)
            step += tok == env.tokens.step_sep
        step_ids[b, :len(r)] = torch.tensor(ids)
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, step_ids=step_ids,
                    group_ids=torch.arange(len(rows)),
                    info={"prompt_ids": [env.prompt_ids(p) for p in problems], "problems": list(problems)})


def pad(text: str, kind: str, k: int) -> str:
    steps = parse_steps(text)
    body, answer = [s.text for s in steps[:-1]], steps[-1].text
    last = steps[-2]
    extra = [last.text] * k if kind == "repeat" else [f"{last.result}+0={last.result}"] * k
    return ";".join(body + extra + [answer])


def rl(args) -> None:
    """Short PPO runs with PURE credit, min vs sum form; per-batch padding statistics."""
    from functools import partial

    import pandas as pd

    from labkit.course.presets import lm_rl_setup
    from labkit.learn.loop import train

    start = time.perf_counter()
    make_learner = lm_rl_setup()
    frames = []
    for form in ("min", "sum"):
        for seed in args.seeds:
            learner = make_learner(seed)
            prm = ProcessRewardModel.load(policy=learner.env.model)  # fixed PRM, trunk copied before training
            stats = []

            def estimator(rollouts, form=form, prm=prm, stats=stats):
                need = torch.tensor([p.n_operands for p in rollouts.info["problems"]])  # steps incl. answer
                verdicts = rollouts.truth["verdicts"]
                stats.append({"over_long": float((rollouts.n_steps > need).double().mean()),
                              "malformed": float(sum(not v.well_formed for v in verdicts) / len(verdicts)),
                              "mean_steps": float(rollouts.n_steps.double().mean())})
                return pure(rollouts, step_scores=prm.step_scores, form=form, verifiable_weight=args.verifiable_weight)

            curve = train(learner, partial(estimator), iterations=args.iterations, kind="ppo_clip", lr=args.lr,
                          epochs=2, minibatches=4, eval_every=args.eval_every, seed=seed, progress=False,
                          label=f"PURE {form}")
            extra = pd.DataFrame(stats)
            extra.insert(0, "iteration", range(1, len(stats) + 1))
            frames.append(curve.merge(extra, on="iteration", how="left"))
            last = frames[-1].dropna(subset=["over_long"]).tail(6)
            print(f"{form} seed {seed}: success {curve.success.dropna().iloc[0]:.3f} -> "
                  f"{curve.success.dropna().iloc[-1]:.3f}, over-long share (last 6) {last.over_long.mean():.3f}, "
                  f"{time.perf_counter() - start:.0f} s")
    curves = pd.concat(frames, ignore_index=True)
    OUT.mkdir(parents=True, exist_ok=True)
    cols = ["label", "seed", "iteration", "train_reward", "success", "over_long", "malformed", "mean_steps",
            "entropy", "approx_kl"]
    name = f"rl_it{args.iterations}_lr{args.lr:g}_vw{args.verifiable_weight:g}"
    curves[cols].to_csv(OUT / f"{name}.csv", index=False, float_format="%.6g")
    summary = {}
    for label, g in curves.groupby("label"):
        first = g[g.iteration.between(1, 6)]
        last = g[g.iteration > args.iterations - 6]
        summary[label] = {"over_long_first6": round(float(first.over_long.mean()), 4),
                          "over_long_last6": round(float(last.over_long.mean()), 4),
                          "malformed_last6": round(float(last.malformed.mean()), 4),
                          "success_start": round(float(g[g.iteration == 0].success.mean()), 4),
                          "success_end": round(float(g[g.iteration == args.iterations].success.mean()), 4)}
    meta = {"iterations": args.iterations, "seeds": args.seeds, "lr": args.lr, "epochs": 2, "minibatches": 4,
            "setup": "labkit.course.presets.lm_rl_setup() (4-operand train prompts, 8 prompts x 8 samples)",
            "estimator": f"pure(step_scores=PRM, temperature=0.1, verifiable_weight={args.verifiable_weight})",
            "seconds": round(time.perf_counter() - start, 1), "summary": summary}
    write_meta(OUT / f"{name}.json", meta, script=__file__, args=cli_args(args), inputs=[MODEL, PRM], indent=1)
    print(json.dumps(summary, indent=1))


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rl", action="store_true", help="also run the short RL comparison")
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--eval-every", type=int, default=8)
    ap.add_argument("--verifiable-weight", type=float, default=0.0,
                    help="0: PRM reward only (where the static measurement shows sum-form padding pays)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    static()
    if args.rl:
        rl(args)


def static() -> None:
    start = time.perf_counter()
    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    prm = ProcessRewardModel.load(policy=env.model)
    problems = ref.info["problems"]
    texts = [env.completion_text(ref.tokens[b][ref.mask[b]].tolist()) for b in range(len(ref))]
    keep = [b for b, t in enumerate(texts) if len(parse_steps(t)) >= 2]
    base_texts = [texts[b] for b in keep]
    base_problems = [problems[b] for b in keep]
    results = []
    context = env.context
    for kind in ("repeat", "zero"):
        for k in (1, 2):
            padded_all = [pad(t, kind, k) for t in base_texts]
            # the model's context is 64 tokens: keep the responses whose padded version still fits
            idx = [i for i, (t, p) in enumerate(zip(padded_all, base_problems))
                   if len(env.prompt_ids(p)) + len(t) + 1 <= context]
            probs = [base_problems[i] for i in idx]
            ro_pad, ro_orig = build(env, probs, [padded_all[i] for i in idx]), build(env, probs, [base_texts[i] for i in idx])
            p_pad, p_orig = prm.step_scores(ro_pad), prm.step_scores(ro_orig)
            n_steps = ro_pad.n_steps
            inserted = torch.cat([p_pad[b, int(n_steps[b]) - 1 - k:int(n_steps[b]) - 1] for b in range(len(idx))])
            for form in ("min", "sum"):
                for vw in (1.0, 0.0):
                    g = pure(ro_pad, step_scores=p_pad, form=form, verifiable_weight=vw).values[:, 0]
                    g0 = pure(ro_orig, step_scores=p_orig, form=form, verifiable_weight=vw).values[:, 0]
                    results.append({
                        "padding": kind, "extra_steps": k, "rows": len(idx), "form": form, "verifiable_weight": vw,
                        "mean_return_padded": round(float(g.mean()), 4),
                        "mean_return_original": round(float(g0.mean()), 4),
                        "mean_gain": round(float((g - g0).mean()), 4),
                        "share_padded_beats_original": round(float((g > g0 + 1e-9).double().mean()), 4),
                        "mean_prm_score_of_inserted_steps": round(float(inserted.mean()), 4),
                        "verifier_success_original": round(float(ro_orig.scores.mean()), 4),
                        "verifier_success_padded": round(float(ro_pad.scores.mean()), 4),
                    })
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {
        "what": __doc__.splitlines()[0],
        "rows": len(keep), "temperature": 0.1,
        "seconds": round(time.perf_counter() - start, 1),
        "example": {kind: pad(base_texts[0], kind, 2) for kind in ("repeat", "zero")} | {"original": base_texts[0]},
    }
    # the static part takes no option: its command is the bare script
    write_meta(OUT / "static.json", {"meta": meta, "results": results}, script=__file__, inputs=[MODEL, PRM, REFERENCE],
               indent=1)
    for r in results:
        print(r)
    print(f"wrote {OUT / 'static.json'} in {meta['seconds']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
