"""Notebook 04, steps, segments and process rewards: between VinePPO's vines and the agents, which
of the reasoning-side credit families finds the step where the tiny LM went wrong, and what does
each one cost?

Everything runs on the same 32 reference rollouts as notebooks 02 and 03 (``load_reference``),
whose cached 256-vine Monte Carlo step advantages are the truth. ``Method`` names one estimator
with its settings (the roster of them, ``reasoning_methods``, and the models they need,
``load_models``, live in ``labkit.course.reasoning_roster``, shared with the script below);
``credit_quality`` scores one credit against the truth (first-wrong-step hit
rate and step-level rank correlation from ``labkit.scoring``, cost); ``cross_family_table`` does
it for a list of methods. Only 8 reference rollouts have a wrong step, so the comparison itself
is measured on a larger sample over several sampling seeds, cached by
``scripts/build_family_hits.py`` (``load_family_hits``); ``family_intervals`` turns it into hit
rates and rank correlations with intervals and paired differences. Each runner is seeded and
returns plain data.
"""
from __future__ import annotations

import re
import time
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from labkit.core.cache import read_cache, read_meta
from labkit.core.checks import check_int
from labkit.core.paths import data_dir, data_path
from labkit.core.credit import Credit
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.course import reasoning_roster as roster
from labkit.course.reasoning_roster import Knobs, Method, method_by_name, reasoning_methods
from labkit.envs.arithmetic.truth import truth_step_advantage
from labkit.scoring import first_error_hit_rate, first_error_positions, step_rank_correlation


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


def timed_run(method: Method, rollouts: Rollouts) -> Credit:
    """``method.run(rollouts)``, with the seconds the call took in the credit's
    ``info["seconds"]``: a credit computed this way can be handed to ``cross_family_table``,
    which then scores it instead of running the method again."""
    if not isinstance(method, Method):
        raise TypeError(f"method: expected a Method, got {type(method).__name__}")
    start = time.perf_counter()
    credit = method.run(rollouts)
    credit.info["seconds"] = time.perf_counter() - start
    return credit


def cross_family_table(methods: Sequence[Method], rollouts: Rollouts, *, credits: Mapping[str, Credit] | None = None,
                       progress: bool = True) -> pd.DataFrame:
    """Every method in ``methods`` run on ``rollouts`` and scored by ``credit_quality``.

    One row per method, in the given order, with its family, notebook, set-up note, stand-in
    flag and the seconds the call took on this machine (a wall-clock figure: it varies between
    machines and runs, unlike the forward-pass counts). ``credits``: credits some of the
    methods already gave on these same rollouts, by method name, each from ``timed_run``; those
    are scored, not computed again (every method is seeded, so running it again would give the
    same credit), with the seconds ``timed_run`` measured.
    """
    methods = list(methods)
    if not methods:
        raise ValueError("methods: need at least one Method")
    for m in methods:
        if not isinstance(m, Method):
            raise TypeError(f"methods: expected Method entries, got {type(m).__name__}")
    credits = dict(credits or {})
    names = [m.name for m in methods]
    for name, credit in credits.items():
        if name not in names:
            raise ValueError(f"credits: {name!r} is not one of the methods {names}")
        if not isinstance(credit, Credit) or "seconds" not in credit.info:
            raise ValueError(f"credits: {name!r} needs a Credit from timed_run (it records the seconds)")
        if credit.token.shape != rollouts.mask.shape:
            raise ValueError(f"credits: {name!r} was computed on other rollouts (shape {tuple(credit.token.shape)})")
    rows = []
    for m in progress_bar(methods, desc="methods", enabled=progress):
        credit = credits[m.name] if m.name in credits else timed_run(m, rollouts)
        rows.append({"method": m.name, "family": m.family, "notebook": m.notebook,
                     **credit_quality(credit, rollouts), "seconds": credit.info["seconds"], "setup": m.setup,
                     "status": m.status})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the roster (shared with a script)
# The roster's names, read by the notebook from its lesson; they live in reasoning_roster so that
# scripts/build_family_hits.py runs the very same methods.
one_group, with_cost, load_models = roster.one_group, roster.with_cost, roster.load_models
# the methods published after the survey, and their credits on the 32 reference rollouts (cached)
later_methods, load_later_credits = roster.later_methods, roster.load_later_credits
KNOB_USE = roster.KNOB_USE


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

    def remember(self, name: str, credit: Credit, knobs: Knobs = Knobs()) -> None:
        """Keep ``credit`` as the answer for ``name`` at ``knobs``: a credit the notebook already
        computed with the same method and settings (``reasoning_methods`` at the same knobs, on
        the same rollouts), so the explorer shows it without running the method again."""
        if not isinstance(credit, Credit):
            raise TypeError(f"credit: expected a Credit, got {type(credit).__name__}")
        if credit.token.shape != self.rollouts.mask.shape:
            raise ValueError(f"credit: computed on other rollouts (shape {tuple(credit.token.shape)})")
        self._kept[(name, knobs_read(name, knobs))] = credit
        self._kept.move_to_end((name, knobs_read(name, knobs)))
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


