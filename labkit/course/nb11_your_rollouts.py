"""Notebook 11, your own rollouts: a training run's trajectories read from a file (``labkit.io``),
the setup classified from them and notebook 00's decision tree walked from the measured numbers
(``labkit.diagnose``), and the estimators the data supports compared without any ground truth.

The two shipped samples (``data/sample_rollouts/``, written by ``scripts/build_sample_rollouts.py``)
stand in for "your file": the tiny LM on the arithmetic task (reasoning, one outcome per
completion) and notebook 05's ToolWorld agent (turns, tool output, a noisy environment).
Runners return DataFrames, charts, or the ``Diagnosis`` itself.
"""
from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import pandas as pd
import torch

from labkit.core.checks import check_choice, check_int
from labkit.core.cache import read_cache
from labkit.core.paths import data_path
from labkit.core.rollouts import Rollouts
from labkit.diagnose import Diagnosis, check_framework_advantages, diagnose, disagreement, measure_groups, rms_scaled
from labkit.io import read_rollouts, to_trl, to_verl_batch, write_rollouts
from labkit.credit import ESTIMATORS
from labkit.survey import after_survey_estimators, decision_tree_graph
from labkit import viz

SAMPLES = {"arithmetic_lm": "the tiny LM on the arithmetic task (reasoning)",
           "toolworld": "the ToolWorld agent of notebook 05 (tools, turns)"}


# --------------------------------------------------------------------------- the files
def sample_path(name: str) -> Path:
    """The shipped sample ``name`` (a key of :data:`SAMPLES`), as a path to its JSONL file."""
    check_choice("name", name, tuple(SAMPLES))
    file = f"{name}.jsonl"
    _, paths = read_cache(data_path("sample_rollouts"), script="build_sample_rollouts.py", files=[file],
                          argument="name", what="sample rollouts")
    return paths[file]


def first_record(name: str, *, keep: int = 6) -> str:
    """The first record of a sample, as it sits in the file, with every list cut to its first
    ``keep`` entries (the real lines are a few hundred entries long)."""
    keep = check_int("keep", keep, low=1)
    with open(sample_path(name), encoding="utf-8") as fh:
        record = json.loads(fh.readline())
    shown = {k: (v[:keep] + ["..."] if isinstance(v, list) and len(v) > keep else v) for k, v in record.items()}
    return json.dumps(shown, ensure_ascii=False)


def bad_record_message() -> str:
    """The error ``read_rollouts`` gives for a small file whose second record puts a reward on a
    token a tool wrote (the temporary folder's path shown as ``<tmp>``)."""
    good = {"group_id": 0, "tokens": [5, 6, 7], "reward": 1.0}
    bad = {"group_id": 0, "tokens": [5, 6, 7], "generated": [1, 0, 1], "rewards": [0.0, 0.5, 0.0], "reward": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in (good, bad)) + "\n", encoding="utf-8")
        try:
            read_rollouts(path)
        except ValueError as err:
            return str(err).replace(str(path), "<tmp>/run.jsonl").replace(tmp, "<tmp>")
    raise AssertionError("the malformed record was accepted")   # the reader lost a check: say so loudly


#: The estimators this notebook's diagnoses compare: every registered one but those of the methods
#: published after the survey (``labkit.survey.after_survey_estimators``), which would add a row
#: and a column each to the agreement matrix without a lesson of their own here.
COMPARED = tuple(n for n in ESTIMATORS if n not in after_survey_estimators())


@functools.lru_cache(maxsize=4)
def diagnosis(name: str) -> Diagnosis:
    """``labkit.diagnose.diagnose`` of a shipped sample (cached: the widget asks again), comparing
    the estimators of the survey and of notebooks 01-09 (``COMPARED``); ``diagnose`` itself
    also runs the methods published after the survey, which notebook 10 sets apart."""
    return diagnose(sample_path(name), progress=False, estimators=COMPARED)


