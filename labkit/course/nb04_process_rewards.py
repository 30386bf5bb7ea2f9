"""Notebook 04, steps, segments and process rewards: between VinePPO's vines and the agents, which
of the reasoning-side credit families finds the step where the tiny LM went wrong, and what does
each one cost?

Everything runs on the same 32 reference rollouts as notebooks 02 and 03 (``load_reference``),
whose cached 256-vine Monte Carlo step advantages are the truth. ``Method`` names one estimator
with its settings; ``credit_quality`` scores one credit against the truth (first-wrong-step hit
rate and step-level rank correlation from ``labkit.scoring``, cost); ``cross_family_table`` does
it for a list of methods. Each runner is seeded and returns plain data.
"""
from __future__ import annotations

import dataclasses
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import pandas as pd
import torch

from labkit.core.cache import read_cache, read_meta
from labkit.core.checks import check_int
from labkit.core.paths import data_dir
from labkit.core.credit import Cost, Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.envs.arithmetic.truth import truth_step_advantage
from labkit.scoring import first_error_hit_rate, first_error_positions, step_rank_correlation


@dataclass(frozen=True)
class Method:
    """One row of the cross-family table: an estimator run with fixed settings.

    ``run(rollouts) -> Credit`` computes the credit; ``family`` is the survey's methodology
    family, ``notebook`` where the lab teaches it, ``setup`` what had to exist before the call
    (a trained critic, a reward model, a tuned policy) and what that cost, ``stand_in`` whether
    a part the paper gets from an LLM judge is simulated here.
    """

    name: str
    family: str
    notebook: str
    run: Callable[[Rollouts], Credit] = field(repr=False)
    setup: str = ""
    stand_in: bool = False


def credit_quality(credit: Credit, rollouts: Rollouts) -> dict:
    """How well one credit matches the truth of ``rollouts`` (from ``load_reference``), and what it cost.

    ``hit_rate``: how often the most negative step credit is the first wrong step (ties share
    the hit), over rollouts that have a wrong step; ``rank_corr`` and ``rank_corr_within``:
    ``labkit.scoring.step_rank_correlation`` with the Monte Carlo truth step advantage
    (``truth_step_advantage``), pooled and within rollouts; then the ``Cost`` fields the
    estimator reported.
    """
    if not isinstance(credit, Credit):
        raise TypeError(f"credit: expected a Credit, got {type(credit).__name__}")
    hits = first_error_hit_rate(credit.token, rollouts)
    truth = truth_step_advantage(rollouts)
    return {"hit_rate": hits["hit_rate"], "chance": hits["chance"],
            "rank_corr": step_rank_correlation(credit.token, truth, rollouts),
            "rank_corr_within": step_rank_correlation(credit.token, truth, rollouts, within=True),
            **credit.cost.as_dict()}


def cross_family_table(methods: Sequence[Method], rollouts: Rollouts, *, progress: bool = True) -> pd.DataFrame:
    """Every method in ``methods`` run on ``rollouts`` and scored by ``credit_quality``.

    One row per method, in the given order, with its family, notebook, set-up note, stand-in
    flag and the seconds the call took on this machine (a wall-clock figure: it varies between
    machines and runs, unlike the forward-pass counts).
    """
    methods = list(methods)
    if not methods:
        raise ValueError("methods: need at least one Method")
    for m in methods:
        if not isinstance(m, Method):
            raise TypeError(f"methods: expected Method entries, got {type(m).__name__}")
    rows = []
    for m in progress_bar(methods, desc="methods", enabled=progress):
        start = time.perf_counter()
        credit = m.run(rollouts)
        seconds = time.perf_counter() - start
        rows.append({"method": m.name, "family": m.family, "notebook": m.notebook,
                     **credit_quality(credit, rollouts), "seconds": seconds, "setup": m.setup,
                     "stand_in": m.stand_in})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the models and the roster
def one_group(rollouts: Rollouts) -> Rollouts:
    """The rollouts as one group. The reference rollouts answer 32 different problems (groups of
    one, where a group baseline has nothing to compare with); as in notebook 03, group-based
    baselines treat the 32 as one group."""
    return rollouts.with_(group_ids=torch.zeros(rollouts.batch_size, dtype=torch.long))


