"""Notebook 07, critical actions and information: does the policy's entropy find the turns that
decide the outcome, how few updates can CARL get away with, and how close is IGPO's
information-gain credit to the true advantage? Both are answered against the exact truth of
``ToolWorld`` (backward induction under the current policy), in the world and warmed-up policy of
``labkit.course.presets.toolworld_setup``.

* **Is the policy's entropy a good signal of which turns matter?** CARL (arXiv 2512.04949)
  updates only the most uncertain turns. ``entropy_vs_truth`` scores its selection against the
  turns that truly decided the outcome (``truth["decisive"]``) and against the turns with the
  largest exact |A|; ``entropy_proxy_over_training`` repeats that as a policy trains.
  ``focus_training`` trains with GRPO credit kept on a fraction of turns chosen by entropy (CARL),
  by exact |A| (an oracle no real method has) or at random, to separate "update fewer turns"
  from "entropy picks the right ones".
* **How close is information-gain credit to the true advantage?** IGPO (arXiv 2510.14967) rewards
  each turn by how much it raised the probability of success. ``dp_success_prob`` supplies that
  probability from the exact DP (a STAND-IN: the paper teacher-forces the answer under the
  policy); ``turn_credit_agreement`` and ``turn_credit_panels`` compare the credits with exact A.

Every runner is seeded and returns plain data (pandas DataFrames, dicts of tensors); the ones that
loop take ``progress`` and show a tqdm bar.
"""
from __future__ import annotations

import copy
from typing import Mapping, Sequence

import pandas as pd
import torch

from labkit.core.checks import check_choice, check_int, check_number
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.core.stats import top_fraction as top_fraction_mask
from labkit.course import presets
from labkit.course.presets import NB07_WORLD, held_out_sample, toolworld_setup
from labkit.credit import get_estimator
from labkit.credit.entropy import carl
from labkit.credit.information import igpo
from labkit.envs.toolworld import success_prob as exact_success_prob
from labkit.scoring import (first_error_hit_rate, first_error_positions, paired_difference, pearson, rank_correlation,
                            recall_at_k, step_rank_correlation, wilson_interval)
from labkit.viz import credit_panels


RULES = ("entropy", "exact_advantage", "random")


RULE_NAMES = {"entropy": "CARL: highest entropy", "exact_advantage": "oracle: largest exact |A|",
              "random": "random turns", "all": "GRPO: every turn"}


# --------------------------------------------------------------------------- selection
def focused_credit(rollouts: Rollouts, *, rule: str = "entropy", top_fraction: float = 0.3, truth=None,
                   generator: torch.Generator | None = None) -> Credit:
    """GRPO credit kept on a ``top_fraction`` of the batch's turns and zeroed elsewhere.

    ``rule`` says which turns are kept:

    * ``"entropy"``: the most uncertain turns: this *is* ``labkit.credit.entropy.carl``;
    * ``"exact_advantage"``: the turns with the largest exact |A(s_t, a_t)| (``truth``: the
      ``ToolTruth`` of the policy that sampled the batch): an oracle, the turns that truly matter;
    * ``"random"``: turns drawn uniformly (``generator`` seeds the draw).

    The same number of turns, ceil(top_fraction * n), is kept under every rule, so the rules
    differ only in *which* turns get a gradient. ``info``: ``kept`` (B, N), ``share_updated``,
    ``nonzero_share`` (share of turns whose credit is not zero: GRPO gives 0 to every turn of a
    group whose outcomes are all equal) and ``rule``.
    """
    check_choice("rule", rule, RULES)
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    if rule == "entropy":
        credit = carl(rollouts, top_fraction=top_fraction)
        credit.info["rule"] = rule
    else:
        _, present = rollouts.view(rollouts.mask.to(torch.float64), "turn", "sum")
        if rule == "exact_advantage":
            if truth is None or not callable(getattr(truth, "advantage", None)):
                raise ValueError("truth: rule 'exact_advantage' needs the ToolTruth of the sampling policy "
                                 "(env.truth(policy))")
            scores, _ = rollouts.view(truth.advantage(rollouts).abs(), "turn", "sum")
        else:
            if generator is None:
                raise ValueError("generator: rule 'random' needs a torch.Generator to draw the kept turns from")
            scores = torch.rand(present.shape, generator=generator, dtype=torch.float64)
        kept = top_fraction_mask(scores, present, top_fraction)
        base = get_estimator("grpo")(rollouts)
        token = torch.where(rollouts.broadcast(kept.long(), "turn").bool(), base.token,
                            torch.zeros((), dtype=base.token.dtype))
        credit = Credit.from_tokens(rollouts, token, f"focus_{rule}", cost=base.cost, kept=kept,
                                    share_updated=int(kept.sum()) / max(int(present.sum()), 1), rule=rule)
    credit.info["nonzero_share"] = float((credit.token[rollouts.mask] != 0).to(torch.float64).mean())
    return credit