# --------------------------------------------------------------------------- what was measured
def measured_table(dx: Diagnosis) -> pd.DataFrame:
    """The diagnosis's measured quantities as one (quantity, value) table, exact counts only."""
    L, R, G, P, S = dx.lengths, dx.rewards, dx.groups, dx.positions, dx.stochasticity
    rows = [
        ("trajectories", f"{dx.n_trajectories:,}"),
        ("generated tokens: min / median / max", f"{L.generated_min} / {L.generated_median:g} / {L.generated_max}"),
        ("turns: min / median / max", "no turn structure" if L.turns_hist is None
         else f"{L.turns_min} / {L.turns_median:g} / {L.turns_max}"),
        ("tool-output share of positions", f"{P.tool_share:.1%}"),
        ("trajectories with a non-zero reward", f"{R.share_nonzero:.1%}"),
        ("trajectories with an intermediate reward", f"{R.share_intermediate:.1%}"),
        ("groups (size)", f"{G.n_groups} ({G.size_min}-{G.size_max})"),
        ("zero-variance groups", f"{G.n_zero_variance} of {G.n_groups}: "
                                 f"{G.share_rows_zero_variance:.1%} of trajectories get no GRPO gradient"),
        ("stochasticity", "not measurable (nothing repeats)" if not S.measurable else
         f"{S.rate:.3f} ({S.varying_keys} of {S.repeated_keys} repeated situations varied)"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value"])


def histogram_chart(hist, label: str, title: str):
    """A bar chart of one of the diagnosis's histograms (lengths, turns, rewards)."""
    df = pd.DataFrame(hist.rows(), columns=[label, "trajectories"])
    return viz.bar_chart(df, label, "trajectories", title=title, sort=list(df[label]))


def tree_path(dx: Diagnosis) -> pd.DataFrame:
    """Each question the tree asked: the answer, the number behind it and whether it was
    measured, given (an argument) or assumed."""
    return pd.DataFrame([(a.question, a.answer, a.evidence, a.source) for a in dx.answers],
                        columns=["question", "answer", "evidence", "source"])


def tree_picture(dx: Diagnosis, title: str | None = None):
    """Notebook 00's tree with this diagnosis's path lit."""
    nodes, edges = decision_tree_graph(dx.recommendation.leaf)
    return viz.tree_chart(nodes, edges, title=title or f"{dx.recommendation.method_class}")


# --------------------------------------------------------------------------- estimators compared
def agreement_long(dx: Diagnosis) -> pd.DataFrame:
    """The agreement matrix (Spearman rank correlation of the credit over generated tokens) in
    long form: one row per (estimator, estimator) pair."""
    m = dx.comparison.agreement
    return (m.rename_axis("estimator").reset_index()
            .melt(id_vars="estimator", var_name="against", value_name="rank_corr"))


def agreement_chart(dx: Diagnosis, title: str):
    """The agreement matrix as a heat table whose columns narrow as more estimators run, so that
    it fits the notebook's output column (about 620 px of cells)."""
    long = agreement_long(dx).round(2)
    step = max(28, min(44, 620 // max(long["against"].nunique(), 1)))
    return viz.heat_table(long, "estimator", "against", "rank_corr", title=title).properties(width={"step": step})


def pair_disagreement(dx: Diagnosis, a: str, b: str) -> pd.DataFrame:
    """Trajectories of the compared sample ordered by how much estimators ``a`` and ``b``
    disagree on them (``labkit.diagnose.disagreement`` for the pair: the spread of their
    RMS-scaled credit, averaged over the trajectory's generated tokens)."""
    comp = dx.comparison
    for arg, name in (("a", a), ("b", b)):
        check_choice(arg, name, tuple(comp.ran))
    return disagreement({a: comp.credit[a], b: comp.credit[b]}, comp.sample_rollouts.mask)


def disputed_heatmaps(dx: Diagnosis, a: str, b: str, *, rows: int = 6, width: int | None = None):
    """Side-by-side heatmaps of ``a`` and ``b`` (RMS-scaled) on the ``rows`` trajectories where
    they disagree most, with their rank correlation over the whole sample."""
    rows = check_int("rows", rows, low=1, high=viz.MAX_ROWS)
    comp = dx.comparison
    order = pair_disagreement(dx, a, b)
    pick = order["row"].head(rows).tolist()
    ro = comp.sample_rollouts
    panels = {f"{n} (RMS-scaled)": rms_scaled(comp.credit[n], ro.mask)[pick] for n in (a, b)}
    labels = [f"#{r} R={float(ro.scores[r]):g}" for r in pick]
    kw = {} if width is None else {"width": width}
    chart = viz.compare_heatmaps(panels, [ro.text[r] for r in pick] if ro.text else None, row_labels=labels, **kw)
    corr = float(comp.agreement.loc[a, b])
    top = order.iloc[0]
    summary = (f"rank correlation of {a} and {b} over the {len(ro)} compared trajectories: {corr:.3f}; "
               f"most disputed trajectory #{int(top.row)}: disagreement {top.disagreement:.3f}, "
               f"sign conflict on {top.sign_conflict:.0%} of its tokens")
    return chart, summary


def disputed_prompt_answers(dx: Diagnosis, a: str = "grpo", b: str = "carl", *, rows: int = 6,
                            others: tuple = ("reinforce", "tempo")) -> dict:
    """What the disputed-trajectories prediction block asks about, read off a diagnosis.

    For estimators ``a`` and ``b`` (both in ``dx.comparison.ran``): ``corr`` (their rank
    correlation over the sample), ``rows`` (the ``rows`` trajectories they dispute most, most
    disputed first), ``text`` (the most disputed trajectory's generated text, padding and
    end-of-sequence left out), ``lone_failures`` (True when every one of those trajectories failed
    while every other member of its group succeeded), ``entropy`` (mean per-token entropy of each
    of those trajectories, nats; None when the file recorded none), ``max_abs_b`` (the largest
    |credit| ``b`` gives any of their generated tokens), ``b_updates`` ("none", "some" or "all":
    how many of those tokens ``b`` gives a non-zero credit), ``a_credit`` (``a``'s mean credit on the
    most disputed trajectory) and ``a_min`` (the most negative credit ``a`` gives any token of the
    sample). ``others``: for each name in ``others`` that ran, a dict with ``corr`` (its rank
    correlation with ``a``), ``same_rows`` (whether its most disputed trajectories against ``a``
    are the same ``rows``) and ``credit`` (its mean credit on the most disputed trajectory)."""
    rows = check_int("rows", rows, low=1)
    comp = dx.comparison
    order = pair_disagreement(dx, a, b)   # checks both names
    ro = comp.sample_rollouts
    top = [int(r) for r in order["row"].head(rows)]
    mask = ro.mask[top]
    lone = all(float(ro.scores[r]) == 0.0
               and float(ro.scores[ro.group_ids == ro.group_ids[r]].sum()) == int((ro.group_ids == ro.group_ids[r]).sum()) - 1
               for r in top)
    entropy = None
    if ro.entropies is not None:
        entropy = [float(ro.entropies[r][ro.mask[r]].double().mean()) for r in top]
    text = None
    if ro.text:
        text = "".join(t for t, m in zip(ro.text[top[0]], ro.mask[top[0]].tolist()) if m).replace("<eos>", "")
    credit_a, credit_b = comp.credit[a], comp.credit[b]
    out = {"corr": float(comp.agreement.loc[a, b]), "rows": top, "text": text, "lone_failures": lone,
           "entropy": entropy, "max_abs_b": float(credit_b[top][mask].abs().max()),
           "b_updates": {0.0: "none", 1.0: "all"}.get(float((credit_b[top][mask] != 0).double().mean()), "some"),
           "a_credit": float(credit_a[top[0]][ro.mask[top[0]]].double().mean()),
           "a_min": float(credit_a[ro.mask].min()), "others": {}}
    for name in others:
        if name in comp.ran:
            again = [int(r) for r in pair_disagreement(dx, a, name)["row"].head(rows)]
            out["others"][name] = {"corr": float(comp.agreement.loc[a, name]), "same_rows": again == top,
                                   "credit": float(comp.credit[name][top[0]][ro.mask[top[0]]].double().mean())}
    return out


# --------------------------------------------------------------------------- your own file
def format_round_trip(rollouts: Rollouts) -> pd.DataFrame:
    """Write ``rollouts`` in every format labkit reads and read it back: JSONL and Parquet files in
    a temporary folder, a verl-style batch of tensors and TRL-style lists in memory. One row per
    format: trajectories read back, and whether tokens, mask and rewards came back equal."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("jsonl", "parquet"):
            path = write_rollouts(rollouts, Path(tmp) / f"rollouts.{fmt}")
            back = read_rollouts(path)
            rows.append((fmt, path.name, back))
    rows.append(("verl", "to_verl_batch(rollouts)", read_rollouts(to_verl_batch(rollouts), fmt="verl")))
    rows.append(("trl", "to_trl(rollouts)", read_rollouts(to_trl(rollouts), fmt="trl")))
    out = []
    for fmt, source, back in rows:
        T = min(back.horizon, rollouts.horizon)
        same = (back.batch_size == rollouts.batch_size
                and bool(torch.equal(back.mask[:, :T], rollouts.mask[:, :T]))
                and bool(torch.equal(back.tokens[:, :T][back.mask[:, :T]], rollouts.tokens[:, :T][rollouts.mask[:, :T]]))
                and bool(torch.allclose(back.scores.double(), rollouts.scores.double())))
        out.append({"format": fmt, "written as": source, "trajectories": back.batch_size, "same batch": same})
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- a real TRL run
def trl_run_path() -> Path:
    """The committed real TRL run (``data/framework_runs/trl_grpo``: a ``GRPOTrainer`` on the tiny
    LM, 4 steps; ``scripts/build_trl_run.py``), its output folder as TRL left it."""
    path = data_path("framework_runs", "trl_grpo")
    if not (path / "completions").is_dir():
        raise FileNotFoundError(f"the TRL run is missing from {path}; rebuild it with scripts/build_trl_run.py in "
                                f"TRL's side environment (make test-trl)")
    return path


@functools.lru_cache(maxsize=1)
def trl_diagnosis() -> Diagnosis:
    """``diagnose`` of the TRL run's folder, exactly as a practitioner would call it (cached)."""
    return diagnose(trl_run_path(), progress=False)


def trl_logged_zero_share() -> dict[int, float]:
    """TRL's own ``frac_reward_zero_std`` per step, from the run's ``log_history.json``."""
    history = json.loads((trl_run_path() / "log_history.json").read_text())
    return {int(h["step"]): float(h["frac_reward_zero_std"]) for h in history if "frac_reward_zero_std" in h}


def grouping_table(dx: Diagnosis) -> pd.DataFrame:
    """The zero-variance share of the TRL run three ways: grouped as labkit reads the files (training
    step and prompt), grouped by prompt alone (the same prompt at two steps merged: what a reader
    that ignores ``step`` computes), and TRL's own per-step log averaged."""
    ro = read_rollouts(trl_run_path())
    codes = {p: i for i, p in enumerate(dict.fromkeys(ro.prompts))}
    pooled = ro.with_(group_ids=torch.tensor([codes[p] for p in ro.prompts]))
    logged = trl_logged_zero_share()
    rows = [("training step and prompt (labkit)", dx.groups.n_groups, dx.groups.share_rows_zero_variance),
            ("prompt alone (steps merged)", measure_groups(pooled).n_groups,
             measure_groups(pooled).share_rows_zero_variance),
            ("TRL's own log (frac_reward_zero_std, mean over steps)", None, sum(logged.values()) / len(logged))]
    return pd.DataFrame([{"grouped by": g, "groups": "" if n is None else n, "zero-variance share": f"{s:.2%}"}
                         for g, n, s in rows])


def flag_table(dx: Diagnosis) -> pd.DataFrame:
    """The diagnosis's red flags: what was measured, the threshold, and the first thing to try."""
    return pd.DataFrame([{"red flag": f.title, "flagged at": f.threshold, "first thing to try": f.actions[0]}
                         for f in dx.flags])


def misconfigured_runs() -> list[Path]:
    """The TRL runs made with one setting changed each (``data/framework_runs/trl_*`` beside the
    default run; ``scripts/build_trl_run.py --all``), in name order."""
    default = trl_run_path()
    return sorted(p for p in default.parent.glob("trl_*") if p.is_dir() and p != default)


def credit_check_table() -> pd.DataFrame:
    """Each TRL run read and its logged advantages checked against labkit's recomputation: the
    trainer and setting it was made with (its ``meta.json``) beside the cause the check names."""
    out = []
    for path in [trl_run_path(), *misconfigured_runs()]:
        meta = json.loads((path / "meta.json").read_text())
        made = ", ".join(f"{k}={v}" for k, v in meta.get("settings", {}).items()) or (
            "defaults, one prompt twice in the dataset" if meta.get("variant") == "duplicate_prompts" else "defaults")
        check = check_framework_advantages(read_rollouts(path))
        out.append({"run": path.name, "made with": f"{meta.get('trainer', 'GRPOTrainer')} {made}",
                    "matches TRL's default": check.matches, "cause found": check.cause,
                    "max |difference| from the default": f"{check.default_max_diff:.2g}"})
    return pd.DataFrame(out)