def with_cost(credit: Credit, extra: Cost) -> Credit:
    """``credit`` with ``extra`` added to its cost: for work done before the estimator call (the
    log-probs an implicit-reward estimator takes as an argument) that it cannot count itself."""
    return dataclasses.replace(credit, cost=credit.cost + extra)


def load_models(env, *, critic_rollouts: int = 512, critic_steps: int = 80, seed: int = 0,
                progress: bool = True) -> SimpleNamespace:
    """Everything the reasoning-side estimators need besides the rollouts, in one namespace.

    * ``critic``: PPO's value head, fitted live as in notebook 02 (``labkit.learn.lm_runs.fit_lm_critic``);
    * ``prm`` / ``orm``: the shipped process and outcome reward models
      (``scripts/train_reward_models.py``, ``data/reward_models``);
    * ``dpo``: the DPO-tuned copy of the policy, ``treg``: the copy taught T-REG's conditioning
      tokens (``scripts/train_implicit_lm.py``, ``data/implicit_lm``).
    """
    from labkit.learn.lm_runs import fit_lm_critic
    from labkit.learn.reward_models import OutcomeRewardModel, ProcessRewardModel

    critic, history = fit_lm_critic(env, n_rollouts=critic_rollouts, steps=critic_steps, seed=seed,
                                    progress=progress)
    return SimpleNamespace(critic=critic, critic_history=history, prm=ProcessRewardModel.load(),
                           orm=OutcomeRewardModel.load(), dpo=env.tuned("dpo"), treg=env.tuned("treg"))


def _scored_tokens(rollouts: Rollouts) -> int:
    """Token positions one forward pass over every rollout (prompt + response) processes."""
    return sum(len(p) for p in rollouts.info["prompt_ids"]) + int(rollouts.mask.sum())


@dataclass(frozen=True)
class Knobs:
    """The settings notebook 04's explorer moves; each method reads the ones that matter to it.

    ``k``: vines per prefix (VinePPO, Math-Shepherd, SPO), forks per branch point (TEMPO) or
    rewrites per step (InT); ``threshold``: SPO's cut probability; ``temperature``: PURE's
    soft-minimum temperature; ``beta``: the log-ratio scale of the implicit rewards (From r to
    Q*, SPRO); ``error_rate``: CAPO's stand-in verifier's chance of flipping a verdict.
    """

    k: int = 9
    threshold: float = 0.9
    temperature: float = 0.1
    beta: float = 0.1
    error_rate: float = 0.1
    seed: int = 0


KNOB_USE = {"k": ("VinePPO", "Math-Shepherd", "SPO", "TEMPO", "InT"), "threshold": ("SPO",),
            "temperature": ("PURE min-form",), "beta": ("From r to Q*", "SPRO"), "error_rate": ("CAPO",)}