# --------------------------------------------------------------------------- entropy against the truth
def _overlap(selected: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    hits = int((selected & target).sum())
    return hits / max(int(selected.sum()), 1), hits / max(int(target.sum()), 1)


def entropy_vs_truth(rollouts: Rollouts, truth, *, top_fraction: float = 0.3) -> dict[str, float]:
    """How well the policy's entropy marks the turns that matter, on one batch.

    Needs ToolWorld rollouts (one position per turn, ``truth["decisive"]``) and the exact
    ``ToolTruth`` of the policy that sampled them. Returns:

    * ``turns``, ``decisive`` (counts) and ``decisive_rate`` (share of turns that are decisive);
    * ``entropy_decisive`` / ``entropy_routine``: mean policy entropy at decisive / other turns;
    * ``abs_A_decisive`` / ``abs_A_routine``: mean |exact A| at decisive / other turns;
    * ``carl_precision`` (share of CARL's kept turns that are decisive; chance = decisive_rate)
      and ``carl_recall`` (share of decisive turns CARL keeps; chance = ``share_kept``);
    * ``carl_overlap_top_A``: share of CARL's kept turns that are also among the same number of
      turns with the largest |exact A| (chance = ``share_kept``).
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    if "decisive" not in rollouts.truth:
        raise ValueError("rollouts: need truth['decisive'] (sample with ToolWorld.sample)")
    m, dec = rollouts.mask, rollouts.truth["decisive"] & rollouts.mask
    routine = m & ~dec
    if not bool(dec.any()) or not bool(routine.any()):
        raise ValueError("rollouts: need both decisive and routine turns to compare them")
    H = rollouts.entropies.to(torch.float64)
    A = truth.advantage(rollouts).abs()
    credit = carl(rollouts, top_fraction=top_fraction)
    kept = rollouts.broadcast(credit.info["kept"].long(), "turn").bool() & m
    top_A = rollouts.broadcast(top_fraction_mask(rollouts.view(A, "turn", "sum")[0],
                                          rollouts.view(m.double(), "turn", "sum")[1], top_fraction).long(),
                               "turn").bool() & m
    precision, recall = _overlap(kept, dec)
    n = int(m.sum())
    return {"turns": n, "decisive": int(dec.sum()), "decisive_rate": int(dec.sum()) / n,
            "entropy_decisive": float(H[dec].mean()), "entropy_routine": float(H[routine].mean()),
            "abs_A_decisive": float(A[dec].mean()), "abs_A_routine": float(A[routine].mean()),
            "share_kept": credit.info["share_updated"], "carl_precision": precision, "carl_recall": recall,
            "carl_overlap_top_A": _overlap(kept, top_A)[0]}


def entropy_panels(rollouts: Rollouts, truth, *, top_fraction: float = 0.3,
                   rows: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
    """Two (len(rows), T) panels for ``viz.compare_heatmaps``: each turn's policy entropy minus
    CARL's cut on the WHOLE batch (positive = CARL updates the turn, negative = it skips it),
    and exact A. ``rows`` picks the trajectories to show (default all)."""
    credit = carl(rollouts, top_fraction=top_fraction)
    H = torch.where(rollouts.mask, rollouts.entropies.to(torch.float64) - credit.info["entropy_threshold"], 0.0)
    # exact A second here: the entropy is the panel this figure is about
    return credit_panels({f"entropy minus CARL's cut (> 0: in the top {top_fraction:.0%}, updated)": H,
                          "exact advantage A": truth.advantage(rollouts)}, rows=rows)


def where_carl_looks(env, rollouts: Rollouts, truth, *, top_fraction: float = 0.3) -> pd.DataFrame:
    """CARL's selection by the observation the turn started from (file numbers pooled as "j").

    The ToolWorld policy sees only the last observation, so its entropy, and therefore CARL's
    choice, is a property of the observation. One row per observation kind: ``turns`` (share of
    all played turns), ``entropy`` (mean policy entropy), ``carl_keeps`` (share of those turns
    CARL keeps), ``abs_A`` (mean |exact A|) and ``decisive`` (share of all decisive turns that
    start from it). Sorted by entropy, highest first.
    """
    import re

    m = rollouts.mask
    credit = carl(rollouts, top_fraction=top_fraction)
    kept = rollouts.broadcast(credit.info["kept"].long(), "turn").bool() & m
    dec = rollouts.truth["decisive"] & m
    kinds = [re.sub(r"\d+", "j", name) for name in env.obs_names]
    obs = rollouts.states[m].tolist()
    df = pd.DataFrame({"observation": [kinds[o] for o in obs],
                       "entropy": rollouts.entropies[m].to(torch.float64).numpy(),
                       "kept": kept[m].numpy(), "abs_A": truth.advantage(rollouts).abs()[m].numpy(),
                       "decisive": dec[m].numpy()})
    g = df.groupby("observation", sort=False)
    out = pd.DataFrame({"turns": g.size() / len(df), "entropy": g.entropy.mean(), "carl_keeps": g.kept.mean(),
                        "abs_A": g.abs_A.mean(), "decisive": g.decisive.sum() / max(int(df.decisive.sum()), 1)})
    return out.sort_values("entropy", ascending=False).reset_index()


def entropy_proxy_over_training(n_files: int = NB07_WORLD.n_files, *, max_turns: int = NB07_WORLD.max_turns,
                                stages: Sequence[int] = (0, 20, 40, 60), top_fraction: float = 0.3,
                                n_tasks: int = 32, group_size: int = 8, seed: int = 0, progress: bool = True,
                                **env_kwargs) -> pd.DataFrame:
    """``entropy_vs_truth`` at several points of one GRPO training run from the uniform policy.

    ``stages`` are cumulative training iterations (increasing, first may be 0). The run is
    trained in chunks: the chunk up to the first non-zero stage is exactly
    ``toolworld_setup(warmup_iterations=stage, seed=seed)``, later chunks continue with seeds
    seed + 1, seed + 2, ... (the optimiser restarts per chunk). At every stage a fresh batch of
    ``n_tasks`` x ``group_size`` episodes (sampling seed ``seed + 10_000``) is scored. One row
    per stage with the exact success probability ``J`` and every entry of ``entropy_vs_truth``.
    """
    from labkit.envs.toolworld import ToolLearner
    from labkit.learn.loop import train

    stages = [check_int("stages", s, low=0) for s in stages]
    if not stages:
        raise ValueError("stages: need at least one training stage")
    if any(b <= a for a, b in zip(stages, stages[1:])):
        raise ValueError(f"stages: must increase strictly, got {stages}")
    n_tasks = check_int("n_tasks", n_tasks, low=1)
    group_size = check_int("group_size", group_size, low=1)
    seed = check_int("seed", seed)
    env, policy = toolworld_setup(n_files, max_turns=max_turns, warmup_iterations=0, **env_kwargs)
    done, chunk, rows = 0, 0, []
    for stage in progress_bar(stages, desc="stages", enabled=progress):
        if stage > done:
            train(ToolLearner(env, policy), "grpo", kind="grpo", iterations=stage - done,
                  seed=seed + chunk, progress=False, label="grpo")
            done, chunk = stage, chunk + 1
        truth = env.truth(policy)
        ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed + 10_000)
        rows.append({"iteration": stage, "J": truth.J, **entropy_vs_truth(ro, truth, top_fraction=top_fraction)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- training with focused updates
def _recording(estimator, log: list):
    def run(rollouts: Rollouts) -> Credit:
        credit = estimator(rollouts)
        log.append((credit.info.get("share_updated", 1.0), credit.info["nonzero_share"]))
        return credit
    return run


def focus_training(env, start_policy, settings: Mapping[str, Sequence[float]] | None = None, *,
                   seeds: Sequence[int] = (0, 1, 2), iterations: int = 40, n_tasks: int = 8,
                   group_size: int = 8, lr: float | None = None, eval_every: int = 5, include_grpo: bool = True,
                   progress: bool = True) -> pd.DataFrame:
    """Train copies of ``start_policy`` with GRPO credit kept on a fraction of the turns.

    ``settings`` maps a rule of ``focused_credit`` ("entropy" = CARL, "exact_advantage",
    "random") to the top fractions to run (default ``{"entropy": (0.1, 0.3, 0.5)}``). With
    ``include_grpo`` plain GRPO (every turn, rule "all", top_fraction 1) runs too. Every run
    uses ``labkit.learn.loop.train`` with the GRPO loss, ``iterations`` batches of ``n_tasks`` x
    ``group_size`` episodes, and seed s: runs with the same seed share their first batch, so
    they differ by the credit only. The "random" rule draws its turns from a generator seeded
    with s.

    Returns the stacked learning curves (``train``'s columns; ``success`` is the exact J at
    iteration 0, every ``eval_every`` iterations and at the end) plus ``rule``, ``rule_name``,
    ``top_fraction``, and per iteration ``share_updated`` (share of turns kept) and
    ``nonzero_share`` (share of turns whose credit was not zero).
    """
    from labkit.envs.toolworld import ToolLearner
    from labkit.learn.loop import train

    settings = {"entropy": (0.1, 0.3, 0.5)} if settings is None else dict(settings)
    runs = [("all", 1.0)] if include_grpo else []
    for rule, fractions in settings.items():
        check_choice("settings", rule, RULES)
        for f in fractions:
            runs.append((rule, check_number("settings", f, low=0.0, high=1.0, low_open=True)))
    if not runs:
        raise ValueError("settings: nothing to run (no settings and include_grpo=False)")
    seeds = [check_int("seeds", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    iterations = check_int("iterations", iterations, low=1)
    env._check_policy(start_policy)

    curves = []
    bar = progress_bar(total=len(runs) * len(seeds), desc="training runs", enabled=progress)
    for rule, frac in runs:
        for s in seeds:
            policy = copy.deepcopy(start_policy)
            learner = ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size)
            if rule == "all":
                def estimator(ro):
                    credit = get_estimator("grpo")(ro)
                    credit.info["nonzero_share"] = float((credit.token[ro.mask] != 0).to(torch.float64).mean())
                    return credit
            elif rule == "exact_advantage":
                def estimator(ro, frac=frac, policy=policy):
                    return focused_credit(ro, rule="exact_advantage", top_fraction=frac, truth=env.truth(policy))
            elif rule == "random":
                gen = torch.Generator().manual_seed(s)

                def estimator(ro, frac=frac, gen=gen):
                    return focused_credit(ro, rule="random", top_fraction=frac, generator=gen)
            else:
                def estimator(ro, frac=frac):
                    return focused_credit(ro, rule="entropy", top_fraction=frac)
            log: list = []
            label = "GRPO" if rule == "all" else f"{rule} {frac:g}"
            curve = train(learner, _recording(estimator, log), kind="grpo", iterations=iterations, lr=lr,
                          eval_every=eval_every, seed=s, progress=False, label=label)
            curve["rule"], curve["rule_name"], curve["top_fraction"] = rule, RULE_NAMES[rule], frac
            curve["share_updated"] = [float("nan")] + [a for a, _ in log]
            curve["nonzero_share"] = [float("nan")] + [b for _, b in log]
            curves.append(curve)
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True)


def focus_run(env, start_policy, rule: str, share: float, *, seed: int = 0, iterations: int = 40,
              eval_every: int = 5, done: pd.DataFrame | None = None) -> pd.DataFrame:
    """One run of ``focus_training`` (``rule`` at top fraction ``share``, seed ``seed``, no GRPO run,
    exact J every ``eval_every`` iterations).

    ``done``: curves a ``focus_training`` call already returned for the same env, start policy,
    iterations and ``eval_every``; if they hold this (rule, share, seed), those rows are returned
    instead of training again. Why that is the same answer: every run of ``focus_training`` starts from its
    own copy of the start policy with its own seeds, so a run does not depend on which others ran
    with it (tested). This is what makes notebook 07's slider answer at once on the shares the
    notebook has trained already.
    """
    check_choice("rule", rule, RULES)
    share = check_number("share", share, low=0.0, high=1.0, low_open=True)
    if done is not None:
        hit = done[(done.rule == rule) & (done.seed == seed) & ((done.top_fraction - share).abs() < 1e-9)]
        if len(hit) and int(hit.iteration.max()) == iterations:
            return hit.reset_index(drop=True)
    return focus_training(env, start_policy, {rule: (share,)}, seeds=(seed,), iterations=iterations,
                          eval_every=eval_every, include_grpo=False, progress=False)


def final_j(env, start_policy, curves: pd.DataFrame, settings: Sequence[tuple[str, float]], *, seed: int = 0,
            iterations: int = 40, eval_every: int = 10) -> pd.DataFrame:
    """The final exact J of seed ``seed``'s run at each (rule, share) of ``settings``, as the
    focus dashboard shows it: one row per setting, in order (``rule``, ``share``, ``J``).

    ``rule`` is a rule of ``focused_credit`` or "all" (plain GRPO, share 1). A run ``curves`` (from
    ``focus_training`` with the same env, start policy, iterations and ``eval_every``) holds is
    read from it; any other is trained (``focus_run``). CARL at share 1 keeps every turn, which
    is GRPO's credit (``carl`` returns the base credit unchanged), so it is read from the GRPO run.
    """
    rows = []
    for rule, share in settings:
        share = check_number("settings", share, low=0.0, high=1.0, low_open=True)
        if rule == "all" or (rule == "entropy" and share == 1.0):
            run = curves[(curves.rule == "all") & (curves.seed == seed)]
            if not len(run) or int(run.iteration.max()) != iterations:
                raise ValueError(f"curves: hold no GRPO run of seed {seed} with {iterations} iterations")
        else:
            run = focus_run(env, start_policy, rule, share, seed=seed, iterations=iterations, eval_every=eval_every,
                            done=curves)
        rows.append({"rule": rule, "share": share, "J": float(run.dropna(subset=["success"]).success.iloc[-1])})
    if not rows:
        raise ValueError("settings: need at least one (rule, share) pair")
    return pd.DataFrame(rows)


def focus_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Final exact success per (rule, top_fraction) over seeds, next to the share of turns updated.

    Columns: rule, rule_name, top_fraction, share_updated (mean share of turns kept per batch),
    nonzero_share (mean share of turns with non-zero credit), J_start, J_final_mean / _std /
    _min / _max over seeds, env_steps (mean cumulative env steps of a run), seeds, and
    ``matches_grpo``: final mean J at least GRPO's mean minus one GRPO seed-std (if a GRPO run
    is in ``curves``; else missing).
    """
    need = {"rule", "rule_name", "top_fraction", "seed", "iteration", "success", "share_updated",
            "nonzero_share", "env_steps"}
    missing = sorted(need - set(curves.columns))
    if missing:
        raise ValueError(f"curves: missing columns {missing}; pass the output of focus_training")
    keys = ["rule", "rule_name", "top_fraction"]
    last_it = curves.groupby(keys + ["seed"]).iteration.transform("max")
    last = curves[curves.iteration == last_it]
    first = curves[curves.iteration == 0]
    g = last.groupby(keys, sort=False)
    table = g.success.agg(["mean", "std", "min", "max"]).add_prefix("J_final_")
    table.insert(0, "J_start", first.groupby(keys, sort=False).success.mean())
    trained = curves[curves.iteration > 0].groupby(keys, sort=False)
    table.insert(0, "nonzero_share", trained.nonzero_share.mean())
    table.insert(0, "share_updated", trained.share_updated.mean())
    table["env_steps"] = g.env_steps.mean()
    table["seeds"] = g.size()
    table = table.reset_index()
    full = table[table.rule == "all"]
    if len(full):
        bar = float(full.J_final_mean.iloc[0]) - float(full.J_final_std.fillna(0).iloc[0])
        table["matches_grpo"] = table.J_final_mean >= bar
    return table


def fewer_updates(summary: pd.DataFrame) -> pd.DataFrame:
    """The toy's counterpart of CARL's "72 % fewer updates at equal performance", per rule.

    For each rule: the smallest share of turns updated whose final mean J is within one seed-std
    of GRPO's (``matches_grpo`` of ``focus_summary``), and ``fewer_updates`` = 1 - that share.
    ``smallest_matching_share`` is NaN when no tested share of that rule matched GRPO.
    """
    if "matches_grpo" not in summary.columns:
        raise ValueError("summary: no matches_grpo column; run focus_training with include_grpo=True "
                         "and pass focus_summary's output")
    grpo = summary[summary.rule == "all"].iloc[0]
    rows = []
    for rule, part in summary[summary.rule != "all"].groupby("rule", sort=False):
        ok = part[part.matches_grpo]
        share = float(ok.share_updated.min()) if len(ok) else float("nan")
        best = part.loc[part.J_final_mean.idxmax()]
        rows.append({"rule": rule, "rule_name": RULE_NAMES[rule], "shares_tested": sorted(part.share_updated.round(3)),
                     "grpo_J": float(grpo.J_final_mean), "grpo_std": float(grpo.J_final_std),
                     "smallest_matching_share": share, "fewer_updates": 1 - share,
                     "best_J": float(best.J_final_mean), "best_share": float(best.share_updated)})
    return pd.DataFrame(rows)


def share_vs_performance(summary: pd.DataFrame) -> pd.DataFrame:
    """``focus_summary`` as one line per selection rule for ``viz.line_chart``: columns rule_name,
    share_updated, J (final mean), J_min, J_max. GRPO (every turn updated) is appended to every
    rule's line at share 1, where all rules coincide."""
    need = {"rule", "rule_name", "share_updated", "J_final_mean", "J_final_min", "J_final_max"}
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary: missing columns {missing}; pass the output of focus_summary")
    cols = {"J_final_mean": "J", "J_final_min": "J_min", "J_final_max": "J_max"}
    full = summary[summary.rule == "all"]
    parts = []
    for rule, part in summary[summary.rule != "all"].groupby("rule", sort=False):
        line = pd.concat([part, full.assign(rule_name=part.rule_name.iloc[0])])
        parts.append(line.sort_values("share_updated"))
    if not parts:
        parts = [full]
    out = pd.concat(parts, ignore_index=True).rename(columns=cols)
    return out[["rule_name", "share_updated", "J", "J_min", "J_max"]]


# --------------------------------------------------------------------------- IGPO with a DP stand-in
def dp_success_prob(env, truth, rollouts: Rollouts) -> torch.Tensor:
    """STAND-IN for IGPO's p_k: the exact probability of success after each turn, (B, N + 1).

    p_0 = V(s_0) before the first turn, p_k = V(s_k) after turn k (exact DP under the sampling
    policy), and after a trajectory's last turn p = its outcome (1 if it succeeded, 0 if it
    failed or timed out). N is the batch's largest number of turns; columns past a trajectory's
    end repeat its outcome (``igpo`` ignores them). In the IGPO paper p_k is the policy's own
    teacher-forced probability of the gold answer, a far noisier belief than this oracle.

    Exact V is a success probability only when a turn costs nothing, a wrong submit costs
    nothing and success pays 1: ``env`` must have step_cost = 0, wrong_submit = 0 and
    success_reward = 1.
    """
    return exact_success_prob(env, truth, rollouts)  # the one rule lives in labkit.envs.toolworld


def information_gain(rollouts: Rollouts, success_prob: torch.Tensor) -> torch.Tensor:
    """Per-turn information gain p_k - p_{k-1} laid out per position, (B, T); 0 off the mask."""
    r = igpo(rollouts, success_prob=success_prob, final="ig", normalize=False).info["ig"]
    return torch.where(rollouts.mask, rollouts.broadcast(r, "turn"), 0.0)


CREDIT_METHODS = ("grpo", "carl", "igpo", "ig")


def turn_credit_panels(rollouts: Rollouts, truth, success_prob: torch.Tensor, *,
                       methods: Sequence[str] = CREDIT_METHODS, top_fraction: float = 0.3, gamma: float = 1.0,
                       rows: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
    """(len(rows), T) credit of each method next to exact A, titled for ``viz.compare_heatmaps``.

    ``methods`` from "grpo", "carl" (top ``top_fraction`` of turns by entropy), "igpo" (with the
    ``success_prob`` given, e.g. the DP stand-in, and discount ``gamma`` over turns) and "ig"
    (IGPO's per-turn information gain p_k - p_(k-1), before it is normalised and summed).
    Credit is computed on the whole batch (GRPO and IGPO normalise within task groups, CARL ranks
    over the batch); ``rows`` only picks what is returned.
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    methods = [check_choice("methods", m, CREDIT_METHODS) for m in methods]
    make = {"grpo": ("GRPO", lambda: get_estimator("grpo")(rollouts)),
            "carl": (f"CARL (top {top_fraction:.0%} entropy)", lambda: carl(rollouts, top_fraction=top_fraction)),
            "igpo": (f"IGPO, γ = {gamma:g} (stand-in p from DP)",
                     lambda: igpo(rollouts, success_prob=success_prob, gamma=gamma)),
            "ig": ("information gain p_k - p_(k-1) alone", lambda: information_gain(rollouts, success_prob))}
    credits = {make[m][0]: make[m][1]() for m in methods}
    return credit_panels(credits, truth=truth.advantage(rollouts), truth_title="exact advantage A", rows=rows)


def _agreement(credit: torch.Tensor, exact: torch.Tensor, rollouts: Rollouts) -> dict[str, float]:
    m = rollouts.mask
    a, b = credit[m].to(torch.float64), exact[m].to(torch.float64)
    return {"pearson": pearson(a, b, constant=0.0), "spearman": rank_correlation(credit, exact, m),
            "decisive_recall": recall_at_k(credit, m, rollouts.truth["decisive"] & m)}


def turn_credit_agreement(rollouts: Rollouts, truth, success_prob: torch.Tensor, *, top_fraction: float = 0.3,
                          gamma: float = 1.0) -> pd.DataFrame:
    """How each method's turn credit agrees with the exact advantage over a whole batch.

    One row per panel of ``turn_credit_panels`` (except exact A itself): ``pearson`` and
    ``spearman`` correlation with exact A over every played turn, and ``decisive_recall``:
    the share of each trajectory's decisive turns among its turns with the largest |credit|
    (``labkit.scoring.recall_at_k``; ties count in expectation, so credit that is constant
    along a trajectory scores the chance level).
    """
    if "decisive" not in rollouts.truth:
        raise ValueError("rollouts: need truth['decisive'] (sample with ToolWorld.sample)")
    panels = turn_credit_panels(rollouts, truth, success_prob, top_fraction=top_fraction, gamma=gamma)
    exact = panels.pop("exact advantage A")
    return pd.DataFrame([{"method": name, **_agreement(credit, exact, rollouts)} for name, credit in panels.items()])


def igpo_gamma_sweep(rollouts: Rollouts, truth, success_prob: torch.Tensor,
                     gammas: Sequence[float] = (0.0, 0.5, 0.9, 1.0)) -> pd.DataFrame:
    """IGPO's agreement with exact A (as in ``turn_credit_agreement``) as its turn discount varies.

    IGPO credits turn k with sum_(j >= k) gamma^(j - k) r~_j: at gamma = 0 a turn keeps only its
    own (normalised) information gain, at gamma = 1 it adds every later turn's. One row per gamma.
    """
    gammas = [check_number("gammas", g, low=0.0, high=1.0) for g in gammas]
    if not gammas:
        raise ValueError("gammas: need at least one discount")
    if "decisive" not in rollouts.truth:
        raise ValueError("rollouts: need truth['decisive'] (sample with ToolWorld.sample)")
    exact = truth.advantage(rollouts)
    return pd.DataFrame([{"gamma": g, **_agreement(igpo(rollouts, success_prob=success_prob, gamma=g).token,
                                                   exact, rollouts)} for g in gammas])


def ig_decomposition(rollouts: Rollouts, truth, success_prob: torch.Tensor) -> dict[str, float]:
    """Check that, with the DP stand-in, a turn's information gain is its skill plus its luck.

    skill = exact A(s_k, a_k), luck = r_k + V(s_{k+1}) - Q(s_k, a_k) (``ToolTruth.skill_luck``).
    Returns the largest |IG - (skill + luck)| over played turns, and the share of the IG's
    variance that the skill part and the luck part carry (var(skill) / var(IG), var(luck) / var(IG)).
    """
    skill, luck = truth.skill_luck(rollouts)
    ig = information_gain(rollouts, success_prob)
    m = rollouts.mask
    var = float(ig[m].var())
    return {"max_abs_gap": float((ig - skill - luck)[m].abs().max()),
            "skill_var_share": float(skill[m].var()) / var if var > 0 else float("nan"),
            "luck_var_share": float(luck[m].var()) / var if var > 0 else float("nan")}


# --------------------------------------------------------------------------- the tiny LM: where entropy is natural
LM_SIGNALS = {"entropy": "highest entropy", "surprise": "lowest p(chosen token)"}
LM_ACTIONS = ("step", "token")


def _need_lm_truth(rollouts: Rollouts) -> None:
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"rollouts: expected Rollouts, got {type(rollouts).__name__}")
    if "first_error_step" not in rollouts.truth:
        raise ValueError("rollouts: truth has no 'first_error_step' (the tiny LM's rollouts carry it: "
                         "ArithmeticLM.rollouts or load_reference)")


def first_wrong_token_table(rollouts: Rollouts) -> pd.DataFrame:
    """Where each rollout with a wrong step first leaves every correct answer: one row per such
    rollout with ``row``, ``position`` (its first wrong token), ``step`` (the first wrong step),
    ``step_text`` (that step as written), ``written`` (the token there) and ``right`` (the token
    a correct step has there).

    Every step before the first wrong one is right, so at that step the running total is the sum
    of the operands so far and the right step is known: ``acc+next=sum;`` (or ``#acc<eos>`` for
    the answer). The first token of the written step that differs from it is the first wrong
    token, e.g. the ``1`` of ``149+71=210;`` (``2`` was right). A right step cut short (the
    context ran out) has its last token marked, with ``right`` the token that should have come
    next. Needs the tiny LM's rollouts: ``truth["first_error_step"]``, ``info["problems"]`` and
    ``text``.
    """
    from labkit.policies.vocab import EOS

    _need_lm_truth(rollouts)
    if rollouts.text is None or "problems" not in rollouts.info:
        raise ValueError("rollouts: need text and info['problems'] (the tiny LM's rollouts carry both)")
    first = rollouts.truth["first_error_step"]
    rows = []
    for b in (first >= 0).nonzero().flatten().tolist():
        i, ops = int(first[b]), rollouts.info["problems"][b].operands
        acc = sum(ops[:i + 1])
        right = list(f"{acc}+{ops[i + 1]}={acc + ops[i + 1]};") if i + 1 < len(ops) else ["#", *str(acc), EOS]
        positions = ((rollouts.step_ids[b] == i) & rollouts.mask[b]).nonzero().flatten().tolist()
        if not positions:
            continue
        j = next((j for j, t in enumerate(positions) if j >= len(right) or rollouts.text[b][t] != right[j]),
                 len(positions) - 1)
        rows.append({"row": b, "position": positions[j], "step": i,
                     "step_text": "".join(rollouts.text[b][t] for t in positions),
                     "written": rollouts.text[b][positions[j]], "right": right[j] if j < len(right) else ""})
    return pd.DataFrame(rows, columns=["row", "position", "step", "step_text", "written", "right"])


def first_wrong_tokens(rollouts: Rollouts) -> torch.Tensor:
    """(B, T) bool: each rollout's first wrong token (``first_wrong_token_table``); a rollout
    whose steps are all right has none."""
    out = torch.zeros_like(rollouts.mask)
    table = first_wrong_token_table(rollouts)
    out[table.row.tolist(), table.position.tolist()] = True
    return out


def wrong_token_uncertainty(rollouts: Rollouts) -> pd.DataFrame:
    """``first_wrong_token_table`` with how unsure the policy was there: ``p`` (the probability
    it gave the wrong token it wrote), ``entropy`` (nats), ``entropy_rank`` and ``surprise_rank``
    (the token's rank among its rollout's tokens by entropy and by -log p, 1 = the most
    uncertain) and ``tokens`` (the rollout's generated tokens)."""
    table = first_wrong_token_table(rollouts)
    H, S = _signal(rollouts, "entropy"), _signal(rollouts, "surprise")
    b, t = table.row.tolist(), table.position.tolist()
    return table.assign(p=[float(rollouts.logprobs[i, j].exp()) for i, j in zip(b, t)],
                        entropy=[float(H[i, j]) for i, j in zip(b, t)],
                        entropy_rank=[int((H[i] > H[i, j]).sum()) + 1 for i, j in zip(b, t)],
                        surprise_rank=[int((S[i] > S[i, j]).sum()) + 1 for i, j in zip(b, t)],
                        tokens=[int(rollouts.mask[i].sum()) for i in b])


def _signal(rollouts: Rollouts, signal: str) -> torch.Tensor:
    """(B, T) float64 per position: the sampling policy's entropy, or the surprise -log p of the
    token it chose; -inf off the mask (never the largest)."""
    check_choice("signal", signal, tuple(LM_SIGNALS))
    x = rollouts.entropies if signal == "entropy" else rollouts.logprobs
    if x is None:
        raise ValueError(f"rollouts: carry no {'entropies' if signal == 'entropy' else 'logprobs'} to rank by")
    x = x.to(torch.float64) if signal == "entropy" else -x.to(torch.float64)
    return torch.where(rollouts.mask, x, float("-inf"))


def uncertainty_hits(rollouts: Rollouts, signal: str = "entropy") -> pd.DataFrame:
    """Where the most uncertain position of each rollout with a wrong step lies.

    ``signal``: ``"entropy"`` (the sampling policy's entropy at each position) or ``"surprise"``
    (-log p of the token it chose: the lowest chosen-token probability). One row per rollout with
    a wrong step: ``row``; ``token_hit`` (1 if the top position is the first wrong token,
    ``first_wrong_token_table``) and ``token_chance`` (1 / its tokens: a random position);
    ``step_hit`` (1 if it lies in the first wrong step) and ``step_chance`` (1 / its steps: a
    random step, the chance of ``labkit.scoring.first_error_hits``). Tied top positions share
    the hit.
    """
    x, wrong_tok = _signal(rollouts, signal), first_wrong_tokens(rollouts)
    wrong_step = first_error_positions(rollouts)
    rows = []
    for b in sorted(set(wrong_tok.nonzero()[:, 0].tolist())):
        top = (x[b] == x[b].max()) & rollouts.mask[b]
        n_top = int(top.sum())
        rows.append({"row": b, "token_hit": int((top & wrong_tok[b]).sum()) / n_top,
                     "token_chance": 1.0 / int(rollouts.mask[b].sum()),
                     "step_hit": int((top & wrong_step[b]).sum()) / n_top,
                     "step_chance": 1.0 / int(rollouts.n_steps[b])})
    return pd.DataFrame(rows, columns=["row", "token_hit", "token_chance", "step_hit", "step_chance"])


def uncertainty_hit_tables(rollouts: Rollouts) -> dict[str, pd.DataFrame]:
    """``uncertainty_hits`` of both signals as ``first_error_hits``-shaped tables (``row``,
    ``hit``, ``chance``), for ``labkit.scoring.hit_rate_intervals`` and ``paired_difference``:
    keys "<signal name> -> first wrong token" and "<signal name> -> first wrong step"."""
    out = {}
    for target in ("token", "step"):
        for signal, name in LM_SIGNALS.items():
            h = uncertainty_hits(rollouts, signal)
            out[f"{name} -> first wrong {target}"] = pd.DataFrame(
                {"row": h.row, "hit": h[f"{target}_hit"], "chance": h[f"{target}_chance"]})
    return out


def _action_rollouts(rollouts: Rollouts, action: str) -> Rollouts:
    """The rollouts as one GRPO group whose turns (CARL's actions) are its steps or its tokens."""
    check_choice("action", action, LM_ACTIONS)
    m = rollouts.mask
    turns = rollouts.step_ids if action == "step" else torch.where(m, m.long().cumsum(1) - 1, -1)
    # the sampled problems differ row by row: a group of one has no baseline, so as notebooks 03
    # and 04 do, GRPO's group is the whole batch
    return rollouts.with_(turn_ids=turns, group_ids=torch.zeros(rollouts.batch_size, dtype=torch.long))


def lm_carl(rollouts: Rollouts, *, action: str = "step", top_fraction: float = 0.3) -> Credit:
    """``labkit.credit.entropy.carl`` on the tiny LM's rollouts, one GRPO group of the whole batch.

    ``action``: what CARL ranks and keeps: ``"step"`` (a reasoning step ``a+b=c;`` is one
    action, ranked by the mean entropy of its tokens) or ``"token"`` (every token is an action).
    The ``top_fraction`` most uncertain actions of the batch keep GRPO's credit, the rest get 0.
    ``info`` adds ``kept_positions`` (B, T) bool, the tokens that keep their credit.
    """
    top_fraction = check_number("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    ro = _action_rollouts(rollouts, action)
    credit = carl(ro, top_fraction=top_fraction)
    credit.info["kept_positions"] = ro.broadcast(credit.info["kept"].long(), "turn").bool() & ro.mask
    return credit


def lm_grpo(rollouts: Rollouts) -> Credit:
    """GRPO on the tiny LM's rollouts, one group of the whole batch (``lm_carl``'s base)."""
    return get_estimator("grpo")(_action_rollouts(rollouts, "step"))


def carl_selection(rollouts: Rollouts, *, top_fraction: float = 0.3) -> pd.DataFrame:
    """Does CARL keep the tiny LM's mistakes? ``entropy_vs_truth``'s precision and recall, with
    the first wrong steps (or tokens) in place of ToolWorld's decisive turns.

    One row per ``action`` of ``lm_carl`` ("step", "token"): ``actions`` (count in the batch),
    ``wrong`` (first wrong steps, or first wrong tokens; one per rollout with a wrong step) and
    ``wrong_rate`` (their share: the precision of a random pick), ``share_kept``, ``precision``
    (share of kept actions that are a first wrong one) and ``recall`` (share of first wrong ones
    kept; a random pick keeps ``share_kept``).
    """
    _need_lm_truth(rollouts)
    rows = []
    for action in LM_ACTIONS:
        credit = lm_carl(rollouts, action=action, top_fraction=top_fraction)
        present = _action_rollouts(rollouts, action).view(rollouts.mask.double(), "turn", "sum")[1]
        kept = credit.info["kept"] & present
        target = first_error_positions(rollouts) if action == "step" else first_wrong_tokens(rollouts)
        wrong = _action_rollouts(rollouts, action).view(target.double(), "turn", "max")[0].bool() & present
        n, n_wrong, n_kept = int(present.sum()), int(wrong.sum()), int(kept.sum())
        both = int((kept & wrong).sum())
        rows.append({"action": action, "actions": n, "wrong": n_wrong, "wrong_rate": n_wrong / n,
                     "share_kept": n_kept / n, "precision": both / max(n_kept, 1),
                     "recall": both / max(n_wrong, 1)})
    return pd.DataFrame(rows)


def within_rank_corr(credit: torch.Tensor, truth_adv: torch.Tensor, rollouts: Rollouts) -> pd.DataFrame:
    """``labkit.scoring.step_rank_correlation(..., within=True)`` rollout by rollout: one row per
    rollout it averages over (at least two steps and a truth that is not constant), with ``row``
    and ``rho`` (Spearman's rho between the rollout's step credits and its true step
    advantages). The mean of ``rho`` is ``step_rank_correlation(..., within=True)``."""
    truth, present = rollouts.view(truth_adv.to(torch.float64), "step", "mean")
    rows = []
    for b in range(rollouts.batch_size):
        if int(present[b].sum()) >= 2 and float(truth[b][present[b]].std()) > 0:
            one = rollouts.select([b])
            rows.append({"row": b, "rho": step_rank_correlation(credit[b:b + 1], truth_adv[b:b + 1], one,
                                                                 within=True)})
    return pd.DataFrame(rows, columns=["row", "rho"])


def credit_vs_mc_truth(credits: Mapping[str, torch.Tensor], rollouts: Rollouts, truth_adv: torch.Tensor, *,
                       baseline: str | None = None, n_boot: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Each credit of ``credits`` (name -> (B, T) token credit) against the Monte Carlo truth
    ``truth_adv`` (``labkit.envs.arithmetic.truth.truth_step_advantage``), notebook 04's scores:
    ``hit_rate`` and ``chance`` (``first_error_hit_rate``), ``rank_corr`` (pooled) and
    ``rank_corr_within`` (``step_rank_correlation``). With ``baseline`` (a key of ``credits``),
    ``within_vs_base``: the within-rollout rho minus the baseline's, with its paired bootstrap
    interval over rollouts (``within_low``, ``within_high``; ``labkit.scoring.paired_difference``,
    ``n_boot`` resamples seeded ``seed``).
    """
    if not credits:
        raise ValueError("credits: need at least one credit to score")
    if baseline is not None and baseline not in credits:
        raise ValueError(f"baseline: {baseline!r} is not one of the credits {list(credits)}")
    per_row = {name: within_rank_corr(c, truth_adv, rollouts).rename(columns={"rho": "hit"})
               for name, c in credits.items()}
    rows = []
    for name, c in credits.items():
        hits = first_error_hit_rate(c, rollouts)
        row = {"method": name, "hit_rate": hits["hit_rate"], "chance": hits["chance"],
               "rank_corr": step_rank_correlation(c, truth_adv, rollouts),
               "rank_corr_within": step_rank_correlation(c, truth_adv, rollouts, within=True)}
        if baseline is not None:
            # paired_difference reads a per-rollout score from its tables' "hit" column
            d = paired_difference(per_row[name], per_row[baseline], n_boot=n_boot, seed=seed)
            row.update(within_vs_base=d["diff"], within_low=d["low"], within_high=d["high"])
        rows.append(row)
    return pd.DataFrame(rows)





# notebook 03's cached hits: the loader lives in presets (both lessons read it); the lesson hands it on
load_vine_hits = presets.load_vine_hits


def vine_hit_rollouts(env, meta: Mapping) -> Rollouts:
    """Notebook 03's larger sample, sampled again: one rollout of each of ``meta["n_problems"]``
    distinct held-out ``meta["n_operands"]``-operand problems, seed ``meta["seed"]``, exactly as
    ``scripts/build_vine_hits.py`` drew them (``meta``: that cache's meta, ``load_vine_hits``).
    ``env``: the ``ArithmeticLM`` the cache was built from."""
    for key in ("n_problems", "n_operands", "seed"):
        if key not in meta:
            raise ValueError(f"meta: has no {key!r} (pass the meta load_vine_hits returns)")
    return held_out_sample(env, int(meta["n_problems"]), int(meta["n_operands"]), seed=int(meta["seed"]))


def cached_hit_tables(hits: pd.DataFrame, rollouts: Rollouts,
                      methods: Sequence[str] = ("VinePPO K=9", "truth K=64")) -> dict[str, pd.DataFrame]:
    """The cached hits of ``methods`` (``load_vine_hits``) as ``first_error_hits`` tables (``row``,
    ``hit``, ``chance``) on the rollouts of ``rollouts`` (``vine_hit_rollouts``) whose row and
    first wrong step match the cache: a sampler that drew one token differently on this machine
    changes that rollout, and a hit scored on another rollout must not be paired with it."""
    _need_lm_truth(rollouts)
    first = rollouts.truth["first_error_step"]
    out = {}
    for name in methods:
        t = hits[hits.method == name]
        if t.empty:
            raise ValueError(f"methods: {name!r} is not in the cached hits ({sorted(hits.method.unique())})")
        same = [int(r) < len(rollouts) and int(first[int(r)]) == int(s) for r, s in zip(t.row, t.first_error_step)]
        out[name] = t[same][["row", "hit", "chance"]].reset_index(drop=True)
    return out


ACTION_NAMES = {"step": "a step is an action", "token": "a token is an action"}


def carl_share_sweep(rollouts: Rollouts, fractions: Sequence[float] = (0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 1.0), *,
                     level: float = 0.95) -> pd.DataFrame:
    """CARL's first-wrong-step hit rate (``lm_carl``'s credit, ``labkit.scoring.first_error_hits``)
    as the share of actions it keeps varies, for both actions ("step", "token").

    One row per (action, top fraction): ``action``, ``action_name``, ``top_fraction``,
    ``hit_rate`` with its Wilson interval at ``level`` (``low``, ``high``), ``chance`` and
    ``rollouts`` (those with a wrong step). At top fraction 1 CARL is GRPO.
    """
    fractions = [check_number("fractions", f, low=0.0, high=1.0, low_open=True) for f in fractions]
    if not fractions:
        raise ValueError("fractions: need at least one share of actions to keep")
    _need_lm_truth(rollouts)
    rows = []
    for action in LM_ACTIONS:
        for f in fractions:
            # the rate over the batch in one pass (first_error_hits' rule, without its per-rollout table)
            hits = first_error_hit_rate(lm_carl(rollouts, action=action, top_fraction=f).token, rollouts)
            if hits["rollouts"] == 0:
                raise ValueError("rollouts: no rollout has a wrong step to score")
            low, high = wilson_interval(hits["hit_rate"] * hits["rollouts"], hits["rollouts"], level=level)
            rows.append({"action": action, "action_name": ACTION_NAMES[action], "top_fraction": f,
                         "hit_rate": hits["hit_rate"], "low": low, "high": high, "chance": hits["chance"],
                         "rollouts": hits["rollouts"]})
    return pd.DataFrame(rows)


def paired_differences(tables: Mapping[str, pd.DataFrame], pairs: Sequence[tuple[str, str]], *,
                       n_boot: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Hit rate of a minus that of b for each (a, b) of ``pairs`` (names in ``tables``, each a
    ``first_error_hits`` table), on the rollouts both scored, with the paired bootstrap interval
    of ``labkit.scoring.paired_difference``. One row per pair: ``a``, ``b``, ``diff``, ``low``,
    ``high``, ``rollouts``."""
    rows = []
    for a, b in pairs:
        for name in (a, b):
            if name not in tables:
                raise ValueError(f"pairs: {name!r} is not one of the tables {list(tables)}")
        common = sorted(set(tables[a].row) & set(tables[b].row))
        if not common:
            raise ValueError(f"pairs: {a!r} and {b!r} scored no rollout in common")
        ta, tb = (tables[n].set_index("row").loc[common].reset_index() for n in (a, b))
        rows.append({"a": a, "b": b, **paired_difference(ta, tb, n_boot=n_boot, seed=seed)})
    return pd.DataFrame(rows)
