"""The streaming tally: every measurement of labkit.diagnose, accumulated chunk by chunk."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from labkit.core.checks import check_int
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.segments import last_generated
from labkit.core.stats import constant_groups
from labkit.diagnose.histograms import add_counts, bincount_histogram, bincount_summary, histogram, summary
from labkit.diagnose.results import (INTERMEDIATE_MIN_SHARE, GroupStats, Lengths, PositionStats, RewardStats,
                                     Stochasticity)
from labkit.diagnose.situations import CHUNK_ROWS, Situations

__all__ = ["Tally"]


class Tally:
    """Every measurement of :mod:`labkit.diagnose.measure`, accumulated over a batch or over a
    stream of batches (the chunks of a file, ``labkit.io.iter_rollouts``) and mergeable
    (:meth:`merge`).

    ``add(chunk)`` reduces a chunk to what the measurements need, so a tally's memory does not
    grow with the chunks' (rows, T) tensors: bincounts of the generated and episode lengths and
    of the turn counts (lengths are integers: their min, median, max, mean and histogram are
    exact from the counts); per trajectory its total reward (float64) and group id (int64),
    16 bytes a trajectory, from which the reward distribution, the zero-variance groups and
    the comparison's sample of whole groups are computed exactly as from the whole batch; a few
    counters (trajectories with a non-zero / an intermediate reward; generated and used
    positions; the widest chunk); which optional fields appeared; and the stochasticity
    estimate's (situation, result) visit counts, one row per distinct pair, compacted as they
    grow; and a per-trajectory row log for the run over training steps (:meth:`row_table`: the
    step, lengths, total reward, each logged reward function and the framework's advantage when
    the reader kept them in ``info``; a few dozen bytes a trajectory). The results
    (:meth:`lengths`, :meth:`rewards`, :meth:`groups`, :meth:`positions`,
    :meth:`stochasticity`) equal the ``measure_*`` functions on the concatenated batch, padded
    to the widest chunk (the ``measure_*`` functions are this class on one batch), provided the
    chunks number their groups alike, as ``iter_rollouts`` does.
    """

    def __init__(self) -> None:
        self.n = 0
        self.horizon = 0
        self.generated = 0
        self.used = 0
        self.nonzero = 0
        self.intermediate = 0
        self._gen = np.zeros(1, dtype=np.int64)
        self._episode = np.zeros(1, dtype=np.int64)
        self._turns = np.zeros(1, dtype=np.int64)
        self._scores: list[np.ndarray] = []
        self._groups: list[np.ndarray] = []
        self.max_agent = -1
        self.fields: set[str] = set()
        self.situations = Situations()
        self._log: list[dict[str, np.ndarray]] = []
        self.part_names: tuple[str, ...] = ()

    def add(self, rollouts: Rollouts, *, stochasticity: bool = True, chunk_rows: int = CHUNK_ROWS,
            progress=None) -> "Tally":
        """Measure one batch into the tally; returns the tally. ``stochasticity``: also collect
        its (situation, result) visits (:func:`measure_stochasticity`), ``chunk_rows`` rows at a
        time (``progress``: a tqdm-like wrapper for that loop)."""
        check_rollouts(rollouts)
        chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
        B, T = rollouts.batch_size, rollouts.horizon
        mask, r = rollouts.mask, rollouts.rewards
        gen = rollouts.lengths.long()
        # everything up to the last generated position is generated or environment output
        last = last_generated(mask)
        episode = last + 1
        self._gen = add_counts(self._gen, gen)
        self._episode = add_counts(self._episode, episode)
        self._turns = add_counts(self._turns, rollouts.n_turns.long())
        self.generated += int(gen.sum())
        self.used += int(episode.sum())
        # a non-zero reward anywhere but on the last generated position is an intermediate one
        # (rewards are zero off the mask, so none lies after it)
        per_row = (r != 0).sum(1)
        on_last = (r.gather(1, last.clamp(min=0)[:, None]).squeeze(1) != 0) & (last >= 0)
        self.nonzero += int((per_row > 0).sum())
        self.intermediate += int((per_row - on_last.long() > 0).sum())
        self._scores.append(rollouts.scores.to(torch.float64).numpy().copy())
        self._groups.append(rollouts.group_ids.long().numpy().copy())
        self._log.append(self._row_log(rollouts, gen, episode, per_row > 0))
        self.max_agent = max(self.max_agent, int(rollouts.agent_ids.max()))
        self.fields |= {name for name in ("anchor_keys", "entropies", "logprobs", "states", "prompts")
                        if getattr(rollouts, name) is not None}
        if stochasticity:
            self.situations.add_rollouts(rollouts, chunk_rows=chunk_rows, progress=progress)
        self.n += B
        self.horizon = max(self.horizon, T)
        return self

    def merge(self, other: "Tally") -> "Tally":
        """Add another tally's batches (measured after this one's); returns this tally."""
        if not isinstance(other, Tally):
            raise TypeError(f"other: expected a Tally, got {type(other).__name__}")
        for name in ("_gen", "_episode", "_turns"):
            mine, theirs = getattr(self, name), getattr(other, name)
            out = np.zeros(max(len(mine), len(theirs)), dtype=np.int64)
            out[:len(mine)] += mine
            out[:len(theirs)] += theirs
            setattr(self, name, out)
        for name in ("n", "generated", "used", "nonzero", "intermediate"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.horizon = max(self.horizon, other.horizon)
        self.max_agent = max(self.max_agent, other.max_agent)
        self._scores += other._scores
        self._groups += other._groups
        if self._log and other._log and self.part_names != other.part_names:
            raise ValueError(f"other: its reward functions {other.part_names} differ from this tally's {self.part_names}")
        self.part_names = self.part_names or other.part_names
        self._log += other._log
        self.fields |= other.fields
        self.situations.merge(other.situations)
        return self

    def _row_log(self, ro: Rollouts, gen: torch.Tensor, episode: torch.Tensor, nonzero: torch.Tensor) -> dict:
        """One chunk's per-trajectory columns (see :meth:`row_table`)."""
        B = ro.batch_size
        out = {"generated": gen.numpy().astype(np.int64), "episode": episode.numpy().astype(np.int64),
               "nonzero": nonzero.numpy().copy()}
        steps = ro.info.get("training_steps")
        if isinstance(steps, torch.Tensor) and steps.shape == (B,):
            out["step"] = steps.long().numpy().copy()
        parts, names = ro.info.get("reward_parts"), tuple(ro.info.get("reward_part_names", ()))
        if isinstance(parts, torch.Tensor) and parts.dim() == 2 and parts.shape == (B, len(names)) and names:
            if self._log and names != self.part_names:
                raise ValueError(f"rollouts: reward functions {names} differ from the earlier chunks' {self.part_names}")
            self.part_names = names
            for k, name in enumerate(names):
                out[f"reward:{name}"] = parts[:, k].double().numpy().copy()
        adv = ro.info.get("advantages")
        if isinstance(adv, torch.Tensor) and adv.shape[:1] == (B,):
            if adv.dim() == 2 and adv.shape == ro.mask.shape:  # per position: its mean over generated ones
                m = ro.mask.double()
                adv = (adv.double() * m).sum(1) / m.sum(1).clamp(min=1)
            if adv.dim() == 1:
                out["advantage"] = adv.double().numpy().copy()
        return out

    def row_table(self) -> pd.DataFrame:
        """One row per trajectory, in the order added: ``group``, ``score`` (total reward),
        ``generated`` and ``episode`` lengths, ``nonzero`` (any non-zero reward), and where every
        chunk's reader kept them: ``step`` (training step), ``reward:<function>`` (each logged
        reward function; NaN where it returned nothing), ``advantage`` (the framework's, averaged
        over a trajectory's generated positions when it is per position). ``zero_variance``: the
        trajectory's group has two or more members, all with the same total reward."""
        self._need()
        cols: dict[str, np.ndarray] = {"group": self.group_ids.numpy(), "score": self.scores.numpy()}
        for key in self._log[0]:
            if all(key in part for part in self._log):
                cols[key] = np.concatenate([part[key] for part in self._log])
        cols["zero_variance"] = constant_groups(self.scores, self.group_ids).numpy()
        return pd.DataFrame(cols)

    def _need(self) -> None:
        if self.n == 0:
            raise ValueError("tally: no trajectories added yet")

    @property
    def scores(self) -> torch.Tensor:
        """Total reward per trajectory, float64, in the order added."""
        self._need()
        if len(self._scores) > 1:
            self._scores = [np.concatenate(self._scores)]
        return torch.from_numpy(self._scores[0])

    @property
    def group_ids(self) -> torch.Tensor:
        """Group id per trajectory, int64, in the order added."""
        self._need()
        if len(self._groups) > 1:
            self._groups = [np.concatenate(self._groups)]
        return torch.from_numpy(self._groups[0])

    @property
    def max_turns(self) -> int:
        """The largest number of turns of a trajectory."""
        return int(np.nonzero(self._turns)[0][-1])

    def lengths(self, *, bins: int = 20) -> Lengths:
        """:func:`measure_lengths` of everything added."""
        self._need()
        bins = check_int("bins", bins, low=1)
        g, e = bincount_summary(self._gen), bincount_summary(self._episode)
        kw = {}
        if self.max_turns > 1:
            tm = bincount_summary(self._turns)
            kw = dict(turns_min=tm[0], turns_median=tm[1], turns_max=tm[2],
                      turns_hist=bincount_histogram(self._turns, bins))
        return Lengths(g[0], g[1], g[2], g[3], e[0], e[1], e[2], bincount_histogram(self._gen, bins), **kw)

    def rewards(self, *, bins: int = 20) -> RewardStats:
        """:func:`measure_rewards` of everything added."""
        self._need()
        s = self.scores
        share_inter = self.intermediate / self.n
        return RewardStats(
            share_nonzero=self.nonzero / self.n, share_intermediate=share_inter,
            intermediate=share_inter >= INTERMEDIATE_MIN_SHARE,
            total_mean=float(s.mean()), total_std=float(s.std()) if s.numel() > 1 else 0.0,
            total_min=float(s.min()), total_max=float(s.max()), n_distinct=int(torch.unique(s).numel()),
            hist=histogram(s, bins=bins))

    def group_sizes(self) -> torch.Tensor:
        """Trajectories per group, in the order of the sorted group ids."""
        return torch.unique(self.group_ids, return_counts=True)[1]

    def groups(self) -> GroupStats:
        """:func:`measure_groups` of everything added."""
        self._need()
        sizes = torch.unique(self.group_ids, return_counts=True)[1]
        n = sizes.numel()
        # the zero-variance rule lives once, in core.stats (GRPO's group-of-one rule beside it)
        zero_rows = constant_groups(self.scores, self.group_ids)
        n_zero = int(torch.unique(self.group_ids[zero_rows]).numel())
        n_multi = int((sizes >= 2).sum())
        size_summary = summary(sizes)
        return GroupStats(
            n_groups=n, size_min=int(size_summary[0]), size_median=size_summary[1], size_max=int(size_summary[2]),
            n_singletons=int((sizes == 1).sum()), n_zero_variance=n_zero,
            share_zero_variance=n_zero / n_multi if n_multi else float("nan"),
            share_rows_zero_variance=float(zero_rows.sum()) / self.n,
            size_hist=histogram(sizes))

    def positions(self) -> PositionStats:
        """:func:`measure_positions` of everything added, padded to the widest batch."""
        self._need()
        return PositionStats(self.generated, self.used - self.generated, self.n * self.horizon - self.used)

    def stochasticity(self) -> Stochasticity:
        """:func:`measure_stochasticity` of everything added (with ``stochasticity=True``)."""
        self._need()
        return self.situations.result("turn" if self.max_turns > 1 else "action")