def reasoning_methods(env, models: SimpleNamespace, knobs: Knobs = Knobs()) -> list[Method]:
    """Every reasoning-side estimator in the lab, set up for the tiny LM's reference rollouts.

    Notebooks 01-03's (GRPO, PPO's GAE, VinePPO, Math-Shepherd) and notebook 04's, in the
    course's order; ``models`` is ``load_models(env)``. Log-probabilities an estimator takes as an
    argument are computed inside ``run`` and their forward passes added to its cost, so the
    table compares whole recipes. Group baselines see the 32 rollouts as one group
    (``one_group``); TEMPO grows its own tree around each rollout.
    """
    from labkit.credit import get_estimator
    from labkit.envs.arithmetic.labels import planning_mask
    from labkit.learn.judges import stand_in_step_verifier

    est = get_estimator
    kn = knobs

    def logprob_cost(ro, n_models):
        return Cost(policy_forwards=n_models * ro.batch_size, policy_tokens=n_models * _scored_tokens(ro))

    def dpo_q(ro):
        credit = est("dpo_implicit_q")(ro, logprobs=models.dpo.rollout_logprobs(ro), ref_logprobs=env.rollout_logprobs(ro),
                                       beta=kn.beta)
        return with_cost(credit, logprob_cost(ro, 2))

    def spro(ro):
        credit = est("spro")(one_group(ro), logprobs=models.dpo.rollout_logprobs(ro),
                             ref_logprobs=env.rollout_logprobs(ro), beta=kn.beta)
        return with_cost(credit, logprob_cost(ro, 2))

    def t_reg(ro):
        credit = est("t_reg")(ro, better_logprobs=models.treg.rollout_logprobs(ro, condition="better"),
                              worse_logprobs=models.treg.rollout_logprobs(ro, condition="worse"))
        return with_cost(credit, logprob_cost(ro, 2))

    def capo(ro):
        # a callable verifier, so capo counts its calls (one per response)
        return est("capo")(one_group(ro), verdicts=lambda r: stand_in_step_verifier(r, error_rate=kn.error_rate,
                                                                                     seed=kn.seed))

    s = kn.seed
    return [
        Method("GRPO", "episode", "01", lambda ro: est("grpo")(one_group(ro))),
        Method("PPO: GAE from a learned critic", "td", "02", lambda ro: est("gae")(ro, values=models.critic, lam=1.0),
               setup="value head fitted on 512 rollouts (notebook 02)"),
        Method("VinePPO", "mc", "03", lambda ro: est("vineppo")(ro, value_fn=env.value_fn(seed=s + 1), k=kn.k)),
        Method("Math-Shepherd labels", "mc", "03",
               lambda ro: est("math_shepherd")(ro, value_fn=env.value_fn(seed=s + 2), k=kn.k)),
        Method("SPO", "mc", "04", lambda ro: est("spo")(ro, value_fn=env.cut_value_fn(seed=s + 3), k=kn.k,
                                                       threshold=kn.threshold)),
        Method("TEMPO", "mc", "04", lambda ro: est("tempo")(ro, tree_fn=env.tree_fn(seed=s + 4), branching=kn.k)),
        Method("PURE min-form", "process", "04",
               lambda ro: est("pure")(one_group(ro), step_scores=models.prm.step_scores, form="min",
                                      temperature=kn.temperature),
               setup="PRM trained offline on Monte Carlo step labels"),
        Method("PURE sum-form", "process", "04",
               lambda ro: est("pure")(one_group(ro), step_scores=models.prm.step_scores, form="sum"),
               setup="PRM trained offline on Monte Carlo step labels"),
        Method("SPRO", "process", "04", spro, setup="DPO-tuned policy against the base model"),
        Method("CAPO", "judge", "04", capo, setup="stand-in verifier: exact step verdicts, flipped at random",
               stand_in=True),
        Method("From r to Q*", "implicit", "04", dpo_q, setup="DPO-tuned policy against the base model"),
        Method("T-REG", "implicit", "04", t_reg, setup="a copy taught 'better' / 'worse' conditioning tokens"),
        Method("RED", "redistribution", "04", lambda ro: est("red")(ro, scores=models.orm.prefix_scores),
               setup="outcome reward model trained offline"),
        Method("ACPO attribution", "redistribution", "04",
               lambda ro: est("acpo")(ro, outcome_model=env.outcome_attribution_fn(models.orm)),
               setup="outcome reward model trained offline"),
        Method("HICRA", "entropy_information", "04",
               lambda ro: est("hicra")(one_group(ro), planning_mask=planning_mask(ro))),
        Method("InT", "counterfactual", "04",
               lambda ro: est("int_interventions")(ro, rewrite_fn=env.step_rewrite_fn(seed=s + 5), k=kn.k)),
    ]


def method_by_name(methods: Sequence[Method], name: str) -> Method:
    """The method called ``name`` (ValueError listing the names otherwise)."""
    for m in methods:
        if m.name == name:
            return m
    raise ValueError(f"name: no method {name!r}; choose from {[m.name for m in methods]}")


def explore(env, models: SimpleNamespace, rollouts: Rollouts, name: str, knobs: Knobs = Knobs()) -> Credit:
    """The credit of the method called ``name`` with the explorer's ``knobs`` (one code path with
    the table: the method comes from ``reasoning_methods``)."""
    return method_by_name(reasoning_methods(env, models, knobs), name).run(rollouts)


