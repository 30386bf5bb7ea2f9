"""Speed and memory of ``labkit.diagnose`` on 100,000 trajectories of 256 positions, 2 threads.

Prints figures (no assertions; the issue's target is read + diagnose <= 60 s and <= 2 GB peak
memory on 2 cores). The batch is synthetic, built in memory with a fixed seed: groups of 8,
lengths 64-256, two turns around a 16-token tool answer in half of the rows, a 0/1 outcome
whose success rate differs by group (so some groups have zero variance), log-probabilities and
entropies. The batch is written to Parquet (``labkit.io.write_rollouts``), then a fresh
process diagnoses the file: ``diagnose(path)`` streams it in chunks of ``--batch-rows`` records
(``labkit.io.iter_rollouts`` into a ``Tally``) and reads back only the comparison's sample
(``read_rollouts(rows=...)``); that process's figures are read + diagnose alone. A second fresh
process runs the same three phases one by one (the pass over the file, the sample read, the
estimators) to show each one's peak; ``--in-memory`` adds the old path (read the whole file,
diagnose the batch) for comparison.

Wall time is what the target is about; CPU time (this process, both threads) is printed
beside it because on a shared machine the wall time also counts waiting for a core. Memory is
the resident set size sampled every 5 ms during each phase (its peak) and after it (torch's
allocations are invisible to ``tracemalloc``; ``ru_maxrss`` survives fork and exec on Linux,
so a child would report its parent's peak).
Run: ``OMP_NUM_THREADS=2 python benchmarks/diagnose_speed.py [--rows N] [--positions T] [--in-memory]``.
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
from labkit.diagnose import (DEFAULT_SAMPLE, STREAM_BATCH_ROWS, Tally, compare_sample, diagnose, sample_rows,
                             supported_estimators, tally_features)
from labkit.io import iter_rollouts, read_rollouts, write_rollouts


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


def _table_header() -> None:
    print(f"{'what':50s} {'wall s':>7s} {'CPU s':>7s} {'peak MB':>8s} {'after MB':>9s}")
    print(f"{'after imports':50s} {'':7s} {'':7s} {'':8s} {current_mb():9.0f}")


def _phase(label, fn, rows: list):
    """Run ``fn`` as one phase: print and keep (label, wall s, CPU s, peak MB)."""
    with PhasePeak() as mem:
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        sec, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{label:50s} {sec:7.2f} {cpu:7.2f} {mem.peak:8.0f} {current_mb():9.0f}", flush=True)
    rows.append((label, sec, cpu, mem.peak))
    return out


def measure_streamed(path: Path, sample: int | None, batch_rows: int) -> None:
    """The measured process for the streaming path: ``diagnose(path)`` and nothing else."""
    torch.set_num_threads(2)
    _table_header()
    rows: list = []
    d = _phase(f"diagnose(path) streamed, batch_rows={batch_rows}",
               lambda: diagnose(path, sample=sample, progress=False, batch_rows=batch_rows), rows)
    for stage, sec in d.seconds.items():
        print(f"{'  of which ' + stage:50s} {sec:7.2f}")
    _, sec, cpu, peak = rows[0]
    print(f"\nstreamed read + diagnose: {sec:.1f} s wall, {cpu:.1f} s CPU (2 threads), peak RSS {peak:.0f} MB "
          f"({d.n_trajectories:,} x {d.horizon} positions; estimators on {int(d.comparison.rows.numel()):,} "
          f"trajectories: {', '.join(d.comparison.ran)})")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        d.save(tmp)
    print(f"(writing report.md + report.html afterwards: {time.perf_counter() - start:.1f} s)")
    print(d.summary())


def measure_phases(path: Path, sample: int | None, batch_rows: int) -> None:
    """The streaming path's three phases one by one (public API), each with its own peak:
    the pass over the file, reading the sample back, the estimators on it."""
    torch.set_num_threads(2)
    _table_header()
    rows: list = []
    tally = Tally()

    def stream():
        for chunk in iter_rollouts(path, batch_rows=batch_rows, progress=False):
            tally.add(chunk)

    _phase("1. iter_rollouts + Tally (whole file)", stream, rows)
    picked = sample_rows(tally.group_ids, sample, 0)
    sub = _phase(f"2. read_rollouts(rows=) of {picked.numel():,} sampled rows",
                 lambda: read_rollouts(path, rows=picked.numpy(), progress=False), rows)
    run, not_run = supported_estimators(None, features=tally_features(tally))
    _phase(f"3. compare {len(run)} estimators on the sample", lambda: compare_sample(sub, picked, run, not_run), rows)


def measure_in_memory(path: Path, sample: int | None) -> None:
    """The old path for comparison: read the whole file, then diagnose the batch in memory."""
    torch.set_num_threads(2)
    _table_header()
    rows: list = []
    rollouts = _phase("read Parquet whole (read_rollouts)", lambda: read_rollouts(path, progress=False), rows)
    _phase("diagnose(rollouts) in memory", lambda: diagnose(rollouts, sample=sample, progress=False), rows)
    print(f"\nin-memory read + diagnose: {sum(r[1] for r in rows):.1f} s wall, {sum(r[2] for r in rows):.1f} s CPU, "
          f"peak RSS {max(r[3] for r in rows):.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                        help="trajectories for the estimator comparison (0 = all)")
    parser.add_argument("--batch-rows", type=int, default=STREAM_BATCH_ROWS, help="records per streamed chunk")
    parser.add_argument("--in-memory", action="store_true",
                        help="also measure the old path (read the whole file, diagnose in memory)")
    parser.add_argument("--no-phases", action="store_true", help="skip the phase-by-phase breakdown")
    parser.add_argument("--measure", metavar="PARQUET", help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--mode", default="streamed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        path, sample = Path(args.measure), args.sample or None
        if args.mode == "streamed":
            measure_streamed(path, sample, args.batch_rows)
        elif args.mode == "phases":
            measure_phases(path, sample, args.batch_rows)
        else:
            measure_in_memory(path, sample)
        return
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.parquet"
        start = time.perf_counter()
        write_rollouts(Rollouts(**synthetic_tensors(args.rows, args.positions)), path)
        print(f"wrote {args.rows:,} x {args.positions} synthetic trajectories to Parquet "
              f"({path.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - start:.1f} s", flush=True)
        modes = ["streamed"] + ([] if args.no_phases else ["phases"]) + (["in-memory"] if args.in_memory else [])
        titles = {"streamed": "diagnose(path): the streaming path, in a fresh process",
                  "phases": "the same, phase by phase (public API), in a fresh process",
                  "in-memory": "the old path: read_rollouts(path) whole + diagnose(rollouts), in a fresh process"}
        env = {**os.environ, "OMP_NUM_THREADS": "2"}
        for mode in modes:
            print(f"\n== {titles[mode]}", flush=True)
            subprocess.run([sys.executable, __file__, "--measure", str(path), "--sample", str(args.sample),
                            "--batch-rows", str(args.batch_rows), "--mode", mode], env=env, check=True)


if __name__ == "__main__":
    main()
