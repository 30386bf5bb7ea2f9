"""Speed and memory of ``labkit.diagnose`` on 100,000 trajectories of 256 positions, 2 threads.

Prints figures (no assertions; the issue's target is read + diagnose <= 60 s and <= 2 GB peak
memory on 2 cores). The batch is synthetic, built in memory with a fixed seed: groups of 8,
lengths 64-256, two turns around a 16-token tool answer in half of the rows, a 0/1 outcome
whose success rate differs by group (so some groups have zero variance), log-probabilities and
entropies. When ``labkit.io`` is present the batch is also written to Parquet and "read" is
``labkit.io.read_rollouts`` on that file; otherwise "read" is building the ``Rollouts``.

Wall time is what the target is about; CPU time (this process, both threads) is printed
beside it because on a shared machine the wall time also counts waiting for a core. Peak
memory is the process's maximum resident set size (``ru_maxrss``: torch's allocations are
invisible to ``tracemalloc``), printed with the resident size after imports for reference.
Run: ``OMP_NUM_THREADS=2 python benchmarks/diagnose_speed.py [--rows N] [--positions T]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import threading
import tempfile
import time
from pathlib import Path

import torch

from labkit.core.rollouts import Rollouts
from labkit.diagnose import DEFAULT_SAMPLE, diagnose


def rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PhasePeak:
    """The largest resident set size seen while the ``with`` block runs, MB, from
    ``/proc/self/statm`` sampled every 5 ms by a thread (``ru_maxrss`` cannot be reset, so it
    cannot tell one phase's peak from an earlier one)."""

    def __enter__(self) -> "PhasePeak":
        self.peak, self._stop = 0.0, threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE") / 2**20
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._read())
            self._stop.wait(0.005)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._read())


def synthetic_tensors(B: int, T: int, seed: int = 0) -> dict:
    """The benchmark batch as the tensors a ``Rollouts`` is built from (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    group = torch.arange(B) // 8
    lengths = torch.randint(64, T + 1, (B,), generator=g)
    t = torch.arange(T)
    mask = t[None, :] < lengths[:, None]
    # half the rows: positions [24, 40) are a tool answer between two turns
    agent = torch.arange(B) % 2 == 0
    tool = agent[:, None] & (t[None, :] >= 24) & (t[None, :] < 40)
    mask &= ~tool
    turn_ids = torch.where(mask, torch.where(agent[:, None] & (t[None, :] >= 40), 1, 0), -1)
    tokens = torch.randint(0, 32_000, (B, T), generator=g)
    tokens[:, :8] = (group[:, None] * 7 + t[None, :8]) % 32_000  # a shared opening per task
    rate = torch.rand(B // 8 + 1, generator=g)[group]
    outcome = (torch.rand(B, generator=g) < rate).float()
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lengths - 1] = outcome
    logprobs = torch.where(mask, -torch.rand(B, T, generator=g) * 3, 0.0)
    entropies = torch.where(mask, torch.rand(B, T, generator=g) * 2, 0.0)
    return dict(tokens=tokens, mask=mask, rewards=rewards, group_ids=group, turn_ids=turn_ids,
                step_ids=turn_ids.clone(), logprobs=logprobs, entropies=entropies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                        help="trajectories for the estimator comparison (0 = all)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(f"{'what':54s} {'wall s':>8s} {'CPU s':>7s} {'phase peak RSS MB':>18s}")
    print(f"{'after imports':54s} {'':8s} {'':7s} {rss_mb():18.0f}")
    timed: dict[str, float] = {}
    cpus: dict[str, float] = {}

    def phase(label, fn, counted=True):
        with PhasePeak() as mem:
            start, cpu = time.perf_counter(), time.process_time()
            out = fn()
            sec, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{label:54s} {sec:8.2f} {cpu:7.2f} {mem.peak:18.0f}")
        if counted:
            timed[label] = sec
            cpus[label] = cpu
        return out, mem.peak

    tensors, _ = phase("make the synthetic tensors (not counted)", lambda: synthetic_tensors(args.rows, args.positions),
                       counted=False)
    try:
        from labkit import io as lio
    except ImportError:
        lio = None
    peaks = []
    with tempfile.TemporaryDirectory() as tmp:
        if lio is not None:
            path = Path(tmp) / "rollouts.parquet"
            phase("write Parquet (not counted)", lambda: lio.write_rollouts(Rollouts(**tensors), path), counted=False)
            del tensors
            print(f"{'  Parquet file size, MB':54s} {path.stat().st_size / 2**20:8.0f}")
            source, peak = phase("read Parquet (labkit.io.read_rollouts)", lambda: lio.read_rollouts(path))
        else:
            source, peak = phase("build the Rollouts (no labkit.io: stands in for read)", lambda: Rollouts(**tensors))
            del tensors
        peaks.append(peak)
        d, peak = phase("diagnose", lambda: diagnose(source, sample=args.sample or None, progress=False))
        peaks.append(peak)
    for stage, sec in d.seconds.items():
        print(f"{'  of which ' + stage:54s} {sec:8.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        phase("write report.md + report.html (not counted)", lambda: d.save(tmp), counted=False)
    print(f"\nread + diagnose: {sum(timed.values()):.1f} s wall, {sum(cpus.values()):.1f} s CPU (2 threads), "
          f"peak RSS {max(peaks):.0f} MB "
          f"({args.rows:,} x {args.positions} positions; estimators on {int(d.comparison.rows.numel()):,} "
          f"trajectories: {', '.join(d.comparison.ran)})")
    print(d.summary())


if __name__ == "__main__":
    main()