def knobs_read(name: str, knobs: Knobs) -> tuple:
    """What the method called ``name`` reads of ``knobs``: (knob, value) pairs for the knobs
    ``KNOB_USE`` lists for it (matched as the explorer's summary line matches them, by name
    prefix), plus the seed, which every method reads. Two settings with the same pairs give the
    same credit (each method is seeded)."""
    if not isinstance(knobs, Knobs):
        raise TypeError(f"knobs: expected a Knobs, got {type(knobs).__name__}")
    used = [k for k, users in KNOB_USE.items() if any(str(name).startswith(u) for u in users)]
    return tuple((k, getattr(knobs, k)) for k in used) + (("seed", knobs.seed),)


class Explorer:
    """``explore`` with a memory for a dashboard: the credit of a method is kept, keyed by the
    method and the knobs it reads (``knobs_read``), so moving a knob the shown method does not read,
    or going back to a setting seen before, reuses the credit instead of running the method
    again (up to ``size`` credits, least recently used first out). ``explorer(name, knobs)``
    returns what ``explore(env, models, rollouts, name, knobs)`` returns; ``n_runs`` counts the
    methods actually run."""

    def __init__(self, env, models: SimpleNamespace, rollouts: Rollouts, *, size: int = 256) -> None:
        self.env, self.models, self.rollouts = env, models, rollouts
        self.size = check_int("size", size, low=1)
        self.n_runs = 0
        self._kept: OrderedDict = OrderedDict()

    def __call__(self, name: str, knobs: Knobs = Knobs()) -> Credit:
        key = (name, knobs_read(name, knobs))
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        credit = explore(self.env, self.models, self.rollouts, name, knobs)
        self.n_runs += 1
        self._kept[key] = credit
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return credit


def bonus_landing(base: torch.Tensor, boosted: torch.Tensor, rollouts: Rollouts, *, threshold: float = 0.05) -> dict:
    """Where an additive credit bonus (HICRA's boosted minus base credit) lands, against the truth.

    Shares of the total |bonus| on tokens whose Monte Carlo step advantage is above
    ``threshold`` ("deserved credit"), below ``-threshold`` ("deserved blame") or in between,
    and on the first wrong step's tokens (``scoring.first_error_positions``); plus the share of
    generated tokens that got any bonus.
    """
    truth = truth_step_advantage(rollouts).double()
    bonus = (torch.as_tensor(boosted).double() - torch.as_tensor(base).double()).abs() * rollouts.mask
    total = float(bonus.sum())

    def share(where):
        return float(bonus[where & rollouts.mask].sum()) / total if total > 0 else 0.0

    return {"tokens_with_bonus": float((bonus > 0).sum()) / max(int(rollouts.mask.sum()), 1),
            "on_positive_truth": share(truth > threshold), "on_negative_truth": share(truth < -threshold),
            "on_near_zero_truth": share(truth.abs() <= threshold),
            "on_first_wrong_step": share(first_error_positions(rollouts))}


def first_error_roles(rollouts: Rollouts) -> dict[str, int]:
    """What went wrong in each rollout's first wrong step: a wrong ``operand`` (a or b of
    ``a+b=c`` is not the running total or the next operand: a planning error in HICRA's terms),
    a wrong ``result`` (c != a + b: a procedural error) or ``other`` (a malformed step, a wrong or
    misplaced answer)."""
    from labkit.envs.arithmetic.env import parse_steps

    counts = {"operand": 0, "result": 0, "other": 0}
    for b in (rollouts.truth["first_error_step"] >= 0).nonzero().flatten().tolist():
        text = "".join(tok for tok, m in zip(rollouts.text[b], rollouts.mask[b].tolist()) if m)
        steps, ops = parse_steps(text), rollouts.info["problems"][b].operands
        i = int(rollouts.truth["first_error_step"][b])
        acc = ops[0]
        for s in steps[:i]:  # the running total as written (local correctness, like the verifier)
            acc = s.result if s.kind == "step" else acc
        s = steps[i]
        if s.kind == "step" and i + 1 < len(ops) and (s.lhs != acc or s.rhs != ops[i + 1]):
            counts["operand"] += 1
        elif s.kind == "step" and i + 1 < len(ops) and s.result != s.lhs + s.rhs:
            counts["result"] += 1
        else:
            counts["other"] += 1
    return counts


