"""Speed and memory of ``labkit.diagnose`` on 100,000 trajectories of 256 positions, 2 threads.

Prints figures (no assertions; the issue's target is read + diagnose <= 60 s and <= 2 GB peak
memory on 2 cores). The batch is synthetic, built in memory with a fixed seed: groups of 8,
lengths 64-256, two turns around a 16-token tool answer in half of the rows, a 0/1 outcome
whose success rate differs by group (so some groups have zero variance), log-probabilities and
entropies. The batch is written to Parquet (``labkit.io.write_rollouts``), then a fresh
process reads it (``labkit.io.read_rollouts``) and diagnoses it: that process's figures are
read + diagnose alone.

Wall time is what the target is about; CPU time (this process, both threads) is printed
beside it because on a shared machine the wall time also counts waiting for a core. Memory is
the resident set size sampled every 5 ms during each phase (its peak) and after it (torch's
allocations are invisible to ``tracemalloc``; ``ru_maxrss`` survives fork and exec on Linux,
so a child would report its parent's peak).
Run: ``OMP_NUM_THREADS=2 python benchmarks/diagnose_speed.py [--rows N] [--positions T]``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import tempfile
import time
from pathlib import Path

import torch

from labkit.core.rollouts import Rollouts
from labkit.diagnose import DEFAULT_SAMPLE, diagnose
from labkit.io import read_rollouts, write_rollouts


def current_mb() -> float:
    """Resident set size of this process now, MB (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class PhasePeak:
    """The largest resident set size seen while the ``with`` block runs, MB, from
    ``/proc/self/statm`` sampled every 5 ms by a thread (``ru_maxrss`` cannot be reset, so it
    cannot tell one phase's peak from an earlier one)."""

    def __enter__(self) -> "PhasePeak":
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> float:
        return current_mb()

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


def measure(path: Path, sample: int | None) -> None:
    """The measured process: read ``path`` and diagnose it, nothing else (so its peak memory is
    read + diagnose alone: a process that built and wrote the batch keeps that memory)."""
    torch.set_num_threads(2)
    print(f"{'what':46s} {'wall s':>7s} {'CPU s':>7s} {'peak MB':>8s} {'after MB':>9s}")
    print(f"{'after imports':46s} {'':7s} {'':7s} {'':8s} {current_mb():9.0f}")
    timed: dict[str, float] = {}
    cpus: dict[str, float] = {}
    peaks: list[float] = []

    def phase(label, fn):
        with PhasePeak() as mem:
            start, cpu = time.perf_counter(), time.process_time()
            out = fn()
            sec, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{label:46s} {sec:7.2f} {cpu:7.2f} {mem.peak:8.0f} {current_mb():9.0f}")
        timed[label], cpus[label] = sec, cpu
        peaks.append(mem.peak)
        return out

    rollouts = phase("read Parquet (labkit.io.read_rollouts)", lambda: read_rollouts(path, progress=False))
    d = phase("diagnose", lambda: diagnose(rollouts, sample=sample, progress=False))
    for stage, sec in d.seconds.items():
        print(f"{'  of which ' + stage:46s} {sec:7.2f}")
    print(f"\nread + diagnose: {sum(timed.values()):.1f} s wall, {sum(cpus.values()):.1f} s CPU (2 threads), "
          f"peak RSS {max(peaks):.0f} MB ({rollouts.batch_size:,} x {rollouts.horizon} positions; estimators on "
          f"{int(d.comparison.rows.numel()):,} trajectories: {', '.join(d.comparison.ran)})")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        d.save(tmp)
    print(f"(writing report.md + report.html afterwards: {time.perf_counter() - start:.1f} s)")
    print(d.summary())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                        help="trajectories for the estimator comparison (0 = all)")
    parser.add_argument("--measure", metavar="PARQUET", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.measure:
        measure(Path(args.measure), args.sample or None)
        return
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.parquet"
        start = time.perf_counter()
        write_rollouts(Rollouts(**synthetic_tensors(args.rows, args.positions)), path)
        print(f"wrote {args.rows:,} x {args.positions} synthetic trajectories to Parquet "
              f"({path.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - start:.1f} s; "
              f"measuring read + diagnose in a fresh process:\n", flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": "2"}
        subprocess.run([sys.executable, __file__, "--measure", str(path), "--sample", str(args.sample)],
                       env=env, check=True)


if __name__ == "__main__":
    main()