def prompt_answers(explorer: Explorer, settings: Sequence[tuple[str, Knobs]]) -> pd.DataFrame:
    """What the explorer shows at each of ``settings`` ((method name, Knobs) pairs): one row per
    setting, in order, with a label (``setting``: the method and the knobs it reads, such as
    "SPO k=4 threshold=0.9"), the method, the knobs it reads (``k``, ``threshold``,
    ``error_rate``; NaN where the method ignores one), and ``credit_quality``'s ``hit_rate``,
    ``chance``, ``rank_corr_within`` and ``policy_forwards``. The credits come from the
    explorer's memory where it holds them."""
    if not isinstance(explorer, Explorer):
        raise TypeError(f"explorer: expected an Explorer, got {type(explorer).__name__}")
    settings = list(settings)
    if not settings:
        raise ValueError("settings: need at least one (method, Knobs) pair")
    rows = []
    for name, knobs in settings:
        if not isinstance(knobs, Knobs):
            raise TypeError(f"settings: expected (method name, Knobs) pairs, got a {type(knobs).__name__}")
        read = dict(knobs_read(name, knobs))
        q = credit_quality(explorer(name, knobs), explorer.rollouts)
        label = " ".join([name] + [f"{k}={v:g}" for k, v in read.items() if k != "seed"])
        rows.append({"setting": label, "method": name,
                     **{k: read.get(k, float("nan")) for k in ("k", "threshold", "error_rate")},
                     **{k: q[k] for k in ("hit_rate", "chance", "rank_corr_within", "policy_forwards")}})
    return pd.DataFrame(rows)


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


# --------------------------------------------------------------------------- the table on a larger sample
FAMILY_HITS_DIR = data_path("family_hits")


