"""Train the tiny LM's process reward model (PRM) and outcome reward model (ORM); ship them in data/reward_models/.

PRM: Math-Shepherd-style soft labels. Sample rollouts of the shipped model on TRAIN-split problems
(2-4 operands; a third at the policy's temperature, two thirds hotter for more wrong steps); label step i with the mean outcome of k continuations from the prefix ending after
step i (``ArithmeticLM.prefix_values``); the final step's label is the rollout's own outcome. BCE.
ORM: the same network trained on complete responses' outcomes only (label at the final token).

Evaluation (stored in train_log.json): the PRM's step accuracy at threshold 0.5 and AUC against the
verifier's exact step correctness (local: ``truth["step_correct"]``) and against prefix correctness
(every step so far correct: what Monte Carlo labels measure), on rollouts of HELD-OUT problems and
on the 32 reference rollouts, each next to its base rate (majority-class accuracy). The ORM's
accuracy / AUC on held-out outcomes, next to its base rate.

Usage: python scripts/train_reward_models.py [--rollouts 512] [--hot-rollouts 1024] [--k 16] [--steps 600]
Seeded; one CPU thread; about 6 minutes.
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
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.envs.arithmetic.truth import load_reference  # noqa: E402
from labkit.learn.reward_models import DEFAULT_DIR, OutcomeRewardModel, ProcessRewardModel, binary_auc  # noqa: E402


def mc_step_labels(env: ArithmeticLM, ro, k: int, seed: int) -> tuple[torch.Tensor, int, int]:
    """Soft label of every step: mean outcome of k continuations after it; the last step's = outcome."""
    n_steps = ro.n_steps
    S = int(n_steps.max())
    labels = torch.zeros(len(ro), S, dtype=torch.float64)
    prefixes, problems, cells = [], [], []
    for b in range(len(ro)):
        ids = ro.tokens[b].tolist()
        steps = ro.step_ids[b].tolist()
        m = int(n_steps[b])
        for i in range(m - 1):  # prefixes ending after step i (not the last: its label is the outcome)
            end = max(t for t, s in enumerate(steps) if s == i) + 1
            prefixes.append(ro.info["prompt_ids"][b] + ids[:end])
            problems.append(ro.info["problems"][b])
            cells.append((b, i))
        if m:
            labels[b, m - 1] = float(ro.scores[b])
    vals, tokens = env.prefix_values(prefixes, problems, k, seed=seed)
    for (b, i), v in zip(cells, vals.tolist()):
        labels[b, i] = v
    return labels, len(prefixes) * k, tokens


def concat(parts):
    """One Rollouts from several (padded to the longest); truth and info rows follow."""
    if len(parts) == 1:
        return parts[0]
    T = max(p.horizon for p in parts)
    S = max(p.truth["step_correct"].shape[1] for p in parts)

    def padded(x, width, value):
        return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

    return Rollouts(
        tokens=torch.cat([padded(p.tokens, T, 0) for p in parts]),
        mask=torch.cat([padded(p.mask, T, False) for p in parts]),
        rewards=torch.cat([padded(p.rewards, T, 0.0) for p in parts]),
        step_ids=torch.cat([padded(p.step_ids, T, -1) for p in parts]),
        group_ids=torch.cat([p.group_ids + 100000 * j for j, p in enumerate(parts)]),
        truth={"step_correct": torch.cat([padded(p.truth["step_correct"], S, False) for p in parts])},
        info={"prompt_ids": [x for p in parts for x in p.info["prompt_ids"]],
              "problems": [x for p in parts for x in p.info["problems"]]})


