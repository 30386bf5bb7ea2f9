"""``diagnose``: from a batch of rollouts (or a rollout file) to a :class:`Diagnosis`."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from labkit.core.checks import check_bool, check_int
from labkit.core.rollouts import Rollouts
from labkit.diagnose import report
from labkit.io import read_rollouts
from labkit.diagnose.compare import EstimatorComparison, compare_estimators, data_features
from labkit.diagnose.decide import Answer, decision_inputs, walk_tree
from labkit.diagnose.measure import (GroupStats, Lengths, PositionStats, RewardStats, Stochasticity,
                                     measure_groups, measure_lengths, measure_positions, measure_rewards,
                                     measure_stochasticity)
from labkit.survey.decision_tree import DecisionInputs, Recommendation

__all__ = ["Diagnosis", "diagnose", "DEFAULT_SAMPLE", "PROGRESS_MIN_POSITIONS"]

#: Trajectories (whole groups) the estimator comparison runs on by default: the measured
#: quantities always use every trajectory, the comparison a sample (its cost grows with the
#: estimators run, and 2,048 trajectories already rank credit over about half a million positions).
DEFAULT_SAMPLE = 2048
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
            f"  length (generated tokens) min / median / max: {L.generated_min:,} / {L.generated_median:,.1f} / "
            f"{L.generated_max:,}" + (f"; turns {L.turns_min} / {L.turns_median:g} / {L.turns_max}"
                                      if L.turns_hist is not None else ""),
            f"  non-zero reward: {R.share_nonzero:.1%} of trajectories; intermediate rewards: "
            f"{R.share_intermediate:.1%}",
            f"  groups: {G.n_groups:,} (size {G.size_min}-{G.size_max}); zero-variance: "
            f"{G.n_zero_variance:,} ({G.share_rows_zero_variance:.1%} of trajectories get no GRPO gradient)",
            f"  tool-output share of positions: {P.tool_share:.1%}",
            f"  stochasticity: {S.summary()}",
            f"  tree: " + " -> ".join(f"{a.answer}" for a in self.answers),
            f"  recommended: {rec.method_class} ({', '.join(rec.candidates)})",
        ]
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


def _read(source, fmt, progress) -> tuple[Rollouts, str]:
    if isinstance(source, Rollouts):
        if fmt is not None:
            raise ValueError(f"fmt: only for a file source; source is already a Rollouts (got fmt={fmt!r})")
        return source, "rollouts in memory"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"source: no such file {path}")
        return read_rollouts(path, fmt, progress=progress), str(path)
    raise TypeError(f"source: expected a Rollouts or a path to a rollout file, got {type(source).__name__}")


def diagnose(source, *, fmt: str | None = None, can_replay: bool = False, privileged_info: bool = False,
             stochastic_env: bool | None = None, estimators: Sequence[str] | None = None,
             sample: int | None = DEFAULT_SAMPLE, seed: int = 0, progress: bool | None = None) -> Diagnosis:
    """Classify a training setup from its rollouts and walk notebook 00's decision tree.

    ``source``: a ``Rollouts``, or a path to a rollout file read by ``labkit.io.read_rollouts``
    (``fmt``: its format, default from the file name). ``can_replay`` / ``privileged_info``:
    properties of the training rig that no file shows (reported as given). ``stochastic_env``:
    None to measure it (see ``labkit.diagnose.measure.measure_stochasticity``), True / False to
    state it. ``estimators``: registered names to compare (default every one the data supports;
    ``[]`` skips the comparison). ``sample``: trajectories (whole groups, drawn with ``seed``)
    the estimator comparison runs on, None for all; the measured quantities always use all.
    ``progress``: tqdm bars; None shows them for batches of at least
    :data:`PROGRESS_MIN_POSITIONS` padded positions.
    """
    can_replay = check_bool("can_replay", can_replay)
    privileged_info = check_bool("privileged_info", privileged_info)
    if stochastic_env is not None:
        stochastic_env = check_bool("stochastic_env", stochastic_env)
    seed = check_int("seed", seed)
    if sample is not None:
        sample = check_int("sample", sample, low=1)
    if progress is not None:
        progress = check_bool("progress", progress)
    if estimators is not None:
        if isinstance(estimators, str) or not all(isinstance(n, str) for n in estimators):
            raise TypeError(f"estimators: expected a list of registered names, got {estimators!r}")
        estimators = list(estimators)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    rollouts, name = _read(source, fmt, progress)
    if not isinstance(source, Rollouts):
        seconds["read"] = time.perf_counter() - clock
    show = progress if progress is not None else rollouts.batch_size * rollouts.horizon >= PROGRESS_MIN_POSITIONS

    def bar(it, desc):
        return tqdm(it, desc=desc, leave=False) if show else it

    def stage(label):
        nonlocal clock
        now = time.perf_counter()
        seconds[label] = now - clock
        clock = now

    clock = time.perf_counter()
    lengths = measure_lengths(rollouts)
    rewards = measure_rewards(rollouts)
    groups = measure_groups(rollouts)
    positions = measure_positions(rollouts)
    features = data_features(rollouts)
    stage("measure")
    stochasticity = measure_stochasticity(rollouts, progress=(lambda it: bar(it, "stochasticity")) if show else None)
    stage("stochasticity")
    inputs, evidence = decision_inputs(lengths, rewards, stochasticity, can_replay=can_replay,
                                       privileged_info=privileged_info, stochastic_env=stochastic_env)
    rec, answers = walk_tree(inputs, evidence)
    comparison = None
    if estimators is None or estimators:
        comparison = compare_estimators(rollouts, estimators, sample=sample, seed=seed,
                                        progress=(lambda it: bar(it, "estimators")) if show else None)
    stage("estimators")
    return Diagnosis(name, rollouts.batch_size, rollouts.horizon, lengths, rewards, groups, positions,
                     stochasticity, features, inputs, evidence, answers, rec, comparison, seed, seconds)