def load_family_hits(path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """Every method of the cross-family table scored on a larger sample, over several sampling
    seeds, cached by ``scripts/build_family_hits.py`` in ``path`` (default ``data/family_hits``):
    (hits, meta). Hits in long form, one row per (seed, method, rollout with a wrong step):
    ``seed``, ``method``, ``row`` (index in that seed's sample), ``hit`` and ``chance``
    (``labkit.scoring.first_error_hits``), ``rank_corr_within`` (Spearman's rho of the rollout's
    step credits against a Monte Carlo step advantage; NaN where there is nothing to rank),
    ``first_error_step``, ``steps``, ``reward``. Raises if the cache is missing, foreign or stale
    (``labkit.core.cache``)."""
    meta, files = read_cache(Path(path) if path is not None else FAMILY_HITS_DIR, script="build_family_hits.py",
                             files=["hits.csv"], what="cached hits")
    return pd.read_csv(files["hits.csv"]), meta


FAMILY_SCORES = ("hit", "rank_corr_within")


def family_intervals(hits: pd.DataFrame, *, score: str = "hit", reference: str = "VinePPO",
                     methods: Sequence[str] | None = None, level: float = 0.95, n_boot: int = 4000,
                     seed: int = 0) -> pd.DataFrame:
    """How far each method's score on ``hits`` (``load_family_hits``') could move, and whether
    it can be told apart from chance and from ``reference``.

    ``score`` is ``"hit"`` (the first-wrong-step hit rate) or ``"rank_corr_within"`` (the mean
    within-rollout rank correlation with the truth; rollouts with nothing to rank are left out).
    One row per method of ``methods`` (default: every method, in the cache's order) with
    ``rollouts`` scored, the ``mean`` score and its ``level`` interval over the rollouts
    (``low``, ``high``: Wilson for a hit rate, the bootstrap below for a correlation), the
    lowest and highest of the per-sample means (``seed_low``, ``seed_high``; one sample per
    sampling seed), and two differences
    paired over the same rollouts: the score minus chance (``vs_chance``, ``vs_chance_low``,
    ``vs_chance_high``; chance is a random pick's hit, or a correlation of 0) and minus
    ``reference``'s (``vs_ref``, ``vs_ref_low``, ``vs_ref_high``; 0 for the reference itself).
    An interval that covers 0 says the sample cannot tell the two apart.

    The differences' intervals are ``labkit.scoring.paired_difference``'s paired bootstrap
    (``n_boot`` resamples of the rollouts, numpy seeded ``seed``, percentile interval), with the
    same numbers: the resampled rollouts are drawn once and shared by every method instead of
    drawn again per call, which is what makes a table of 20 methods quick.
    """
    from labkit.core.checks import check_choice, check_number
    from labkit.scoring import wilson_interval

    check_choice("score", score, FAMILY_SCORES)
    n_boot = check_int("n_boot", n_boot, low=1)
    level = check_number("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    seed = check_int("seed", seed)
    need = {"seed", "method", "row", "hit", "chance", "rank_corr_within"}
    if not isinstance(hits, pd.DataFrame) or not need <= set(hits.columns):
        raise ValueError(f"hits: expected load_family_hits' table with columns {sorted(need)}")
    order = list(dict.fromkeys(hits.method))
    methods = order if methods is None else list(methods)
    if not methods:
        raise ValueError("methods: need at least one method")
    for argument, names in (("methods", methods), ("reference", [reference])):
        for name in names:
            if name not in order:
                raise ValueError(f"{argument}: no method {name!r} in hits; choose from {order}")
    wide = hits.pivot_table(index=["seed", "row"], columns="method", values=score, dropna=False)
    # every method scores the same rollouts; a correlation is missing only where the truth has
    # nothing to rank, the same rollouts for every method
    keep = wide[[*methods, reference]].notna().all(axis=1)
    if not bool(keep.any()):
        raise ValueError(f"hits: no rollout has a {score} score for every method asked for")
    wide = wide[keep]
    chance = (hits.groupby(["seed", "row"]).chance.first().reindex(wide.index).to_numpy(float) if score == "hit"
              else np.zeros(len(wide)))
    idx = np.random.default_rng(seed).integers(0, len(wide), size=(n_boot, len(wide)))  # paired_difference's draw

    def paired(d: np.ndarray) -> tuple[float, float, float]:
        lo, hi = np.quantile(d[idx].mean(1), [(1 - level) / 2, (1 + level) / 2])
        return float(d.mean()), float(lo), float(hi)

    ref = wide[reference].to_numpy(float)
    rows = []
    for name in methods:
        x = wide[name].to_numpy(float)
        vs_chance, vs_ref = paired(x - chance), paired(x - ref)
        low, high = (wilson_interval(float(x.sum()), len(x), level=level) if score == "hit"
                     else vs_chance[1:])  # a correlation's chance is 0: its interval is the mean's
        per_seed = wide[name].groupby(level="seed").mean()
        rows.append({"method": name, "rollouts": len(x), "mean": float(x.mean()), "low": low, "high": high,
                     "seed_low": float(per_seed.min()), "seed_high": float(per_seed.max()),
                     "vs_chance": vs_chance[0], "vs_chance_low": vs_chance[1], "vs_chance_high": vs_chance[2],
                     "vs_ref": vs_ref[0], "vs_ref_low": vs_ref[1], "vs_ref_high": vs_ref[2]})
    out = pd.DataFrame(rows)
    out.attrs.update(score=score, reference=reference, level=level, n_boot=n_boot)
    return out


def interval_text(table: pd.DataFrame, *, decimals: int = 3) -> pd.DataFrame:
    """``family_intervals``' table for reading: one text column each for the mean with its
    interval, the per-sample range, and the two paired differences with theirs (columns named
    after the reference)."""
    need = {"method", "rollouts", "mean", "low", "high", "seed_low", "seed_high", "vs_chance", "vs_ref"}
    if not isinstance(table, pd.DataFrame) or not need <= set(table.columns):
        raise ValueError("table: expected family_intervals' table")
    d = check_int("decimals", decimals, low=0)

    def num(v, sign=False):
        # rounding then adding 0.0 turns a negative zero positive: a -0.000 never prints
        return f"{round(float(v), d) + 0.0:{'+' if sign else ''}.{d}f}"

    def ci(m, lo, hi, sign=False):
        return f"{num(m, sign)} [{num(lo, sign)}, {num(hi, sign)}]"

    ref, level = table.attrs.get("reference", "reference"), table.attrs.get("level", 0.95)
    return pd.DataFrame({
        "method": table.method, "rollouts": table.rollouts,
        f"mean [{100 * level:g} % interval]": [ci(r.mean, r.low, r.high) for r in table.itertuples()],
        "per sample": [f"{num(r.seed_low)} to {num(r.seed_high)}" for r in table.itertuples()],
        "minus chance": [ci(r.vs_chance, r.vs_chance_low, r.vs_chance_high, True) for r in table.itertuples()],
        f"minus {ref}": [ci(r.vs_ref, r.vs_ref_low, r.vs_ref_high, True) for r in table.itertuples()]})


def family_costs(meta: dict) -> pd.DataFrame:
    """What each method of ``load_family_hits``' cache cost per sample (one rollout of each of
    ``meta["n_problems"]`` problems): the mean over the samples of its policy forwards, policy
    token positions and calls to another model, one row per method in the cache's order."""
    samples = meta.get("samples") if isinstance(meta, dict) else None
    if not samples:
        raise ValueError("meta: expected load_family_hits' meta, with its samples")
    names = list(samples[0]["cost"])
    rows = [{"method": name, **{col: sum(s["cost"][name][col] for s in samples) / len(samples)
                                for col in ("policy_forwards", "policy_tokens", "aux_calls")}} for name in names]
    return pd.DataFrame(rows)
