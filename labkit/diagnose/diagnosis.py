"""``diagnose``: from a batch of rollouts (or a rollout file, streamed in chunks) to a :class:`Diagnosis`."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from labkit.core.checks import check_bool, check_int
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.diagnose import report
from labkit.io import iter_rollouts, read_rollouts
from labkit.diagnose.compare import (EstimatorComparison, _check_names, compare_sample, sample_rows,
                                     supported_estimators, tally_features)
from labkit.diagnose.advice import Flag, red_flags
from labkit.diagnose.decide import Answer, decision_inputs, walk_tree
from labkit.diagnose.framework_credit import AdvantageCheck, check_framework_advantages
from labkit.diagnose.training_steps import RunSteps, run_steps
from labkit.diagnose.results import GroupStats, Lengths, PositionStats, RewardStats, Stochasticity
from labkit.diagnose.tally import Tally
from labkit.survey.decision_tree import DecisionInputs, Recommendation

__all__ = ["Diagnosis", "diagnose", "DEFAULT_SAMPLE", "PROGRESS_MIN_POSITIONS", "STREAM_BATCH_ROWS", "source_notes"]

#: What a group is when the data gives its group ids itself.
GIVEN_GROUPING = "group ids as given"


def source_notes(info: dict) -> tuple[str, ...]:
    """Sentences on how a batch was read, from a reader's ``info``: what a position is, which
    columns are the reward, missing rewards, fields not used."""
    notes = []
    if info.get("format"):
        notes.append(f"format: {info['format']}")
    if info.get("tokenizer"):
        notes.append(f"positions: {info['tokenizer']}")
    if info.get("reward_columns"):
        cols = info["reward_columns"]
        notes.append("reward: " + (f"column {cols[0]!r}" if len(cols) == 1 else
                                   "the unweighted sum of " + ", ".join(repr(c) for c in cols)))
    if info.get("missing_rewards"):
        notes.append(f"{info['missing_rewards']:,} missing reward values (None / NaN) counted as 0, as TRL's "
                     f"nansum does")
    if info.get("ignored_fields"):
        notes.append("fields not used: " + ", ".join(info["ignored_fields"]))
    return tuple(notes)

#: Trajectories (whole groups) the estimator comparison runs on by default: the measured
#: quantities always use every trajectory, the comparison a sample (its cost grows with the
#: estimators run, and 2,048 trajectories already rank credit over about half a million positions).
DEFAULT_SAMPLE = 2048
#: Records per chunk when :func:`diagnose` streams a file: on 100,000 x 256 Parquet the peak
#: resident memory is about 0.9 GB at 4,096 (0.37 GB of it the imports) and 1.0 GB at 8,192, with
#: the same speed to within the machine's noise.
STREAM_BATCH_ROWS = 4096
#: Trajectories the check of the framework's own advantages runs on at most: whole training steps
#: (each a batch the framework normalised over), spread over the run. The check recomputes the
#: advantages about a hundred ways, a few seconds at 20,000 rows.
CREDIT_CHECK_ROWS = 8192
#: ``progress=None`` shows progress bars from this many padded positions (B x T) on.
PROGRESS_MIN_POSITIONS = 2_000_000


@dataclass
class Diagnosis:
    """Everything :func:`diagnose` measured and concluded.

    Measured on every trajectory: ``lengths``, ``rewards``, ``groups``, ``positions`` (generated /
    tool output / padding), ``stochasticity``, ``features`` (what the data carries). Concluded:
    ``inputs`` (the tree's answers), ``evidence`` ({question id: (the number or argument behind
    its answer, "measured" / "given" / "assumed")} for every question, asked or not: answers off
    the path still raise caveats), ``answers`` (each question on the path with its evidence),
    ``recommendation`` (the leaf). ``comparison``: the estimators run on a
    sample (None when ``estimators=[]``). ``seconds``: wall time per stage.
    ``unit``: what a position is ("token", or "character" for text read without token ids and
    without a tokenizer: every length is then in characters). ``grouping``: what a group is
    (``info['grouping']`` of the data: "training step and prompt", "prompt", "uid", ...).
    ``source_notes``: how the source was read (tokenizer, reward columns, missing rewards,
    ignored fields), for the report. ``steps``: the run per training step and its drifts (None
    when the data carries no step, or one). ``flags``: the red flags, each with what to change
    (:mod:`labkit.diagnose.advice`). ``caveats``: the tree's caveats about what was measured or
    stated; ``unstated``: what the tree assumed because nobody said (no caveat rests on it).
    ``credit_check``: the framework's logged advantages set beside labkit's recomputation
    (:mod:`labkit.diagnose.framework_credit`), on whole training steps of at most
    :data:`CREDIT_CHECK_ROWS` trajectories; None when the data carries no advantages.
    """
    source: str
    n_trajectories: int
    horizon: int
    lengths: Lengths
    rewards: RewardStats
    groups: GroupStats
    positions: PositionStats
    stochasticity: Stochasticity
    features: dict[str, bool]
    inputs: DecisionInputs
    evidence: dict[str, tuple[str, str]]
    answers: list[Answer]
    recommendation: Recommendation
    comparison: EstimatorComparison | None
    seed: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    unit: str = "token"
    grouping: str = GIVEN_GROUPING
    source_notes: tuple[str, ...] = ()
    steps: RunSteps | None = None
    flags: tuple[Flag, ...] = ()
    caveats: tuple[str, ...] = ()
    unstated: tuple[str, ...] = ()
    credit_check: AdvantageCheck | None = None
    _blocks: list | None = field(default=None, repr=False, compare=False)
    _pngs: dict | None = field(default=None, repr=False, compare=False)

    def blocks(self) -> list:
        """The report's blocks (``labkit.diagnose.report``), built once."""
        if self._blocks is None:
            self._blocks = report.blocks(self)
        return self._blocks

    def _charts(self) -> dict[str, bytes]:
        if self._pngs is None:
            self._pngs = report.render_pngs(self.blocks())
        return self._pngs

    def summary(self) -> str:
        """A few lines for a terminal: the key numbers and the recommendation."""
        L, R, G, P, S = self.lengths, self.rewards, self.groups, self.positions, self.stochasticity
        rec = self.recommendation
        lines = [
            f"{self.source}: {self.n_trajectories:,} trajectories",
            f"  length (generated {self.unit}s) min / median / max: {L.generated_min:,} / {L.generated_median:,.1f} / "
            f"{L.generated_max:,}" + (f"; turns {L.turns_min} / {L.turns_median:g} / {L.turns_max}"
                                      if L.turns_hist is not None else ""),
            f"  non-zero reward: {R.share_nonzero:.1%} of trajectories; intermediate rewards: "
            f"{R.share_intermediate:.1%}",
            f"  groups: {G.n_groups:,} by {self.grouping} (size {G.size_min}-{G.size_max}); zero-variance: "
            f"{G.n_zero_variance:,} ({G.share_rows_zero_variance:.1%} of trajectories get no GRPO gradient)",
            f"  tool-output share of positions: {P.tool_share:.1%}",
            f"  stochasticity: {S.summary()}",
            "  tree: " + " -> ".join(f"{a.answer}" for a in self.answers),
            f"  recommended: {rec.method_class} ({', '.join(rec.candidates)})",
        ]
        if self.steps is not None:
            lines.append(f"  over {len(self.steps.table)} training steps: "
                         + ("; ".join(d.text for d in self.steps.drifts) or "no drift past the thresholds"))
        for f in self.flags:
            lines.append(f"  red flag: {f.title} (flagged at {f.threshold}); try: {f.actions[0]}")
        if self.comparison is not None:
            c = self.comparison
            lines.append(f"  estimators compared on {int(c.rows.numel()):,} trajectories: {', '.join(c.ran)}"
                         + (f"; skipped {', '.join(c.skipped)}" if c.skipped else ""))
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The report as Markdown (charts referenced as ``report_files/<name>.png``, which
        :meth:`save` writes)."""
        return report.render_markdown(self.blocks(), self._charts())

    def to_html(self) -> str:
        """The report as one self-contained HTML page (charts embedded, no network)."""
        return report.render_html(self.blocks(), self._charts())

    def save(self, out_dir) -> tuple[Path, Path]:
        """Write ``report.md`` (with ``report_files/*.png``) and ``report.html`` into ``out_dir``
        (created if needed); returns the two paths."""
        if not isinstance(out_dir, (str, os.PathLike)):
            raise TypeError(f"out_dir: expected a folder path, got {type(out_dir).__name__}")
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise ValueError(f"out_dir: {out} exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        pngs = self._charts()
        files = out / "report_files"
        files.mkdir(exist_ok=True)
        for name, png in pngs.items():
            (files / f"{name}.png").write_bytes(png)
        md, page = out / "report.md", out / "report.html"
        md.write_text(self.to_markdown(), encoding="utf-8")
        page.write_text(self.to_html(), encoding="utf-8")
        return md, page


def _pad_horizon(ro: Rollouts, T: int) -> Rollouts:
    """``ro`` padded on the right to ``T`` positions with the readers' padding (token 0, not
    generated, reward 0, labels -1, log-prob / entropy / state 0, text "")."""
    extra = T - ro.horizon
    if extra <= 0:
        return ro

    def pad(x: torch.Tensor, value) -> torch.Tensor:
        return torch.cat([x, torch.full((x.shape[0], extra), value, dtype=x.dtype)], 1)

    changes = {"tokens": pad(ro.tokens, 0), "mask": pad(ro.mask, False), "rewards": pad(ro.rewards, 0)}
    for name, value in (("step_ids", -1), ("turn_ids", -1), ("agent_ids", -1), ("logprobs", 0), ("entropies", 0),
                        ("states", 0)):
        if getattr(ro, name) is not None:
            changes[name] = pad(getattr(ro, name), value)
    if ro.text is not None:
        changes["text"] = [list(row) + [""] * extra for row in ro.text]
    return ro.with_(**changes)


def _read_sample(path: Path, fmt, rows: torch.Tensor, names, horizon: int, read: dict) -> Rollouts:
    """Rows ``rows`` of a file, as the same rows of the whole file read at once would be: group
    ids in the file's numbering (``names``: the streamed file's group names, None for integer
    ids), padded to the file's ``horizon``; ``read``: the reader's arguments."""
    sub = read_rollouts(path, fmt, rows=rows.numpy(), progress=False, **read)
    if names is not None:
        local = sub.info["group_names"]
        code = {name: i for i, name in enumerate(names)}
        ids = torch.tensor([code[local[g]] for g in sub.group_ids.tolist()], dtype=torch.long)
        sub = sub.with_(group_ids=ids, info={**sub.info, "group_names": tuple(names)})
    return _pad_horizon(sub, horizon)


def _check_rows(rows) -> torch.Tensor | None:
    """Indices of the trajectories the advantage check runs on: every one when they fit in
    :data:`CREDIT_CHECK_ROWS`, else whole training steps spread evenly over the run (a step is the
    batch a framework normalises over); None when nothing carries a logged advantage."""
    if "advantage" not in rows.columns:
        return None
    if len(rows) <= CREDIT_CHECK_ROWS or "step" not in rows.columns:
        return torch.arange(min(len(rows), CREDIT_CHECK_ROWS))
    sizes = rows.groupby("step", sort=True).size()
    per = max(1, int(CREDIT_CHECK_ROWS // max(1, int(sizes.median()))))
    chosen = sizes.index[sorted({int(round(i)) for i in np.linspace(0, len(sizes) - 1, per)})]
    return torch.from_numpy(np.flatnonzero(rows["step"].isin(chosen).to_numpy()))


def _known_caveats(rec: Recommendation, known: set[str]) -> tuple[str, ...]:
    """The tree's caveats that rest only on inputs in ``known`` (measured or stated)."""
    about = rec.caveat_about or [()] * len(rec.caveats)
    return tuple(c for c, needs in zip(rec.caveats, about) if set(needs) <= known)


def diagnose(source, *, fmt: str | None = None, can_replay: bool | None = None,
             privileged_info: bool | None = None,
             stochastic_env: bool | None = None, estimators: Sequence[str] | None = None,
             sample: int | None = DEFAULT_SAMPLE, seed: int = 0, progress: bool | None = None,
             batch_rows: int = STREAM_BATCH_ROWS, tokenizer=None, reward: str | Sequence[str] | None = None,
             trust_pickle: bool = False, max_length: int | None = None) -> Diagnosis:
    """Classify a training setup from its rollouts and walk notebook 00's decision tree.

    ``source``: a ``Rollouts``, or a path to a rollout file or a run's folder, read as
    ``labkit.io.read_rollouts`` reads it (``fmt``, ``tokenizer``, ``reward``, ``trust_pickle``:
    its arguments; a saved verl batch is read whole first). A file or folder is **streamed**: read in chunks of ``batch_rows`` records
    (``labkit.io.iter_rollouts``), each measured into a :class:`~labkit.diagnose.tally.Tally`
    and dropped, then only the comparison's sample is read back (``read_rollouts(rows=...)``).
    Memory is therefore bounded by one chunk (``batch_rows`` x its longest record) plus the
    sample, plus 16 bytes per trajectory and the stochasticity counts (one row per distinct
    (situation, result) pair), whatever the file's size; a ``Rollouts`` is measured by the same
    tally in one pass. Either way the numbers, the recommendation and the comparison are the
    ones the whole batch gives (tested on both shipped samples, JSONL and Parquet), with two
    limits: a file whose group ids are integers in its first chunk and strings later is refused
    (``iter_rollouts`` cannot renumber chunks already measured; ``diagnose(read_rollouts(path))``
    reads it), and a trajectory's total reward is summed over its chunk's width, so with several
    non-zero rewards in a row it may differ from the whole batch's in the last bit.

    ``can_replay`` / ``privileged_info``: properties of the training rig that no file shows
    (reported as given; None, the default: not stated, so the tree walks as if False and the
    report raises no caveat about them). ``max_length``: the generation cap, in the data's
    positions (tokens, or characters for text read without a tokenizer), for the share of
    trajectories that reached it (None: not measured). ``stochastic_env``: None to measure it (see
    ``labkit.diagnose.measure.measure_stochasticity``), True / False to state it.
    ``estimators``: registered names to compare (default every one the data supports; ``[]``
    skips the comparison). ``sample``: trajectories (whole groups, drawn with ``seed`` from the
    group sizes alone, see ``sample_rows``) the estimator comparison runs on, None for all (a
    file is then read whole for it); the measured quantities always use all. ``progress``: tqdm
    bars; None shows them for large files and batches of at least
    :data:`PROGRESS_MIN_POSITIONS` padded positions.
    """
    if can_replay is not None:
        can_replay = check_bool("can_replay", can_replay)
    if privileged_info is not None:
        privileged_info = check_bool("privileged_info", privileged_info)
    if stochastic_env is not None:
        stochastic_env = check_bool("stochastic_env", stochastic_env)
    if max_length is not None:
        max_length = check_int("max_length", max_length, low=1)
    seed = check_int("seed", seed)
    batch_rows = check_int("batch_rows", batch_rows, low=1)
    if sample is not None:
        sample = check_int("sample", sample, low=1)
    if progress is not None:
        progress = check_bool("progress", progress)
    if estimators is not None:
        if isinstance(estimators, str) or not all(isinstance(n, str) for n in estimators):
            raise TypeError(f"estimators: expected a list of registered names, got {estimators!r}")
        estimators = list(estimators)
        if estimators:
            _check_names(estimators)
    seconds: dict[str, float] = {}
    tally = Tally()
    names = None
    read = {"tokenizer": tokenizer, "reward": reward, "trust_pickle": trust_pickle}
    info: dict | None = None
    if isinstance(source, Rollouts):
        for arg, value in (("fmt", fmt), *read.items()):
            if value not in (None, False):
                raise ValueError(f"{arg}: only for a file source; source is already a Rollouts (got {arg}={value!r})")
        info = source.info
        name = "rollouts in memory"
        show = progress if progress is not None else source.batch_size * source.horizon >= PROGRESS_MIN_POSITIONS
        clock = time.perf_counter()
        tally.add(source, stochasticity=False)
        seconds["measure"] = time.perf_counter() - clock
        clock = time.perf_counter()
        tally.situations.add_rollouts(source, progress=(lambda it: progress_bar(it, desc="stochasticity", leave=False))
                                      if show else None)
        seconds["stochasticity"] = time.perf_counter() - clock
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"source: no such file or folder {path}")
        name = str(path)
        seconds.update(read=0.0, measure=0.0, stochasticity=0.0)
        chunks = iter_rollouts(path, fmt, batch_rows=batch_rows, progress=progress, **read)
        while True:
            clock = time.perf_counter()
            chunk = next(chunks, None)
            seconds["read"] += time.perf_counter() - clock
            if chunk is None:
                break
            clock = time.perf_counter()
            tally.add(chunk, stochasticity=False)
            mid = time.perf_counter()
            tally.situations.add_rollouts(chunk)
            seconds["measure"] += mid - clock
            seconds["stochasticity"] += time.perf_counter() - mid
            names = chunk.info.get("group_names")
            if info is None:
                info = {k: v for k, v in chunk.info.items() if not isinstance(v, torch.Tensor)}
                info.pop("missing_rewards", None)
            # what a chunk says about the whole source adds up over the chunks
            info["missing_rewards"] = info.get("missing_rewards", 0) + int(chunk.info.get("missing_rewards", 0))
            ignored = set(info.get("ignored_fields", ())) | set(chunk.info.get("ignored_fields", ()))
            if ignored:
                info["ignored_fields"] = tuple(sorted(ignored))
            del chunk  # the next chunk replaces it, not joins it
        show = progress if progress is not None else tally.n * tally.horizon >= PROGRESS_MIN_POSITIONS
    else:
        raise TypeError(f"source: expected a Rollouts or a path to a rollout file, got {type(source).__name__}")

    clock = time.perf_counter()
    lengths, rewards, groups = tally.lengths(), tally.rewards(), tally.groups()
    positions, stochasticity = tally.positions(), tally.stochasticity()
    features = tally_features(tally)
    unit = info.get("position_unit", "token")
    inputs, evidence = decision_inputs(lengths, rewards, stochasticity, can_replay=can_replay,
                                       privileged_info=privileged_info, stochastic_env=stochastic_env, unit=unit)
    rec, answers = walk_tree(inputs, evidence)
    stated = {"can_replay": can_replay, "privileged_info": privileged_info}
    known = {"trajectory_tokens", "reward_density"} | {k for k, v in stated.items() if v is not None}
    if stochastic_env is not None or stochasticity.measurable:
        known.add("stochastic_env")
    caveats = _known_caveats(rec, known)
    unstated = tuple(f"{k} was not stated, so the tree took it as False (pass {k}=True if your rig has it)"
                     for k, v in stated.items() if v is None)
    rows = tally.row_table()
    steps = run_steps(rows, unit=unit, max_length=max_length)
    seconds["measure"] += time.perf_counter() - clock
    clock = time.perf_counter()
    credit_check = None
    picked = _check_rows(rows)
    if picked is not None:
        if isinstance(source, Rollouts):
            part = source if picked.numel() == source.batch_size else source.select(picked)
        else:
            part = read_rollouts(Path(source), fmt, rows=picked.numpy(), progress=False, **read)
        credit_check = check_framework_advantages(part)
        seconds["credit check"] = time.perf_counter() - clock
    flags = tuple(red_flags(groups, rewards, stochasticity, rows, steps, unit=unit, stochastic_stated=stochastic_env,
                            credit_check=credit_check))
    del rows
    comparison = None
    if estimators is None or estimators:
        clock = time.perf_counter()
        run, not_run = supported_estimators(None, estimators, features=features)
        rows = sample_rows(tally.group_ids, sample, seed)
        if isinstance(source, Rollouts):
            sub = source if rows.numel() == source.batch_size else source.select(rows)
        else:
            sub = _read_sample(Path(source), fmt, rows, names, tally.horizon, read)
            seconds["sample"] = time.perf_counter() - clock
            clock = time.perf_counter()
        comparison = compare_sample(sub, rows, run, not_run,
                                    progress=(lambda it: progress_bar(it, desc="estimators", leave=False)) if show else None)
        seconds["estimators"] = time.perf_counter() - clock
    return Diagnosis(name, tally.n, tally.horizon, lengths, rewards, groups, positions,
                     stochasticity, features, inputs, evidence, answers, rec, comparison, seed, seconds,
                     unit=unit, grouping=info.get("grouping", GIVEN_GROUPING), source_notes=source_notes(info),
                     steps=steps, flags=flags, caveats=caveats, unstated=unstated, credit_check=credit_check)