def prefix_correct(step_correct: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Step i is prefix-correct iff steps 0..i are all correct (what Monte Carlo labels measure)."""
    bad = (~step_correct & present).long().cumsum(1) > 0
    return ~bad & present


def judge(scores: torch.Tensor, truth: torch.Tensor, present: torch.Tensor) -> dict:
    s, y = scores[present], truth[present].bool()
    pred = s > 0.5
    base = max(float(y.double().mean()), 1 - float(y.double().mean()))
    return {"n_steps": int(y.numel()), "accuracy": round(float((pred == y).double().mean()), 4),
            "base_rate": round(base, 4), "auc": round(binary_auc(s, y), 4),
            "share_correct": round(float(y.double().mean()), 4)}


def evaluate_prm(prm: ProcessRewardModel, ro) -> dict:
    scores = prm.step_scores(ro)
    _, present = prm.step_end_positions(ro)
    S = scores.shape[1]
    local = ro.truth["step_correct"][:, :S]
    present = present[:, :local.shape[1]]
    scores = scores[:, :local.shape[1]]
    return {"local_step_correct": judge(scores, local, present),
            "prefix_correct": judge(scores, prefix_correct(local, present), present)}


def evaluate_orm(orm: OutcomeRewardModel, ro) -> dict:
    s = orm.scores(ro)
    y = ro.scores > 0.5
    base = max(float(y.double().mean()), 1 - float(y.double().mean()))
    return {"n": len(ro), "accuracy": round(float(((s > 0.5) == y).double().mean()), 4), "base_rate": round(base, 4),
            "auc": round(binary_auc(s, y), 4)}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=512, help="train rollouts at the policy temperature, labelled for the PRM")
    ap.add_argument("--hot-rollouts", type=int, default=1024,
                    help="extra train rollouts sampled at --hot-temperature (more wrong steps to learn from)")
    ap.add_argument("--hot-temperature", type=float, default=1.5)
    ap.add_argument("--orm-rollouts", type=int, default=2048, help="train rollouts for the ORM (outcomes only)")
    ap.add_argument("--held-out", type=int, default=384, help="held-out rollouts for evaluation")
    ap.add_argument("--k", type=int, default=16, help="continuations per step label")
    ap.add_argument("--steps", type=int, default=600, help="optimizer steps of the PRM")
    ap.add_argument("--orm-steps", type=int, default=600, help="optimizer steps of the ORM")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    timing = {}
    env = ArithmeticLM.load()

    # ---- data: train-split rollouts, Monte Carlo step labels
    # The shipped model gets ~90 % of steps right at its own temperature, so wrong steps are rare;
    # rollouts sampled hotter add wrong steps. Their labels still come from continuations at the
    # policy's own temperature (the vines), so every label is a value of the policy itself.
    hot = ArithmeticLM(env.model, env.tokenizer, env.task, temperature=args.hot_temperature)
    problems = env.task.sample_prompts(args.rollouts + args.hot_rollouts, n_operands=(2, 3, 4), split="train",
                                       seed=args.seed)
    parts = [env.rollouts(problems[:args.rollouts], seed=args.seed)]
    if args.hot_rollouts:
        parts.append(hot.rollouts(problems[args.rollouts:], seed=args.seed + 1))
    labels, n_vines, vine_tokens = [], 0, 0
    for j, part in enumerate(parts):
        lab, nv, vt = mc_step_labels(env, part, args.k, seed=args.seed + 2 + j)
        labels.append(lab)
        n_vines, vine_tokens = n_vines + nv, vine_tokens + vt
    ro = concat(parts)
    S = ro.step_ids.max().item() + 1
    labels = torch.cat([torch.nn.functional.pad(x, (0, S - x.shape[1])) for x in labels])
    timing["prm_labels_s"] = round(time.perf_counter() - start, 1)
    print(f"PRM data: {len(ro)} rollouts (success {float(ro.scores.mean()):.3f}), {n_vines} vines, "
          f"{timing['prm_labels_s']} s")

    # ---- PRM
    t0 = time.perf_counter()
    prm = ProcessRewardModel.from_policy(env.model, seed=args.seed)
    prm_losses = prm.fit(ro, labels, steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    timing["prm_fit_s"] = round(time.perf_counter() - t0, 1)
    print(f"PRM fit: loss {prm_losses[0]:.3f} -> {sum(prm_losses[-50:]) / 50:.3f} ({timing['prm_fit_s']} s)")

    # ---- ORM on outcomes only (more rollouts: they cost one sample each, no vines)
    t0 = time.perf_counter()
    orm_problems = env.task.sample_prompts(args.orm_rollouts, n_operands=(2, 3, 4), split="train", seed=args.seed + 10)
    orm_ro = env.rollouts(orm_problems, seed=args.seed + 10)
    orm = OutcomeRewardModel.from_policy(env.model, seed=args.seed)
    orm_losses = orm.fit(orm_ro, steps=args.orm_steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    timing["orm_fit_s"] = round(time.perf_counter() - t0, 1)
    print(f"ORM fit on {len(orm_ro)} outcomes (success {float(orm_ro.scores.mean()):.3f}): loss "
          f"{orm_losses[0]:.3f} -> {sum(orm_losses[-50:]) / 50:.3f} ({timing['orm_fit_s']} s)")

    # ---- evaluation: held-out problems and the reference rollouts
    t0 = time.perf_counter()
    held = env.task.sample_prompts(args.held_out, n_operands=(2, 3, 4), split="held_out", seed=args.seed + 20)
    held_ro = env.rollouts(held, seed=args.seed + 20)
    ref, _ = load_reference(env)
    evaluation = {
        "prm_held_out": evaluate_prm(prm, held_ro),
        "prm_reference": evaluate_prm(prm, ref),
        "prm_train_fit": evaluate_prm(prm, ro),
        "orm_held_out": evaluate_orm(orm, held_ro),
        "orm_reference": evaluate_orm(orm, ref),
    }
    timing["eval_s"] = round(time.perf_counter() - t0, 1)
    for key, val in evaluation.items():
        print(key, json.dumps(val))

    # ---- ship
    args.out.mkdir(parents=True, exist_ok=True)
    prm.save(args.out / "prm.safetensors")
    orm.save(args.out / "orm.safetensors")
    every = max(1, args.steps // 60)  # a compact loss curve: every n-th step
    log = {
        "what": "PRM: soft Monte Carlo step labels (Math-Shepherd), BCE; ORM: final-token outcome, BCE. "
                "Both: a deep copy of the tiny LM's trunk + a linear head read through a sigmoid.",
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "out"},
        "torch_threads": 1,
        "prm_data": {"rollouts": len(ro), "success_rate": round(float(ro.scores.mean()), 4),
                 "share_steps_correct": round(float(ro.truth["step_correct"][prm.step_end_positions(ro)[1]]
                                                    .double().mean()), 4),
                     "labelled_steps": int(ro.n_steps.sum()), "vines": n_vines, "vine_tokens": vine_tokens,
                     "mean_label": round(float(labels[prm.step_end_positions(ro)[1]].mean()), 4)},
        "orm_data": {"rollouts": len(orm_ro), "success_rate": round(float(orm_ro.scores.mean()), 4)},
        "held_out": {"rollouts": len(held_ro), "success_rate": round(float(held_ro.scores.mean()), 4)},
        "prm_loss": {"every": every, "values": [round(x, 4) for x in prm_losses[::every]]},
        "orm_loss": {"every": every, "values": [round(x, 4) for x in orm_losses[::every]]},
        "evaluation": evaluation,
        "evaluation_note": "accuracy = share of steps where (score > 0.5) equals the truth; base_rate = "
                           "majority-class accuracy; local_step_correct = the verifier's per-step verdict; "
                           "prefix_correct = all steps up to this one correct (what MC labels target)",
        "timing_s": {**timing, "total": round(time.perf_counter() - start, 1)},
    }
    # the stamp: the tiny model the heads sit on and the reference rollouts the evaluation reads
    write_meta(args.out / "train_log.json", log, script=__file__, args=cli_args(args),
               inputs=["tiny_lm/model.safetensors", "lm_truth/reference.safetensors"], indent=1)
    print(f"wrote {args.out} in {log['timing_s']['total']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