def capo_error_sweep(env, models: SimpleNamespace, rollouts: Rollouts, error_rates: Sequence[float] = (0.0, 0.1, 0.3),
                     *, seeds: Sequence[int] = (0, 1, 2, 3)) -> pd.DataFrame:
    """CAPO with its stand-in verifier at each error rate: mean hit rate and within-rollout rank
    correlation over ``seeds`` (the verifier's flips are random), one row per error rate."""
    rates = [float(r) for r in error_rates]
    if not rates:
        raise ValueError("error_rates: need at least one error rate")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    rows = []
    for rate in rates:
        scores = [credit_quality(explore(env, models, rollouts, "CAPO", Knobs(error_rate=rate, seed=s)), rollouts)
                  for s in seeds]
        rows.append({"error_rate": rate, "hit_rate": sum(q["hit_rate"] for q in scores) / len(seeds),
                     "rank_corr_within": sum(q["rank_corr_within"] for q in scores) / len(seeds),
                     "seeds": len(seeds)})
    return pd.DataFrame(rows)


DATA_DIR = data_dir()
PADDING_SCRIPT = "build_pure_padding.py"


def load_padding(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The PURE padding measurement cached by ``scripts/build_pure_padding.py`` in ``path``
    (default ``data/pure_padding/static.json``): (results, meta). Raises if the file is missing,
    foreign or stale (built from another model or PRM, ``labkit.core.cache``)."""
    data = read_meta(Path(path) if path is not None else DATA_DIR / "pure_padding" / "static.json",
                     script=PADDING_SCRIPT, what="padding measurement")
    return pd.DataFrame(data["results"]), data["meta"]


def implicit_training_log(path: Path | None = None) -> dict:
    """The held-out success of the shipped model and its DPO / T-REG copies, from
    ``scripts/train_implicit_lm.py``'s log (``path``, default ``data/implicit_lm/train_log.json``)."""
    log = read_meta(Path(path) if path is not None else DATA_DIR / "implicit_lm" / "train_log.json",
                    script="train_implicit_lm.py", what="training log")
    return dict(log["eval"])


PADDING_RL_RUN = "rl_it40_lr3e-05_vw0"  # the longer, larger-step run of scripts/build_pure_padding.py --rl


def load_padding_rl(run: str = PADDING_RL_RUN, path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """Curves of the RL runs of ``scripts/build_pure_padding.py --rl`` (one row per label, seed and
    iteration: train reward, held-out success at evaluation points, share of over-long and
    malformed responses, mean steps) and the run's settings; ``run`` names the files
    (``rl_it<iterations>_lr<lr>_vw<verifiable weight>``) in ``path`` (default
    ``data/pure_padding``)."""
    # the run's name spells the options that build it
    name = re.fullmatch(r"rl_it(\d+)_lr(.+)_vw(.+)", str(run))
    args = ["--rl"] + (["--iterations", name[1], "--lr", name[2], "--verifiable-weight", name[3]] if name else [])
    meta, files = read_cache(Path(path) if path is not None else DATA_DIR / "pure_padding", script=PADDING_SCRIPT,
                             meta=f"{run}.json", files=[f"{run}.csv"], args=args, what="padding RL run")
    return pd.read_csv(files[f"{run}.csv"]), meta


def padding_rl_summary(curves: pd.DataFrame, *, last: int = 6) -> pd.DataFrame:
    """Per credit form: held-out success before and after training (mean, min and max over
    seeds), and the share of over-long (padded) and malformed responses over the last ``last``
    iterations (mean over seeds, and the largest seed's)."""
    for col in ("label", "seed", "iteration", "success", "over_long", "malformed"):
        if col not in curves.columns:
            raise ValueError(f"curves: missing column {col!r}; pass load_padding_rl()'s curves")
    rows = []
    for label, runs in curves.groupby("label", sort=False):
        evals = runs.dropna(subset=["success"])
        first = evals[evals.iteration == evals.iteration.min()].success
        end = evals[evals.iteration == evals.iteration.max()].success
        tail = runs[runs.iteration > runs.iteration.max() - last].groupby("seed")[["over_long", "malformed"]].mean()
        rows.append({"form": label, "success_before": first.mean(), "success_after": end.mean(),
                     "after_min": end.min(), "after_max": end.max(), "over_long": tail.over_long.mean(),
                     "over_long_worst_seed": tail.over_long.max(), "malformed": tail.malformed.mean()})
    return pd.DataFrame(rows)
